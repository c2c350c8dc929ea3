"""Packing examples into rows: every document once and whole, no target across a document boundary, segments in
order with padding last, deterministic bytes; padding mode; overflow; the batcher's bit-exact resume."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitrain.common.errors import UserError
from minitrain.data.batch import take, trim_padding
from minitrain.data.batcher import EvalBatcher, TrainBatcher
from minitrain.data.packing import PackedBatch, best_fit, pack, pad_id_of
from minitrain.data.text_examples import Example

PAD = 0


def documents_of(batch: PackedBatch) -> list[tuple[list[int], list[bool]]]:
    """Each (row, segment)'s document rebuilt: its inputs then its last target, and the loss mask of its targets
    (with False for the first token, which nothing predicts)."""
    found = []
    for r in range(len(batch.input)):
        for segment in range(1, int(batch.segment_ids[r].max()) + 1):
            at = np.flatnonzero(batch.segment_ids[r] == segment)
            inputs, targets = batch.input[r, at].tolist(), batch.target[r, at].tolist()
            assert inputs[1:] == targets[:-1]  # the shift stays inside the document
            found.append((inputs + targets[-1:], [False, *batch.loss_mask[r, at].tolist()]))
    return found


@st.composite
def examples(draw, max_len: int = 13):
    n = draw(st.integers(1, 20))
    out = []
    for i in range(n):
        ids = draw(st.lists(st.integers(1, 50), min_size=2, max_size=max_len))
        mask = [False, *draw(st.lists(st.booleans(), min_size=len(ids) - 1, max_size=len(ids) - 1))]
        out.append(Example(ids, mask, f"data.jsonl:{i + 1}"))
    return out


@settings(max_examples=60, deadline=None, derandomize=True)
@given(examples(), st.integers(12, 20))
def test_packing_keeps_every_document_once_whole_and_inside_its_segment(docs, max_seq_len):
    batch = pack(docs, max_seq_len, "pack", PAD)
    assert [a.dtype for a in batch] == [np.int64, np.int64, bool, bool, np.int32]
    assert all(a.shape == (len(batch.input), max_seq_len) for a in batch)
    rebuilt = documents_of(batch)
    assert sorted(rebuilt) == sorted((d.ids, d.loss_mask) for d in docs)  # every real token once, masks with them
    real = batch.segment_ids > 0
    assert np.array_equal(real, batch.attn_pad_mask)
    assert not (batch.loss_mask & ~real).any()
    assert (batch.input[~real] == PAD).all() and (batch.target[~real] == PAD).all()
    for row in batch.segment_ids:  # segments 1..k in order, contiguous, padding only at the end
        k = int(row.max())
        assert k >= 1 and np.array_equal(np.unique(row[row > 0]), np.arange(1, k + 1))
        assert (np.diff(row[row > 0]) >= 0).all() and (row[: (row > 0).sum()] > 0).all()
    fill = batch.attn_pad_mask.sum(axis=1)
    assert (fill <= max_seq_len / 2).sum() <= 1  # best fit leaves at most one row half empty or more
    again = pack(docs, max_seq_len, "pack", PAD)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(batch, again, strict=True))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(examples(), st.integers(12, 20))
def test_pad_mode_is_one_example_per_row_in_order(docs, max_seq_len):
    batch = pack(docs, max_seq_len, "pad", PAD)
    assert len(batch.input) == len(docs)
    assert documents_of(batch) == [(d.ids, d.loss_mask) for d in docs]
    assert set(np.unique(batch.segment_ids)) <= {0, 1}


def test_a_row_packs_documents_in_file_order_with_targets_inside_each():
    docs = [Example([5, 6, 7], [False, True, True], "a"), Example([8, 9], [False, True], "b"),
            Example([1, 2, 3, 4], [False, False, True, True], "c")]
    batch = pack(docs, 6, "pack", PAD)
    assert batch.input.tolist() == [[5, 6, 8, 1, 2, 3]]
    assert batch.target.tolist() == [[6, 7, 9, 2, 3, 4]]  # 7 and 9 (the documents' last tokens) are never inputs
    assert batch.segment_ids.tolist() == [[1, 1, 2, 3, 3, 3]]
    assert batch.loss_mask.tolist() == [[True, True, True, False, True, True]]


def test_best_fit_fills_the_row_with_least_room_first():
    assert best_fit([6, 5, 3, 2, 1], 8) == [[0, 3], [1, 2], [4]]  # 3 goes to the room of 3, not of 2
    assert best_fit([4, 4, 4], 8) == [[0, 1], [2]]


def test_a_record_longer_than_a_row_is_an_error_naming_it_unless_asked():
    long = Example(list(range(1, 12)), [False] + [True] * 10, "data.jsonl:7")  # 11 tokens: 10 positions
    with pytest.raises(UserError, match=r"^data\.jsonl:7: the record is 11 tokens, more than a row holds "
                                        r"\(max_seq_len \+ 1 = 5\)"):
        pack([long], 4, "pack", PAD)
    cut = pack([long], 4, "pad", PAD, overflow="truncate")
    assert cut.input.tolist() == [[1, 2, 3, 4]] and cut.target.tolist() == [[2, 3, 4, 5]]
    pieces = pack([long], 4, "pack", PAD, overflow="split")
    assert pieces.input.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, PAD, PAD]]
    assert pieces.target.tolist() == [[2, 3, 4, 5], [6, 7, 8, 9], [10, 11, PAD, PAD]]  # every target once
    assert pieces.loss_mask.sum() == 10


def test_a_cut_that_counts_nothing_is_refused_or_dropped():
    """A long prompt, its completion (the counted targets) at the end: truncating leaves nothing to train on;
    splitting drops the pieces that count nothing, so no row has a zero count."""
    prompt_first = Example(list(range(1, 21)), [False] * 18 + [True] * 2, "data.jsonl:3")
    with pytest.raises(UserError, match=r"^data\.jsonl:3: the record is 20 tokens and none of its first 5"):
        pack([prompt_first], 4, "pad", PAD, overflow="truncate")
    pieces = pack([prompt_first], 4, "pad", PAD, overflow="split")
    assert pieces.input.tolist() == [[17, 18, 19, PAD]] and pieces.loss_mask.tolist() == [[False, True, True, False]]
    assert pieces.loss_mask.any(axis=1).all()


def test_bad_settings_and_examples_are_refused():
    one = [Example([1, 2], [False, True], "a")]
    with pytest.raises(UserError, match=r"packing mode must be one of \['pack', 'pad'\]"):
        pack(one, 4, "stack", PAD)
    with pytest.raises(UserError, match=r"overflow must be one of \['error', 'truncate', 'split'\]"):
        pack(one, 4, "pack", PAD, overflow="drop")
    with pytest.raises(UserError, match="no examples to pack"):
        pack([], 4, "pack", PAD)
    with pytest.raises(UserError, match=r"^b: the record is 1 token long: there is nothing to predict"):
        pack([Example([3], [False], "b")], 4, "pack", PAD)


def test_the_arrays_are_read_only_and_batch_operations_keep_the_type():
    batch = pack([Example([1, 2, 3], [False, True, True], "a"), Example([4, 5], [False, True], "b")], 8, "pad", PAD)
    with pytest.raises(ValueError, match="read-only"):
        batch.input[0, 0] = 9
    picked = take(batch, np.array([1]))
    assert isinstance(picked, PackedBatch) and picked.segment_ids.tolist() == [[1] + [0] * 7]
    trimmed = trim_padding(batch)
    assert isinstance(trimmed, PackedBatch) and trimmed.input.shape == (2, 2)


def test_the_batcher_resumes_a_packed_split_bit_exactly():
    rng = np.random.default_rng(0)
    docs = [Example(rng.integers(1, 50, int(rng.integers(2, 9))).tolist(), [False] + [True] * 8, f"x:{i}")
            for i in range(40)]
    docs = [Example(d.ids, d.loss_mask[: len(d.ids)], d.where) for d in docs]
    split = pack(docs, 8, "pack", PAD)
    batcher = TrainBatcher(split, batch_size=3, data_seed=7)
    first = [next(batcher) for _ in range(5)]
    state = batcher.state_dict()
    expected = [next(batcher) for _ in range(2 * batcher.steps_per_epoch)]
    resumed = TrainBatcher(split, batch_size=3, data_seed=12345)
    resumed.load_state_dict(state)
    got = [next(resumed) for _ in range(len(expected))]
    assert all(isinstance(b, PackedBatch) for b in first + got)
    pairs = zip(expected, got, strict=True)
    assert all(a.tobytes() == b.tobytes() for x, y in pairs for a, b in zip(x, y, strict=True))
    assert sum(len(b.input) for b in EvalBatcher(split, 4)) == len(split.input)


def test_padding_is_the_pad_id_else_eos_else_0():
    tokenizer = lambda pad, eos: SimpleNamespace(pad_id=pad, eos_id=eos)  # noqa: E731
    assert [pad_id_of(tokenizer(*ids)) for ids in ((3, 2), (None, 2), (None, None))] == [3, 2, 0]
