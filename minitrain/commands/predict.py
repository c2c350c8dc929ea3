"""`minitrain predict SOURCE INPUT -o OUT [--format F] [--force]`: a table model's predictions (and class probabilities)
for the rows of INPUT, with the preprocessing training fitted (minitrain/training/table_predictions.py)."""

from __future__ import annotations

import argparse

from minitrain.commands.common import read_from
from minitrain.common.io import check_output


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run folder or model file of a model.type sequential run")
    parser.add_argument("input", help="rows to predict: csv, parquet, jsonl, json or arrow")
    parser.add_argument("-o", "--output", required=True, help="where to write the predictions (same formats)")
    parser.add_argument("--format", choices=["csv", "parquet", "jsonl", "json", "arrow"],
                        help="INPUT's format, when its extension does not say")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists (never the input)")
    parser.set_defaults(handler=predict_command)


def predict_command(args: argparse.Namespace) -> int:
    from minitrain.training.table_predictions import predict

    check_output(args.output, read_from(args.source, args.input), force=args.force, flag="predict -o")
    summary = predict(args.source, args.input, args.output, args.format)
    scores = "".join(f", {key} {value:.4f}" for key, value in summary.items() if key not in ("rows", "output"))
    print(f"{summary['rows']} predictions written to {summary['output']}{scores}")
    return 0
