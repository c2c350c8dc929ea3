"""Llama: the decoder of Llama 2/3, SmolLM2, Qwen2 and Mistral, readable top to bottom, built from minitrain.nn.

    idx (B, T) ──► embed_tokens[idx] ──► n_layer × LlamaDecoderLayer ──► norm ──► lm_head ──► logits (B, T, V)
                                                ▲
                         positions (B, T) ──► rotary cos, sin (queries and keys of every layer)

    LlamaDecoderLayer(x):  h = x + self_attn(input_layernorm(x))     grouped-query attention, rotary positions
                           y = h + mlp(post_attention_layernorm(h))  down_proj(silu(gate_proj) · up_proj)

RMSNorm (eps `rms_norm_eps`), rotary positions (θ = `rope_theta`, optionally Llama 3's `rope_scaling`; no position
table), `n_kv_head` key/value heads shared by groups of the `n_head` query heads, SwiGLU, no biases except the
optional q/k/v ones (`attention_bias`: Qwen2), the output head tied to the token embedding or its own
(`tie_embeddings`). One class covers Hugging Face's `llama`, `qwen2` and `mistral` configs (without a sliding
window). Parameter names are Hugging Face LlamaForCausalLM's (`model.layers.0.self_attn.q_proj.weight`...); linear
weights are stored [in, out], the transpose of theirs (minitrain's `nn.Linear`), lm_head's too.

`forward` is MiniGPT's, plus `segment_ids` for packed documents: a token attends only to earlier tokens of its
own segment, and rotary positions restart at 0 with each segment (and count real tokens only: a left-padded row
starts at 0 too). `generate` continues prompts with a KV cache (minitrain/models/kv_cache.py), feeding one new
token per step. `dropout` (0 in every pretrained model) drops the output of each sub-layer while training.
`model.gradient_checkpointing = True` keeps only each layer's input on the tape and recomputes the layer in
backward (minitrain/autograd/recompute.py): the same gradients, a second forward pass of the layers, and ~30×
less activation memory at SmolLM2-135M's shape (what brings a QLoRA step on 4 × 256 tokens under 1.5 GB).

Init, all from the training RNG (transformers' for these models): embed_tokens, then per layer q, k, v, o, gate,
up, down, then lm_head when untied, all N(0, 0.02²) (initializer_range); biases 0, norms 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from minitrain.autograd import functional as F
from minitrain.autograd.recompute import checkpoint
from minitrain.autograd.tensor import TAPE, Tensor
from minitrain.common.errors import ArgumentError
from minitrain.common.strict import PositiveInt, Section
from minitrain.models.family import DropoutRate, FileSchema, ModelFamily, Shapes
from minitrain.models.kv_cache import KVCache
from minitrain.models.sampling import next_token
from minitrain.nn import Embedding, Linear, LlamaDecoderLayer, Module, ModuleDict, ModuleList, RMSNorm, inference
from minitrain.nn.dropout import Dropout
from minitrain.nn.llama_shared import LLAMA_INIT_STD
from minitrain.nn.rotary import RotaryEmbedding, inverse_frequencies, rope_positions


def parameter_shapes(config: Mapping[str, Any]) -> Shapes:
    """Every parameter's Hugging Face name and (minitrain) shape, in model order, without building the model."""
    d, n_head, n_kv = config["d_model"], config["n_head"], config.get("n_kv_head") or config["n_head"]
    head_dim = config.get("head_dim") or d // n_head
    bias = config.get("attention_bias", False)
    shapes = [("model.embed_tokens.weight", (config["vocab_size"], d))]
    for i in range(config["n_layer"]):
        layer = f"model.layers.{i}"
        a, m = f"{layer}.self_attn", f"{layer}.mlp"
        for name, width in (("q_proj", n_head * head_dim), ("k_proj", n_kv * head_dim), ("v_proj", n_kv * head_dim)):
            shapes += [(f"{a}.{name}.weight", (d, width))] + ([(f"{a}.{name}.bias", (width,))] if bias else [])
        shapes += [
            (f"{a}.o_proj.weight", (n_head * head_dim, d)), (f"{m}.gate_proj.weight", (d, config["d_ff"])),
            (f"{m}.up_proj.weight", (d, config["d_ff"])), (f"{m}.down_proj.weight", (config["d_ff"], d)),
            (f"{layer}.input_layernorm.weight", (d,)), (f"{layer}.post_attention_layernorm.weight", (d,)),
        ]  # fmt: skip
    shapes.append(("model.norm.weight", (d,)))
    return shapes if config.get("tie_embeddings", True) else [*shapes, ("lm_head.weight", (d, config["vocab_size"]))]


class Llama(Module):
    """Llama-family language model. `logits, loss = model(idx, targets, attn_pad_mask, loss_mask, segment_ids)`."""

    # True: recompute each layer in backward (config: training.gradient_checkpointing). A family whose model class
    # has this attribute accepts that key (minitrain/config/rules.py).
    gradient_checkpointing: bool = False

    def __init__(
        self,
        *,
        n_layer: int,
        n_head: int,
        n_kv_head: int | None = None,
        d_model: int,
        d_ff: int,
        vocab_size: int,
        max_seq_len: int,
        rope_theta: float = 10000.0,
        rope_scaling: Mapping[str, Any] | None = None,
        rms_norm_eps: float = 1e-5,
        tie_embeddings: bool = True,
        attention_bias: bool = False,
        head_dim: int | None = None,
        dropout: float = 0.0,
        rng: np.random.Generator | int = 0,
        dtype: type = np.float32,
    ) -> None:
        """`rng` is the training RNG (or a seed for one): it draws the initial weights and, later, dropout masks.
        n_kv_head defaults to n_head (ordinary multi-head attention), head_dim to d_model // n_head."""
        super().__init__()
        n_kv_head = n_head if n_kv_head is None else n_kv_head
        if head_dim is None:
            if d_model % n_head:
                raise ArgumentError(f"model: d_model ({d_model}) must be divisible by n_head ({n_head}), or give "
                                    "head_dim")
            head_dim = d_model // n_head
        if not 0.0 <= dropout < 1.0:
            raise ArgumentError(f"model: dropout must be in [0, 1), got {dropout}")
        inverse_frequencies(head_dim, rope_theta, rope_scaling)  # an unsupported rope_scaling fails here
        self.config = dict(type="llama", n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head, d_model=d_model,
                           d_ff=d_ff, vocab_size=vocab_size, max_seq_len=max_seq_len, rope_theta=float(rope_theta),
                           rope_scaling=None if rope_scaling is None else dict(rope_scaling),
                           rms_norm_eps=float(rms_norm_eps), tie_embeddings=bool(tie_embeddings),
                           attention_bias=bool(attention_bias), head_dim=head_dim, dropout=float(dropout))  # fmt: skip
        self.rng = rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.model = ModuleDict(
            embed_tokens=Embedding(vocab_size, d_model, rng=rng, std=LLAMA_INIT_STD, dtype=dtype),
            layers=ModuleList(
                LlamaDecoderLayer(d_model, n_head, n_kv_head, head_dim, d_ff, rms_norm_eps, attention_bias, dropout,
                                  rng=rng, dtype=dtype)
                for _ in range(n_layer)
            ),
            norm=RMSNorm(d_model, rms_norm_eps, dtype=dtype),
            rotary_emb=RotaryEmbedding(head_dim, rope_theta, rope_scaling),
        )
        if not tie_embeddings:
            self.lm_head = Linear(d_model, vocab_size, bias=False, rng=rng, std=LLAMA_INIT_STD, dtype=dtype)

    def forward(
        self,
        idx: np.ndarray,
        targets: np.ndarray | None = None,
        attn_pad_mask: np.ndarray | None = None,
        loss_mask: np.ndarray | None = None,
        segment_ids: np.ndarray | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, V), and the mean cross-entropy over the positions loss_mask marks
        (every position if it is None) when targets (B, T) are given. attn_pad_mask (B, T) is True on real tokens
        (padding keys are never attended to, and do not count as positions); segment_ids (B, T) marks packed
        documents (no attention across them; positions restart at 0 with each).

        An integer attn_pad_mask is taken as segment_ids (0 on padding, k on the k-th document of its row): that
        is how a packed batch reaches the model through lab 01's `model(input, target, attn_pad_mask, loss_mask)`
        call, whose four arguments never change (minitrain/data/batch.py)."""
        if attn_pad_mask is not None and segment_ids is None and np.issubdtype(attn_pad_mask.dtype, np.integer):
            segment_ids, attn_pad_mask = attn_pad_mask, attn_pad_mask > 0
        batch, time = idx.shape
        if time > self.config["max_seq_len"]:
            raise ValueError(f"Llama: sequence length {time} exceeds max_seq_len {self.config['max_seq_len']}")
        positions = rope_positions(batch, time, attn_pad_mask, segment_ids)
        x = self.decode(idx, positions, F.attention_mask(time, time, attn_pad_mask, segment_ids))
        logits = self.head(x)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits, targets, loss_mask)

    def decode(self, idx: np.ndarray, positions: np.ndarray, allowed: np.ndarray, cache: KVCache | None = None
               ) -> Tensor:
        """The hidden states after the final norm, (B, T, C): the embedding and every layer, with rotary
        positions (B, T) and the attention mask `allowed` (B, T, T_k); with a cache, over the cached positions too."""
        m = self.model
        x = m.embed_tokens(idx)
        cos, sin = m.rotary_emb(positions, x.dtype)
        for i, layer in enumerate(m.layers):
            if self.gradient_checkpointing and cache is None and TAPE.recording:
                x = checkpoint(lambda h, layer=layer: layer(h, cos, sin, allowed), x,
                               [p for p in layer.parameters() if p.requires_grad], _dropout_rngs(layer))  # fmt: skip
            else:
                x = layer(x, cos, sin, allowed, None if cache is None else cache.layers[i])
        return m.norm(x)

    def head(self, x: Tensor) -> Tensor:
        """Logits (..., V) from hidden states (..., C): the token embedding, transposed, when tied."""
        if self.config["tie_embeddings"]:
            return F.linear(x, self.model.embed_tokens.weight.T)
        return self.lm_head(x)

    # ------------------------------------------------------------------------------------------- generation
    def step(self, idx: np.ndarray, mask: np.ndarray, cache: KVCache) -> np.ndarray:
        """Feed new tokens idx (B, T_new) (mask: True on real ones) through the cache; the logits of the last
        position, (B, V). Call under `inference(model)`."""
        positions, key_mask = cache.advance(mask)
        allowed = F.attention_mask(idx.shape[1], key_mask.shape[1], key_mask)
        x = self.decode(idx, positions, allowed, cache)
        return self.head(x[:, -1]).data

    def generate(
        self,
        prompt_ids: Sequence[int] | Sequence[Sequence[int]],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos_id: int | None = None,
        rng: np.random.Generator | int | None = None,
        vocab_limit: int | None = None,
    ) -> list[list[int]]:
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
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        idx = np.zeros((len(prompts), width), dtype=np.int64)
        mask = np.zeros(idx.shape, dtype=bool)
        for row, prompt in enumerate(prompts):  # left padding: every row's last position is its last token
            idx[row, width - len(prompt) :], mask[row, width - len(prompt) :] = prompt, True
        c = self.config
        cache = KVCache(c["n_layer"], len(prompts), width + max_new_tokens, c["n_kv_head"], c["head_dim"],
                        self.model.embed_tokens.weight.dtype)  # fmt: skip
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

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.config.items() if k != "type")


def _dropout_rngs(layer: Module) -> list[np.random.Generator]:
    """The generators a layer's active dropouts draw from (a checkpointed layer replays them)."""
    rngs = {id(d.rng): d.rng for d in layer.modules() if isinstance(d, Dropout) and d.p > 0 and d.training}
    return list(rngs.values())


# --- the family record: how configs, model files and run folders name it (minitrain/models/family.py) ---------


class RopeScaling(Section):
    """Llama 3's `rope_scaling` (minitrain/nn/rotary.py), as transformers' config writes it."""

    rope_type: Literal["llama3"]
    factor: float = Field(gt=0)
    low_freq_factor: float = Field(gt=0)
    high_freq_factor: float = Field(gt=0)
    original_max_position_embeddings: PositiveInt


class LlamaKeys(Section):
    """`model:` keys of `type: llama` (with n_layer, n_head, d_model, d_ff, vocab_size, max_seq_len, dropout);
    left out, they take Llama's defaults."""

    n_kv_head: PositiveInt | None = Field(None, description="llama: key/value heads (default n_head)")
    head_dim: PositiveInt | None = Field(None, description="llama: size of each head (default d_model / n_head)")
    rope_theta: float | None = Field(None, gt=0, description="llama: rotary base θ (default 10000)")
    rope_scaling: RopeScaling | None = Field(None, description="llama: Llama 3's rotary scaling")
    rms_norm_eps: float | None = Field(None, gt=0, description="llama: RMSNorm eps (default 1e-5)")
    tie_embeddings: bool | None = Field(None, description="llama: output head = token embedding (default true)")
    attention_bias: bool | None = Field(None, description="llama: biases on q, k, v (Qwen2; default false)")


class LlamaFile(FileSchema):
    """A Llama file's `model_config`: what the model is built from, checked before anything is allocated."""

    type: Literal["llama"]
    n_layer: PositiveInt
    n_head: PositiveInt
    n_kv_head: PositiveInt
    d_model: PositiveInt
    d_ff: PositiveInt
    vocab_size: PositiveInt
    max_seq_len: PositiveInt
    head_dim: PositiveInt
    rope_theta: float = Field(gt=0)
    rope_scaling: dict[str, Any] | None = None
    rms_norm_eps: float = Field(gt=0)
    tie_embeddings: bool
    attention_bias: bool
    dropout: DropoutRate = 0.0

    @model_validator(mode="after")
    def _heads_group(self) -> LlamaFile:
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_head {self.n_head} is not a multiple of n_kv_head {self.n_kv_head}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} is odd; rotary embeddings need it even")
        return self


def _tensor_count(config: Mapping[str, Any]) -> int:
    per_layer = 9 + (3 if config.get("attention_bias", False) else 0)
    return 2 + per_layer * int(config["n_layer"]) + (0 if config.get("tie_embeddings", True) else 1)


def _linear_paths(config: Mapping[str, Any]) -> list[str]:
    return [name.removesuffix(".weight") for name, _ in parameter_shapes(config)
            if name.endswith("_proj.weight") or name == "lm_head.weight"]  # fmt: skip


FAMILY = ModelFamily(name="llama", model=Llama, keys=LlamaKeys, file_schema=LlamaFile, file_prefix="llama",
                     reads="text", parameter_shapes=parameter_shapes, width=lambda config: config["d_model"],
                     tensor_count=_tensor_count, linear_paths=_linear_paths,
                     example={"type": "llama", "n_layer": 1, "n_head": 4, "n_kv_head": 2, "d_model": 16, "d_ff": 32,
                              "vocab_size": 64, "max_seq_len": 32})
