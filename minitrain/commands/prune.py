"""`minitrain prune SOURCE OUT --method magnitude|wanda --sparsity S [--force] [--structure unstructured|2:4]
[--exclude NAME ...] [--calibration FILE] [--calibration-samples N]`: zero the least important share of a trained
model's linear weights, write the pruned model file and score it on the run's val split against the dense model
(minitrain/training/prune_run.py)."""

from __future__ import annotations

import argparse

from minitrain.commands.common import percent, positive_int, read_from
from minitrain.common.errors import UserError
from minitrain.common.io import check_output
from minitrain.pruning.masks import STRUCTURES, TWO_FOUR
from minitrain.pruning.scores import METHODS

DEFAULT_CALIBRATION_SAMPLES = 128  # Wanda's paper calibrates with 128 sequences


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run folder or model file")
    parser.add_argument("out", help="the pruned model file to write (.safetensors)")
    parser.add_argument("--method", choices=METHODS, required=True,
                        help="magnitude: |W| per layer; wanda: |W|·‖X‖ per output, X from calibration records")
    parser.add_argument("--sparsity", type=float, default=None,
                        help="the share of each layer's weights set to zero, in [0, 1) (2:4: 0.5, the default)")
    parser.add_argument("--structure", choices=STRUCTURES, default="unstructured",
                        help="2:4: 2 of every 4 consecutive inputs kept")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="NAME", help="linear layers left dense")
    parser.add_argument("--calibration", metavar="FILE", help="wanda: records to read the inputs from (default: the "
                                                              "run's training split)")
    parser.add_argument("--calibration-samples", type=positive_int, default=None, metavar="N",
                        help="wanda: records drawn (seeded) from the calibration data (default 128)")
    parser.add_argument("--vocab", help="vocab.json, when the source does not record it")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists (never the input)")
    parser.set_defaults(handler=prune_command)


def prune_command(args: argparse.Namespace) -> int:
    from minitrain.training.prune_run import prune_run

    sparsity = args.sparsity
    if args.structure == TWO_FOUR:
        if sparsity not in (None, 0.5):
            raise UserError(f"--structure 2:4 prunes exactly 0.5 of each layer; leave --sparsity {sparsity} out", 2)
        sparsity = 0.5
    elif sparsity is None:
        raise UserError("--sparsity is needed with --structure unstructured (e.g. --sparsity 0.5)", 2)
    if not 0 <= sparsity < 1:
        raise UserError(f"--sparsity must be in [0, 1), got {sparsity}", 2)
    if args.method == "magnitude" and (args.calibration, args.calibration_samples) != (None, None):
        raise UserError("--calibration: magnitude pruning reads the weights alone; calibration records are for "
                        "--method wanda", 2)
    check_output(args.out, read_from(args.source, args.vocab, args.calibration), force=args.force, flag="prune OUT",
                 suffix=".safetensors")
    row = prune_run(args.source, args.out, args.method, sparsity, args.structure, args.exclude,
                    args.calibration_samples or DEFAULT_CALIBRATION_SAMPLES, args.calibration, args.vocab)
    print(format_row(row))
    print(f"wrote {args.out}")
    return 0


def format_row(row: dict) -> str:
    """What `prune` prints: val PPL and exact match, dense against pruned, then each layer's zeros."""
    name = f"{row['method']} {row['structure']} {100 * row['sparsity']:g} %"
    lines = [f"{'':32}{'val PPL':>10}{'exact match':>13}",
             f"{'dense':32}{row['dense_val_ppl']:>10.3f}{percent(row['dense_val_exact_match']):>13}",
             f"{name:32}{row['val_ppl']:>10.3f}{percent(row['val_exact_match']):>13}",
             f"{'layer':32}{'zeros':>10}{'of':>9}{'sparsity':>10}"]
    for path, layer in row["layers"].items():
        lines.append(f"{path:32}{layer['zeros']:>10,}{layer['size']:>9,}{100 * layer['sparsity']:>9.2f}%")
    return "\n".join(lines)
