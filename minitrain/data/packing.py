"""Token examples (`text_examples.Example`) to (N, T) arrays: several documents packed into each row, or one
padded example per row.

A document of n tokens takes n - 1 positions of a row: input = ids[:-1], target = ids[1:], loss mask =
loss_mask[1:]. The shift happens inside the document, so no target ever crosses a document boundary: every
position's target is the next token of its own document (the last one's is the document's EOS, which is never an
input itself). A row of T = max_seq_len positions therefore holds a document of at most T + 1 tokens.

    mode "pack"   documents are placed whole, best fit in file order: each goes into the row with the least room
                  that still fits it (the earliest such row on a tie), or starts a new row. Deterministic, and
                  tight: at most one row is left half empty or more.
    mode "pad"    row i is example i alone, right-padded.

The arrays, a `PackedBatch` (the fields of `batch.Batch`, plus `segment_ids`):

    input, target     (N, T) int64    token ids; pad_id on padding
    attn_pad_mask     (N, T) bool     True on real positions (a row's documents first, its padding last)
    loss_mask         (N, T) bool     True where the target counts (never on padding)
    segment_ids       (N, T) int32    1..k for the k documents of a row, in order; 0 on padding

A model given segment_ids attends from t only to s ≤ t of the same segment and restarts positions at each
segment's first token, so a packed row computes what its k documents would, each in a row of its own.

A document longer than a row (more than T + 1 tokens), by `overflow`:

    "error"      (the default) a UserError naming the record's file and line: nothing is silently dropped
    "truncate"   keep its first T + 1 tokens; the rest is not trained on (a UserError when no target it counts
                 is left: a completion that starts after the cut)
    "split"      cut it into pieces of T + 1 tokens, each piece starting on the previous one's last token, so every
                 token is still a target exactly once (the context before a cut is lost); each piece is a document,
                 and a piece with no counted target (a long prompt's first pieces) is dropped: it adds no loss

So every document, and every row, has at least one counted target: no batch is a division by zero.

`TrainBatcher` and `EvalBatcher` (`batcher.py`) batch a PackedBatch as they do a Batch: rows are gathered whole.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.data.text_examples import Example, TextTokenizer

MODES = ("pack", "pad")
OVERFLOWS = ("error", "truncate", "split")


def pad_id_of(tokenizer: TextTokenizer) -> int:
    """The id that fills padding: the tokenizer's PAD, else its EOS, else 0 (padding is never attended to nor
    counted, so any id in the vocabulary will do)."""
    return next((i for i in (tokenizer.pad_id, tokenizer.eos_id) if i is not None), 0)


class PackedBatch(NamedTuple):
    """(N, T) arrays: `input`/`target` int64, `attn_pad_mask`/`loss_mask` bool, `segment_ids` int32 (0 = padding)."""

    input: np.ndarray
    target: np.ndarray
    attn_pad_mask: np.ndarray
    loss_mask: np.ndarray
    segment_ids: np.ndarray


def pack(
    examples: Sequence[Example], max_seq_len: int, mode: str = "pack", pad_id: int = 0, overflow: str = "error"
) -> PackedBatch:
    """The examples as a PackedBatch of rows of `max_seq_len` positions (see the module docstring); the arrays
    are read-only. UserError for an unknown mode or overflow, no examples, an example of fewer than 2 tokens
    (nothing to predict), or one longer than a row with overflow="error"."""
    if mode not in MODES:
        raise UserError(f"packing mode must be one of {list(MODES)}, got {mode!r}", BAD_INPUT)
    if overflow not in OVERFLOWS:
        raise UserError(f"overflow must be one of {list(OVERFLOWS)}, got {overflow!r}", BAD_INPUT)
    if max_seq_len < 1 or pad_id < 0:
        raise ValueError(f"max_seq_len must be ≥ 1 and pad_id ≥ 0, got {max_seq_len} and {pad_id}")
    if not examples:
        raise UserError("no examples to pack", BAD_INPUT)
    documents = [piece for example in examples for piece in _fit(example, max_seq_len, overflow)]
    if mode == "pad":
        rows = [[i] for i in range(len(documents))]
    else:
        rows = best_fit([len(doc.ids) - 1 for doc in documents], max_seq_len)
    return _arrays(rows, documents, max_seq_len, pad_id)


def _fit(example: Example, max_seq_len: int, overflow: str) -> list[Example]:
    """The example as the documents it becomes in rows of `max_seq_len` positions (itself, when it fits)."""
    ids, mask, where = example
    if len(ids) != len(mask):
        raise ValueError(f"{where}: {len(ids)} ids but {len(mask)} loss-mask entries")
    if len(ids) < 2:
        raise UserError(f"{where}: the record is {len(ids)} token long: there is nothing to predict", BAD_INPUT)
    width = max_seq_len + 1  # tokens a row holds: T inputs and the last one's target
    if len(ids) <= width:
        return [example]
    if overflow == "error":
        raise UserError(f"{where}: the record is {len(ids)} tokens, more than a row holds (max_seq_len + 1 = "
                        f"{width}); shorten it, raise max_seq_len, or set overflow to truncate or split", BAD_INPUT)
    if overflow == "truncate":
        if not any(mask[1:width]):
            raise UserError(f"{where}: the record is {len(ids)} tokens and none of its first {width} (a row) is "
                            "counted: truncated, nothing would be trained on; shorten its prompt, raise max_seq_len, "
                            "or set overflow to split", BAD_INPUT)
        return [Example(ids[:width], mask[:width], where)]
    starts = range(0, len(ids) - 1, max_seq_len)  # piece k: tokens k·T .. k·T + T, sharing one token with piece k+1
    return [Example(ids[s : s + width], mask[s : s + width], where) for s in starts if any(mask[s + 1 : s + width])]


def best_fit(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Rows of item indices: each item in turn goes into the row with the least room left that still fits it (the
    earliest on a tie), or a new row. Every length must be in 1..capacity. A row's items stay in input order."""
    rows: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, row index) of rows with room, sorted
    for i, length in enumerate(lengths):
        k = bisect_left(free, (length, -1))
        if k == len(free):
            rows.append([i])
            room, row = capacity - length, len(rows) - 1
        else:
            room, row = free.pop(k)
            rows[row].append(i)
            room -= length
        if room > 0:
            insort(free, (room, row))
    return rows


def _arrays(rows: list[list[int]], documents: list[Example], width: int, pad_id: int) -> PackedBatch:
    shape = (len(rows), width)
    inputs = np.full(shape, pad_id, dtype=np.int64)
    targets = np.full(shape, pad_id, dtype=np.int64)
    attn_pad_mask = np.zeros(shape, dtype=bool)
    loss_mask = np.zeros(shape, dtype=bool)
    segment_ids = np.zeros(shape, dtype=np.int32)
    for r, row in enumerate(rows):
        t = 0
        for segment, i in enumerate(row, start=1):
            ids, mask, _ = documents[i]
            n = len(ids) - 1
            inputs[r, t : t + n] = ids[:-1]
            targets[r, t : t + n] = ids[1:]
            loss_mask[r, t : t + n] = mask[1:]
            segment_ids[r, t : t + n] = segment
            t += n
        attn_pad_mask[r, :t] = True
    batch = PackedBatch(inputs, targets, attn_pad_mask, loss_mask, segment_ids)
    for array in batch:
        array.setflags(write=False)  # batches are views or gathers of these: nobody may scribble on the split
    return batch
