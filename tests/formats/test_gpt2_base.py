"""A GPT-2 that brings its own BPE tokenizer is a pretrained base: a tiny random GPT-2 written here as a Hugging Face
folder (HF GPT-2 names, Conv1D [in, out] layout) with the tiny byte-level BPE of test_pretrained_tokenizer.py, then
loaded (logits equal a NumPy GPT-2 forward), fine-tuned with LoRA from YAML (resume bit-exact), sampled, scored,
exported and read back, and refused where its tokenizer does not fit."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
import yaml
from test_cli import run
from test_pretrained_runs import CHATS, train
from test_pretrained_tokenizer import tiny_fields

from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.config.problems import ConfigError
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.text_models import load_text_model
from minitrain.lora import merge_adapters
from minitrain.models.minigpt import parameter_shapes
from minitrain.nn import inference

GPT2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 272, "n_positions": 32,
        "n_embd": 16, "n_layer": 2, "n_head": 2, "n_inner": None, "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
        "bos_token_id": 0, "eos_token_id": 0}
GPT2_SPECIALS = {"bos_id": 0, "eos_id": 0, "pad_id": None, "chat_template": None}  # <|endoftext|> for both
LORA = "lora: {enabled: true, rank: 2, alpha: 4, dropout: 0.0, target_modules: [c_attn, c_proj]}\n"


def gpt2_folder(folder: Path, vocab_size: int = 272, bpe_files: bool = False) -> dict[str, np.ndarray]:
    """A tiny GPT-2 as transformers saves one (float32, `transformer.` names, no lm_head: tied), its tokenizer as
    tokenizer.json or as GPT-2's vocab.json + merges.txt; returns the weights."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {**GPT2, "vocab_size": vocab_size}
    rng = np.random.default_rng(7)
    shapes = parameter_shapes({"n_layer": config["n_layer"], "d_model": config["n_embd"], "d_ff": 4 * config["n_embd"],
                               "vocab_size": vocab_size, "max_seq_len": config["n_positions"]})
    state = {name: (rng.normal(0, 0.3, shape) + (name.endswith("ln_1.weight") or name.endswith("ln_2.weight")
                                                 or name.endswith("ln_f.weight"))).astype(np.float32)
             for name, shape in shapes}
    (folder / "config.json").write_text(json.dumps(config))
    safetensors.numpy.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer = PretrainedTokenizer.from_gguf_fields(**{**tiny_fields(), **GPT2_SPECIALS})
    if bpe_files:
        fields = tiny_fields()
        (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(fields["tokens"])}))
        (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(fields["merges"]) + "\n")
    else:
        tokenizer.save(folder)
    return state


def numpy_gpt2(state: dict[str, np.ndarray], config: dict, idx: np.ndarray) -> np.ndarray:
    """GPT-2's forward written out in NumPy from the HF state dict: the reference MiniGPT must equal."""
    def norm(x, name):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * state[f"{name}.weight"] + state[f"{name}.bias"]

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

    state = s = {k.removeprefix("transformer."): v.astype(np.float64) for k, v in state.items()}
    T, H, D = idx.shape[1], config["n_head"], config["n_embd"]
    x = s["wte.weight"][idx] + s["wpe.weight"][:T]
    for i in range(config["n_layer"]):
        h = f"h.{i}"
        q, k, v = np.split(norm(x, f"{h}.ln_1") @ s[f"{h}.attn.c_attn.weight"] + s[f"{h}.attn.c_attn.bias"], 3, -1)
        q, k, v = (a.reshape(*a.shape[:2], H, D // H).transpose(0, 2, 1, 3) for a in (q, k, v))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D // H) + np.triu(np.full((T, T), -np.inf), 1)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        heads = (p / p.sum(-1, keepdims=True)) @ v
        x = x + heads.transpose(0, 2, 1, 3).reshape(x.shape) @ s[f"{h}.attn.c_proj.weight"] + s[f"{h}.attn.c_proj.bias"]
        m = gelu(norm(x, f"{h}.ln_2") @ s[f"{h}.mlp.c_fc.weight"] + s[f"{h}.mlp.c_fc.bias"])
        x = x + m @ s[f"{h}.mlp.c_proj.weight"] + s[f"{h}.mlp.c_proj.bias"]
    return norm(x, "ln_f") @ s["wte.weight"].T


@pytest.fixture
def base(tmp_path) -> Path:
    gpt2_folder(tmp_path / "gpt2")
    records = [json.dumps({"prompt": q, "completion": " " + a}) for q, a in CHATS]
    (tmp_path / "train.jsonl").write_text("\n".join(records * 2) + "\n", encoding="utf-8")
    (tmp_path / "val.jsonl").write_text("\n".join(records[:2]) + "\n", encoding="utf-8")
    return tmp_path / "gpt2"


def gpt2_config(tmp_path: Path, base: Path, extra: str = LORA, data: str = "") -> str:
    return (f"name: tiny\nmodel: {{type: minigpt, init_from: {base}, dropout: 0.0}}\n"
            f"data: {{train_path: {tmp_path}/train.jsonl, val_path: {tmp_path}/val.jsonl, loss_on: completion"
            f"{data}}}\n"
            "optimizer: {lr_max: 0.01}\n"
            "training: {batch_size: 2, total_steps: 3, val_every: 2, log_every: 1, "
            "checkpoint: {save_every: 1, keep_last: null}}\n"
            f"output: {{models_dir: {tmp_path}/models}}\n" + extra)


def test_the_loaded_gpt2_equals_a_numpy_forward_and_reads_its_own_tokenizer(tmp_path, base):
    state = safetensors.numpy.load_file(str(base / "model.safetensors"))
    loaded = load_text_model(str(base))
    assert loaded.kind == "pretrained" and loaded.tokenizer.eos_id == 0  # GPT-2's <|endoftext|>
    idx = np.array([loaded.tokenizer.encode("hola como hola")])
    assert idx.shape[1] < len("hola como hola") / 2  # BPE ids ("hola", "Ġhola"...), not characters
    with inference(loaded.model):
        got = loaded.model(idx)[0].data
    np.testing.assert_allclose(got, numpy_gpt2(state, GPT2, idx), atol=1e-4)
    # GPT-2's vocab.json + merges.txt read as the same byte-level BPE
    gpt2_folder(tmp_path / "files", bpe_files=True)
    _, _, files_tokenizer, _ = load_pretrained_base(tmp_path / "files")
    text = "hola como, ¿qué tal? <|endoftext|>"
    assert files_tokenizer.encode(text) == loaded.tokenizer.encode(text)
    assert files_tokenizer.eos_id == loaded.tokenizer.eos_id == 0


def test_a_gpt2_whose_tokenizer_makes_ids_past_its_embedding_is_refused(tmp_path, capsys):
    gpt2_folder(tmp_path / "small", vocab_size=200)  # the tokenizer has 266 tokens
    with pytest.raises(UserError, match="ids up to 265 but the model has 200 embedding rows"):
        load_pretrained_base(tmp_path / "small")
    (tmp_path / "train.jsonl").write_text('{"text": "hola"}\n', encoding="utf-8")
    (tmp_path / "val.jsonl").write_text('{"text": "como"}\n', encoding="utf-8")
    path = tmp_path / "run.yaml"
    path.write_text(gpt2_config(tmp_path, tmp_path / "small").replace(", loss_on: completion", ""))
    code, _, err = run(["validate", path], capsys)
    assert code == 2 and "200 embedding rows" in err and "Traceback" not in err


def test_a_gpt2_base_pads_its_rows_and_refuses_packing(tmp_path, base):
    path = tmp_path / "run.yaml"
    path.write_text(gpt2_config(tmp_path, base))
    cfg = load_config(path)
    assert cfg.on_pretrained_base and cfg.data.packing == "pad" and cfg.data.vocab_path is None
    path.write_text(gpt2_config(tmp_path, base, data=", packing: pack"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "no segment ids" in {p.path: p.message for p in info.value.problems}[("data", "packing")]


def test_lora_on_a_gpt2_base_trains_resumes_bit_exactly_samples_evals_and_exports(tmp_path, base, capsys):
    results = train(tmp_path, gpt2_config(tmp_path, base), "straight")
    run_dir = tmp_path / "straight"
    assert results["steps"] == 3 and 0 < results["loss_tokens_seen"] < results["tokens_seen"]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (run_dir / "tokenizer" / name).read_bytes() == (base / name).read_bytes()
    resolved = yaml.safe_load((run_dir / "config.resolved.yaml").read_text())
    assert resolved["model"]["vocab_size"] == 272 and resolved["model"]["max_seq_len"] == 32
    assert resolved["data"]["packing"] == "pad"
    model_file = safetensors.numpy.load_file(results["model_path"])
    assert model_file and all(".lora_" in name for name in model_file)

    train(tmp_path, gpt2_config(tmp_path, base), "resumed", resume=run_dir / "checkpoints" / "step-1.safetensors")
    assert (tmp_path / "resumed" / "train_log.jsonl").read_bytes() == (run_dir / "train_log.jsonl").read_bytes()

    code, out, err = run(["sample", run_dir, "--prompt", "hola", "--max-new-tokens", "3"], capsys)
    assert code == 0 and out.startswith("hola"), err
    scores = {}
    for source in (run_dir, base):
        code, out, err = run(["eval", source, "--data", tmp_path / "val.jsonl", "--json"], capsys)
        assert code == 0, err
        scores[source] = json.loads(out)
    assert scores[run_dir]["tokens"] == scores[base]["tokens"] > 0
    assert scores[run_dir]["loss"] != scores[base]["loss"]  # the adapters changed the model

    code, _, err = run(["export", run_dir, tmp_path / "adapter"], capsys)  # the adapter, as PEFT users expect
    assert code == 0 and not (tmp_path / "adapter" / "model.safetensors").exists(), err
    assert json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["fan_in_fan_out"] is True  # Conv1D
    code, _, err = run(["export", run_dir, tmp_path / "export", "--merge-adapters"], capsys)
    assert code == 0, err
    out = tmp_path / "export"
    assert json.loads((out / "config.json").read_text())["architectures"] == ["GPT2LMHeadModel"]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (base / name).read_bytes()
    adapted = load_text_model(str(run_dir)).model
    exported = load_text_model(str(out)).model
    idx = np.array([[5, 270, 100, 3]])
    with inference(adapted), inference(exported):
        np.testing.assert_allclose(exported(idx)[0].data, adapted(idx)[0].data, atol=1e-5)
    merged = merge_adapters(adapted).state_dict()  # the adapters folded in: the weights the export must hold
    reloaded = exported.state_dict()
    assert reloaded.keys() == merged.keys() and all(np.array_equal(reloaded[n], merged[n]) for n in merged)


def test_init_base_writes_a_minigpt_config_that_validates(tmp_path, base, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text((tmp_path / "train.jsonl").read_text(), encoding="utf-8")
    (data / "val.jsonl").write_text((tmp_path / "val.jsonl").read_text(), encoding="utf-8")
    out = tmp_path / "c.yaml"
    code, printed, err = run(["init", "--base", base, "--data", data, "-o", out], capsys)
    assert code == 0, err
    config = yaml.safe_load(out.read_text())
    assert config["model"]["type"] == "minigpt" and config["model"]["max_seq_len"] == 32
    assert config["data"]["packing"] == "pad"
    assert config["lora"]["target_modules"] == ["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"]
    assert "Tokenizer: the base's own (266 tokens)" in printed
    assert sorted(p.name for p in data.iterdir()) == ["train.jsonl", "val.jsonl"]
    code, _, err = run(["validate", out], capsys)
    assert code == 0, err


def test_a_gpt2_base_on_the_hub_is_read_as_a_base(hub, tmp_path):
    from fakehub import TOKEN
    from huggingface_hub import HfApi

    gpt2_folder(tmp_path / "gpt2", bpe_files=True)  # GPT-2's own files: vocab.json + merges.txt, no tokenizer.json
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("alice/gpt2")
    api.upload_folder(repo_id="alice/gpt2", folder_path=str(tmp_path / "gpt2"))
    loaded = load_text_model("alice/gpt2")
    tokenizer = loaded.tokenizer
    assert loaded.kind == "pretrained" and tokenizer.encode("hola") == [tokenizer.tokenizer.token_to_id("hola")]
