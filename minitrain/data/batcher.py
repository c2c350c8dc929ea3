"""Batches for next-character prediction (lab 00).

Every record is encoded once, up front, as `e = [BOS] + text + [EOS]` and split into

    input  = e[:-1]     what the model reads at positions 0..n-2
    target = e[1:]      what it must predict there (the next token)

each right-padded with PAD to `seq_len` columns. Two boolean masks of the same (N, T) shape go with them:

    attn_pad_mask[t]  True where input[t] is a real token; attention never looks at PAD keys
    loss_mask[t]      True where target[t] counts in the loss. With `loss_on="answer"` (the default) that is the
                      characters of the conjugated form plus EOS; with `loss_on="all"` every real target.

For `caminar|P1|camino` the prompt `caminar|P1|` has 11 characters, so targets 11..17 (`camino` + EOS) count.

A batch is then just a gather of B rows from these arrays, which keeps the per-step cost tiny. Training
(`TrainBatcher`) is an endless iterator over shuffled epochs driven by its own data RNG; evaluation
(`EvalBatcher`) walks the split once in file order and keeps the last, smaller batch.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

import numpy as np

from minitrain.common.errors import UserError
from minitrain.data.batch import LOSS_ON, Batch, batches_per_epoch, take
from minitrain.data.tokenizer import CharTokenizer


def encode_split(
    records: Sequence[dict], tokenizer: CharTokenizer, seq_len: int = 32, loss_on: str = "answer"
) -> Batch:
    """Encode `records` (from `corpus.load_records`) once: the whole split as one `Batch` of (N, seq_len) arrays.

    Row i is record i: with e = `tokenizer.encode_line(text)` ([BOS] + characters + [EOS]), input = e[:-1] and
    target = e[1:], right-padded with `tokenizer.pad_id`; `input`/`target` are int64. `attn_pad_mask` (bool) is
    True where the input is a real token. `loss_mask` (bool) is True where the TARGET counts: with
    loss_on="answer", the targets from the form's first character to EOS (everything after the last `|`); with
    loss_on="all", every real target. Padding never counts. A UserError for an empty split, an unknown
    `loss_on`, or a record whose line does not fit (more than seq_len + 1 tokens).
    """
    if loss_on not in LOSS_ON:
        raise UserError(f"data.loss_on must be one of {list(LOSS_ON)}, got {loss_on!r}")
    if not records:
        raise UserError("cannot build batches from an empty split")
    n = len(records)
    shape = (n, seq_len)
    inputs = np.full(shape, tokenizer.pad_id, dtype=np.int64)
    targets = np.full(shape, tokenizer.pad_id, dtype=np.int64)
    attn_pad_mask = np.zeros(shape, dtype=bool)
    loss_mask = np.zeros(shape, dtype=bool)
    for row, record in enumerate(records):
        text = record["text"]
        line = tokenizer.encode_line(text)
        steps = len(line) - 1  # number of (input, target) pairs
        if steps > seq_len:
            raise UserError(f"record {text!r} needs {len(line)} tokens, more than seq_len + 1 = {seq_len + 1}")
        inputs[row, :steps] = line[:-1]
        targets[row, :steps] = line[1:]
        attn_pad_mask[row, :steps] = True
        # Target t is token t+1 of the line; the form's first token is line token len(prompt) + 1 (a prompt of
        # characters, or of BPE tokens: `|` is a word of its own, so the form's tokens start after it).
        first = 0 if loss_on == "all" else len(tokenizer.encode(text[: text.rindex("|") + 1]))
        loss_mask[row, first:steps] = True
    for array in (inputs, targets, attn_pad_mask, loss_mask):
        array.setflags(write=False)  # eval batches are views: nobody may scribble on the split
    return Batch(inputs, targets, attn_pad_mask, loss_mask)


class TrainBatcher:
    """Endless shuffled batches: `next(batcher) -> Batch` of exactly `batch_size` rows.

    Each epoch is one permutation of the rows drawn from the data RNG, `Generator(PCG64(data_seed))`, which
    is never used for anything else. An epoch is `steps_per_epoch = N // batch_size` batches; the few rows
    left over wait for a later epoch's permutation, so every batch has the same shape.

    `shuffle=False` keeps the file order in every epoch (the data RNG is not drawn from); `drop_last=False`
    ends each epoch with one smaller batch of the rows left over, so an epoch is ⌈N / batch_size⌉ batches and
    sees every row.

    The state is (epoch, position, RNG state *before* this epoch's permutation was drawn): redrawing the
    permutation from it reproduces the epoch, so a resumed run sees exactly the batches of an uninterrupted one.
    """

    def __init__(
        self, data: Batch, batch_size: int, data_seed: int, shuffle: bool = True, drop_last: bool = True
    ) -> None:
        """Batches of `batch_size` rows of the encoded split `data`, shuffled by `Generator(PCG64(data_seed))`.

        A UserError when batch_size < 1 or the split has fewer rows than one batch. `shuffle` and `drop_last`
        (training.shuffle / training.drop_last) are optional: lab 00 asks only for the default behaviour.
        """
        if batch_size < 1:
            raise UserError(f"batch_size must be at least 1, got {batch_size}")
        self.data = data
        self.num_records = len(data.input)
        if self.num_records < batch_size:
            raise UserError(f"the training split has {self.num_records} records, fewer than batch_size {batch_size}")
        self.batch_size, self.shuffle = batch_size, shuffle
        self.steps_per_epoch = batches_per_epoch(self.num_records, batch_size, drop_last)
        self._rng = np.random.Generator(np.random.PCG64(data_seed))
        self.epoch = -1
        self._start_epoch()

    def _start_epoch(self) -> None:
        self._epoch_rng_state = self._rng.bit_generator.state
        self._order = self._rng.permutation(self.num_records) if self.shuffle else np.arange(self.num_records)
        self.epoch += 1
        self.position = 0  # batches of this epoch already handed out

    def __iter__(self) -> Iterator[Batch]:
        """The batcher is its own iterator, and never ends."""
        return self

    def __next__(self) -> Batch:
        """The next batch: rows `order[position·B : (position+1)·B]` of this epoch's permutation; the first call
        after an epoch's last batch draws the next epoch's permutation (from the data RNG, nothing else)."""
        if self.position == self.steps_per_epoch:
            self._start_epoch()
        start = self.position * self.batch_size
        self.position += 1
        return take(self.data, self._order[start : start + self.batch_size])

    def state_dict(self) -> dict:
        """JSON-serialisable state: {"epoch", "position" (batches of this epoch already handed out), "rng" (the
        data RNG's `bit_generator.state` from BEFORE this epoch's permutation was drawn), "num_records",
        "batch_size"}. A copy: later batches must not change a state already taken."""
        return {
            "epoch": self.epoch,
            "position": self.position,
            "rng": copy.deepcopy(self._epoch_rng_state),
            "num_records": self.num_records,
            "batch_size": self.batch_size,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state`: set the RNG back, redraw the same permutation, skip to `position`, so the next
        batches are exactly those the saved batcher would have given. A UserError (nothing changed) for a state
        of another split size or batch size, or a malformed one."""
        expected = {"epoch", "position", "rng", "num_records", "batch_size"}
        if not isinstance(state, dict) or set(state) != expected:
            raise UserError(f"batcher state must have the keys {sorted(expected)}")
        if (state["num_records"], state["batch_size"]) != (self.num_records, self.batch_size):
            raise UserError(
                f"batcher state is for {state['num_records']} records in batches of {state['batch_size']}, "
                f"but this run has {self.num_records} records in batches of {self.batch_size}"
            )
        if not 0 <= state["position"] <= self.steps_per_epoch:
            raise UserError(f"batcher state position {state['position']} is outside 0..{self.steps_per_epoch}")
        try:
            self._rng.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError) as e:
            raise UserError(f"batcher state has an invalid data RNG state ({e})") from None
        self.epoch = state["epoch"] - 1
        self._start_epoch()
        self.position = state["position"]


class EvalBatcher:
    """One pass over a split in file order, batches of `batch_size` rows, the last one possibly smaller.

    Iterating again starts a new pass; `len()` is the number of batches per pass.
    """

    def __init__(self, data: Batch, batch_size: int) -> None:
        """One pass over the encoded split `data` in batches of `batch_size` rows (UserError if < 1)."""
        if batch_size < 1:
            raise UserError(f"batch_size must be at least 1, got {batch_size}")
        self.data = data
        self.num_records = len(data.input)
        self.batch_size = batch_size

    def __len__(self) -> int:
        """Batches per pass: ceil(N / batch_size)."""
        return -(-self.num_records // self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        """Rows 0..B−1, B..2B−1, ... in file order; the last batch holds what is left, so every row is scored
        exactly once whatever the batch size."""
        for start in range(0, self.num_records, self.batch_size):
            yield take(self.data, slice(start, start + self.batch_size))
