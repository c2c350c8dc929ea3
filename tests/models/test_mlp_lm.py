"""The MLP language model: float64 gradcheck, causality and its fixed window, loss at init, overfitting, and the
same training run, artifacts and sampling as MiniGPT through `model.type: mlp_lm`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_run import train_tiny, write_tiny_run

from minitrain import gradcheck
from minitrain.cli import main
from minitrain.models.mlp_lm import MLPLanguageModel
from minitrain.models.registry import build_model, parameter_shapes
from minitrain.optim import AdamW
from minitrain.runs.model_files import load_model_file

TINY = dict(vocab_size=7, max_seq_len=8, context=3, d_embed=2, hidden=[5, 4])


def batch(b=2, t=6, seed=0):
    r = np.random.default_rng(seed)
    return r.integers(0, 7, size=(b, t)), r.integers(0, 7, size=(b, t))


def test_whole_model_gradcheck_float64():
    model = MLPLanguageModel(**TINY, activation="tanh", rng=3, dtype=np.float64)
    idx, targets = batch()
    mask = np.array([[True] * 6, [True, True, True, True, False, False]])
    assert gradcheck(lambda *_: model(idx, targets, loss_mask=mask)[1], model.parameters())


def test_each_position_reads_exactly_the_last_context_ids():
    model = MLPLanguageModel(**TINY, rng=0)
    idx, _ = batch(b=1, t=8)
    logits = model(idx)[0].data
    later = idx.copy()
    later[0, 5:] = (later[0, 5:] + 1) % 7  # the future of positions 0..4
    np.testing.assert_array_equal(model(later)[0].data[0, :5], logits[0, :5])
    earlier = idx.copy()
    earlier[0, 1] = (earlier[0, 1] + 1) % 7  # context 3: position 1 is read by positions 1, 2, 3 only
    changed = np.any(model(earlier)[0].data[0] != logits[0], axis=-1)
    assert changed.tolist() == [False, True, True, True, False, False, False, False]


def test_loss_at_init_is_close_to_a_uniform_guess_and_one_batch_overfits():
    model = MLPLanguageModel(vocab_size=64, max_seq_len=32, rng=0)
    idx = np.random.default_rng(1).integers(0, 64, size=(8, 32))
    assert model(idx, idx)[1].item() == pytest.approx(np.log(64), abs=0.05)
    small = MLPLanguageModel(**TINY, rng=0)
    idx, targets = batch(b=4, seed=2)
    opt = AdamW(small.named_parameters(), lr=3e-2, weight_decay=0.0, buffer=small.pack_parameters())
    for _ in range(400):
        small.zero_grad()
        _, loss = small(idx, targets)
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


def test_config_keys_shapes_and_bad_values():
    model = build_model({"type": "mlp_lm", **TINY})
    assert model.config == {"type": "mlp_lm", **TINY, "activation": "tanh", "dropout": 0.0}
    assert [(n, p.shape) for n, p in model.named_parameters()] == parameter_shapes(model.config)
    assert build_model(model.config).state_dict().keys() == model.state_dict().keys()  # the saved config rebuilds it
    with pytest.raises(ValueError, match="activation must be one of tanh, relu, gelu"):
        MLPLanguageModel(**TINY, activation="swish")


@pytest.mark.slow
def test_a_run_trains_saves_and_samples_an_mlp_lm(tmp_path, capsys):
    config = write_tiny_run(tmp_path)
    text = config.read_text(encoding="utf-8").replace(
        "model: {n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32}",
        "model: {type: mlp_lm, context: 6, d_embed: 8, hidden: [32], vocab_size: 64, max_seq_len: 32}")
    config.write_text(text, encoding="utf-8")
    results = train_tiny(config, tmp_path / "run")
    assert results["status"] == "completed" and results["val_ppl"] < 60
    model_path = tmp_path / "run" / results["model_path"] if not results["model_path"].startswith("/") else None
    model_file = sorted((tmp_path / "models").glob("mlp-lm-*.safetensors"))
    assert len(model_file) == 1 and model_path is None
    _, model_config, _ = load_model_file(model_file[0])
    assert model_config["type"] == "mlp_lm" and model_config["hidden"] == [32]
    resolved = (tmp_path / "run" / "config.resolved.yaml").read_text(encoding="utf-8")
    assert "type: mlp_lm" in resolved and "n_layer" not in resolved
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["parameters"] == 64 * 8 + 48 * 32 + 32 + 32 * 64 + 64

    assert main(["sample", str(tmp_path / "run"), "--prompt", "comer|P1|"]) == 0
    assert capsys.readouterr().out.startswith("comer|P1|")
    assert main(["export", str(tmp_path / "run"), str(tmp_path / "export")]) == 1
    assert "only MiniGPT (model.type minigpt) has a transformers twin" in capsys.readouterr().err
    assert not (tmp_path / "export" / "config.json").exists()


def test_the_committed_mlp_lm_reproduces_its_val_ppl(monkeypatch):
    from pathlib import Path

    from minitrain.config import load_config
    from minitrain.config.datacheck import load_split
    from minitrain.data.batcher import EvalBatcher, encode_split
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.loop import evaluate
    from minitrain.training.scoring import EVAL_BATCH_SIZE

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)  # the config's data paths are relative to the repository
    run = repo / "experiments" / "16-mlp-lm"
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    state, model_config, _ = load_model_file(repo / results["model_path"])
    cfg = load_config(run / "config.yaml")
    assert model_config == cfg.model.architecture()
    model = build_model(model_config)
    model.load_state_dict(state)
    val = encode_split(load_split(cfg.data, "val"), CharTokenizer.load(cfg.data.vocab_path), cfg.model.max_seq_len,
                       cfg.data.loss_on)  # fmt: skip
    _, val_ppl = evaluate(model, EvalBatcher(val, EVAL_BATCH_SIZE))
    # Bit-identical on the machine that trained it; elsewhere BLAS may round float32 sums differently.
    assert val_ppl == pytest.approx(results["val_ppl"], rel=1e-6)
    assert results["val_ppl"] < 5.799501 and results["beats_baseline"] is True
