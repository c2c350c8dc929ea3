"""A key/value cache for generation: each step feeds only the new tokens, not the whole prefix again.

In causal attention a position's keys and values never change once computed (they depend on the tokens before
it only), so generating token n + 1 needs the new token's query against the n keys already seen. The cache keeps
them, per layer, in arrays allocated once for the longest sequence of the call:

    prefill: the prompts (B, T0) run once; every layer stores k, v (B, T0, H_kv, D)
    step:    one new token per row (B, 1); each layer appends its k, v and attends over all T0 + n positions

so a step costs O(n) instead of re-running O(n²) attention over the prefix. `KVCache.advance(mask)` registers
new positions: which are real tokens (batched prompts are left-padded; padding is never attended to) and each
token's rotary position (real tokens before it in its row), kept per key (`positions`) for a sliding window.
Shapes: B batch, capacity = the most positions the call will hold, H_kv key/value heads, D head_dim.
"""

from __future__ import annotations

import numpy as np

from minitrain.nn.rotary import rope_positions


class LayerCache:
    """One layer's keys and values: (B, capacity, H_kv, D) each, the first `length` positions filled."""

    def __init__(self, batch: int, capacity: int, n_kv_head: int, head_dim: int, dtype: type = np.float32) -> None:
        self.keys = np.zeros((batch, capacity, n_kv_head, head_dim), dtype=dtype)
        self.values = np.zeros_like(self.keys)
        self.length = 0

    def update(self, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Append (B, T_new, H_kv, D) keys and values; return views of every position so far, (B, length, H_kv, D)."""
        end = self.length + keys.shape[1]
        if end > self.keys.shape[1]:
            raise ValueError(f"KV cache: {end} positions do not fit its capacity of {self.keys.shape[1]}")
        self.keys[:, self.length : end] = keys
        self.values[:, self.length : end] = values
        self.length = end
        return self.keys[:, :end], self.values[:, :end]


class KVCache:
    """Every layer's `LayerCache`, the key mask and each key's rotary position (B, capacity), and each row's count
    of real tokens so far."""

    def __init__(
        self, n_layer: int, batch: int, capacity: int, n_kv_head: int, head_dim: int, dtype: type = np.float32
    ) -> None:
        self.layers = [LayerCache(batch, capacity, n_kv_head, head_dim, dtype) for _ in range(n_layer)]
        self.key_mask = np.zeros((batch, capacity), dtype=bool)
        self.positions = np.zeros((batch, capacity), dtype=np.int64)
        self.seen = np.zeros(batch, dtype=np.int64)  # real tokens so far per row: the next one's position
        self.length = 0

    def advance(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Register T_new positions, mask (B, T_new) True on real tokens; return their rotary positions (B, T_new)
        and the key mask of every position so far (B, length)."""
        mask = np.asarray(mask, dtype=bool)
        end = self.length + mask.shape[1]
        if end > self.key_mask.shape[1]:
            raise ValueError(f"KV cache: {end} positions do not fit its capacity of {self.key_mask.shape[1]}")
        self.key_mask[:, self.length : end] = mask
        positions = self.positions[:, self.length : end] = rope_positions(*mask.shape, mask, start=self.seen)
        self.seen += mask.sum(axis=1)
        self.length = end
        return positions, self.key_mask[:, :end]
