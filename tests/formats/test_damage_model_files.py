"""Crafted model files, generated: GGUF metadata (written with the `gguf` package's own writer) given the wrong
type, NaN, inf, 0, a negative or a huge value, a list, a non-UTF-8 string, or left out; safetensors headers with
negative, string or float shapes and offsets, or offsets overlapping another tensor's; Hugging Face config.json keys
set to anything. Each file goes through the reading entry points (`load_pretrained_base`, what every run, `sample`,
`eval` and `export` do first, and `describe_base`, what `init --base` reads), in-process under a hang guard: each
either succeeds or refuses with one UserError, exit 2, naming the file; never another exception, a hang or a
huge allocation (a crafted block count or layer count is compared with the tensors in the file before any list
of shapes is made). Conventions of tests/training/test_damage.py (derandomized in `make test`, more examples
under MINITRAIN_DAMAGE_EXAMPLES). Below them, the cases issue 43 listed, one test each."""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
from pathlib import Path

import gguf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import count, hang_guard
from test_hub_pretrained import HF_CONFIG, MINITRAIN, hf_folder, random_hf_state
from test_pretrained_tokenizer import tiny_fields

from minitrain.cli import main
from minitrain.common.errors import UserError
from minitrain.formats.gguf_read import gguf_name
from minitrain.formats.safetensors_folder import read_safetensors
from minitrain.hub.pretrained import describe_base, load_pretrained_base

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "12"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
SETTINGS = settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
T = gguf.GGUFValueType


def gguf_metadata() -> dict[str, tuple]:
    """A tiny llama GGUF's metadata (HF_CONFIG's model, 2 layers of width 32): key -> (value, type, item type)."""
    fields = tiny_fields()
    c = HF_CONFIG
    return {
        "general.architecture": ("llama", T.STRING, None),
        "llama.block_count": (c["num_hidden_layers"], T.UINT32, None),
        "llama.context_length": (c["max_position_embeddings"], T.UINT32, None),
        "llama.embedding_length": (c["hidden_size"], T.UINT32, None),
        "llama.feed_forward_length": (c["intermediate_size"], T.UINT32, None),
        "llama.attention.head_count": (c["num_attention_heads"], T.UINT32, None),
        "llama.attention.head_count_kv": (c["num_key_value_heads"], T.UINT32, None),
        "llama.attention.layer_norm_rms_epsilon": (1e-5, T.FLOAT32, None),
        "llama.rope.freq_base": (10000.0, T.FLOAT32, None),
        "llama.rope.dimension_count": (8, T.UINT32, None),
        "llama.vocab_size": (c["vocab_size"], T.UINT32, None),
        "tokenizer.ggml.model": ("gpt2", T.STRING, None),
        "tokenizer.ggml.pre": ("smollm", T.STRING, None),
        "tokenizer.ggml.tokens": (fields["tokens"], T.ARRAY, T.STRING),
        "tokenizer.ggml.merges": (fields["merges"], T.ARRAY, T.STRING),
        "tokenizer.ggml.token_type": (fields["token_types"], T.ARRAY, T.INT32),
        "tokenizer.ggml.bos_token_id": (1, T.UINT32, None),
        "tokenizer.ggml.eos_token_id": (2, T.UINT32, None),
        "tokenizer.ggml.padding_token_id": (2, T.UINT32, None),
        "tokenizer.ggml.add_bos_token": (False, T.BOOL, None),
        "tokenizer.chat_template": (fields["chat_template"], T.STRING, None),
    }


def write_crafted_gguf(path: Path, changes: dict[str, tuple | None], n_layer: int = 2) -> Path:
    """The tiny GGUF with `changes` (key -> (value, type, item type), or None: left out), F32 tensors of `n_layer`
    layers, written by the gguf package's writer."""
    writer = gguf.GGUFWriter(None, "llama")
    writer.kv_data[0].clear()  # general.architecture is written below, like every other key
    for key, entry in {**gguf_metadata(), **changes}.items():
        if entry is not None:
            writer.add_key_value(key, *entry)
    for name, w in random_hf_state({**MINITRAIN, "n_layer": n_layer}).items():
        writer.add_tensor(gguf_name(name), w)
    writer.outfile = path
    writer.write_header_to_file(path)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


NAN, INF = float("nan"), float("inf")
GGUF_VALUES = st.one_of(
    st.none(),
    st.tuples(st.sampled_from([0, 1, 2, 3, 4, 7, 8, 16, 32, 64, 300, 2**31 - 1, 2**32 - 1]), st.just(T.UINT32)),
    st.tuples(st.sampled_from([-1, -8, 0, 4, -(2**31)]), st.just(T.INT32)),
    st.tuples(st.sampled_from([2**40, 2**63 - 1, 0]), st.just(T.UINT64)),
    st.tuples(st.one_of(st.floats(width=32), st.sampled_from([NAN, INF, -INF, 0.0, 2.5, 1e-5])), st.just(T.FLOAT32)),
    st.tuples(st.sampled_from([NAN, 1e300, -1.0, 4.0]), st.just(T.FLOAT64)),
    st.tuples(st.booleans(), st.just(T.BOOL)),
    st.tuples(st.one_of(st.text(max_size=6), st.sampled_from(["4", "llama", "qwen2", "none", "linear"])),
              st.just(T.STRING)),
    st.tuples(st.sampled_from([b"\xff\xfe", b"ab\xc3"]), st.just(T.STRING)),
    st.tuples(st.sampled_from([[4, 4], [1], [-1, 2]]), st.just(T.ARRAY), st.just(T.INT32)),
    st.tuples(st.sampled_from([["a", "b"], ["4"]]), st.just(T.ARRAY), st.just(T.STRING)),
    st.tuples(st.sampled_from([[1.5, NAN]]), st.just(T.ARRAY), st.just(T.FLOAT32)),
).map(lambda v: v if v is None or len(v) == 3 else (*v, None))


def loads_or_is_one_error(spec: Path, where: str) -> None:
    """Both reading entry points on `spec`: success with the ids fitting the embedding, or one UserError, exit 2,
    naming `where`; under a hang guard."""
    with hang_guard(60, f"reading {spec}"):
        for read in (describe_base, load_pretrained_base):
            try:
                out = read(spec)
            except UserError as exc:
                assert exc.exit_code == 2 and where in str(exc) and "\n" not in str(exc), str(exc)
                continue
            model, tokenizer = out[0], out[-2]
            assert tokenizer.vocab_size <= model["vocab_size"]


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(list(gguf_metadata())), GGUF_VALUES, min_size=1, max_size=3),
       n_layer=st.sampled_from([1, 2]))
def test_a_crafted_gguf_loads_or_is_one_error(tmp_path_factory, changes, n_layer):
    count("crafted gguf files")
    path = write_crafted_gguf(tmp_path_factory.mktemp("gguf") / "m.gguf", changes, n_layer)
    loads_or_is_one_error(path, str(path))


HEADER_VALUES = st.one_of(st.integers(-3, 3000), st.sampled_from([-1, 2**63, 1.5, "8", None, True, [], {}]),
                          st.lists(st.one_of(st.integers(-4, 300), st.sampled_from([-1, 2.0, "4", None])),
                                   max_size=3))


@SETTINGS
@given(tensor=st.integers(0, 19), key=st.sampled_from(["shape", "data_offsets", "dtype", "overlap"]),
       value=HEADER_VALUES)
def test_a_crafted_safetensors_header_reads_or_is_one_error(tmp_path_factory, tensor, key, value):
    count("safetensors headers")
    folder = tmp_path_factory.mktemp("st")
    hf_folder(folder, bf16=False)
    path = folder / "model.safetensors"
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    names = [n for n in header if n != "__metadata__"]
    entry = header[names[tensor % len(names)]]
    if key == "overlap":  # another tensor's offsets shifted into this one's bytes
        other = header[names[(tensor + 1) % len(names)]]
        width = entry["data_offsets"][1] - entry["data_offsets"][0]
        start = max(0, other["data_offsets"][0] - (value if type(value) is int and value >= 0 else 1) % (width + 1))
        entry["data_offsets"] = [start, start + width]
    else:
        entry[key] = value
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + size:])
    with hang_guard(60, f"reading {path}"):
        try:
            state = read_safetensors(path)
        except UserError as exc:
            assert exc.exit_code == 2 and str(path) in str(exc) and "\n" not in str(exc), str(exc)
            return
    spans = sorted(tuple(header[n]["data_offsets"]) for n in names)
    assert all(end <= begin for (_, end), (begin, _) in itertools.pairwise(spans)), "overlapping offsets were read"
    assert all(math.prod(header[n]["shape"]) == state[n].size for n in names)
    loads_or_is_one_error(folder, str(folder))


CONFIG_KEYS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
               "intermediate_size", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta",
               "rope_scaling", "rope_parameters", "head_dim", "sliding_window", "tie_word_embeddings", "model_type")
CONFIG_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True),
                          st.text(max_size=6), st.sampled_from([10**12, 2**40, 0, 8, 4, "llama", "qwen2", [], [4]]),
                          st.dictionaries(st.sampled_from(["rope_type", "factor", "rope_theta", "type"]),
                                          st.sampled_from(["llama3", "default", NAN, 2.0, None, "x"]), max_size=3))


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), CONFIG_VALUES, min_size=1, max_size=3))
def test_a_crafted_config_json_loads_or_is_one_error(tmp_path_factory, changes):
    count("crafted config.json")
    folder = tmp_path_factory.mktemp("hf")
    hf_folder(folder)
    (folder / "config.json").write_text(json.dumps({**HF_CONFIG, **changes}))
    loads_or_is_one_error(folder, str(folder))


# --- the cases issue 43 listed --------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, entry", [
    ("llama.attention.head_count", ("4", T.STRING, None)), ("llama.attention.head_count", (4.0, T.FLOAT32, None)),
    ("llama.attention.head_count", (NAN, T.FLOAT32, None)), ("llama.attention.head_count", (INF, T.FLOAT32, None)),
    ("llama.attention.head_count", ([4, 4], T.ARRAY, T.INT32)), ("llama.attention.head_count", (0, T.UINT32, None)),
    ("llama.attention.head_count", (-4, T.INT32, None)), ("llama.attention.head_count_kv", (-2, T.INT32, None)),
    ("tokenizer.ggml.merges", (1.5, T.FLOAT32, None)), ("tokenizer.ggml.bos_token_id", ([1], T.ARRAY, T.INT32)),
    ("tokenizer.ggml.pre", (b"\xff\xfe", T.STRING, None)), ("general.architecture", (["llama"], T.ARRAY, T.STRING)),
    ("llama.block_count", (2**40, T.UINT64, None)), ("llama.rope.freq_base", (1e300, T.FLOAT64, None)),
])
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a float past float32's range: refused, not a stray warning
def test_gguf_metadata_of_the_wrong_type_or_range_is_one_error_naming_the_key(tmp_path, key, entry):
    path = write_crafted_gguf(tmp_path / "m.gguf", {key: entry})
    with hang_guard(60, f"reading {path}"):
        for read in (describe_base, load_pretrained_base):
            with pytest.raises(UserError) as caught:
                read(path)
            assert caught.value.exit_code == 2 and str(path) in str(caught.value)
            assert key in str(caught.value) or "tensors" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("change, key", [
    ({"num_hidden_layers": 10**12}, "tensors"), ({"rope_theta": NAN}, "rope_theta"),
    ({"rope_theta": INF}, "rope_theta"), ({"rope_scaling": "llama3"}, "rope_scaling"),
    ({"rope_parameters": [1]}, "rope_parameters"), ({"rope_scaling": 8}, "rope_scaling"),
])
def test_a_config_json_out_of_range_or_not_an_object_is_one_error(tmp_path, change, key):
    hf_folder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**HF_CONFIG, **change}))
    with hang_guard(60, "reading the folder"), pytest.raises(UserError, match=key) as caught:
        describe_base(tmp_path)  # what `init --base` reads: no weights, so only a wrong config.json is refused
        load_pretrained_base(tmp_path)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("entry, message", [
    ({"shape": [-8, -1]}, "integers >= 0"), ({"shape": ["8"]}, "integers >= 0"), ({"shape": [2.0, 4.0]}, "integers"),
    ({"data_offsets": [-4, 0]}, "integers >= 0"), ({"data_offsets": [0.0, 4.0]}, "integers"),
    ({"data_offsets": [0, 4], "shape": [1]}, "overlap"),
])
def test_a_safetensors_header_with_bad_shapes_or_overlapping_offsets_is_refused(tmp_path, entry, message):
    path = tmp_path / "model.safetensors"
    header = {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
              "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}
    header["b"].update(entry)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(8))
    with pytest.raises(UserError, match=message):
        read_safetensors(path)


def test_a_gguf_export_of_a_context_past_uint32_is_refused_before_writing(tmp_path, capsys):
    hf_folder(tmp_path / "base")
    config = json.loads((tmp_path / "base" / "config.json").read_text())
    (tmp_path / "base" / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2**32}))
    out = tmp_path / "m.gguf"
    assert main(["export", str(tmp_path / "base"), str(out), "--format", "gguf"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "max_seq_len" in err and not out.exists(), err
