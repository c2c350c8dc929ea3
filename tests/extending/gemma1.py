"""`model.type: gemma1`, a family composed from the decoder's pieces: save this file as minitrain/models/gemma1.py and
add the line `"gemma1",` to FAMILY_MODULES in minitrain/models/registry.py.

The first Gemma (Gemma Team, 2024; transformers' GemmaForCausalLM) is the Llama decoder (minitrain/models/decoder.py)
with three other pieces, which its successors keep (minitrain/models/gemma.py has Gemma 2 and 3):

    norm(x) = x/√(mean(x²) + eps) · (1 + w)              the gain stored as its offset from 1 (w = 0 at init)
    mlp(x)  = down_proj(gelu(gate_proj(x)) · up_proj(x))  GeGLU, with the tanh GELU
    x₀      = embed_tokens[idx] · √d_model                 and the output head is the token embedding (tied)
"""

from __future__ import annotations

from functools import partial

import numpy as np

from minitrain.autograd import functional as F
from minitrain.models.decoder import Decoder
from minitrain.models.family import ModelFamily, file_schema_of
from minitrain.models.gemma import GemmaRMSNorm
from minitrain.models.llama import FAMILY as LLAMA
from minitrain.nn import LlamaMLP


class Gemma1(Decoder):
    """`model(idx, targets, attn_pad_mask, loss_mask, segment_ids)` -> (None, loss); generate() with a KV cache."""

    def __init__(self, *, n_layer: int, n_head: int, n_kv_head: int | None = None, d_model: int, d_ff: int,
                 vocab_size: int, max_seq_len: int, head_dim: int | None = None, rope_theta: float = 10000.0,
                 rms_norm_eps: float = 1e-6, dropout: float = 0.0, rng: np.random.Generator | int = 0,
                 dtype: type = np.float32) -> None:
        config = dict(type="gemma1", n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head, d_model=d_model,
                      d_ff=d_ff, vocab_size=vocab_size, max_seq_len=max_seq_len, head_dim=head_dim,
                      rope_theta=float(rope_theta), rms_norm_eps=float(rms_norm_eps), dropout=float(dropout))
        super().__init__(config, norm=GemmaRMSNorm, mlp=partial(LlamaMLP, activation=F.gelu),
                         embed_scale=float(np.sqrt(d_model)), rng=rng, dtype=dtype)


# Its `model:` keys, their rules, parameter names and shapes are Llama's (those its constructor takes); it reads
# packed rows as the decoder does. No export layout: transformers' Gemma and llama.cpp's gemma are not written.
FAMILY = ModelFamily(name="gemma1", model=Gemma1, keys=LLAMA.keys, file_prefix="gemma1", reads="text",
                     file_schema=file_schema_of("gemma1", Gemma1, LLAMA.keys), parameter_shapes=LLAMA.parameter_shapes,
                     width=LLAMA.width, linear_paths=LLAMA.linear_paths, check=LLAMA.check, packs_rows=True,
                     example={**LLAMA.example, "type": "gemma1"})
