"""Generating text from a trained MiniGPT, one character at a time.

Autoregressive sampling: start from `[BOS] + prompt`, run the model, turn the logits of the last position into a
choice of the next token, append it and repeat, until the model emits EOS or `max_new_tokens` are produced.

    logits z ∈ R^V at the last position
    temperature 0     ->  next = argmax_v z_v                          (greedy: deterministic)
    temperature τ > 0 ->  p_v = softmax(z / τ)_v,  next ~ p            (τ < 1 sharpens, τ > 1 flattens)
    top_k = k         ->  only the k largest z_v keep their mass, the others get p_v = 0
    top_p = q         ->  only the likeliest tokens whose mass reaches q keep it (nucleus sampling), after top_k

Only ids the tokenizer knows can be chosen: the model's embedding may have spare rows (vocab_size 64 for a
vocabulary of 50), and those ids stand for no character. The course asks for greedy decoding (`comer|R1|` ->
`comí`): the conjugated form the model finds most likely. There is no key/value cache: every step re-runs the
whole prefix, which is simple and, for prompts of a few dozen characters, fast enough; a model with its own
`generate` (the Llama family's, over a KV cache) is called instead when the whole text fits its context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from minitrain.common.errors import ArgumentError
from minitrain.evaluation import metrics
from minitrain.nn import inference


class Tokenizer(metrics.Tokenizer, Protocol):
    """metrics.Tokenizer, and the vocabulary size the sampled ids stay below."""

    vocab_size: int


def next_token(
    logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator, top_p: float | None = None
) -> int:
    """Pick the next token id from one position's logits, shape (V,). A NaN or +inf logit (weights that overflow
    float32) leaves no distribution to sample from, nor an argmax to trust: ArgumentError."""
    if np.isnan(logits).any() or np.isposinf(logits).any():
        raise ArgumentError("the model's next-token logits are NaN or infinite: its weights overflow float32")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64)
    if top_k is not None and top_k < z.size:
        kth_largest = np.partition(z, -top_k)[-top_k]
        z = np.where(z >= kth_largest, z, -np.inf)
    # Shift before dividing: the largest logit becomes 0 and the rest negative, so however small τ is
    # (1e-320 makes z/τ overflow), exp() sees values in [-inf, 0] and the likeliest token keeps p > 0.
    with np.errstate(over="ignore", divide="ignore"):
        z = (z - z.max()) / temperature
    p = np.exp(z)
    p /= p.sum()
    if top_p is not None and top_p < 1.0:
        p = nucleus(p, top_p)
    return int(rng.choice(z.size, p=p))


def nucleus(p: np.ndarray, top_p: float) -> np.ndarray:
    """p restricted to its nucleus and renormalised: the likeliest tokens, in order, up to and including the one
    whose cumulative mass reaches top_p (transformers' TopPLogitsWarper; the likeliest token always stays)."""
    order = np.argsort(-p, kind="stable")
    mass_before = np.cumsum(p[order]) - p[order]
    kept = np.zeros_like(p)
    keep = order[mass_before < top_p]
    kept[keep] = p[keep]
    return kept / kept.sum()


def generate(model, tokenizer: Tokenizer, prompt: str, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, seed: int | np.random.Generator | None = None) -> str:
    """Continue `prompt` and return only the new text (EOS and other specials dropped).

    `seed` makes sampling reproducible; pass one `np.random.Generator` to several calls to draw several
    different samples from one seed. The model is put in eval mode (no dropout) for the call and restored.
    """
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    ids = [tokenizer.bos_id, *tokenizer.encode(prompt)]
    new = continue_ids(model, ids, max_new_tokens, temperature, top_k, None, tokenizer.eos_id,
                       np.random.default_rng(seed), tokenizer.vocab_size)
    return tokenizer.decode(new)


def continue_ids(model, ids: list[int], max_new_tokens: int, temperature: float, top_k: int | None,
                 top_p: float | None, eos_id: int | None, rng: np.random.Generator, vocab_limit: int) -> list[int]:
    """The new ids after `ids` (EOS not included), drawn from `rng`; only ids below `vocab_limit` are chosen."""
    context = model.config["max_seq_len"]
    if hasattr(model, "generate") and len(ids) + max_new_tokens <= context:  # a KV cache: the same draws, faster
        return model.generate(ids, max_new_tokens, temperature, top_k, top_p, eos_id=eos_id, rng=rng,
                              vocab_limit=vocab_limit)[0]
    ids, new = list(ids), []
    with inference(model):
        for _ in range(max_new_tokens):
            window = np.asarray([ids[-context:]], dtype=np.int64)  # (1, T): learned positions stop at P
            logits, _ = model(window)  # (1, T, V)
            # Embedding rows past the tokenizer's vocabulary (the lab pads V to 64) are no token.
            token = next_token(logits.data[0, -1, :vocab_limit], temperature, top_k, rng, top_p)
            if token == eos_id:
                break
            ids.append(token)
            new.append(token)
    return new


def next_log_probs_fn(model: Any, pad_id: int = 0) -> Callable[[list[list[int]]], np.ndarray]:
    """Adapt a model to `metrics.greedy_exact_match`: prefixes (lists of ids) -> (N, V) next-token log-probs.

    The prefixes are right-padded into one (N, T) batch. Attention is causal, so the logits at position
    len(prefix) − 1 never see the padding after it. A prefix longer than max_seq_len keeps its last tokens.
    """
    context = model.config["max_seq_len"]

    def next_log_probs(prefixes: list[list[int]]) -> np.ndarray:
        windows = [p[-context:] for p in prefixes]
        lengths = np.array([len(w) for w in windows])
        idx = np.full((len(windows), lengths.max()), pad_id, dtype=np.int64)
        for row, window in enumerate(windows):
            idx[row, : len(window)] = window
        with inference(model):
            logits, _ = model(idx, attn_pad_mask=np.arange(idx.shape[1]) < lengths[:, None])
        last = logits.data[np.arange(len(windows)), lengths - 1].astype(np.float64)  # (N, V)
        shifted = last - last.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # log-softmax

    return next_log_probs
