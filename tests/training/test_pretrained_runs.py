"""Runs on a pretrained Llama base from YAML: a tiny random Llama written as a Hugging Face folder (and a GGUF)
with a tiny byte-level BPE tokenizer, chat records, LoRA and full fine-tuning, bit-exact resume, sampling from the
run, the refusals, and `validate`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
import yaml
from test_cli import run
from test_hub_pretrained import HF_CONFIG, MINITRAIN, hf_folder, random_hf_state, write_gguf

from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.config.problems import ConfigError
from minitrain.data.batch import Batch, trim_padding
from minitrain.hub.pretrained_runs import complete_model_section, run_model
from minitrain.models.llama import Llama
from minitrain.training.run import run_training

CHATS = [("hola", "hola hola"), ("como", "como hola"), ("hola como", "como"), ("como como", "hola"),
         ("hola hola", "como hola como")]


def chat_lines(pairs) -> str:
    return "".join(json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]})
                   + "\n" for q, a in pairs)


@pytest.fixture
def base(tmp_path, monkeypatch) -> Path:
    """A tiny Llama base folder (float32 weights, the tiny BPE tokenizer with its chat template) and chat data."""
    hf_folder(tmp_path / "base", bf16=False)
    (tmp_path / "train.jsonl").write_text(chat_lines(CHATS * 2), encoding="utf-8")
    (tmp_path / "val.jsonl").write_text(chat_lines(CHATS[:2]), encoding="utf-8")
    return tmp_path / "base"


LORA = "lora: {enabled: true, rank: 2, alpha: 4, dropout: 0.0, target_modules: [q_proj, k_proj, v_proj, o_proj]}\n"


def config_text(tmp_path: Path, init_from: Path, extra: str = LORA, model: str = "", data: str = "",
                steps: int = 3) -> str:
    return (f"name: tiny\nmodel: {{type: llama, init_from: {init_from}, max_seq_len: 48{model}}}\n"
            f"data: {{train_path: {tmp_path}/train.jsonl, val_path: {tmp_path}/val.jsonl, loss_on: completion"
            f"{data}}}\n"
            "optimizer: {lr_max: 0.01}\n"
            f"training: {{batch_size: 2, total_steps: {steps}, val_every: 2, log_every: 1, "
            "checkpoint: {save_every: 1, keep_last: null}}\n"
            f"output: {{models_dir: {tmp_path}/models}}\n" + extra)


def write_config(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def train(tmp_path: Path, text: str, out: str, **kwargs) -> dict:
    path = write_config(tmp_path, text, f"{out}.yaml")
    return run_training(load_config(path), tmp_path / out, progress=False, config_path=path, **kwargs)


# --- the model reads packed rows through lab 01's four arguments ------------------------------------------------

def test_an_integer_attn_pad_mask_is_read_as_segment_ids():
    model = Llama(**{k: v for k, v in MINITRAIN.items() if k != "type"}, rng=0)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, MINITRAIN["vocab_size"], (2, 7))
    segments = np.array([[1, 1, 1, 2, 2, 0, 0], [1, 1, 2, 2, 2, 3, 0]], dtype=np.int32)
    by_mask = model(idx, attn_pad_mask=segments)[0].data
    by_name = model(idx, attn_pad_mask=segments > 0, segment_ids=segments)[0].data
    assert np.array_equal(by_mask, by_name)
    alone = model(idx[:1, 3:5])[0].data  # the second document of row 0, as a row of its own
    assert np.allclose(by_mask[0, 3:5], alone[0], atol=1e-5)
    assert not np.allclose(model(idx, attn_pad_mask=segments > 0)[0].data[0, 3:5], alone[0], atol=1e-3)
    batch = trim_padding(Batch(idx, idx, segments, segments > 0))
    assert batch.input.shape == (2, 6) and batch.attn_pad_mask.dtype == np.int32


# --- the config -------------------------------------------------------------------------------------------------

def test_the_architecture_is_filled_from_the_base_and_a_given_key_must_equal_it(tmp_path, base):
    cfg = complete_model_section(load_config(write_config(tmp_path, config_text(tmp_path, base))))
    arch = cfg.model.architecture()
    assert {k: arch[k] for k in ("n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab_size", "head_dim")} == {
        k: MINITRAIN[k] for k in ("n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab_size", "head_dim")}
    assert arch["max_seq_len"] == 48  # shorter than the base's 64: allowed
    assert (cfg.data.packing, cfg.data.overflow, cfg.data.vocab_path) == ("pack", "error", None)
    assert complete_model_section(cfg) == cfg  # idempotent
    bad = load_config(write_config(tmp_path, config_text(tmp_path, base, model=", n_layer: 3, max_seq_len: 65")
                                   .replace("max_seq_len: 48, ", "")))
    with pytest.raises(ConfigError) as info:
        complete_model_section(bad)
    assert {p.path for p in info.value.problems} == {("model", "n_layer"), ("model", "max_seq_len")}


@pytest.mark.parametrize("model, data, where, message", [
    ("", ", vocab_path: data/processed/vocab.json", ("data", "vocab_path"), "never on character ids"),
    ("", ", loss_on: answer", ("data", "loss_on"), "answer counts the verb form"),
    ("", ", dev_path: x.jsonl", ("data", "dev_path"), "read data.train_path and data.val_path only"),
    ("", ", heldout_policy: verbs_4", ("data", "heldout_policy"), "the held-out verbs"),
    ("", ", format: csv", ("data", "format"), "read by their extension"),
])
def test_a_pretrained_base_refuses_character_keys(tmp_path, base, model, data, where, message):
    text = config_text(tmp_path, base, model=model, data=data).replace("loss_on: completion, loss_on", "loss_on")
    with pytest.raises(ConfigError) as info:
        load_config(write_config(tmp_path, text))
    assert [p.path for p in info.value.problems] == [where] and message in info.value.problems[0].message


def test_loss_on_left_out_counts_all_tokens_on_a_pretrained_base(tmp_path, base):
    cfg = load_config(write_config(tmp_path, config_text(tmp_path, base).replace(", loss_on: completion", "")))
    assert cfg.data.loss_on == "all"


def test_packing_is_refused_for_minigpt_and_completion_for_verb_records(tmp_path):
    text = ("model: {n_layer: 1}\ndata: {packing: pack, loss_on: completion}\ntraining: {total_steps: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_config(write_config(tmp_path, text))
    found = {p.path: p.message for p in info.value.problems}
    assert set(found) == {("data", "packing"), ("data", "loss_on")}
    assert "cannot read packed rows" in found[("data", "packing")]


def test_validate_checks_the_base_and_counts_the_data_in_tokens(tmp_path, base, capsys):
    path = write_config(tmp_path, config_text(tmp_path, base))
    code, out, err = run(["validate", path], capsys)
    assert code == 0, err
    assert "✓ data: train 6 rows of packed tokens, val 1 rows of packed tokens" in out
    assert f"vocab_size {MINITRAIN['vocab_size']}" in out
    (tmp_path / "val.jsonl").write_text(chat_lines([("hola " * 40, "como")]), encoding="utf-8")
    code, out, err = run(["validate", path], capsys)
    assert code == 2 and "data.val_path" in err and "more than a row holds" in err


# --- training ---------------------------------------------------------------------------------------------------

def test_lora_on_a_pretrained_base_trains_resumes_bit_exactly_and_samples(tmp_path, base, capsys):
    results = train(tmp_path, config_text(tmp_path, base), "straight")
    run_dir = tmp_path / "straight"
    assert results["steps"] == 3 and results["val_exact_match"] is None
    assert not {"ngram_baseline_val_ppl", "beats_baseline", "ppl_improvement_pct"} & set(results)  # the course's
    assert results["tokens_seen"] > 0 and results["loss_tokens_seen"] < results["tokens_seen"]
    assert np.isclose(results["val_ppl"], np.exp(results["val_loss"]))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (run_dir / "tokenizer" / name).read_bytes() == (base / name).read_bytes()
    resolved = yaml.safe_load((run_dir / "config.resolved.yaml").read_text())
    assert resolved["model"]["n_kv_head"] == 2 and resolved["model"]["d_model"] == 32
    assert "vocab_path" not in resolved["data"] and resolved["data"]["packing"] == "pack"
    model_file = safetensors.numpy.load_file(results["model_path"])
    assert model_file and all(".lora_" in name for name in model_file)  # adapters only: the base stays in init_from
    adapter = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert adapter["fan_in_fan_out"] is False and adapter["r"] == 2 and adapter["base_model_name_or_path"] == str(base)
    tensors = safetensors.numpy.load_file(str(run_dir / "adapter" / "adapter_model.safetensors"))
    assert tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"].shape == (2, 32)  # (r, in)
    assert tensors["base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight"].shape == (16, 2)  # (out, r)

    # resume from step 1: the same log, byte for byte
    text = config_text(tmp_path, base)
    train(tmp_path, text, "resumed", resume=run_dir / "checkpoints" / "step-1.safetensors")
    assert (tmp_path / "resumed" / "train_log.jsonl").read_bytes() == (run_dir / "train_log.jsonl").read_bytes()

    model, tokenizer = run_model(run_dir)
    assert tokenizer.vocab_size == MINITRAIN["vocab_size"] and "lora" in str(model)
    code, out, err = run(["sample", run_dir, "--prompt", "hola", "--chat", "--max-new-tokens", "4"], capsys)
    assert code == 0, err
    assert out.startswith("hola")
    code, out, err = run(["info", run_dir], capsys)
    assert code == 0, err


def test_train_parses_a_gguf_base_once_and_encodes_each_record_once(tmp_path, base, capsys, monkeypatch):
    """`minitrain train` trains on the rows its data check packed (the records are not encoded again) and parses
    the base's GGUF once for the check and the weights; its log is the one of a run that packs its own rows."""
    import gguf

    from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
    from minitrain.data.text_examples import encode_records
    from minitrain.data.text_records import read_file
    from minitrain.formats import gguf_read
    from minitrain.hub import pretrained_runs

    write_gguf(tmp_path / "base.gguf", random_hf_state(MINITRAIN), HF_CONFIG)
    text = config_text(tmp_path, tmp_path / "base.gguf", steps=2)
    train(tmp_path, text, "alone")  # run_training without a summary: it packs the rows itself
    counts = {"__init__": 0, "apply_chat_template": 0}

    def count(cls, name):
        original = getattr(cls, name)

        def counted(self, *args, **kwargs):
            counts[name] += 1
            return original(self, *args, **kwargs)
        monkeypatch.setattr(cls, name, counted)
    count(gguf.GGUFReader, "__init__")
    count(PretrainedTokenizer, "apply_chat_template")
    gguf_read._open_gguf.cache_clear()
    pretrained_runs._read_base.cache_clear()
    code, _, err = run(["train", write_config(tmp_path, text, "cli.yaml"), "--out-dir", tmp_path / "cli", "--quiet"],
                       capsys)
    assert code == 0, err
    assert counts["__init__"] == 1
    assert (tmp_path / "cli" / "train_log.jsonl").read_bytes() == (tmp_path / "alone" / "train_log.jsonl").read_bytes()
    renders, counts["apply_chat_template"] = counts["apply_chat_template"], 0
    records = read_file(tmp_path / "train.jsonl") + read_file(tmp_path / "val.jsonl")
    encode_records(records, pretrained_runs.read_base(tmp_path / "base.gguf").tokenizer, "completion")
    assert renders == counts["apply_chat_template"] > 0  # one encoding of every record, not two


def test_full_fine_tuning_from_a_gguf_writes_every_weight(tmp_path, base):
    hf = random_hf_state(MINITRAIN)
    write_gguf(tmp_path / "tiny.gguf", hf, HF_CONFIG)
    data = f", packing: pad, test_path: {tmp_path}/val.jsonl"
    results = train(tmp_path, config_text(tmp_path, tmp_path / "tiny.gguf", extra="", data=data), "full")
    assert np.isclose(results["test_ppl"], np.exp(results["test_loss"]))
    state = safetensors.numpy.load_file(results["model_path"])
    assert "model.layers.1.mlp.down_proj.weight" in state and not any("lora" in n for n in state)
    before = hf["model.layers.1.mlp.down_proj.weight"].T
    assert not np.allclose(state["model.layers.1.mlp.down_proj.weight"], before)  # trained from the base's weights
    assert np.abs(state["model.layers.1.mlp.down_proj.weight"] - before).max() < 0.1
    manifest = json.loads((tmp_path / "full" / "manifest.json").read_text())
    assert manifest["init_from"] == str(tmp_path / "tiny.gguf")


def test_qlora_holds_the_base_in_nf4_and_saves_adapters_only(tmp_path, base):
    extra = LORA.replace("target_modules", "quantize_base: true, target_modules")
    results = train(tmp_path, config_text(tmp_path, base, extra=extra, steps=2), "qlora")
    manifest = json.loads((tmp_path / "qlora" / "manifest.json").read_text())
    per_layer = 32 * 32 + 32 * 16 * 2 + 32 * 32 + 3 * 32 * 64  # q, k, v, o, gate, up, down: every linear layer
    assert manifest["quantized_parameters"] == 2 * per_layer
    assert all(".lora_" in name for name in safetensors.numpy.load_file(results["model_path"]))
    assert np.isfinite(results["val_loss"])


def test_a_lora_run_exports_merged_as_a_plain_model_of_the_base(tmp_path, base):
    from minitrain.hub.export_text import export_text_model
    from minitrain.hub.pretrained import load_pretrained_base
    from minitrain.models.registry import build_model
    from minitrain.nn import inference

    train(tmp_path, config_text(tmp_path, base), "run")
    adapted, tokenizer = run_model(tmp_path / "run")
    export_text_model(tmp_path / "run", tmp_path / "export", merge_adapters=True)
    model_config, state, exported_tokenizer, _ = load_pretrained_base(tmp_path / "export")
    assert "lora" not in model_config and exported_tokenizer.encode("hola como") == tokenizer.encode("hola como")
    # trained on rows of 48 positions, the model keeps the base's context of 64 (a published fine-tune is not cut)
    assert adapted.config["max_seq_len"] == model_config["max_seq_len"] == 64
    assert (tmp_path / "export" / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()
    plain = build_model(model_config)
    plain.load_state_dict(state)
    idx = np.array([tokenizer.encode("hola como hola")])
    with inference(adapted), inference(plain):
        want, got = adapted(idx)[0].data, plain(idx)[0].data
    base_model = build_model(model_config)
    base_model.load_state_dict(load_pretrained_base(base)[1])
    with inference(base_model):
        assert np.abs(base_model(idx)[0].data - want).max() > 1e-3  # the adapters changed the model
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_lora_run_exports_its_adapter_by_default_and_merged_on_merge_adapters(tmp_path, base, capsys):
    # what PEFT users expect, and what docs/hub.md and `export --help` say: the adapter, merged on --merge-adapters
    train(tmp_path, config_text(tmp_path, base), "run")
    code, _, err = run(["export", tmp_path / "run", tmp_path / "adapter"], capsys)
    assert code == 0, err
    names = {p.name for p in (tmp_path / "adapter").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "README.md"} <= names
    assert not {"config.json", "model.safetensors"} & names
    ours, runs = tmp_path / "adapter", tmp_path / "run" / "adapter"  # the run wrote RUN/adapter from its live model
    assert (ours / "adapter_config.json").read_bytes() == (runs / "adapter_config.json").read_bytes()
    exported, written = (safetensors.numpy.load_file(f / "adapter_model.safetensors") for f in (ours, runs))
    assert exported.keys() == written.keys() and all(np.array_equal(exported[k], written[k]) for k in written)
    assert (tmp_path / "adapter" / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()
    card = (tmp_path / "adapter" / "README.md").read_text()
    assert "holds a LoRA adapter (rank 2, alpha 4" in card and "AutoPeftModelForCausalLM.from_pretrained" in card
    code, _, err = run(["export", tmp_path / "run", tmp_path / "merged", "--merge-adapters"], capsys)
    assert code == 0 and not (tmp_path / "merged" / "adapter_config.json").exists(), err
    peft = safetensors.numpy.load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    merged = safetensors.numpy.load_file(tmp_path / "merged" / "model.safetensors")
    q = "model.layers.1.self_attn.q_proj"
    update = 2.0 * peft[f"base_model.model.{q}.lora_B.weight"] @ peft[f"base_model.model.{q}.lora_A.weight"]  # α/r
    want = safetensors.numpy.load_file(base / "model.safetensors")[f"{q}.weight"] + update
    np.testing.assert_allclose(merged[f"{q}.weight"], want, atol=1e-6)
    # On the Hub an adapter names its base by Hub id, and this base is a local folder
    code, out, err = run(["publish", "--repo", "alice/a", tmp_path / "run", "--dry-run"], capsys)
    assert code == 2 and "--merge-adapters" in err and not out
    code, out, _ = run(["publish", "--repo", "alice/a", tmp_path / "run", "--dry-run", "--base-model", "bob/b"], capsys)
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert code == 0 and "adapter_model.safetensors" in listed and "model.safetensors" not in listed
    code, out, _ = run(["publish", "--repo", "alice/a", tmp_path / "run", "--dry-run", "--merge-adapters"], capsys)
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert code == 0 and "model.safetensors" in listed and "adapter_config.json" not in listed
    from minitrain.hub.final_model import write_final_model  # what `train` writes into the spec's ./output

    weights, facts = write_final_model(tmp_path / "run")
    facts = json.loads(facts.read_text())
    assert all(".lora_" in name for name in safetensors.numpy.load_file(weights)) and facts["method"] == "lora"
    assert facts["base"] == "base" and facts["adapter_dir"] == "adapter" and facts["lora"]["rank"] == 2


def base_parameters(base: Path) -> int:
    """The base's weights, counted from its file (the output layer is tied: no lm_head)."""
    return sum(a.size for a in safetensors.numpy.load_file(base / "model.safetensors").values())


LORA_PARAMETERS = 2 * 2 * (32 + 32 + 32 + 16 + 32 + 16 + 32 + 32)  # 2 layers, rank 2: A (in×r), B (r×out) of q k v o


def test_a_lora_card_counts_the_whole_model_and_its_trainable_share(tmp_path, base):
    from minitrain.hub.export_text import export_text_model

    train(tmp_path, config_text(tmp_path, base), "run")
    export_text_model(tmp_path / "run", tmp_path / "export", merge_adapters=True)
    card = (tmp_path / "export" / "README.md").read_text()
    total = base_parameters(base) + LORA_PARAMETERS
    assert f"Parameters: {total:,} ({LORA_PARAMETERS:,} trained by the run" in card
    assert f"{100 * LORA_PARAMETERS / total:.2f} %" in card
    with pytest.raises(UserError, match=r"--float-base: .* is not a QLoRA run"):  # its base is the float one already
        export_text_model(tmp_path / "run", tmp_path / "floating", float_base=True)
    assert not (tmp_path / "floating").exists()


def test_a_qlora_card_and_adapter_say_what_the_run_read_and_that_its_base_was_nf4(tmp_path, base, capsys):
    from minitrain.hub.export_text import export_text_model

    (tmp_path / "my-data").mkdir()
    for split in ("train", "val"):
        (tmp_path / "my-data" / f"{split}.jsonl").write_bytes((tmp_path / f"{split}.jsonl").read_bytes())
    text = config_text(tmp_path, base, extra=LORA.replace("target_modules", "quantize_base: true, target_modules"),
                       steps=2).replace(f"train_path: {tmp_path}/train.jsonl, val_path: {tmp_path}/val.jsonl",
                                        f"source: {tmp_path}/my-data")
    train(tmp_path, text, "run")
    export_text_model(tmp_path / "run", tmp_path / "export", merge_adapters=True)
    card = (tmp_path / "export" / "README.md").read_text()
    total = base_parameters(base) + LORA_PARAMETERS  # the 4-bit weights are the model's too
    assert f"Parameters: {total:,} ({LORA_PARAMETERS:,} trained by the run" in card
    assert "`my-data`" in card and "`train.jsonl`" in card and "`val.jsonl`" in card
    assert "data/processed" not in card and "NF4" in card and "base `base`" in card
    assert "n-gram baseline" not in card  # the course's comparison; a fine-tune's results do not have it
    adapter = tmp_path / "run" / "adapter"
    meta = json.loads(adapter.joinpath("adapter_model.safetensors").read_bytes()[8:][:int.from_bytes(
        adapter.joinpath("adapter_model.safetensors").read_bytes()[:8], "little")])["__metadata__"]
    assert meta["minitrain_base_quantization"] == "nf4" and "NF4" in meta["minitrain_note"]
    for written in (card, json.dumps(meta)):
        assert str(tmp_path) not in written  # no path of this machine: the base and the data by name
    # PEFT finds a local base only by its absolute path (any other name is a Hub id to it)
    assert json.loads(adapter.joinpath("adapter_config.json").read_text())["base_model_name_or_path"] == str(base)

    # merged into the NF4 base it trained on (the default) or into the float base, the gap between the two printed
    code, _, err = run(["export", tmp_path / "run", tmp_path / "floating", "--float-base"], capsys)
    assert code == 0 and "exported merged into the float base (--float-base)" in err
    gap = float(err.split("differ by up to ")[1].split()[0])
    assert gap > 0 and f"folded into the NF4 base instead, the logits differ by up to {gap:.4g}" in (
        tmp_path / "floating" / "README.md").read_text()
    assert f"folded into the float base instead, the logits differ by up to {gap:.4g}" in card
    peft = safetensors.numpy.load_file(adapter / "adapter_model.safetensors")
    float_base = safetensors.numpy.load_file(base / "model.safetensors")
    floating = safetensors.numpy.load_file(tmp_path / "floating" / "model.safetensors")
    nf4 = safetensors.numpy.load_file(tmp_path / "export" / "model.safetensors")
    q = "model.layers.0.self_attn.q_proj"
    update = 2.0 * peft[f"base_model.model.{q}.lora_B.weight"] @ peft[f"base_model.model.{q}.lora_A.weight"]  # α/r
    np.testing.assert_allclose(floating[f"{q}.weight"], float_base[f"{q}.weight"] + update, atol=1e-6)
    gate = "model.layers.0.mlp.gate_proj.weight"  # adapted by no LoRA: the float base's, or its NF4 rounding
    assert np.array_equal(floating[gate], float_base[gate]) and 0 < np.abs(nf4[gate] - float_base[gate]).max() < 0.5
    assert run(["export", tmp_path / "run", tmp_path / "f.gguf", "--format", "gguf", "--float-base"], capsys)[0] == 2
    code, out, _ = run(["publish", "--repo", "alice/q", tmp_path / "run", "--dry-run", "--float-base"], capsys)
    assert code == 0 and f"(--float-base); the two merges' logits differ by up to {gap:.4g}" in out


def test_a_lora_run_with_a_relative_base_reads_and_exports_from_another_folder(tmp_path, base, monkeypatch):
    """Every path the run records resolves from any folder (manifest.json's working_dir), and its adapter names the
    local base by its absolute path, the one name PEFT finds a local base by from any folder."""
    from minitrain.hub.export_text import export_text_model
    from minitrain.hub.run_folder import read_run

    monkeypatch.chdir(tmp_path)
    text = config_text(Path("."), Path("base"))
    assert "init_from: base," in text and "train_path: ./train.jsonl" in text
    results = train(tmp_path, text, "run")
    assert not Path(results["model_path"]).is_absolute()  # recorded relative to the working folder
    assert json.loads((tmp_path / "run/manifest.json").read_text())["working_dir"] == ".."
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    info = read_run(tmp_path / "run")
    assert info.model_path.resolve() == (tmp_path / results["model_path"]).resolve()
    assert Path(info.data_config().train_path).resolve() == tmp_path / "train.jsonl"
    export_text_model(tmp_path / "run", "export")
    for adapter in (tmp_path / "run" / "adapter", tmp_path / "elsewhere" / "export"):
        named = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
        assert Path(named).is_absolute() and Path(named).resolve() == base.resolve()
