"""Lab 00 batcher: padding, shifted targets, masks, shuffling with the data RNG, exact resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from minitrain.common.errors import UserError
from minitrain.data.batcher import Batch, EvalBatcher, TrainBatcher, encode_split
from minitrain.data.corpus import load_records, make_record
from minitrain.data.tokenizer import CharTokenizer

FORMS = {
    "caminar": "camino caminas camina caminamos camináis caminan",
    "vender": "vendo vendes vende vendemos vendéis venden",
    "dividir": "divido divides divide dividimos dividís dividen",
}
RECORDS = [
    make_record(verb, "P", person, form)
    for verb, forms in FORMS.items()
    for person, form in enumerate(forms.split(), start=1)
]
TOK = CharTokenizer.from_texts(r["text"] for r in RECORDS)
SEQ_LEN = 32


def split(loss_on="answer"):
    return encode_split(RECORDS, TOK, seq_len=SEQ_LEN, loss_on=loss_on)


def all_batches(batcher, n):
    return [next(batcher) for _ in range(n)]


def same(a: list[Batch], b: list[Batch]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x, y) for ba, bb in zip(a, b, strict=True) for x, y in zip(ba, bb, strict=True)
    )


@pytest.mark.lab00
def test_rows_are_shifted_padded_lines():
    data = split()
    for row, record in enumerate(RECORDS):
        line = TOK.encode_line(record["text"])
        n = len(line) - 1
        assert data.input[row, :n].tolist() == line[:-1]
        assert data.target[row, :n].tolist() == line[1:]
        assert (data.input[row, n:] == TOK.pad_id).all() and (data.target[row, n:] == TOK.pad_id).all()
    assert data.input.shape == data.target.shape == (len(RECORDS), SEQ_LEN)
    assert data.input.dtype == data.target.dtype == np.int64
    assert data.attn_pad_mask.dtype == data.loss_mask.dtype == bool


@pytest.mark.lab00
def test_attention_mask_marks_exactly_the_real_input_tokens():
    data = split()
    for row, record in enumerate(RECORDS):
        n = len(record["text"]) + 1  # BOS + text (EOS is never an input)
        assert data.attn_pad_mask[row].tolist() == [True] * n + [False] * (SEQ_LEN - n)


@pytest.mark.lab00
def test_loss_counts_only_the_answer_and_eos():
    data = split()
    for row, record in enumerate(RECORDS):
        counted = data.target[row][data.loss_mask[row]].tolist()
        assert counted == [*TOK.encode(record["form"]), TOK.eos_id]
    # Padding is never counted: every counted target is a real position.
    assert not (data.loss_mask & ~data.attn_pad_mask).any()
    assert (data.target[data.loss_mask] != TOK.pad_id).all()


@pytest.mark.lab00
def test_loss_on_all_counts_every_real_target():
    data = split("all")
    assert np.array_equal(data.loss_mask, data.attn_pad_mask)
    for row, record in enumerate(RECORDS):
        counted = data.target[row][data.loss_mask[row]].tolist()
        assert counted == [*TOK.encode(record["text"]), TOK.eos_id]


def test_unknown_loss_on_is_a_user_error():
    with pytest.raises(UserError, match="loss_on"):
        split("prompt")


def test_a_line_longer_than_seq_len_is_a_user_error():
    with pytest.raises(UserError, match="caminar"):
        encode_split(RECORDS, TOK, seq_len=10)


@pytest.mark.lab00
def test_same_seed_same_batches_other_seed_other_order():
    data = split()
    a = all_batches(TrainBatcher(data, 4, data_seed=7), 20)
    b = all_batches(TrainBatcher(data, 4, data_seed=7), 20)
    c = all_batches(TrainBatcher(data, 4, data_seed=8), 20)
    assert same(a, b)
    assert not same(a, c)


@pytest.mark.lab00
def test_each_epoch_is_a_fresh_permutation():
    data = split()
    batcher = TrainBatcher(data, 3, data_seed=0)
    assert batcher.steps_per_epoch == len(RECORDS) // 3
    epochs = []
    for _ in range(3):
        rows = [tuple(r) for _ in range(batcher.steps_per_epoch) for r in next(batcher).input.tolist()]
        assert sorted(rows) == sorted(tuple(r) for r in data.input.tolist())  # every record exactly once
        epochs.append(rows)
    assert epochs[0] != epochs[1] != epochs[2]
    assert batcher.epoch == 2


def test_training_batches_have_a_fixed_shape_and_drop_the_remainder():
    data = split()
    batcher = TrainBatcher(data, 5, data_seed=1)
    assert batcher.steps_per_epoch == 3  # 18 records: 3 batches of 5, 3 rows wait for the next epoch
    for batch in all_batches(batcher, 10):
        assert all(a.shape == (5, SEQ_LEN) for a in batch)


def test_without_shuffle_every_epoch_is_the_file_order():
    data = split()
    batcher = TrainBatcher(data, 6, data_seed=7, shuffle=False)
    rows = [r for _ in range(2 * batcher.steps_per_epoch) for r in next(batcher).input.tolist()]
    assert rows == data.input.tolist() * 2
    assert same(all_batches(TrainBatcher(data, 6, data_seed=1, shuffle=False), 7),
                all_batches(TrainBatcher(data, 6, data_seed=2, shuffle=False), 7))  # the seed plays no part


def test_keeping_the_last_batch_sees_every_record_each_epoch():
    data = split()
    batcher = TrainBatcher(data, 5, data_seed=1, drop_last=False)
    assert batcher.steps_per_epoch == 4  # 18 records: 5 + 5 + 5 + 3
    for _ in range(2):
        epoch = all_batches(batcher, batcher.steps_per_epoch)
        assert [len(b.input) for b in epoch] == [5, 5, 5, 3]
        rows = sorted(tuple(r) for b in epoch for r in b.input.tolist())
        assert rows == sorted(tuple(r) for r in data.input.tolist())
    in_order = TrainBatcher(data, 5, data_seed=1, shuffle=False, drop_last=False)
    assert [r for b in all_batches(in_order, 4) for r in b.input.tolist()] == data.input.tolist()


def test_resume_without_dropping_the_last_batch_sees_the_same_batches():
    data = split()
    expected = all_batches(TrainBatcher(data, 5, data_seed=3, drop_last=False), 13)
    first = TrainBatcher(data, 5, data_seed=3, drop_last=False)
    all_batches(first, 6)
    resumed = TrainBatcher(data, 5, data_seed=0, drop_last=False)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert (resumed.epoch, resumed.position) == (first.epoch, first.position) == (1, 2)  # 6 = 4 + 2 batches
    assert same(all_batches(resumed, 7), expected[6:])


@pytest.mark.lab00
def test_resume_from_state_dict_sees_the_same_batches():
    data = split()
    reference = TrainBatcher(data, 4, data_seed=7)
    expected = all_batches(reference, 25)
    for stop in (0, 1, 3, 4, 9, 17):
        first = TrainBatcher(data, 4, data_seed=7)
        all_batches(first, stop)
        state = json.loads(json.dumps(first.state_dict()))  # it must survive JSON
        resumed = TrainBatcher(data, 4, data_seed=12345)  # the seed is overridden by the state
        resumed.load_state_dict(state)
        # Where the batcher stands: an epoch counts as begun at its first batch, so after 4 batches of 4 per
        # epoch it is at position 4 of epoch 0, and the next batch starts epoch 1.
        where = (0, 0) if stop == 0 else ((stop - 1) // 4, (stop - 1) % 4 + 1)
        assert (resumed.epoch, resumed.position) == (first.epoch, first.position) == where, stop
        assert same(all_batches(resumed, 25 - stop), expected[stop:])


def test_state_for_another_split_is_rejected():
    data = split()
    state = TrainBatcher(data, 4, data_seed=7).state_dict()
    with pytest.raises(UserError, match="batches of 4"):
        TrainBatcher(data, 3, data_seed=7).load_state_dict(state)
    with pytest.raises(UserError, match="keys"):
        TrainBatcher(data, 4, data_seed=7).load_state_dict({"epoch": 0})


def test_data_rng_is_private():
    # Drawing from numpy's global RNG or another generator must not change the batches.
    data = split()
    a = all_batches(TrainBatcher(data, 4, data_seed=7), 10)
    batcher = TrainBatcher(data, 4, data_seed=7)
    np.random.seed(0)
    b = []
    for _ in range(10):
        np.random.random(5)
        b.append(next(batcher))
    assert same(a, b)


@pytest.mark.lab00
def test_eval_pass_is_in_order_and_keeps_the_last_partial_batch():
    data = split()
    evaluator = EvalBatcher(data, 5)
    batches = list(evaluator)
    assert len(batches) == len(evaluator) == 4
    assert [b.input.shape[0] for b in batches] == [5, 5, 5, 3]
    assert np.array_equal(np.concatenate([b.input for b in batches]), data.input)
    assert np.array_equal(np.concatenate([b.loss_mask for b in batches]), data.loss_mask)
    assert same(list(evaluator), batches)  # a second pass is identical


def test_split_arrays_are_read_only():
    batch = next(iter(EvalBatcher(split(), 4)))
    with pytest.raises(ValueError, match="read-only"):
        batch.input[0, 0] = 5


@pytest.mark.lab00
def test_masks_on_the_committed_corpus():
    processed = Path(__file__).resolve().parents[2] / "data" / "processed"
    tok = CharTokenizer.load(processed / "vocab.json")
    for name in ("dev", "val"):
        records = load_records(processed / f"{name}.jsonl")
        data = encode_split(records, tok, seq_len=SEQ_LEN)
        assert data.loss_mask.sum(axis=1).tolist() == [len(r["form"]) + 1 for r in records]
        # The first counted target is predicted while reading the last "|" of the prompt.
        first = data.loss_mask.argmax(axis=1)
        assert (data.input[np.arange(len(records)), first] == tok.encode("|")[0]).all()
        assert not (data.loss_mask & ~data.attn_pad_mask).any()
