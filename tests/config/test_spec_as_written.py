"""The specs' own examples as written (issue 44): the publish spec's key names are aliases of minitrain's,
recorded resolved; defaults never conflict with what the user wrote; refusals name their true cause."""

from __future__ import annotations

import pytest
from test_config_spec import write
from test_hub_pretrained import hf_folder
from test_spec_coverage import snippet

from minitrain.config import ConfigError, load_config, resolved_dict
from minitrain.models.registry import build_model

PUBLISH_SPEC_3_3 = snippet("publish", "§3.3")  # the publish spec's example, as written


def problems_of(tmp_path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    return str(info.value)


def test_the_publish_specs_names_are_minitrains_keys_resolved(tmp_path, monkeypatch):
    # model.path's own architecture gives the model and its LoRA targets (§3.2): offline, the Hub id's cannot be read
    assert ("model.path: Qwen/Qwen2.5-Coder-0.5B: no config.json to read its architecture from"
            in problems_of(tmp_path, PUBLISH_SPEC_3_3))
    hf_folder(tmp_path / "base")  # a tiny Llama folder for the Hub id
    monkeypatch.chdir(tmp_path)
    local = PUBLISH_SPEC_3_3.replace("Qwen/Qwen2.5-Coder-0.5B", "./base")
    assert "c.yaml:5: data.train_path: model.path ./base is a pretrained base: give its held-out records as " \
           "data.val_path too" in problems_of(tmp_path, local)  # the default is the course's corpus
    cfg = load_config(write(tmp_path, local.replace("  batch_size: 8", "  batch_size: 8\n  val_path: v.jsonl")))
    data = resolved_dict(cfg)
    assert data["model"]["init_from"] == "./base" and data["model"]["type"] == "llama"
    assert data["lora"]["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"]  # the family's, as init --base writes them
    assert data["training"]["batch_size"] == 8 and data["output"]["dir"] == "./output"
    assert data["publish"] == {"repo": "myuser/qwen-finetuned", "private": False, "merge_adapters": True,
                               "model_card": True}
    assert "path" not in data["model"] and "batch_size" not in data["data"] and "output_dir" not in data["training"]
    assert cfg.source.notes == []  # publish.model_card: true is a setting, not a key with no effect
    local = load_config(write(tmp_path, "model:\n  path: ./local-model.safetensors\ntraining:\n  max_steps: 5\n"))
    assert local.model.init_from == "./local-model.safetensors"


@pytest.mark.parametrize(("text", "line", "message"), [
    ("model:\n  path: a/b\n  init_from: c/d\n", 2, "model.path: also given as model.init_from"),
    ("data:\n  batch_size: 4\ntraining:\n  batch_size: 2\n", 2, "data.batch_size: also given as training.batch_size"),
    ("data:\n  batch_size: 0\n", 2, "data.batch_size: must be greater than or equal to 1"),
    ("model:\n  pth: a/b\n", 2, "model.pth: unknown key — did you mean 'path'?"),
    ("data:\n  batch_sise: 4\n", 2, "data.batch_sise: unknown key — did you mean 'batch_size'?"),
    ("training:\n  output_dri: ./o\n", 2, "training.output_dri: unknown key — did you mean 'output_dir'?"),
    ("publish:\n  repo: u/m\n  model_card: maybe\n", 3, "publish.model_card: "),
])
def test_an_alias_is_checked_under_the_name_the_user_wrote(tmp_path, text, line, message):
    assert f"c.yaml:{line}: {message}" in problems_of(tmp_path, text)


# The YAML-mode spec's §9 checkpoint and lr_monitor callbacks, in a spec manifest (Appendix A's defaults apply).
SPEC_MANIFEST = 'entrenar: "1.0"\nname: cb\nversion: "1.0.0"\ntraining:\n  max_steps: 10\n'
CALLBACKS_9 = """\
callbacks:
  - type: "checkpoint"
    trigger: "epoch_end"
    config:
      save_best: true
      metric: "val_loss"
  - type: "lr_monitor"
    trigger: "step"
"""


def test_a_default_yields_to_the_callback_that_keeps_the_best_model(tmp_path):
    cfg = load_config(write(tmp_path, SPEC_MANIFEST + CALLBACKS_9))
    assert cfg.training.checkpoint.save_best is False  # Appendix A's save_best: true yields to the callback's
    assert cfg.callbacks[0].config.save_best is True
    assert load_config(write(tmp_path, SPEC_MANIFEST)).training.checkpoint.save_best is True  # no callback: the default
    both = SPEC_MANIFEST + "  checkpoint: {save_best: true}\n" + CALLBACKS_9  # both written: the user is told
    assert "kept by one rule only" in problems_of(tmp_path, both)


# §3.1's freeze list, on a Llama base: the same name endings as lora.target_modules.
LLAMA = "model:\n  {type: llama, n_layer: 11, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, freeze: %s}\n" \
        "training:\n  max_steps: 5\n"


def test_freeze_takes_the_name_endings_lora_targets_take(tmp_path):
    cfg = load_config(write(tmp_path, LLAMA % "[embed_tokens, layers.0, layers.1]"))
    model = build_model(cfg.model.architecture())
    frozen = model.freeze(cfg.model.freeze)
    names = [name for name, _ in model.named_parameters()]
    assert frozen == [n for n in names if n.startswith(("model.embed_tokens.", "model.layers.0.", "model.layers.1."))]
    assert not any(n.startswith("model.layers.10.") for n in frozen)  # layers.1 is block 1, not block 10
    assert "'layers.99' matches no parameter" in problems_of(tmp_path, LLAMA % "[layers.99]")


# The YAML-mode spec's §7 quantize block, as written (on lab 01's MiniGPT, whose output head is its embedding).
QUANTIZE_7 = """\
training:
  max_steps: 10
quantize:
  enabled: true
  bits: 4
  scheme: "symmetric"
  granularity: "per_channel"
  group_size: 128
  qat:
    enabled: false
    observer: "histogram"
  calibration:
    samples: 512
    method: "percentile"
    percentile: 99.99
  exclude:
    - "lm_head"
    - "embed_tokens"
"""


def test_the_quantize_block_refuses_only_what_cannot_be_and_warns_what_is_unused(tmp_path):
    message = problems_of(tmp_path, QUANTIZE_7)
    assert message.count("quantize.") == 1  # exclude, group_size and qat.observer are not refused
    assert "c.yaml:13: quantize.calibration.samples: method percentile sets each range from the weights alone" in (
        message) and "no activations to calibrate" in message
    cfg = load_config(write(tmp_path, QUANTIZE_7.replace("samples: 512", "samples: 0")))
    assert [w.split(":")[0] for w in cfg.source.warnings] == [
        "quantize.group_size", "quantize.qat.observer", "quantize.exclude[0]", "quantize.exclude[1]"]
    assert "stays float anyway" in cfg.source.warnings[2] and "tied to the token embedding" in cfg.source.warnings[2]
    assert cfg.quantize.linear_exclude(cfg.model.architecture()) == []  # nothing for quantization to leave out
    untied = "model: {type: llama, n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, " \
             "tie_embeddings: false}\n" + QUANTIZE_7.replace("samples: 512", "samples: 0")
    llama = load_config(write(tmp_path, untied))
    assert llama.quantize.linear_exclude(llama.model.architecture()) == ["lm_head"]  # a linear layer: excluded
    assert [w.split(":")[0] for w in llama.source.warnings][2:] == ["quantize.exclude[1]"]
    still = problems_of(tmp_path, QUANTIZE_7.replace("- \"embed_tokens\"", "- \"c_atn\""))
    assert "quantize.exclude[1]: 'c_atn' names no linear layer" in still  # a typo is still an error


# --- refusals name their true cause, overrides are named as overrides, a failed Hub request is exit 5 ----------

@pytest.mark.parametrize(("text", "cause"), [
    ("output:\n  registry: {enabled: true}\n", "cannot reach the pacha:// registry"),
    ("monitoring:\n  tracking: {backend: trueno-db}\n", "trueno-db is entrenar's own database"),
    ("monitoring:\n  tracking: {backend: wandb}\n", "a hosted service minitrain does not reach"),
    ("output:\n  report: {format: pdf}\n", "print that to PDF"),
    ("model:\n  format: apr\n", "apr is entrenar's own format"),
    ("quality: {score: 87.5}\n", "computed by every run"),
    ("model:\n  format: pt\n", "minitrain reads and writes safetensors and GGUF"),  # GGUF is read too
    ("model:\n  device: cuda\n", "not supported: minitrain runs NumPy on the CPU"),  # this one is the CPU
])
def test_a_refusal_names_its_own_cause(tmp_path, text, cause):
    message = problems_of(tmp_path, text)
    assert cause in message and "CPU NumPy" not in message


def test_a_problem_an_override_made_names_the_override(tmp_path, capsys):
    from minitrain import cli

    path = write(tmp_path, "training:\n  epochs: 3\noptimizer:\n  lr: 0.001\n")
    # (An override of a key the file spells otherwise replaces it: tests/config/test_spec_coverage_fixes.py.)
    assert cli.main(["validate", "--no-data", str(path), "--set", "model.d_model=30"]) == 2
    assert "  --set model.d_model=30: model.n_head: d_model 30 is not divisible" in capsys.readouterr().err
    assert cli.main(["validate", "--no-data", str(path), "--set", "training.batch_size=0"]) == 2
    assert "  --set training.batch_size=0: training.batch_size: must be" in capsys.readouterr().err  # as before


def test_an_offline_hub_source_is_exit_5_as_the_docs_table_says(hub, tmp_path, capsys, monkeypatch):
    from huggingface_hub import constants

    from minitrain import cli

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    path = write(tmp_path, "model:\n  type: sequential\n  layers: [{linear: {out_features: 2}}]\n"
                           "data:\n  source: hf://datasets/alice/parity\ntraining:\n  max_steps: 5\n")
    assert cli.main(["validate", str(path)]) == 5
    assert "data.source: hf://datasets/alice/parity: not in the local Hugging Face cache" in capsys.readouterr().err
    worse = write(tmp_path, path.read_text() + "  batch_size: 0\n", "worse.yaml")  # bad input besides: exit 2
    assert cli.main(["validate", str(worse)]) == 2


def test_out_dir_overrides_the_publish_specs_output_dir(tmp_path):
    """`train --out-dir D` replaces training.output_dir (the key the file spells) instead of clashing with it."""
    cfg = load_config(write(tmp_path, "training:\n  max_steps: 5\n  output_dir: ./output\n"),
                      values={"output.dir": str(tmp_path / "elsewhere")})
    assert cfg.output.dir == str(tmp_path / "elsewhere")
    assert cfg.source.overrides == (f"--out-dir {tmp_path / 'elsewhere'}",)
