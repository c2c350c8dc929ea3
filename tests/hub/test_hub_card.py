"""The model card: front matter the Hub's ModelCard accepts, and the run's facts in the body."""

from __future__ import annotations

import json

import pytest
import yaml
from fakehub import make_run
from huggingface_hub import ModelCard, ModelCardData

from minitrain.hub.card import MISSING, build_card
from minitrain.hub.export_hf import export_model
from minitrain.hub.run_folder import read_run


def test_card_round_trips_through_huggingface_hub(tmp_path):
    text = build_card(read_run(make_run(tmp_path)), vocab_size=18, repo_id="alice/minigpt")
    card = ModelCard(text)
    assert str(card) == text  # parse + render gives back exactly what was written
    data = card.data
    assert isinstance(data, ModelCardData)
    assert data.library_name == "minitrain" and data.language == "es" and data.license == "mit"
    assert data.pipeline_tag == "text-generation" and "minitrain" in data.tags
    assert data.model_name == "alice/minigpt"
    metrics = {(r.dataset_split, r.metric_type): r.metric_value for r in data.eval_results}
    assert metrics == {("val", "perplexity"): 1.87, ("val", "exact_match"): 0.625, ("train", "perplexity"): 1.31}
    assert {r.task_type for r in data.eval_results} == {"text-generation"}
    # The raw front matter has the model-index structure the Hub validates.
    front = yaml.safe_load(text.split("---\n")[1])
    result = front["model-index"][0]["results"][0]
    assert result["task"]["type"] == "text-generation"
    assert {"type", "name"} <= set(result["dataset"])
    assert all({"type", "value"} <= set(m) for m in result["metrics"])


def test_card_reports_the_run(tmp_path):
    info = read_run(make_run(tmp_path))
    text = build_card(info, vocab_size=18, repo_id="alice/minigpt")
    n_params = sum(a.size for a in info.state.values())
    for expected in [
        "Trained from scratch",
        f"Parameters: {n_params:,}",
        "2 layers, 2 heads, width 8, MLP width 16",
        "Context length: 16 tokens",
        "18 symbols",
        "| train | 3 | 45 |",  # 3 records of 13 characters, each + BOS + EOS
        "| val | 2 | 31 |",
        "| dev | not recorded | not recorded |",
        "adamw, lr 0.001 -> 0.0001",
        "training 42, data 7",
        "Test CPU, 2 cores",
        "12.5 s",
        "| steps | 38 |",
        "| val PPL (held-out verbs) | 1.870 |",
        "| character n-gram baseline, val PPL | 7.500 |",
        "| beats the n-gram baseline | yes |",
        "| held-out exact match (greedy) | 62.5 % |",
        "Intended use and limitations",
        'GPT2LMHeadModel.from_pretrained("alice/minigpt")',
        "init_from: alice/minigpt",
        'minitrain sample alice/minigpt --prompt "comer|R1|"',
    ]:
        assert expected in text, expected


def test_card_without_results_says_not_recorded_and_has_no_model_index(tmp_path):
    run = make_run(tmp_path)
    (run / "results.json").write_text(json.dumps({"model_path": str(tmp_path / "models" / "minigpt-test.safetensors")}))
    text = build_card(read_run(run), vocab_size=18)
    assert "| val PPL (held-out verbs) | not recorded |" in text
    assert f"| held-out exact match (greedy) | {MISSING} |" in text
    card = ModelCard(text)
    assert card.data.eval_results is None and "model-index" not in card.data.to_dict()


def test_a_model_started_from_a_hub_model_names_it_as_base_model(tmp_path):
    run = make_run(tmp_path)
    config = yaml.safe_load((run / "config.resolved.yaml").read_text())
    config["model"]["init_from"] = "alice/minigpt-base"
    (run / "config.resolved.yaml").write_text(yaml.safe_dump(config))
    text = build_card(read_run(run), vocab_size=18)
    assert ModelCard(text).data.base_model == "alice/minigpt-base"
    assert "Initialised from `alice/minigpt-base`" in text


def test_same_run_same_card(tmp_path):
    info = read_run(make_run(tmp_path))
    assert build_card(info, 18, "alice/m") == build_card(info, 18, "alice/m")


def test_a_plain_text_run_exports_with_a_card_about_its_text(tmp_path):
    # Exporting a plain-text run crashed: count_split read each line as a JSON record (JSONDecodeError).
    run_dir = make_run(tmp_path)
    data = tmp_path / "data"
    for split in ("train", "val"):
        (data / f"{split}.txt").write_text("hola mundo\nadiós\n", "utf-8")
    config = yaml.safe_load((run_dir / "config.resolved.yaml").read_text("utf-8"))
    config["data"].update(format="text", loss_on="all", heldout_policy="none", train_path=str(data / "train.txt"),
                          val_path=str(data / "val.txt"))
    (run_dir / "config.resolved.yaml").write_text(yaml.safe_dump(config), "utf-8")
    export_model(run_dir, tmp_path / "export", repo_id="alice/text")
    card = (tmp_path / "export" / "README.md").read_text("utf-8")
    assert "trained on plain text" in card and "| train | 2 | 19 |" in card  # 10 + 2 and 5 + 2 tokens
    assert "Spanish" not in card and "comer|R1|" not in card and "language: es" not in card
    assert "| val PPL | 1.870 |" in card and "exact match" not in card
    assert "(`train.txt`, one example per line)" in card and str(tmp_path) not in card  # no path of this machine


@pytest.mark.parametrize("absolute", [True, False])
def test_a_card_started_from_a_local_file_names_it_by_its_name(tmp_path, absolute):
    run = make_run(tmp_path)
    config = yaml.safe_load((run / "config.resolved.yaml").read_text())
    config["model"]["init_from"] = str(tmp_path / "m" / "base.safetensors") if absolute else "runs/b/base.safetensors"
    (run / "config.resolved.yaml").write_text(yaml.safe_dump(config))
    text = build_card(read_run(run), vocab_size=18)
    assert "Initialised from `base.safetensors`" in text and str(tmp_path) not in text


def test_a_family_without_a_layout_is_described_by_its_record(monkeypatch):
    from dataclasses import replace
    from pathlib import Path

    from minitrain.models.registry import FAMILIES

    mlp = Path(__file__).resolve().parents[2] / "models" / "mlp-lm-f01987eef0d24fef.safetensors"
    info = read_run(mlp)
    text = build_card(info, vocab_size=40)
    assert "A character-level MLP language model that conjugates Spanish verbs" in text
    assert f"- Architecture: fixed-context MLP language model ({info.model_config['context']} characters of" in text
    # A new family says what its model's docstring says, and lists its own keys: never "MLP" words.
    monkeypatch.setattr(FAMILIES["mlp_lm"].model, "__doc__", "Recurrent toy language model. `logits = model(idx)`.")
    config = {k: v for k, v in info.model_config.items() if k != "context"}
    text = build_card(replace(info, model_config=config), vocab_size=40)
    assert "A character-level toy language model that conjugates" in text and "MLP language" not in text
    assert f"- Architecture: recurrent toy language model (d_embed {config['d_embed']}, hidden" in text


def test_a_run_without_the_baseline_comparison_has_no_baseline_rows(tmp_path):
    """A fine-tune's results have no n-gram baseline keys (training/artifacts.py): its card lists no '—' rows for
    a comparison the run never made, while a course run's card keeps them."""
    from dataclasses import replace

    info = read_run(make_run(tmp_path))
    assert "| beats the n-gram baseline |" in build_card(info, vocab_size=18)
    results = {k: v for k, v in info.results.items() if k not in ("ngram_baseline_val_ppl", "beats_baseline")}
    text = build_card(replace(info, results=results), vocab_size=18)
    assert "n-gram baseline" not in text and "| val PPL" in text


@pytest.mark.parametrize("damage", [
    {"parameters": 0}, {"parameters": 100, "quantized_parameters": None}, {"parameters": 100, "trainable_parameters":
    None}, {"parameters": True}, {"parameters": -5}, {"data_sha256": {"train": {"path": 5}}},
    {"data_sha256": {"train": {"path": None, "sha256": 3}}}, {"data_sha256": [1]},
])
def test_a_damaged_manifest_gives_a_card_from_the_model_file_not_a_traceback(tmp_path, damage):
    """A manifest is schema-checked only for the keys a run needs to resume; the counts and data entries a card
    reads are checked where it reads them: a damaged one falls back to the file's own count."""
    from dataclasses import replace

    info = read_run(make_run(tmp_path))
    text = build_card(replace(info, manifest={**info.manifest, **damage}), vocab_size=18)
    assert "- Parameters: " in text and "Traceback" not in text
    if "parameters" in damage:
        assert f"- Parameters: {sum(a.size for a in info.state.values()):,}." in text
