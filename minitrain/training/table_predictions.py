"""Predictions of a trained table model for new rows (`minitrain predict RUN_DIR INPUT -o OUT`).

The model file holds the pipeline training fitted (the columns it reads, the preprocessing, the classes), so the
rows go through exactly the transform training used: a column missing, a category never seen in training or a
missing value is an error naming it. The output table has one row per input row:

    row          the input row's number (1-based, as errors count rows)
    prediction   the predicted class (with its original label: "cat", 7...) or value
    p_<class>    classification: the probability of each class (softmax of the logits)
    target       the input's own target column, when it has one (and `predict` prints the accuracy or MSE)

INPUT and OUT may be csv, parquet, jsonl, json or arrow (by extension, or `--format` for INPUT).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import DataError, UserError
from minitrain.common.io import atomic_write, atomic_write_text
from minitrain.data.formats import detect_format, pyarrow_module, read_table, table_from_rows
from minitrain.data.preprocessing import plain_value
from minitrain.data.tables import CLASSIFICATION, TablePipeline, as_model_input, columns_of
from minitrain.evaluation.table_metrics import log_softmax_rows
from minitrain.hub.run_folder import read_run
from minitrain.models.registry import build_model, model_type
from minitrain.nn import inference

BATCH_ROWS = 1024


def predict(source: str | Path, input_path: str | Path, out_path: str | Path, fmt: str | None = None) -> dict:
    """Write the predictions of the model in `source` (run folder or model file) for `input_path` to `out_path`;
    return a summary {"rows", "output", and "accuracy" or "mse" when the input has the target}."""
    info = read_run(source)
    if not info.pipeline:
        kind = model_type(info.model_config)
        raise UserError(f"predict: {info.model_path} is a {kind} language model, which reads text, not table rows; "
                        "use `minitrain sample` to continue a prompt", 2)
    pipeline = TablePipeline.from_dict(info.pipeline)
    model = build_model(info.model_config)
    model.load_state_dict(info.state, source=str(info.model_path))
    where = str(input_path)
    try:
        columns = columns_of(read_table(input_path, fmt), where)
        # The model reads ids after an embedding, else floats of its weights' dtype.
        features = as_model_input(pipeline.features_of(columns, where), next(iter(info.state.values())).dtype,
                                  model.embeds, pipeline.features, where)
        targets = pipeline.targets_of(columns[pipeline.target], where) if pipeline.target in columns else None
    except DataError as exc:
        raise UserError(exc.detail, 2) from None
    outputs = []
    with inference(model):
        for start in range(0, len(features), BATCH_ROWS):
            outputs.append(model(features[start : start + BATCH_ROWS]).data)
    outputs = np.concatenate(outputs).astype(np.float64)
    overflowed = np.flatnonzero(~np.isfinite(outputs).all(axis=1))
    if overflowed.size:  # finite features far outside the training range can still overflow inside the model
        raise UserError(f"{where}, row {overflowed[0] + 1}: the model's output overflows (its features are far "
                        "outside what it was trained on); no predictions written", 2)
    table, summary = _prediction_table(pipeline, outputs, targets, columns.get(pipeline.target))
    write_table(out_path, table)
    return {"rows": len(outputs), "output": str(out_path), **summary}


def _prediction_table(pipeline: TablePipeline, outputs: np.ndarray, targets: np.ndarray | None,
                      raw_target: np.ndarray | None) -> tuple[dict[str, list], dict[str, float]]:
    rows = {"row": list(range(1, len(outputs) + 1))}
    summary: dict[str, float] = {}
    if pipeline.task == CLASSIFICATION:
        probabilities = np.exp(log_softmax_rows(outputs))
        chosen = probabilities.argmax(axis=1)
        rows["prediction"] = [pipeline.classes[i] for i in chosen]
        for k, label in enumerate(pipeline.classes):
            rows[f"p_{label}"] = probabilities[:, k].tolist()
        if targets is not None:
            summary["accuracy"] = float(np.mean(chosen == targets))
    else:
        rows["prediction"] = outputs[:, 0].tolist() if outputs.shape[1] == 1 else outputs.tolist()
        if targets is not None:
            summary["mse"] = float(np.mean((outputs - targets) ** 2))
    if raw_target is not None:
        rows["target"] = [plain_value(v) for v in raw_target]
    return rows, summary


def write_table(path: str | Path, columns: dict[str, list]) -> None:
    """Write `columns` as the format `path`'s extension names (csv, parquet, jsonl, json, arrow), atomically."""
    path = Path(path)
    fmt = detect_format(path)
    pa = pyarrow_module()
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    if fmt in ("jsonl", "json"):
        import json

        lines = [json.dumps(row, ensure_ascii=False) for row in rows]
        atomic_write_text(path, ("\n".join(lines) + "\n") if fmt == "jsonl" else "[\n" + ",\n".join(lines) + "\n]\n")
        return
    table = table_from_rows(rows, str(path), pa)
    if fmt == "csv":
        import pyarrow.csv

        atomic_write(path, lambda f: pyarrow.csv.write_csv(table, f))
    elif fmt == "parquet":
        import pyarrow.parquet

        atomic_write(path, lambda f: pyarrow.parquet.write_table(table, f))
    elif fmt == "arrow":
        import pyarrow.ipc

        def write(f: Any) -> None:
            with pyarrow.ipc.new_file(f, table.schema) as writer:
                writer.write_table(table)

        atomic_write(path, write)
    else:
        raise UserError(f"{path}: predictions are written as csv, parquet, jsonl, json or arrow, not {fmt}", 2)
