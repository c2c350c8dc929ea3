"""A key/value cache for generation: each step feeds only the new tokens, not the whole prefix again.

In causal attention a position's keys and values never change once computed (they depend on the tokens before
it only), so generating token n + 1 needs the new token's query against the n keys already seen. The cache keeps
them, per layer, in arrays allocated once for the longest sequence of the call:

    prefill: the prompts (B, T0) run once; every layer stores k, v (B, T0, H_kv, D)
    step:    one new token per row (B, 1); each layer appends its k, v and attends over all T0 + n positions

so a step costs O(n) instead of re-running O(n²) attention over the prefix. `KVCache.advance(mask)` registers
new positions: which are real tokens (batched prompts are left-padded; padding is never attended to) and each
token's rotary position (real tokens before it in its row), kept per key (`positions`) for a sliding window.
A sliding layer's cache (`window` W) rolls: it keeps only the W − 1 latest keys and values, all that a later query
can see (rows are left-padded, so the latest indices are the latest positions of every row), and answers the
new tokens with those and theirs: `visible(total, new)` says how many of the latest positions that is.
Shapes: B batch, capacity = the most positions the call will hold, H_kv key/value heads, D head_dim.
"""

from __future__ import annotations

import numpy as np

from minitrain.nn.rotary import rope_positions


class LayerCache:
    """One layer's keys and values: (B, capacity, H_kv, D) each, the first `length` positions filled; with a
    `window`, only the window − 1 latest (B, ≤ W − 1, H_kv, D)."""

    def __init__(self, batch: int, capacity: int, n_kv_head: int, head_dim: int, dtype: type = np.float32,
                 window: int | None = None) -> None:
        self.capacity, self.window = capacity, window
        self.keys = np.zeros((batch, capacity if window is None else 0, n_kv_head, head_dim), dtype=dtype)
        self.values = np.zeros_like(self.keys)
        self.length = 0

    def visible(self, total: int, new: int) -> int:
        """How many of the `total` latest positions `update` of `new` ones returns: all, or W − 1 + new."""
        return total if self.window is None else min(total, self.window - 1 + new)

    def update(self, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Append (B, T_new, H_kv, D) keys and values; return views of every position so far, (B, length, H_kv, D)
        (with a window: the `visible` latest)."""
        end = self.length + keys.shape[1]
        if end > self.capacity:
            raise ValueError(f"KV cache: {end} positions do not fit its capacity of {self.capacity}")
        if self.window is not None:
            k, v = np.concatenate([self.keys, keys], 1), np.concatenate([self.values, values], 1)
            keep = max(0, k.shape[1] - self.window + 1)
            self.keys, self.values, self.length = k[:, keep:], v[:, keep:], end
            return k, v
        self.keys[:, self.length : end] = keys
        self.values[:, self.length : end] = values
        self.length = end
        return self.keys[:, :end], self.values[:, :end]


class KVCache:
    """Every layer's `LayerCache`, the key mask and each key's rotary position (B, capacity), and each row's count
    of real tokens so far."""

    def __init__(
        self, n_layer: int, batch: int, capacity: int, n_kv_head: int, head_dim: int, dtype: type = np.float32,
        windows: list[int | None] | None = None,
    ) -> None:
        """`windows`: each layer's sliding window (None: it keeps every position)."""
        self.layers = [LayerCache(batch, capacity, n_kv_head, head_dim, dtype, w) for w in windows or [None] * n_layer]
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
