"""LoRA, QLoRA and quantization through configs and commands: a LoRA run writes only its adapters (and PEFT's
layout), resumes bit for bit, merges into a model that computes the same logits, exports and publishes either
way; `quantize:` and `minitrain quantize` write scored integer files that load back; bad keys are exit 2 with
nothing written; `init --method` writes a lora section that validates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
import yaml
from fakehub import RECORDS, TINY_MODEL, make_run
from test_cli import run

from minitrain.data.corpus import make_record, records_to_jsonl
from minitrain.hub.run_folder import read_run
from minitrain.hub.sources import adapted_model, load_model
from minitrain.lora.peft import CONFIG_FILE, WEIGHTS_FILE
from minitrain.nn import inference
from minitrain.runs.model_files import load_model_file

pytestmark = pytest.mark.slow

LORA = """
lora:
  enabled: true
  rank: 2
  alpha: 4
  dropout: 0.0
  bias: lora_only
  target_modules: [c_attn, mlp.c_proj]
"""


@pytest.fixture
def base(tmp_path, monkeypatch):
    """A run folder with a tiny random model and its data (fakehub.make_run, its records as verb records, which
    training reads); the repo's models/ kept clean."""
    run_dir = make_run(tmp_path / "base")
    records = [make_record(verb, code[0], int(code[1]), form) for verb, code, form in (t.split("|") for t in RECORDS)]
    for split, chosen in (("train", records[:3]), ("val", records[3:])):
        (tmp_path / "base" / "data" / f"{split}.jsonl").write_text(records_to_jsonl(chosen), encoding="utf-8")
    return run_dir


def lora_config(tmp_path: Path, base: Path, body: str = LORA, steps: int = 6, name: str = "lora.yaml") -> Path:
    data = base.parent / "data"
    model = "\n".join(f"  {k}: {v}" for k, v in TINY_MODEL.items())
    text = (f"model:\n{model}\n  init_from: {base}\n"
            f"optimizer:\n  lr_max: 0.01\ntraining:\n  total_steps: {steps}\n  batch_size: 2\n  val_every: 3\n"
            f"  checkpoint:\n    save_every: 3\n"
            f"data:\n  train_path: {data}/train.jsonl\n  val_path: {data}/val.jsonl\n  vocab_path: {data}/vocab.json\n"
            "  heldout_policy: none\n"  # the fake run's records: one verb in both splits
            + body)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def train(config: Path, out: Path, capsys, *extra) -> dict:
    code, _, err = run(["train", config, "--out-dir", out, "--models-dir", out / "models", "--quiet", *extra], capsys)
    assert code == 0, err
    return json.loads((out / "results.json").read_text())


def test_a_lora_run_trains_only_its_adapters_and_writes_them_in_peft_layout(tmp_path, base, capsys):
    base_file = Path(json.loads((base / "results.json").read_text())["model_path"])
    base_bytes = base_file.read_bytes()
    results = train(lora_config(tmp_path, base), tmp_path / "run", capsys)
    state, config, _ = load_model_file(results["model_path"])
    assert Path(results["model_path"]).name.startswith("minigpt-phase18-lora-")
    expected = {f"transformer.h.{i}.{layer}.{part}" for i in (0, 1) for layer in ("attn.c_attn", "mlp.c_proj")
                for part in ("lora_A", "lora_B", "base_layer.bias")}
    assert set(state) == expected and state["transformer.h.0.attn.c_attn.lora_A"].shape == (8, 2)
    assert config["lora"]["base"] == str(base) and len(config["lora"]["base_digest"]) == 16
    assert np.abs(state["transformer.h.1.mlp.c_proj.lora_B"]).max() > 0  # B left zero: it trained
    assert base_file.read_bytes() == base_bytes  # the base is only read
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["init_from"] == str(base_file) and 0 < manifest["trainable_share"] < 0.2

    # PEFT's layout: prefixed keys, the factors transposed to torch.nn.Linear's (out, in), the config's fields
    folder = tmp_path / "run" / "adapter"
    peft = safetensors.numpy.load_file(folder / WEIGHTS_FILE)
    prefix = "base_model.model.transformer.h.0.attn.c_attn."
    assert set(peft) == {f"base_model.model.{n}" + (".weight" if n.endswith(("lora_A", "lora_B")) else "")
                         for n in expected}
    np.testing.assert_array_equal(peft[prefix + "lora_A.weight"], state["transformer.h.0.attn.c_attn.lora_A"].T)
    np.testing.assert_array_equal(peft[prefix + "base_layer.bias"], state[prefix[17:] + "base_layer.bias"])
    adapter_config = json.loads((folder / CONFIG_FILE).read_text())
    assert adapter_config["peft_type"] == "LORA" and adapter_config["r"] == 2 and adapter_config["lora_alpha"] == 4
    assert adapter_config["fan_in_fan_out"] is True and adapter_config["bias"] == "lora_only"
    assert adapter_config["target_modules"] == [f"transformer.h.{i}.{layer}" for i in (0, 1)
                                                for layer in ("attn.c_attn", "mlp.c_proj")]

    # export writes the same adapter folder with the tokenizer and a card; sample runs the adapted model
    code, out, _ = run(["export", tmp_path / "run", tmp_path / "export"], capsys)
    assert code == 0 and sorted(Path(p).name for p in out.split()) == sorted(
        ["README.md", CONFIG_FILE, WEIGHTS_FILE, "tokenizer.json", "tokenizer_config.json", "vocab.json"])
    assert safetensors.numpy.load_file(tmp_path / "export" / WEIGHTS_FILE).keys() == peft.keys()
    card = (tmp_path / "export" / "README.md").read_text()
    assert "LoRA adapter (rank 2, alpha 4" in card
    factors = sum(a.size for name, a in state.items() if name.endswith(("lora_A", "lora_B")))
    total = sum(a.size for a in safetensors.numpy.load_file(base_file).values()) + factors
    trained = sum(a.size for a in state.values())  # the factors and the adapted layers' biases (lora_only)
    assert f"Parameters: {total:,} ({trained:,} trained by the run, {100 * trained / total:.2f} %" in card
    assert run(["sample", tmp_path / "run", "--prompt", "comer|R1|"], capsys)[0] == 0


def test_merge_writes_a_plain_run_whose_model_computes_the_adapted_logits(tmp_path, base, capsys):
    train(lora_config(tmp_path, base, LORA.replace("lora_only", "all")), tmp_path / "run", capsys)
    code, out, err = run(["merge-adapters", tmp_path / "run", tmp_path / "merged"], capsys)
    assert code == 0, err and "max |logit difference|" in out
    merge = json.loads((tmp_path / "merged" / "results.json").read_text())["merge"]
    assert merge["max_abs_logit_difference"] < 1e-5 and merge["positions"] > 0
    assert json.loads((tmp_path / "merged" / "manifest.json").read_text())["model_path"] == "model.safetensors"
    info = read_run(tmp_path / "run")
    adapted = adapted_model(info.state, info.model_config, "adapter", run_dir=info.run_dir)
    merged, _ = load_model(str(tmp_path / "merged"))
    assert "lora" not in merged.config and set(merged.state_dict()) == set(load_model(str(base))[0].state_dict())
    idx = np.random.default_rng(0).integers(0, TINY_MODEL["vocab_size"], (4, TINY_MODEL["max_seq_len"]))
    with inference(adapted), inference(merged):
        difference = np.abs(adapted(idx)[0].data - merged(idx)[0].data).max()
    assert difference < 1e-5
    # the merged folder is a run like any other: it exports as a transformers GPT-2
    code, out, _ = run(["export", tmp_path / "merged", tmp_path / "export"], capsys)
    assert code == 0 and "config.json" in out and "model.safetensors" in out
    # the base the adapter names must be the one it was trained on
    other = make_run(tmp_path / "other", seed=1)
    code, _, err = run(["merge-adapters", tmp_path / "run", tmp_path / "merged2", "--base-model", other], capsys)
    assert code == 2 and "holds other weights than the adapter was trained on" in err
    assert not (tmp_path / "merged2").exists()
    code, _, err = run(["merge-adapters", base, tmp_path / "merged3"], capsys)
    assert code == 2 and "not a LoRA run" in err
    # quantizing takes a whole model: the merged run, not the adapters
    code, _, err = run(["quantize", tmp_path / "run", tmp_path / "q.safetensors", "--bits", "8"], capsys)
    assert code == 2 and "`minitrain merge-adapters` it first" in err and not (tmp_path / "q.safetensors").exists()
    assert run(["quantize", tmp_path / "merged", tmp_path / "q.safetensors", "--bits", "8"], capsys)[0] == 0


def test_publish_sends_the_adapter_or_with_merge_adapters_the_merged_model(tmp_path, base, capsys, hub):
    train(lora_config(tmp_path, base), tmp_path / "run", capsys)
    # PEFT loads an adapter's base by its Hub id: a local base is refused, with the two ways out
    code, _, err = run(["publish", "--repo", "alice/lora", tmp_path / "run", "--dry-run"], capsys)
    assert code == 2 and "names its base by Hub id" in err and "--base-model" in err and "--merge-adapters" in err
    code, out, err = run(["publish", "--repo", "alice/lora", tmp_path / "run", "--base-model", "alice/base"], capsys)
    assert code == 0, err
    assert json.loads(hub.repos["alice/lora"].files[CONFIG_FILE])["base_model_name_or_path"] == "alice/base"
    files = hub.repos["alice/lora"].files
    assert "config.json" not in files and b"base `alice/base`" in files["README.md"]  # the card says it too
    code, out, _ = run(["publish", "--repo", "alice/lora", tmp_path / "run", "--dry-run", "--merge-adapters"], capsys)
    assert code == 0 and "  model.safetensors " in out and "  config.json " in out and WEIGHTS_FILE not in out


@pytest.mark.parametrize("double_quantize", [False, True])
def test_a_qlora_run_resumes_bit_for_bit(tmp_path, base, capsys, double_quantize):
    body = LORA + f"  quantize_base: true\n  double_quantize: {str(double_quantize).lower()}\n"
    config = lora_config(tmp_path, base, body)
    whole = train(config, tmp_path / "whole", capsys)
    halfway = tmp_path / "whole" / "checkpoints" / "step-3.safetensors"
    resumed = train(config, tmp_path / "resumed", capsys, "--resume", halfway)  # the base is loaded again
    assert Path(whole["model_path"]).name == Path(resumed["model_path"]).name  # the file is named by its content
    checkpoint, _, _ = load_model_file(tmp_path / "whole" / "checkpoints" / "step-6.safetensors")
    assert not any(name.endswith("base_layer.weight") for name in checkpoint)  # the 4-bit base is rebuilt, not saved
    manifest = json.loads((tmp_path / "whole" / "manifest.json").read_text())
    assert manifest["quantized_parameters"] == 2 * (8 * 24 + 8 * 8 + 8 * 16 + 16 * 8)
    assert manifest["base_weight_bytes"] < 4 * manifest["quantized_parameters"] / 5
    # the exported adapter's card counts the 4-bit weights as the model's and says the adapter needs that base
    assert run(["export", tmp_path / "whole", tmp_path / "export"], capsys)[0] == 0
    card = (tmp_path / "export" / "README.md").read_text()
    base_file = Path(json.loads((base / "results.json").read_text())["model_path"])
    state, _, _ = load_model_file(whole["model_path"])
    total = sum(a.size for a in safetensors.numpy.load_file(base_file).values()) + sum(
        a.size for name, a in state.items() if name.endswith(("lora_A", "lora_B")))
    assert f"Parameters: {total:,} (" in card and "reproduces the run only on minitrain's NF4-quantized base" in card


def test_a_qlora_dry_run_counts_the_4bit_base_as_the_models_parameters(tmp_path, base, capsys):
    """The plan's parameters are the whole model's, the 4-bit base weights among them (frozen), and the line
    base_4bit says how many are held in NF4 blocks and their bytes (64 codes of half a byte + a float32 scale)."""
    config = lora_config(tmp_path, base, LORA + "  quantize_base: true\n")
    code, out, err = run(["train", config, "--dry-run"], capsys)
    assert code == 0, err
    plan = dict(line.strip().split(": ", 1) for line in out.splitlines() if line.startswith("  ") and
                line[2] != " " and not line.endswith(":"))
    base_file = Path(json.loads((base / "results.json").read_text())["model_path"])
    adapters = 2 * ((2 * 8 + 24 * 2) + (2 * 16 + 8 * 2))  # rank 2: A, B of c_attn (8 → 24) and mlp.c_proj (16 → 8)
    total = sum(a.size for a in safetensors.numpy.load_file(base_file).values()) + adapters
    held = 2 * (8 * 24 + 8 * 8 + 8 * 16 + 16 * 8)  # every linear layer of the base, in 4-bit blocks of 64
    assert int(plan["parameters"]) == total == int(plan["trainable_parameters"]) + int(plan["frozen_parameters"])
    assert plan["base_4bit"] == f"{held:,} parameters ({held // 2 + 4 * (held // 64)} bytes as NF4)"


def test_qat_trains_with_the_weights_it_stores(tmp_path, base, capsys):
    body = ("quantize:\n  enabled: true\n  bits: 4\n  granularity: per_group\n  group_size: 8\n"
            "  qat:\n    enabled: true\n    observer: histogram\n"
            "  exclude: [lm_head, embed_tokens]\n")  # the spec's: already true, the embedding (the head) stays float
    results = train(lora_config(tmp_path, base, body), tmp_path / "run", capsys)
    quantized = results["quantized"]
    assert quantized["qat"] is True and quantized["file_bytes"] == Path(quantized["path"]).stat().st_size
    # the validation ran the fake-quantized model, which is what the file stores (ranges by the QAT observer)
    assert quantized["val_ppl"] == pytest.approx(results["val_ppl"], rel=1e-6)
    state, _, meta = load_model_file(quantized["path"])
    assert meta["kind"] == "quantized" and meta["quantization"]["method"] == "mse"
    assert meta["quantization"]["exclude"] == []  # every linear layer quantized
    assert state["transformer.h.0.attn.c_attn.weight"].dtype == np.float32
    assert run(["sample", quantized["path"], "--prompt", "comer|R1|", "--vocab",
                base.parent / "data" / "vocab.json"], capsys)[0] == 0


def test_the_quantize_command_scores_against_float32_and_writes_a_loadable_file(tmp_path, base, capsys):
    out = tmp_path / "q.safetensors"
    code, printed, err = run(["quantize", base, out, "--bits", "4", "--scheme", "asymmetric", "--granularity",
                              "per_group", "--group-size", "8", "--exclude", "mlp.c_proj"], capsys)
    assert code == 0, err
    lines = printed.splitlines()
    assert lines[1].startswith("float32") and lines[2].startswith("int4 asymmetric per_group (group 8)")
    _, _, meta = load_model_file(out)
    evaluation = meta["evaluation"]
    assert evaluation["float32_bytes"] == 4 * sum(a.size for a in read_run(base).state.values())
    assert evaluation["val_ppl"] > 1 and meta["quantization"]["exclude"] == ["mlp.c_proj"]
    assert "transformer.h.0.mlp.c_proj.weight" in safetensors.numpy.load_file(out)  # excluded: kept in float
    code, _, err = run(["quantize", base, tmp_path / "bad.safetensors", "--bits", "4", "--granularity", "per_group",
                        "--group-size", "3"], capsys)
    assert code == 2 and "does not divide" in err and not (tmp_path / "bad.safetensors").exists()


@pytest.mark.parametrize(("body", "key"), [
    (LORA.replace("rank: 2", "rank: 0"), "lora.rank"),
    (LORA.replace("alpha: 4", "alpha: 0"), "lora.alpha"),
    (LORA.replace("[c_attn, mlp.c_proj]", "[c_attn, c_atn]"), "lora.target_modules[1]"),
    (LORA.replace("[c_attn, mlp.c_proj]", "[q_proj, v_proj]"), "lora.target_modules[0]"),
    (LORA + "  target_modules_pattern: 'h\\.9\\..*'\n", "lora.target_modules_pattern"),
    ("quantize:\n  enabled: true\n  bits: 3\n", "quantize.bits"),
    ("quantize:\n  enabled: true\n  granularity: per_group\n  group_size: 12\n", "quantize.group_size"),
    ("quantize:\n  enabled: true\n  exclude: [c_atn]\n", "quantize.exclude[0]"),
    ("quantize:\n  enabled: true\n  scheme: dynamic\n", "quantize.scheme"),
    ("quantize:\n  enabled: false\n  qat:\n    enabled: true\n", "quantize.qat.enabled"),  # a present section is on
    (LORA + "quantize:\n  enabled: true\n", "quantize.enabled"),
])
def test_bad_lora_and_quantize_keys_are_exit_2_naming_the_key_with_nothing_written(tmp_path, base, capsys, body,
                                                                                    key):
    code, _, err = run(["train", lora_config(tmp_path, base, body), "--out-dir", tmp_path / "run", "--quiet"], capsys)
    assert code == 2 and f": {key}: " in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_lora_needs_a_base(tmp_path, base, capsys):
    config = lora_config(tmp_path, base)
    config.write_text(config.read_text().replace(f"  init_from: {base}\n", ""), encoding="utf-8")
    code, _, err = run(["validate", config], capsys)
    assert code == 2 and "lora.enabled: LoRA adapts a trained model: set model.init_from" in err


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_init_method_writes_a_lora_section_that_validates(tmp_path, base, capsys, method):
    out = tmp_path / "c.yaml"
    code, _, err = run(["init", "--base", base, "--method", method, "--data", base.parent / "data", "-o", out], capsys)
    assert code == 0, err
    text = out.read_text()
    lora = yaml.safe_load(text)["lora"]
    assert lora["enabled"] is True and lora["rank"] == 4 and lora["alpha"] == 8  # width 8: the smallest rank
    assert lora["target_modules"] == ["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"]
    assert lora.get("quantize_base", False) is (method == "qlora")
    assert "# publish:" in text and "#   merge_adapters: true" in text
    code, checked, _ = run(["validate", out], capsys)
    quantized = ", base in 4-bit nf4 blocks" if method == "qlora" else ""
    assert code == 0 and f"✓ lora: rank 4, alpha 8 on 8 linear layers{quantized}\n" in checked
    code, _, err = run(["init", "--method", method, "--data", base.parent / "data"], capsys)
    assert code == 2 and "needs" not in err and "--base" in err


def test_suggested_ranks_follow_the_width():
    from minitrain.commands.init_template import suggested_rank

    assert [suggested_rank(w) for w in (8, 64, 896, 4096, 8192)] == [4, 4, 64, 128, 128]
