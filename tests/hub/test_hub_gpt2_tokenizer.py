"""A GPT-2 base that brings its own BPE tokenizer is never fed character ids: the character path (model.init_from of a
character run, `load_pretrained`) refuses it, and it is read as a pretrained base instead
(tests/formats/test_gpt2_base.py); minitrain's own MiniGPT exports, with their character vocabulary, load as before."""

from __future__ import annotations

import json

import pytest
from fakehub import TINY_MODEL
from huggingface_hub import HfApi

from minitrain.common.errors import UserError
from minitrain.data.gpt2_base import is_gpt2_base, own_tokenizer
from minitrain.hub.export_hf import export_model
from minitrain.hub.sources import load_pretrained
from minitrain.hub.upload import publish
from minitrain.models.minigpt import MiniGPT

BPE = {"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}


@pytest.fixture
def export(run, tmp_path):
    export_model(run, tmp_path / "export")
    return tmp_path / "export"


def test_minitrains_own_export_has_no_tokenizer_of_its_own_and_loads(export):
    assert own_tokenizer(export) is None and not is_gpt2_base(str(export))
    pretrained = load_pretrained(str(export))
    assert pretrained.vocab_path == export / "vocab.json"
    MiniGPT(**TINY_MODEL, rng=0).load_state_dict(pretrained.state)


@pytest.mark.parametrize(("change", "named"), [
    ("merges", "merges.txt, the merges of a byte-level BPE"),
    ("tokenizer", "tokenizer.json, a BPE tokenizer"),
    ("vocab", "vocab.json, a token -> id table"),
])
def test_a_gpt2_folder_with_its_own_bpe_tokenizer_is_refused_with_the_file(export, change, named):
    if change == "merges":
        (export / "merges.txt").write_text("#version: 0.2\na b\n")
    elif change == "tokenizer":
        (export / "tokenizer.json").write_text(json.dumps(BPE))
    else:
        (export / "vocab.json").write_text(json.dumps(BPE["model"]["vocab"]))
    with pytest.raises(UserError, match="a GPT-2 model trained with its own tokenizer") as err:
        load_pretrained(str(export))
    assert named in str(err.value) and "character ids" in str(err.value) and is_gpt2_base(str(export))
    with pytest.raises(UserError, match="its own tokenizer"):
        load_pretrained(str(export / "model.safetensors"))  # the weights file alone: its folder is looked at


def test_a_hub_gpt2_repo_with_merges_is_refused_and_an_export_repo_is_not(hub, run, export):
    from fakehub import TOKEN

    publish(run, "alice/minigpt")
    assert load_pretrained("alice/minigpt").vocab_path.name == "vocab.json"
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("alice/gpt2-bpe")
    (export / "merges.txt").write_text("#version: 0.2\na b\n")
    api.upload_folder(repo_id="alice/gpt2-bpe", folder_path=str(export))
    with pytest.raises(UserError, match=r"its own tokenizer \(merges\.txt"):
        load_pretrained("alice/gpt2-bpe")
    assert is_gpt2_base("alice/gpt2-bpe") and not is_gpt2_base("alice/minigpt")


def test_a_cached_repo_is_answered_from_the_cache_without_a_request(hub, run, export, monkeypatch):
    import huggingface_hub
    from fakehub import TOKEN

    from minitrain.data import gpt2_base

    gpt2_base._is_base_repo.cache_clear()  # answers of earlier tests' stand-in Hubs
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("alice/gpt2-bpe")
    (export / "merges.txt").write_text("#version: 0.2\na b\n")
    api.upload_folder(repo_id="alice/gpt2-bpe", folder_path=str(export))
    assert is_gpt2_base("alice/gpt2-bpe")  # fetched into this test's cache
    gpt2_base._is_base_repo.cache_clear()

    def no_request(*args, **kwargs):
        raise AssertionError("asked the Hub for a file the cache holds")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_request)  # gpt2_base imports it when it asks
    assert is_gpt2_base("alice/gpt2-bpe")
