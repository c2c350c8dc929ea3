"""`minitrain merge`: the mergekit-style config checked by key, models of any source loaded and checked to
share architecture and tokenizer, the merge written as the parents' kind of file and read back by eval, and the
same config giving the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from fakehub import RECORDS, TINY_MODEL, make_run
from test_hub_pretrained import hf_folder, random_hf_state, write_safetensors

from minitrain.cli import main
from minitrain.common.errors import UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.sources import load_pretrained
from minitrain.merging import merge_models
from minitrain.merging.parents import load_parent, tokenizer_difference
from minitrain.merging.spec import read_spec
from minitrain.merging.ties import ties
from minitrain.runs.model_files import load_model_file, read_file, save_model_file


@pytest.fixture
def runs(tmp_path) -> list[Path]:
    """Three run folders of TINY_MODEL with different random weights and the same vocabulary."""
    return [make_run(tmp_path / f"r{seed}", seed=seed) for seed in range(3)]


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def ties_config(runs: list[Path], **extra) -> dict:
    return {"merge_method": "ties", "base_model": str(runs[0]),
            "models": [{"model": str(runs[1]), "parameters": {"weight": 1.0, "density": 0.5}},
                       {"model": str(runs[2]), "parameters": {"weight": 0.5}}],
            "parameters": {"density": 0.3, "lambda": 0.8}, **extra}


def test_ties_merge_of_run_folders_is_the_reference_merge_of_every_tensor(runs, tmp_path, capsys):
    config = write(tmp_path / "merge.yaml", ties_config(runs))
    out = tmp_path / "merged.safetensors"
    assert main(["merge", str(config), "-o", str(out)]) == 0
    assert "by ties" in capsys.readouterr().out
    merged, model_config, meta = load_model_file(out)
    states = [load_pretrained(str(r)).state for r in runs]
    assert merged.keys() == states[0].keys() and model_config == TINY_MODEL
    for name, a in merged.items():  # model 2 takes the top-level density, model 1 its own
        expected = ties(states[0][name], [states[1][name], states[2][name]], [1.0, 0.5], [0.5, 0.3], 0.8)
        np.testing.assert_array_equal(a, expected)
    assert meta["merged_from"]["models"][1] == {"model": str(runs[2]), "weight": 0.5, "density": 0.3}
    assert meta["merged_from"]["parameters"] == {"density": 0.3, "lambda": 0.8}


def test_the_merge_is_byte_identical_again_and_dare_follows_its_seed(runs, tmp_path):
    config = ties_config(runs, merge_method="dare_ties", seed=4)
    first, again, other = (tmp_path / f"{n}.safetensors" for n in ("first", "again", "other"))
    merge_models(write(tmp_path / "a.yaml", config), first)
    merge_models(write(tmp_path / "a.yaml", config), again)
    merge_models(write(tmp_path / "b.yaml", {**config, "seed": 5}), other)
    assert first.read_bytes() == again.read_bytes()
    assert read_file(first)[0]["transformer.h.0.mlp.c_fc.weight"].tolist() != \
        read_file(other)[0]["transformer.h.0.mlp.c_fc.weight"].tolist()


def test_linear_and_slerp_merges_read_back_by_eval(runs, tmp_path, capsys):
    out = tmp_path / "linear.safetensors"
    linear = {"merge_method": "linear", "models": [{"model": str(r)} for r in runs[:2]]}
    merge_models(write(tmp_path / "linear.yaml", linear), out)
    states = [load_pretrained(str(r)).state for r in runs[:2]]
    merged = load_model_file(out)[0]
    for name, a in merged.items():
        np.testing.assert_allclose(a, (states[0][name] + states[1][name]) / 2, rtol=1e-6, atol=1e-7)
    slerp = {"merge_method": "slerp", "base_model": str(runs[0]), "models": [{"model": str(runs[1])}],
             "parameters": {"t": [{"filter": "attn", "value": 0.0}, {"value": 1.0}]}}
    merge_models(write(tmp_path / "slerp.yaml", slerp), tmp_path / "slerp.safetensors")
    merged = load_model_file(tmp_path / "slerp.safetensors")[0]
    for name, a in merged.items():  # t = 0 on the attention tensors (the base), t = 1 elsewhere (the other)
        np.testing.assert_allclose(a, states[0 if "attn" in name else 1][name], rtol=1e-5, atol=1e-6)
    records = tmp_path / "forms.jsonl"  # the verb corpus's fields, which a character model is scored on
    fields = [(t, *t.split("|")) for t in RECORDS]  # text, verb, tense+person, form
    records.write_text("".join(json.dumps({"verb": v, "tense": c[0], "person": int(c[1]), "form": f, "text": t})
                               + "\n" for t, v, c, f in fields), "utf-8")
    capsys.readouterr()
    vocab = runs[0].parent / "data" / "vocab.json"
    assert main(["eval", str(out), "--data", str(records), "--vocab", str(vocab), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ppl"] > 1.0


@pytest.mark.parametrize("change, message", [
    ({"d_ff": 32}, ["tensor transformer.h.0.mlp.c_fc.bias is (32,) in ", " but (16,) in "]),  # the first of 8
    ({"n_head": 4}, ["model config n_head is 4 in ", " but 2 in "]),
])
def test_models_of_another_architecture_are_refused_naming_what_differs(runs, tmp_path, capsys, change, message):
    from minitrain.models.registry import parameter_shapes

    other = tmp_path / "other.safetensors"
    shape = {**TINY_MODEL, **change}
    save_model_file(other, {n: np.zeros(s, np.float32) for n, s in parameter_shapes(shape)}, shape)
    config = write(tmp_path / "m.yaml", {"merge_method": "task_arithmetic", "base_model": str(runs[0]),
                                         "models": [{"model": str(other)}]})
    assert main(["merge", str(config), "-o", str(tmp_path / "out.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and all(part in err for part in message) and err.count("\n") == 1
    assert "Traceback" not in err and not (tmp_path / "out.safetensors").exists()


def test_the_old_spellings_are_one_line_naming_the_new_command(runs, tmp_path, capsys):
    """`merge` used to fold a LoRA run (`merge RUN_DIR OUT_DIR`, now `merge-adapters`) and merging was `merge-models`:
    each old spelling is one error line pointing to the new name (exit 2), and writes nothing."""
    adapter = runs[1]  # a run folder where the merge config goes
    for argv, new in [(["merge", str(adapter), str(tmp_path / "out")], f"minitrain merge-adapters {adapter} OUT_DIR"),
                      (["merge", str(runs[0] / "m.safetensors"), str(tmp_path / "out")], "minitrain merge-adapters"),
                      (["merge-models", "m.yaml", "-o", str(tmp_path / "out")], "is now `minitrain merge`")]:
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("error: ") and new in err and err.count("\n") == 1, (argv, err)
    assert not (tmp_path / "out").exists()


def test_models_with_another_vocabulary_are_refused(runs, tmp_path, capsys):
    chars = CharTokenizer.from_texts(RECORDS).chars
    vocab = runs[1].parent / "data" / "vocab.json"
    CharTokenizer(sorted([*chars[:-1], "~"])).save(vocab)  # one character other, the same count
    config = write(tmp_path / "m.yaml", {"merge_method": "linear", "models": [{"model": str(r)} for r in runs[:2]]})
    assert main(["merge", str(config), "-o", str(tmp_path / "out.safetensors")]) == 2
    assert "do not share a tokenizer (character vocabularies" in capsys.readouterr().err
    assert tokenizer_difference(CharTokenizer(["a"]), None) is None  # a bare model file records none


@pytest.mark.parametrize("change, message", [
    ({"merge_methd": "ties"}, "merge_methd: unknown key"),
    ({"parameters": {"lamda": 1.0}}, "parameters.lamda: unknown key — did you mean 'lambda'?"),  # its YAML name
    ({"merge_method": "tie"}, "merge_method: must be one of linear, task_arithmetic, ties, dare_linear, dare_ties, "
                              "slerp (got 'tie') — did you mean 'ties'?"),
    ({"dtype": "bfloat16"}, "dtype: must be one of float32"),
    ({"base_model": None}, "merge_method ties needs base_model"),
    ({"merge_method": "task_arithmetic"}, "merge_method task_arithmetic does not read density"),
    ({"merge_method": "slerp"}, "merge_method slerp does not read density, lambda, weight"),
    ({"seed": -1}, "seed: must be greater than or equal to 0"),
    ({"parameters": {"density": 1.5}}, "parameters.density: must be less than or equal to 1"),
    ({"models": []}, "models: List should have at least 1 item"),
])
def test_a_bad_config_is_refused_by_key_and_line(runs, tmp_path, capsys, change, message):
    config = write(tmp_path / "m.yaml", {k: v for k, v in {**ties_config(runs), **change}.items() if v is not None})
    assert main(["merge", str(config), "-o", str(tmp_path / "out.safetensors")]) == 2
    err = capsys.readouterr().err
    assert f"{config}" in err and message in err and "Traceback" not in err


def test_slerp_needs_exactly_two_models_and_a_t_for_every_tensor(runs, tmp_path):
    three = {"merge_method": "slerp", "base_model": str(runs[0]), "parameters": {"t": 0.5},
             "models": [{"model": str(runs[1])}, {"model": str(runs[2])}]}
    with pytest.raises(UserError, match=r"slerp merges exactly 1 model besides base_model \(got 2\)"):
        read_spec(write(tmp_path / "a.yaml", three))
    partial = {**three, "models": [{"model": str(runs[0])}, {"model": str(runs[1])}],  # base listed too: left out
               "parameters": {"t": [{"filter": "attn", "value": 0.3}]}}
    with pytest.raises(UserError, match=r"parameters.t: no entry matches tensor transformer\.h\.0\.ln_"):
        merge_models(write(tmp_path / "b.yaml", partial), tmp_path / "out.safetensors")


def test_a_minitrain_merge_must_be_written_as_a_model_file(runs, tmp_path):
    config = write(tmp_path / "m.yaml", ties_config(runs))
    with pytest.raises(UserError, match=r"give a path ending in \.safetensors"):
        merge_models(config, tmp_path / "out")


def test_llama_folders_merge_into_a_hugging_face_folder_with_the_base_tokenizer(tmp_path):
    base = tmp_path / "base"
    hf_folder(base, bf16=False)
    other = tmp_path / "other"
    hf_folder(other, bf16=False)
    model_config = load_pretrained_base(base)[0]
    write_safetensors(other / "model.safetensors",
                      {n: ("F32", a) for n, a in random_hf_state(model_config, seed=1).items()})
    config = write(tmp_path / "m.yaml", {"merge_method": "task_arithmetic", "base_model": str(base),
                                         "models": [{"model": str(other), "parameters": {"weight": 0.25}}]})
    merge_models(config, tmp_path / "merged")
    merged_config, merged, _, _ = load_pretrained_base(tmp_path / "merged")
    a, b = load_parent(str(base)), load_parent(str(other))
    assert merged_config == a.model_config and a.kind == "pretrained"
    for name, value in merged.items():
        np.testing.assert_allclose(value, a.state[name] + 0.25 * (b.state[name] - a.state[name]), rtol=1e-6,
                                   atol=1e-7)
    assert (tmp_path / "merged" / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()
    with pytest.raises(UserError, match="not an empty folder"):
        merge_models(config, tmp_path / "merged")


def test_gpt2_bases_merge_into_a_gpt2_folder_and_other_special_tokens_are_refused(tmp_path):
    from test_gpt2_base import GPT2_SPECIALS, gpt2_folder
    from test_pretrained_tokenizer import tiny_fields

    from minitrain.data.pretrained_tokenizer import PretrainedTokenizer

    first = gpt2_folder(tmp_path / "a")
    gpt2_folder(tmp_path / "b")
    second = {n: (a * 0.5 + 0.1).astype(np.float32) for n, a in first.items()}
    write_safetensors(tmp_path / "b" / "model.safetensors", {n: ("F32", a) for n, a in second.items()})
    config = write(tmp_path / "m.yaml", {"merge_method": "linear", "models": [
        {"model": str(tmp_path / "a"), "parameters": {"weight": 3.0}}, {"model": str(tmp_path / "b")}]})
    merge_models(config, tmp_path / "merged")
    assert json.loads((tmp_path / "merged" / "config.json").read_text())["model_type"] == "gpt2"
    merged = load_pretrained_base(tmp_path / "merged")[1]
    a, b = load_parent(str(tmp_path / "a")).state, load_parent(str(tmp_path / "b")).state
    assert merged.keys() == a.keys()
    for name in a:
        np.testing.assert_allclose(merged[name], (3 * a[name] + b[name]) / 4, rtol=1e-6, atol=1e-7)
    llama_specials = PretrainedTokenizer.from_gguf_fields(**tiny_fields())
    gpt2_specials = PretrainedTokenizer.from_gguf_fields(**{**tiny_fields(), **GPT2_SPECIALS})
    assert "special tokens" in tokenizer_difference(llama_specials, gpt2_specials)
    assert tokenizer_difference(gpt2_specials, PretrainedTokenizer.from_gguf_fields(
        **{**tiny_fields(), **GPT2_SPECIALS})) is None


@pytest.mark.parametrize("weights, normalize", [((1.0, -1.0), True), ((0.0, 0.0), True), ((1e308, 1.0), False),
                                                ((1e308, 1e308), True)])
def test_weights_that_make_a_tensor_nan_are_refused_naming_it(runs, tmp_path, capsys, weights, normalize):
    config = write(tmp_path / "merge.yaml", {"merge_method": "linear", "parameters": {"normalize": normalize},
                                             "models": [{"model": str(run), "parameters": {"weight": w}}
                                                        for run, w in zip(runs[:2], weights, strict=True)]})
    out = tmp_path / "merged.safetensors"
    assert main(["merge", str(config), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    named = "tensor " in err if normalize is False or sum(weights) < 1e308 else "sum past" in err
    assert err.count("error:") == 1 and named and str(list(weights)) in err, err
    assert not out.exists()
