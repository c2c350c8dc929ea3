"""A text source to the packed arrays of each split: a split folder keeps its splits, one file is split by
ratios, and the same inputs give the same bytes."""

from __future__ import annotations

import json

import pytest
from text_fixtures import TinyTokenizer

from minitrain.common.errors import UserError
from minitrain.data.packing import PackedBatch
from minitrain.data.text_data import packed_splits, pad_id_of, split_records


def chats(n: int) -> str:
    return "".join(json.dumps({"messages": [{"role": "user", "content": f"Conjuga {i}"},
                                            {"role": "assistant", "content": "vendo" * (1 + i % 3)}]}) + "\n"
                   for i in range(n))


def test_a_split_folder_packs_each_split(tmp_path):
    (tmp_path / "train.jsonl").write_text(chats(12), "utf-8")
    (tmp_path / "validation.jsonl").write_text(chats(3), "utf-8")
    tok = TinyTokenizer()
    splits = packed_splits(tmp_path, tok, 128, "pack", "completion")
    assert list(splits) == ["train", "val"] and all(isinstance(b, PackedBatch) for b in splits.values())
    assert int(splits["train"].segment_ids.max(axis=1).sum()) == 12
    assert splits["train"].input[~splits["train"].attn_pad_mask].tolist() == [pad_id_of(tok)] * int(
        (~splits["train"].attn_pad_mask).sum())
    again = packed_splits(tmp_path, tok, 128, "pack", "completion")
    assert all(a.tobytes() == b.tobytes() for a, b in zip(splits["train"], again["train"], strict=True))
    padded = packed_splits(tmp_path, tok, 128, "pad", "completion")
    assert len(padded["val"].input) == 3


def test_one_file_is_split_by_ratios_and_needs_them(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text(chats(20), "utf-8")
    with pytest.raises(UserError, match=r"not named after splits .* give ratios"):
        split_records(path)
    splits = split_records(path, {"train": 0.8, "val": 0.2}, seed=3)
    assert {k: len(v) for k, v in splits.items()} == {"train": 16, "val": 4}
    lines = [int(r.where.rsplit(":", 1)[1]) for r in splits["val"]]
    assert lines == sorted(lines) and splits == split_records(path, {"train": 0.8, "val": 0.2}, seed=3)
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "train.jsonl").write_text(chats(2), "utf-8")
    with pytest.raises(UserError, match="has train files but no validation file"):
        split_records(tmp_path / "only")
