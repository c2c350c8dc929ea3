"""The LoRA / QLoRA / quantization experiment (README.md): every number of results.json, from the committed corpus.

    python experiments/21-lora/run.py                 everything, into runs/21-lora/, then results.json here
    python experiments/21-lora/run.py --quick DIR     the same pipeline with 3-step runs, no plots, into DIR (the tests)
    python experiments/21-lora/run.py --base-only     steps 1 and 2 only: the split and the base (lab 05 starts there)

1. data     data/processed split by tense: the base never sees the imperfect (I); the adaptation trains on the
            training verbs' imperfect and is scored on the held-out verbs' (dev to choose, val to report)
2. base     base.yaml: lab 01's config without the imperfect
3. adapt    lora.yaml, qlora.yaml, full.yaml from the base, each in its own process (so its peak RSS is its own);
            held-out imperfect and the other tenses scored before and after; the adapters merged, and the merged
            model's logits compared with the adapted model's
4. timing   ms per training step of the three, interleaved in one process (the ratios are what to read);
            `--timing-only` measures this step again into results.json
5. ptq      lab 01's model quantized: bits × granularity → file bytes, val PPL, exact match
6. qat      lab 01's model fine-tuned 300 steps with 4-bit (and 2-bit) QAT, against the same fine-tuning then PTQ

Run from the repository root. Timings and RSS come from a machine other jobs share; see README.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from minitrain.common.runtime import configure
from minitrain.config import load_config
from minitrain.data.corpus import load_records, records_to_jsonl
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.fold_adapters import merged_model
from minitrain.hub.run_folder import read_run
from minitrain.hub.sources import load_model
from minitrain.nn.quantized import Linear4Bit
from minitrain.quant.scheme import Scheme
from minitrain.training.ptq import quantize_run
from minitrain.training.run import build_parts
from minitrain.training.scoring import score_records

HERE = Path(__file__).resolve().parent
DATA = Path("data/processed")
LAB01_MODEL = "models/minigpt-phase18-64ab16764a406b88.safetensors"
HELD_OUT_TENSE = "I"
METHODS = ("lora", "qlora", "full")


def make_data(root: Path) -> dict[str, int]:
    """The tense split (module docstring) under root/data; returns each file's record count."""
    split = {name: load_records(DATA / f"{name}.jsonl") for name in ("train", "dev", "val")}
    files = {}
    for name, records in split.items():
        files[f"base/{name}"] = [r for r in records if r["tense"] != HELD_OUT_TENSE]
        files[f"imperfect/{name}"] = [r for r in records if r["tense"] == HELD_OUT_TENSE]
    for name, records in files.items():
        path = root / "data" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(records_to_jsonl(records), encoding="utf-8")
    return {name: len(records) for name, records in files.items()}


def train(config: Path, out: Path, root: Path, quick: bool, extra: tuple[str, ...] = ()) -> dict:
    """`minitrain train` in its own process; results.json and manifest.json's facts."""
    sets = [f"data.{key}={value.replace('runs/21-lora', str(root))}" for key, value in _paths(config).items()]
    if quick:
        sets += ["scheduler.total_steps=3", "scheduler.warmup_steps=1", "training.val_every=2",
                 "output.plots=false"]
    args = [sys.executable, "-m", "minitrain.cli", "train", str(config), "--out-dir", str(out), "--models-dir",
            str(out / "models"), "--quiet", *(a for s in [*sets, *extra] for a in ("--set", s))]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    results = json.loads((out / "results.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    keys = ("parameters", "trainable_parameters", "quantized_parameters", "trainable_share", "base_weight_bytes")
    return {**results, **{k: manifest[k] for k in keys if k in manifest}}


def _paths(config: Path) -> dict[str, str]:
    """The config's data paths under runs/21-lora (the split files run.py writes), which --quick moves."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))["data"]
    return {key: value for key, value in data.items() if isinstance(value, str) and "runs/21-lora" in value}


def score(source: str, records: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    model, _ = load_model(source)
    tokenizer = CharTokenizer.load(DATA / "vocab.json")
    return {name: {k: round(v, 4) for k, v in score_records(model, tokenizer, recs).items()}
            for name, recs in records.items()}


def adapt(root: Path, quick: bool) -> dict:
    """The three adaptations from the base, with held-out scores before and after."""
    held_out = {name: load_records(root / "data" / f"imperfect/{name}.jsonl") for name in ("dev", "val")}
    held_out["other_tenses_val"] = load_records(root / "data" / "base/val.jsonl")
    rows = {"base": {"scores": score(str(root / "base"), held_out)}}
    for method in METHODS:
        out = root / method
        config = HERE / f"{method}.yaml"
        facts = train(config, out, root, quick, (f"model.init_from={root / 'base'}",))
        adapter = Path(facts["model_path"])
        rows[method] = {
            "trainable_parameters": facts.get("trainable_parameters", facts["parameters"]),
            "parameters": facts["parameters"] + facts.get("quantized_parameters", 0),
            "trainable_share": facts.get("trainable_share", 1.0),
            "model_file_bytes": adapter.stat().st_size,
            "base_weight_bytes": facts.get("base_weight_bytes"),
            "wall_seconds": facts["wall_seconds"], "ms_per_step": facts["ms_per_step"],
            "peak_rss_mb": facts["peak_rss_mb"], "steps": facts["steps"],
            "scores": score(str(out), held_out),
        }
        if method != "full":  # merging the adapters into the base changes the logits by float rounding only
            _, merge = merged_model(read_run(out))
            rows[method]["merged_vs_adapted_max_abs_logit_difference"] = merge["max_abs_logit_difference"]
    return rows


def step_times(root: Path, rounds: int) -> dict[str, float]:
    """Median ms per training step of each method, measured round-robin in this one process."""
    from minitrain.loop import train_step

    parts = {}
    for method in METHODS:
        cfg = load_config(HERE / f"{method}.yaml", [f"model.init_from={root / 'base'}",
                          *(f"data.{k}={v.replace('runs/21-lora', str(root))}"
                            for k, v in _paths(HERE / f"{method}.yaml").items())])
        parts[method] = build_parts(cfg, 1000)
    configure(cfg.model.width, cfg.training.batch_size * cfg.model.max_seq_len)  # as a run does: one BLAS thread
    times = {method: [] for method in METHODS}
    for _ in range(rounds):
        for method, p in parts.items():
            start = time.perf_counter()
            train_step(p.model, p.optimizer, [next(p.batcher)], 1.0)
            p.optimizer.step()
            times[method].append(time.perf_counter() - start)
    medians = {m: float(np.median(t[2:])) * 1000 for m, t in times.items()}
    memory = {m: _training_state_bytes(parts[m].model) for m in METHODS}
    return {"ms_per_step": {m: round(v, 3) for m, v in medians.items()},
            "relative_to_full": {m: round(v / medians["full"], 3) for m, v in medians.items()},
            "training_state_bytes": memory}


def _training_state_bytes(model) -> dict[str, int]:
    """Bytes training holds besides activations (the same for all three): each trainable weight with its gradient
    and AdamW's two moments (4 float32), each frozen weight as held (float32, or 4-bit blocks with their scales)."""
    trainable = model.num_parameters(trainable_only=True)
    four_bit = sum(m.weight.nbytes for m in model.modules() if isinstance(m, Linear4Bit))
    return {"trainable": 16 * trainable, "frozen": 4 * (model.num_parameters() - trainable) + four_bit}


def ptq_table(quick: bool, root: Path) -> list[dict]:
    """Lab 01's model at 8, 4 and 2 bits, per tensor, channel and group of 32 (symmetric, minmax ranges)."""
    rows = []
    grid = [(8, "per_channel")] if quick else [(b, g) for b in (8, 4, 2) for g in ("per_tensor", "per_channel",
                                                                                   "per_group")]
    for bits, granularity in grid:
        scheme = Scheme(bits, "symmetric", granularity, 32 if granularity == "per_group" else None)
        rows.append(quantize_run(LAB01_MODEL, root / f"ptq-int{bits}-{granularity}.safetensors", scheme,
                                 vocab_path=DATA / "vocab.json"))
    if not quick:  # the clipping search, with and without calibration inputs, where rounding hurts most
        for bits, samples in ((4, 0), (2, 0), (2, 256)):
            scheme = Scheme(bits, "symmetric", "per_channel", method="mse")
            row = quantize_run(LAB01_MODEL, root / f"ptq-int{bits}-mse{samples}.safetensors", scheme,
                               calibration_samples=samples, vocab_path=DATA / "vocab.json")
            rows.append({**row, "calibration_samples": samples})
    return rows


def qat_comparison(root: Path, quick: bool) -> dict:
    """Fine-tune lab 01's model with QAT, and the same fine-tuning without it then PTQ, at 4 and 2 bits (--quick:
    the QAT runs only, the ones whose stored weights are the ones trained with)."""
    rows = {}
    variants = (("qat", "true"),) if quick else (("ptq_after_finetune", "false"), ("qat", "true"))
    for bits in (4, 2):
        for name, qat in variants:
            out = root / f"int{bits}-{name}"
            facts = train(HERE / "qat.yaml", out, root, quick, (f"quantize.qat.enabled={qat}", f"quantize.bits={bits}"))
            rows[f"int{bits}_{name}"] = {"val_ppl_before_storing": facts["val_ppl"],
                                         **{k: v for k, v in facts["quantized"].items() if k != "path"}}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", metavar="DIR", help="3-step runs into DIR (the pipeline's test)")
    parser.add_argument("--base-only", action="store_true",
                        help="steps 1 and 2 only: the tense split and the base run, into runs/21-lora/ (lab 05)")
    parser.add_argument("--timing-only", action="store_true",
                        help="measure step 4 again (the runs of step 3 must exist) and update results.json")
    args = parser.parse_args()
    root = Path(args.quick or "runs/21-lora")
    quick = args.quick is not None
    if args.timing_only:
        results = json.loads((HERE / "results.json").read_text())
        results["timing"] = step_times(root, 400)
        (HERE / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(json.dumps(results["timing"], indent=2))
        return 0
    started = time.time()
    results = {"data": make_data(root)}
    base = train(HERE / "base.yaml", root / "base", root, quick)
    if args.base_only:
        print(f"wrote {root / 'data'} and the base run {root / 'base'}: val PPL {base['val_ppl']:.3f}")
        return 0
    results["base"] = {k: base[k] for k in ("val_ppl", "val_exact_match", "wall_seconds", "peak_rss_mb")}
    results["adapt"] = adapt(root, quick)
    results["timing"] = step_times(root, 5 if quick else 200)
    results["ptq"] = ptq_table(quick, root)
    results["qat"] = qat_comparison(root, quick)
    results["total_seconds"] = round(time.time() - started, 1)
    target = root / "results.json" if quick else HERE / "results.json"
    target.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
