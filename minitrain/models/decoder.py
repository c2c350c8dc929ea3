"""The composed decoder: a decoder-only language model whose layers are built from the pieces it is given (a norm,
an attention, an MLP), as torchtune composes its models. Llama, Qwen2 and Mistral are one configuration of it
(minitrain/models/llama.py); Gemma 2 and 3 another (minitrain/models/gemma.py). Names are Hugging Face's.

    idx (B, T) ──► embed_tokens[idx]·s ──► n_layer × DecoderLayer ──► norm ──► lm_head ──► logits (B, T, V)

    DecoderLayer(x):  h = x + self_attn(input_layernorm(x))     attention(C, n_head, n_kv_head, head_dim, bias, p)
                      y = h + mlp(post_attention_layernorm(h))  mlp(C, d_ff, p);  norm(C, rms_norm_eps)
    with `sandwich_norms` (Gemma 2/3: a norm before and after each sub-layer, transformers' names):
                      h = x + post_attention_layernorm(self_attn(input_layernorm(x)))
                      y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))

s is `embed_scale` (1 unless given); the head is the token embedding, transposed, unless `tie_embeddings` is false;
p is `dropout`, on each sub-layer's output; the queries and keys of every layer are rotated by their position
(θ = `rope_theta`, and `rope_scaling`). Each layer is of a kind, `layer_types[i]` (transformers' names):
"full_attention" or "sliding_attention", whose query at position p sees only keys at p − W < p_k ≤ p, W =
`sliding_window` (positions count a document's real tokens); without layer_types every layer slides when a window is
given (Mistral), else none. Sliding layers rotate by θ = `rope_local_theta` when given (Gemma 3). Logits are
soft-capped, c·tanh(z/c), by c = `final_logit_softcapping` when given (Gemma 2). A layer builds its attention, MLP
and norms in that order, so the init draws in transformers' order (q, k, v, o, gate...). B batch, T time, C =
d_model, V vocab_size.

`forward` is every language model's (language_model.py), plus `segment_ids` for packed documents: a token attends
only to earlier tokens of its own segment, and rotary positions restart at 0 with each segment (and count real
tokens only: a left-padded row starts at 0 too); with targets and a plain head (tied, or a bare lm_head) it returns
(None, loss), the loss taken in blocks of the vocabulary (functional.linear_cross_entropy). `generate` continues prompts
with a KV cache (minitrain/models/kv_cache.py), feeding one new token per step; a sliding layer's cache rolls (its
W − 1 latest keys). `model.gradient_checkpointing = True` keeps only each layer's input on the tape and recomputes
the layer in backward (minitrain/autograd/recompute.py): the same gradients, a second forward pass of the layers, and
~30× less activation memory at SmolLM2-135M's shape (what brings a QLoRA step on 4 × 256 tokens under 1.5 GB).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.recompute import checkpoint
from minitrain.autograd.tensor import TAPE, Tensor
from minitrain.models.family import enforce, heads_divide_width
from minitrain.models.kv_cache import KVCache
from minitrain.models.language_model import LanguageModel
from minitrain.models.sampling import next_token
from minitrain.nn import Dropout, Embedding, Linear, Module, ModuleDict, ModuleList, inference
from minitrain.nn.llama_attention import LlamaAttention
from minitrain.nn.llama_mlp import LlamaMLP
from minitrain.nn.llama_shared import LLAMA_INIT_STD, KeyValueStore
from minitrain.nn.rotary import RotaryEmbedding, rope_positions

FULL, SLIDING = "full_attention", "sliding_attention"  # a layer's kind, transformers' `layer_types` names


def decoder_rules(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The decoder's keys' rules (its family's `check`): heads divide the width (unless head_dim is given),
    key/value heads the query heads; each head's dims are even (rotary embeddings rotate pairs of them)."""
    n_head, n_kv, head_dim = config["n_head"], config.get("n_kv_head"), config.get("head_dim")
    if head_dim is None:
        yield from heads_divide_width(config)
    if n_kv is not None and n_head % n_kv:
        yield "n_kv_head", (f"n_head {n_head} is not a multiple of n_kv_head {n_kv}; each key/value head serves "
                            "n_head / n_kv_head query heads")
    if head_dim is not None and head_dim % 2:
        yield "head_dim", f"{head_dim} is odd; rotary embeddings rotate pairs of dims"
    elif head_dim is None and config["d_model"] % n_head == 0 and config["d_model"] // n_head % 2:
        yield "n_head", (f"d_model / n_head = {config['d_model'] // n_head} is odd; rotary embeddings rotate pairs "
                         "of dims (or give an even head_dim)")
    kinds = config.get("layer_types")
    if kinds is not None and len(kinds) != config["n_layer"]:
        yield "layer_types", f"{len(kinds)} kinds for n_layer {config['n_layer']} layers; give one per layer"
    elif kinds is not None and not set(kinds) <= {FULL, SLIDING}:
        yield "layer_types", f"{sorted(set(kinds) - {FULL, SLIDING})}: a layer is {FULL!r} or {SLIDING!r}"
    elif SLIDING in (kinds or ()) and not config.get("sliding_window"):
        yield "sliding_window", f"layer_types has {SLIDING!r} layers; give their window"


def layer_kinds(config: Mapping[str, Any]) -> list[str]:
    """Each layer's kind: `layer_types`, or every layer sliding when only a window is given (Mistral), else full."""
    return list(config.get("layer_types") or [SLIDING if config.get("sliding_window") else FULL] * config["n_layer"])


class DecoderLayer(Module):
    """h = x + self_attn(input_layernorm(x));  y = h + mlp(post_attention_layernorm(h)).  (B, T, C) -> (B, T, C);
    with the two feed-forward norms, the sandwich of the module docstring.

    torchtune's TransformerSelfAttentionLayer, with self_attn called as LlamaAttention is. Registered in transformers'
    order (self_attn, mlp, then the norms): the state dict lists the tensors as a Hugging Face checkpoint does."""

    def __init__(self, self_attn: Module, mlp: Module, input_layernorm: Module, post_attention_layernorm: Module,
                 pre_feedforward_layernorm: Module | None = None, post_feedforward_layernorm: Module | None = None
                 ) -> None:
        super().__init__()
        self.self_attn, self.mlp = self_attn, mlp
        self.input_layernorm, self.post_attention_layernorm = input_layernorm, post_attention_layernorm
        self.pre_feedforward_layernorm, self.post_feedforward_layernorm = pre_feedforward_layernorm, \
            post_feedforward_layernorm

    def forward(
        self, x: Tensor, cos: np.ndarray, sin: np.ndarray, allowed: np.ndarray, cache: KeyValueStore | None = None
    ) -> Tensor:
        h = self.self_attn(self.input_layernorm(x), cos, sin, allowed, cache)
        if self.pre_feedforward_layernorm is None:
            return (h := x + h) + self.mlp(self.post_attention_layernorm(h))
        h = x + self.post_attention_layernorm(h)
        return h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))


class Decoder(LanguageModel):
    """A decoder built from pieces. `model(idx, targets, attn_pad_mask, loss_mask, segment_ids)` -> (None, loss)."""

    # True: recompute each layer in backward (config: training.gradient_checkpointing). A family whose model class
    # has this attribute accepts that key (minitrain/config/rules.py).
    gradient_checkpointing: bool = False

    def __init__(
        self,
        config: dict[str, Any],
        *,
        norm: Callable[..., Module],
        mlp: Callable[..., Module] = LlamaMLP,
        attention: Callable[..., Module] = LlamaAttention,
        embed_scale: float | None = None,
        sandwich_norms: bool = False,
        rng: np.random.Generator | int = 0,
        dtype: type = np.float32,
    ) -> None:
        """`config` (self.config, saved in model files): the keys above, n_layer, max_seq_len (n_kv_head None: n_head;
        head_dim None: d_model // n_head) and the optional ones of the module docstring, obeying decoder_rules.
        Pieces get dtype= and, but norms, rng= (the training RNG, or its seed)."""
        super().__init__()
        c = self.config = config
        enforce(decoder_rules, c)
        c["n_kv_head"] = c["n_head"] if c["n_kv_head"] is None else c["n_kv_head"]
        c["head_dim"] = c["d_model"] // c["n_head"] if c["head_dim"] is None else c["head_dim"]
        rotary = RotaryEmbedding(c["head_dim"], c["rope_theta"], c.get("rope_scaling"))  # fails before any weight
        self.kinds = layer_kinds(c)
        self.embed_scale = embed_scale
        self.rng = rng = np.random.default_rng(rng)
        d, eps, made = c["d_model"], c["rms_norm_eps"], dict(rng=rng, dtype=dtype)

        def layer() -> DecoderLayer:
            return DecoderLayer(
                attention(d, c["n_head"], c["n_kv_head"], c["head_dim"], c.get("attention_bias", False),
                          c["dropout"], **made),
                mlp(d, c["d_ff"], c["dropout"], **made),
                *(norm(d, eps, dtype=dtype) for _ in range(4 if sandwich_norms else 2)))

        self.model = ModuleDict(
            embed_tokens=Embedding(c["vocab_size"], d, std=LLAMA_INIT_STD, **made),
            layers=ModuleList(layer() for _ in range(c["n_layer"])),
            norm=norm(d, eps, dtype=dtype),
            rotary_emb=rotary,
        )
        if c.get("rope_local_theta") is not None:  # no parameters: the state dict is unchanged
            self.model.rotary_emb_local = RotaryEmbedding(c["head_dim"], c["rope_local_theta"])
        if not c.get("tie_embeddings", True):
            self.lm_head = Linear(d, c["vocab_size"], bias=False, std=LLAMA_INIT_STD, **made)

    def logits(self, idx: np.ndarray, attn_pad_mask: np.ndarray | None = None,
               segment_ids: np.ndarray | None = None) -> Tensor:
        """idx (B, T) token ids -> logits (B, T, V) (`model(idx, targets, attn_pad_mask, loss_mask, segment_ids)`
        adds the loss: language_model.py). attn_pad_mask (B, T) is True on real tokens (padding keys are never
        attended to, and do not count as positions); segment_ids (B, T) marks packed documents (no attention across
        them; positions restart at 0 with each).

        An integer attn_pad_mask is taken as segment_ids (0 on padding, k on the k-th document of its row): that
        is how a packed batch reaches the model through lab 01's `model(input, target, attn_pad_mask, loss_mask)`
        call, whose four arguments never change (minitrain/data/batch.py)."""
        return self.head(self.hidden(idx, attn_pad_mask, segment_ids))

    def hidden(self, idx: np.ndarray, attn_pad_mask: np.ndarray | None = None,
               segment_ids: np.ndarray | None = None) -> Tensor:
        """The hidden states (B, T, C) the head reads, for `logits`' arguments."""
        if attn_pad_mask is not None and segment_ids is None and np.issubdtype(attn_pad_mask.dtype, np.integer):
            segment_ids, attn_pad_mask = attn_pad_mask, attn_pad_mask > 0
        batch, time = idx.shape
        positions = rope_positions(batch, time, attn_pad_mask, segment_ids)
        return self.decode(idx, positions, F.attention_mask(time, time, attn_pad_mask, segment_ids))

    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None, attn_pad_mask: np.ndarray | None = None,
                loss_mask: np.ndarray | None = None, segment_ids: np.ndarray | None = None) -> tuple:
        """language_model.py's; with targets and a plain head, (None, loss): the loss by blocks of the vocabulary, never
        the whole (B, T, V) logits (functional.linear_cross_entropy)."""
        if targets is None or (weight := self.head_weight()) is None:
            return super().forward(idx, targets, attn_pad_mask, loss_mask, segment_ids)
        self.check_length(idx)
        x = self.hidden(idx, attn_pad_mask, segment_ids)
        return None, F.linear_cross_entropy(x, weight, targets, loss_mask, self.config.get("final_logit_softcapping"))

    def token_nll(self, idx: np.ndarray, targets: np.ndarray, attn_pad_mask: np.ndarray | None = None,
                  segment_ids: np.ndarray | None = None) -> np.ndarray:
        """−log p(targets) at every position, (B, T), for `logits`' arguments, under `inference(model)`: what
        `minitrain eval` sums (evaluation/text_loss.py). By blocks of the vocabulary when the head is plain."""
        self.check_length(idx)
        x, shape, weight = self.hidden(idx, attn_pad_mask, segment_ids), np.shape(targets), self.head_weight()
        if weight is None:  # the whole logits
            log_p = F.log_softmax(self.head(x)).data
            return -np.take_along_axis(log_p, np.asarray(targets)[..., None], axis=-1)[..., 0]
        flat, everywhere, _ = F.loss_rows((*shape, len(weight.data)), targets, None)
        rows = np.ascontiguousarray(x.data.reshape(len(flat), -1))
        nll, _, _ = F.head_nll(rows, weight.data, flat, everywhere, self.config.get("final_logit_softcapping"))
        return nll.reshape(shape)

    def head_weight(self) -> Tensor | None:
        """The head's weight, (V, C), when it is a plain one: the token embedding when tied, else an lm_head that
        is a bias-free Linear with no weight_transform. None for any other (a LoRA-adapted or 4-bit lm_head, or
        one under quantization-aware training), or a subclass's own `head`: its loss goes through the whole logits."""
        if type(self).head is not Decoder.head:
            return None
        if self.config.get("tie_embeddings", True):
            return self.model.embed_tokens.weight if type(self.model.embed_tokens) is Embedding else None
        head = self.lm_head
        plain = type(head) is Linear and head.bias is None and head.weight_transform is None
        return head.weight.T if plain else None

    def decode(self, idx: np.ndarray, positions: np.ndarray, allowed: np.ndarray, cache: KVCache | None = None,
               key_positions: np.ndarray | None = None) -> Tensor:
        """The hidden states after the final norm, (B, T, C): the embedding and every layer, with rotary
        positions (B, T) and the attention mask `allowed` (B, T, T_k); with a cache, over the cached positions too,
        whose rotary positions are `key_positions` (B, T_k; default `positions`): a sliding layer's window reads
        them."""
        m = self.model
        x = m.embed_tokens(idx)
        if self.embed_scale is not None:
            x = x * self.embed_scale
        rotary = {FULL: m.rotary_emb, SLIDING: getattr(m, "rotary_emb_local", m.rotary_emb)}
        rope = {kind: rotary[kind](positions, x.dtype) for kind in set(self.kinds)}
        masks = {FULL: allowed}
        if SLIDING in self.kinds:
            keys = positions if key_positions is None else key_positions
            masks[SLIDING] = F.sliding_window(allowed, positions, keys, self.config["sliding_window"])
        for i, (layer, kind) in enumerate(zip(m.layers, self.kinds, strict=True)):
            (cos, sin), mask = rope[kind], masks[kind]
            if self.gradient_checkpointing and cache is None and TAPE.recording:
                x = checkpoint(lambda h, layer=layer, cos=cos, sin=sin, mask=mask: layer(h, cos, sin, mask), x,
                               [p for p in layer.parameters() if p.requires_grad], _dropout_rngs(layer))  # fmt: skip
            elif cache is None:
                x = layer(x, cos, sin, mask)
            else:  # a rolling cache answers with its latest keys only
                x = layer(x, cos, sin, mask[..., -cache.layers[i].visible(mask.shape[-1], idx.shape[1]) :],
                          cache.layers[i])
        return m.norm(x)

    def head(self, x: Tensor) -> Tensor:
        """Logits (..., V) from hidden states (..., C): the token embedding, transposed, when tied."""
        tied = self.config.get("tie_embeddings", True)
        logits = F.linear(x, self.model.embed_tokens.weight.T) if tied else self.lm_head(x)
        cap = self.config.get("final_logit_softcapping")
        return (logits / cap).tanh() * cap if cap else logits

    # ------------------------------------------------------------------------------------------- generation
    def step(self, idx: np.ndarray, mask: np.ndarray, cache: KVCache) -> np.ndarray:
        """Feed new tokens idx (B, T_new) (mask: True on real ones) through the cache; the logits of the last
        position, (B, V). Call under `inference(model)`."""
        positions, key_mask = cache.advance(mask)
        allowed = F.attention_mask(idx.shape[1], key_mask.shape[1], key_mask)
        x = self.decode(idx, positions, allowed, cache, cache.positions[:, : cache.length])
        return self.head(x[:, -1]).data

    def generate(self, prompt_ids: Sequence[int] | Sequence[Sequence[int]], max_new_tokens: int,
                 temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
                 eos_id: int | None = None, rng: np.random.Generator | int | None = None,
                 vocab_limit: int | None = None) -> list[list[int]]:
        """Continue each prompt (a list of ids, or a list of them) by up to max_new_tokens; the new ids of each
        (EOS not included: a row stops there). Greedy at temperature 0, else sampled from softmax(z/τ) restricted
        by top_k and top_p (minitrain/models/sampling.py), drawing from `rng` (a generator or a seed) row by row.
        Prompts of different lengths are left-padded into one batch. `vocab_limit`: only ids below it are chosen
        (a tokenizer smaller than the embedding table)."""
        prompts = [list(prompt_ids)] if prompt_ids and np.isscalar(prompt_ids[0]) else [list(p) for p in prompt_ids]
        if not prompts or not all(prompts):
            raise ValueError("generate: every prompt needs at least one token")
        width = max(map(len, prompts))
        if width + max_new_tokens > self.config["max_seq_len"]:
            raise ValueError(f"generate: {width} prompt tokens + {max_new_tokens} new ones exceed max_seq_len "
                             f"{self.config['max_seq_len']}")
        rng = np.random.default_rng(rng)
        idx = np.zeros((len(prompts), width), dtype=np.int64)
        mask = np.zeros(idx.shape, dtype=bool)
        for row, prompt in enumerate(prompts):  # left padding: every row's last position is its last token
            idx[row, width - len(prompt) :], mask[row, width - len(prompt) :] = prompt, True
        c = self.config
        cache = KVCache(c["n_layer"], len(prompts), width + max_new_tokens, c["n_kv_head"], c["head_dim"],
                        self.model.embed_tokens.weight.dtype,
                        [c.get("sliding_window") if kind == SLIDING else None for kind in self.kinds])  # fmt: skip
        new: list[list[int]] = [[] for _ in prompts]
        done = np.zeros(len(prompts), dtype=bool)
        with inference(self):
            logits = self.step(idx, mask, cache)
            for step in range(max_new_tokens):
                tokens = np.zeros(len(prompts), dtype=np.int64)
                for row in np.flatnonzero(~done):
                    tokens[row] = next_token(logits[row, :vocab_limit], temperature, top_k, rng, top_p)
                    if tokens[row] == eos_id:
                        done[row] = True
                    else:
                        new[row].append(int(tokens[row]))
                if done.all() or step == max_new_tokens - 1:
                    break
                logits = self.step(tokens[:, None], np.ones((len(prompts), 1), dtype=bool), cache)
        return new


def _dropout_rngs(layer: Module) -> list[np.random.Generator]:
    """The generators a layer's active dropouts draw from (a checkpointed layer replays them)."""
    rngs = {id(d.rng): d.rng for d in layer.modules() if isinstance(d, Dropout) and d.p > 0 and d.training}
    return list(rngs.values())
