"""The `Batch` every batcher yields, and two operations on it that the library needs whoever wrote the batcher.

A batch is four (B, T) arrays (lab 00):

    input, target    int64 token ids; target[t] is the token after input[t]
    attn_pad_mask    bool, True where input[t] is a real token (attention never looks at PAD keys)
    loss_mask        bool, True where target[t] counts in the loss (`loss_on`: the answer, or every real target)

Packed rows (several documents per row, minitrain/data/packing.py; `data.packing: pack` with a pretrained Llama
base) carry their documents in `attn_pad_mask` itself: there it is int32 segment ids, 0 on padding and k on the
k-th document of the row. The loop's call `model(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask)`
stays as lab 01 wrote it; `Llama.forward` reads an integer mask as `segment_ids` (no attention across documents,
positions restarting at each). Only the Llama family takes them (a config rule refuses packing for the others).
Whatever reads the mask as "real token" counts `np.count_nonzero(mask)`, which is the same for both kinds.

`take` gathers rows of a whole encoded split; `trim_padding` drops the trailing columns that are padding in every
row, which changes no number the model computes on real positions and saves work.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

LOSS_ON = ("answer", "all")  # which targets count: the conjugated form + EOS, or every real token


class Batch(NamedTuple):
    """Arrays of shape (B, T): `input`/`target` int64 token ids, `attn_pad_mask`/`loss_mask` bool."""

    input: np.ndarray
    target: np.ndarray
    attn_pad_mask: np.ndarray
    loss_mask: np.ndarray


def take(split: Batch, index: np.ndarray | slice) -> Batch:
    """Rows `index` of every array (an index array copies them; a slice gives read-only views)."""
    return type(split)(*(array[index] for array in split))


def trim_padding(batch: Batch) -> Batch:
    """The batch without its trailing columns that are padding in every row: (B, T) -> (B, T') with T' the
    longest real sequence in the batch.

    Nothing changes for the real positions: attention is causal, so position t never sees a later column, and
    padding positions are in no loss. The corpus's lines are shorter than max_seq_len, so this saves work
    (about 15 % of a lab-01 step). Arrays come back C-contiguous. Segment ids (an int mask) trim the same way:
    padding is 0 in both kinds.
    """
    width = int(np.flatnonzero(batch.attn_pad_mask.any(axis=0))[-1]) + 1
    if width == batch.input.shape[1]:
        return batch
    return type(batch)(*(np.ascontiguousarray(a[:, :width]) for a in batch))


def batches_per_epoch(num_records: int, batch_size: int, drop_last: bool = True) -> int:
    """⌊N / batch_size⌋ full batches, or ⌈N / batch_size⌉ when the last, smaller one is kept."""
    return num_records // batch_size if drop_last else -(-num_records // batch_size)
