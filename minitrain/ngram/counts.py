"""N-gram counts over token-id sequences, with every n-gram packed into one integer.

Packing. A sequence of j symbols g = (g_1, ..., g_j), each in [0, V), is stored as the base-V number

    key(g) = g_1·V^(j-1) + g_2·V^(j-2) + ... + g_j

so the n-grams of one length are plain int64 arrays that NumPy can sort, unique and search. From a key,
`key // V` is the context (the first j-1 symbols), `key % V` the last symbol, `key // V^(j-1)` the first symbol and
`key % V^(j-1)` the suffix without it. With V ≤ 64 symbols, j ≤ 10 still fits in int64.

What is counted. Each training sequence is an encoded line e = [BOS] + text + [EOS]. The n-gram of length j that
ends at position t is e[t-j+1 .. t]; it is counted for every target position t ≥ 1 (BOS itself is never
predicted) with t-j+1 ≥ 0, i.e. n-grams never reach left of BOS. Short n-grams near the start therefore begin
with BOS, and BOS occurs only at position 0, so an n-gram that begins with BOS has no left neighbour.

Continuation counts (for Kneser–Ney): N1+(• g) = the number of distinct symbols x such that x·g occurs, i.e. in
how many different left contexts g was seen.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAD_ID = 0
BOS_ID = 1


def max_packable_order(vocab_size: int) -> int:
    """The longest n-gram whose key V^j - 1 still fits in int64."""
    j = 1
    while vocab_size ** (j + 1) <= np.iinfo(np.int64).max:
        j += 1
    return j


def pad_sequences(sequences: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> np.ndarray:
    """Right-pad token-id sequences into one (N, L) int64 array, L = the longest length."""
    width = max((len(s) for s in sequences), default=0)
    out = np.full((len(sequences), width), pad_id, dtype=np.int64)
    for i, s in enumerate(sequences):
        out[i, : len(s)] = s
    return out


def suffix_keys(tokens: np.ndarray, length: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pack, for every position t, the `length` symbols ending at t: tokens[..., t-length+1 .. t].

    tokens: (B, T) int. Returns keys (B, T) int64 and `complete` (B, T) bool, False where the window would
    reach left of position 0 (there the key is meaningless). `length` = 0 gives the empty window: key 0,
    complete everywhere.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    keys = np.zeros(tokens.shape, dtype=np.int64)
    # Horner's rule, oldest symbol first: key = (...(g_1·V + g_2)·V + ...)·V + g_j.
    for back in range(length - 1, -1, -1):
        shifted = np.zeros_like(tokens)
        shifted[:, back:] = tokens[:, : tokens.shape[1] - back]
        keys = keys * vocab_size + shifted
    complete = np.zeros(tokens.shape, dtype=bool)
    complete[:, max(length - 1, 0) :] = True
    return keys, complete


class NgramCounts:
    """Raw and continuation counts of every n-gram of length 1..max_order in a set of sequences.

    For each length j (1-based index into the lists): `keys[j]` sorted unique packed n-grams, `raw[j]` how often
    each occurred, `continuation[j]` N1+(• g) for j < max_order (undefined, and not stored, for j = max_order).
    """

    def __init__(self, sequences: Sequence[Sequence[int]], vocab_size: int, max_order: int, pad_id: int = PAD_ID,
                 bos_id: int = BOS_ID) -> None:
        if not 1 <= max_order <= max_packable_order(vocab_size):
            raise ValueError(f"max_order must be in 1..{max_packable_order(vocab_size)} for {vocab_size} symbols, "
                             f"got {max_order}")
        self.vocab_size = vocab_size
        self.max_order = max_order
        self.pad_id = pad_id
        self.bos_id = bos_id
        tokens = pad_sequences(sequences, pad_id)
        # A position is a target when it holds a real token and is not the leading BOS.
        is_target = tokens != pad_id
        is_target[:, :1] = False
        self.keys: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]  # index 0 unused: lengths start at 1
        self.raw: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        for j in range(1, max_order + 1):
            keys, complete = suffix_keys(tokens, j, vocab_size)
            uniq, counts = np.unique(keys[complete & is_target], return_counts=True)
            self.keys.append(uniq)
            self.raw.append(counts.astype(np.int64))
        self.continuation: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        for j in range(1, max_order):
            # Every distinct (j+1)-gram x·g contributes one left neighbour x to its suffix g.
            suffixes = self.keys[j + 1] % vocab_size**j
            uniq, counts = np.unique(suffixes, return_counts=True)
            cont = np.zeros(self.keys[j].shape, dtype=np.int64)
            cont[np.searchsorted(self.keys[j], uniq)] = counts
            self.continuation.append(cont)

    def starts_with_bos(self, j: int) -> np.ndarray:
        """Bool mask over `keys[j]`: the n-grams whose first symbol is BOS (they have no left neighbour)."""
        return self.keys[j] // self.vocab_size ** (j - 1) == self.bos_id

    def predictable(self) -> np.ndarray:
        """Bool mask over the vocabulary: every symbol except PAD and BOS can be predicted."""
        mask = np.ones(self.vocab_size, dtype=bool)
        mask[[self.pad_id, self.bos_id]] = False
        return mask
