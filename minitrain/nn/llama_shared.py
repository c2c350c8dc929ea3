"""What the Llama family's layers share: transformers' init std for their weights, and the KV cache they use.

Kept apart from the layers themselves (rms_norm.py, apply_rotary.py, llama_mlp.py, llama_attention.py) so that
each of those files holds its one piece, which lab 07 asks a student to write (minitrain/seam.py).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

LLAMA_INIT_STD = 0.02  # transformers' initializer_range for Llama, Qwen2 and Mistral


class KeyValueStore(Protocol):
    """One layer's KV cache (minitrain/models/kv_cache.py): stores the new keys and values, returns all so far."""

    def update(self, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
