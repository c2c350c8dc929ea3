"""What every n-gram model here shares: per-length context tables and the level-by-level recursion.

Both smoothing methods can be written as "this context's own (discounted) counts, plus a back-off weight times a
lower-order distribution":

    p_j(w | h) = mass_j(h, w) + backoff_j(h) · p_lower(w | h')          for a context h seen in training

where h has j-1 symbols and h' drops its oldest one. A `LevelTable` stores mass_j and backoff_j for every context
of one length j. A model of order N walks j = 1..N. At level j, three cases:

- the window of j-1 symbols would reach left of BOS (the prefix is too short): the level is skipped, so a short
  prefix is modelled by the longest n-gram that fits, which starts with BOS;
- the context was seen: the formula above;
- the context was never seen: all its mass goes to the lower-order distribution (backoff = 1, no own mass).

The vocabulary and its two unpredictable symbols. Distributions range over all V symbols, but PAD and BOS never
follow anything in the data, so they get probability exactly 0 and the V-2 others sum to 1. (MiniGPT's softmax
spreads a little mass over all V; scores only ever read the probability of counted targets, which are never PAD
or BOS, so both models are scored on the same events and the n-gram is, if anything, favoured.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from minitrain.ngram.counts import NgramCounts, pad_sequences, suffix_keys


class LevelTable(NamedTuple):
    """mass_j and backoff_j for the contexts of one length, in compressed-sparse-row form.

    contexts: (C,) sorted packed context keys; starts: (C+1,) where each context's grams begin in
    symbols/mass; symbols, mass: (G,) the next symbol and its own probability mass; backoff: (C,).
    """

    contexts: np.ndarray
    starts: np.ndarray
    symbols: np.ndarray
    mass: np.ndarray
    backoff: np.ndarray


def level_table(keys: np.ndarray, counts: np.ndarray, discount: np.ndarray | float, extra: float,
                vocab_size: int) -> LevelTable:
    """The level of the grams `keys` (sorted) seen `counts` times, each less `discount`, with `extra` pseudo-counts
    per context: mass = (c(h w) - d) / (Σ_v c(h v) + extra), backoff = (Σ_v d + extra) / (Σ_v c(h v) + extra)."""
    contexts, first = np.unique(keys // vocab_size, return_index=True)
    starts = np.append(first, keys.size)
    discount = np.broadcast_to(discount, counts.shape)
    total = (np.add.reduceat(counts, starts[:-1]).astype(np.float64) if counts.size else np.zeros(0)) + extra
    freed = (np.add.reduceat(discount, starts[:-1]) if counts.size else np.zeros(0)) + extra
    mass = (counts - discount) / np.repeat(total, np.diff(starts))
    return LevelTable(contexts, starts, keys % vocab_size, mass, freed / total)


def lookup(table: LevelTable, keys: np.ndarray, complete: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows (into the flat query arrays) whose context is complete and was seen, and that context's index."""
    if table.contexts.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # A key beyond the last context is clamped onto it and then fails the equality test.
    idx = np.minimum(np.searchsorted(table.contexts, keys), table.contexts.size - 1)
    rows = np.nonzero(complete & (table.contexts[idx] == keys))[0]
    return rows, idx[rows]


def apply_level(p_lower: np.ndarray, table: LevelTable, rows: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    """mass + backoff · p_lower on the given rows of the (Q, V) array p_lower; the other rows unchanged."""
    weight = np.ones(p_lower.shape[0])
    weight[rows] = table.backoff[ctx]
    out = p_lower * weight[:, None]
    # Scatter each context's own grams into its row: a CSR row gather, one entry per (row, gram). A context
    # lists each symbol once, so no (row, symbol) repeats and a plain += on flat indices is exact.
    lengths = table.starts[ctx + 1] - table.starts[ctx]
    entry_row = np.repeat(rows, lengths)
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    entry = np.repeat(table.starts[ctx], lengths) + offsets
    out.reshape(-1)[entry_row * out.shape[1] + table.symbols[entry]] += table.mass[entry]
    return out


class NgramLM:
    """Base class: an n-gram model of `order` over `counts.vocab_size` symbols.

    Subclasses build `self.levels` (one `LevelTable` per n-gram length 1..order); `combine` says how a level's
    table meets the distribution from the levels below (interpolation, unless a subclass says otherwise).
    """

    def __init__(self, counts: NgramCounts, order: int) -> None:
        if not 1 <= order <= counts.max_order:
            raise ValueError(f"order must be in 1..{counts.max_order} (the counted maximum), got {order}")
        self.order = order
        self.vocab_size = counts.vocab_size
        predictable = counts.predictable()
        self.uniform = predictable / predictable.sum()
        self.levels: list[LevelTable] = []

    def combine(self, p: np.ndarray, table: LevelTable, rows: np.ndarray, ctx: np.ndarray,
                complete: np.ndarray) -> np.ndarray:
        """The distribution after level `table`, given `p` from the levels below (all (Q, V)): mass + backoff · p
        where the context was seen; an unseen or too-long context leaves p as it is."""
        return apply_level(p, table, rows, ctx)

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        """p(next | tokens[b, :t+1]) for every position: tokens (B, T) int -> (B, T, V) float64.

        Each row of `tokens` is a prefix that starts with BOS (like a batch's `input`); trailing PAD is
        allowed and only affects the positions inside the padding.
        """
        tokens = np.asarray(tokens, dtype=np.int64)
        b, t = tokens.shape
        p = np.tile(self.uniform, (b * t, 1))
        for j, table in enumerate(self.levels, start=1):
            # Level j reads the j-1 symbols ending at position t, i.e. the context of the gram ending at t+1.
            keys, complete = suffix_keys(tokens, j - 1, self.vocab_size)
            rows, ctx = lookup(table, keys.ravel(), complete.ravel())
            p = self.combine(p, table, rows, ctx, complete.ravel())
        return p.reshape(b, t, self.vocab_size)

    def log_probs(self, tokens: np.ndarray) -> np.ndarray:
        """log of `probs`; PAD and BOS get -inf."""
        with np.errstate(divide="ignore"):
            return np.log(self.probs(tokens))

    def next_log_probs(self, prefixes: list[list[int]]) -> np.ndarray:
        """Log-distribution of the token after each prefix (each starting with BOS): (N, V)."""
        lengths = np.array([len(p) for p in prefixes])
        lp = self.log_probs(pad_sequences(prefixes))
        return lp[np.arange(len(prefixes)), lengths - 1]

