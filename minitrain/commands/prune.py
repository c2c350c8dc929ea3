"""`minitrain prune SOURCE OUT --method magnitude|wanda|sparsegpt|lottery --sparsity S [--force]
[--structure unstructured|2:4] [--exclude NAME ...] [--calibration FILE] [--calibration-samples N] [--rounds R]
[--rewind-step K]`: zero the least important share of a trained model's linear weights (the lottery ticket:
over R rounds of retraining), write the pruned model file and score it on the run's val split against the dense
model (minitrain/training/prune_run.py)."""

from __future__ import annotations

import argparse

from minitrain.commands.common import percent, positive_int, read_from
from minitrain.common.errors import UserError
from minitrain.common.io import check_output
from minitrain.pruning.masks import STRUCTURES, TWO_FOUR
from minitrain.pruning.scores import METHODS

DEFAULT_CALIBRATION_SAMPLES = 128  # Wanda's and SparseGPT's papers calibrate with 128 sequences
DEFAULT_ROUNDS = 3


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run folder or model file")
    parser.add_argument("out", help="the pruned model file to write (.safetensors)")
    parser.add_argument("--method", choices=METHODS, required=True,
                        help="magnitude: |W| per layer; wanda: |W|·‖X‖ per output, X from calibration records; "
                             "sparsegpt: OBS updates with XᵀX; lottery: magnitude over rounds of retraining")
    parser.add_argument("--sparsity", type=float, default=None,
                        help="the share of each layer's weights set to zero, in [0, 1) (2:4: 0.5, the default)")
    parser.add_argument("--structure", choices=STRUCTURES, default="unstructured",
                        help="2:4: 2 of every 4 consecutive inputs kept")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="NAME", help="linear layers left dense")
    parser.add_argument("--calibration", metavar="FILE", help="wanda: records to read the inputs from (default: the "
                                                              "run's training split)")
    parser.add_argument("--calibration-samples", type=positive_int, default=None, metavar="N",
                        help="wanda: records drawn (seeded) from the calibration data (default 128)")
    parser.add_argument("--rounds", type=positive_int, default=None, metavar="R",
                        help="lottery: rounds of pruning and retraining (default 3)")
    parser.add_argument("--rewind-step", type=int, default=None, metavar="K",
                        help="lottery: the step whose checkpoint the kept weights rewind to (default: warm-up steps)")
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
    method = METHODS[args.method]
    if not method.calibrated and (args.calibration, args.calibration_samples) != (None, None):
        raise UserError(f"--calibration: {args.method} pruning reads the weights alone; calibration records are for "
                        f"--method {' or '.join(name for name in METHODS if METHODS[name].calibrated)}", 2)
    if not method.retrains and (args.rounds, args.rewind_step) != (None, None):
        raise UserError(f"--rounds and --rewind-step are the lottery ticket's; --method {args.method} prunes once", 2)
    if method.retrains and args.structure != "unstructured":
        raise UserError(f"--method {args.method} prunes unstructured (by |W| per layer); leave --structure out", 2)
    check_output(args.out, read_from(args.source, args.vocab, args.calibration), force=args.force, flag="prune OUT",
                 suffix=".safetensors")
    row = prune_run(args.source, args.out, args.method, sparsity, args.structure, args.exclude,
                    args.calibration_samples or DEFAULT_CALIBRATION_SAMPLES, args.calibration, args.vocab,
                    args.rounds or DEFAULT_ROUNDS, args.rewind_step)
    print(format_row(row))
    print(f"wrote {args.out}")
    return 0


def format_row(row: dict) -> str:
    """What `prune` prints: val PPL and exact match, dense against pruned (and each lottery round's), then each
    layer's zeros."""
    name = f"{row['method']} {row['structure']} {100 * row['sparsity']:g} %"
    scored = lambda label, ppl, exact: f"{label:32}{ppl:>10.3f}{percent(exact):>13}"  # noqa: E731
    lines = [f"{'':32}{'val PPL':>10}{'exact match':>13}",
             scored("dense", row["dense_val_ppl"], row["dense_val_exact_match"]),
             *(scored(f"round {r['round']}: {100 * r['sparsity']:.1f} %", r["val_ppl"], r["val_exact_match"])
               for r in row.get("rounds", [])[:-1]),  # the lottery's rounds before the last
             scored(name, row["val_ppl"], row["val_exact_match"]),
             f"{'layer':32}{'zeros':>10}{'of':>9}{'sparsity':>10}"]
    for path, layer in row["layers"].items():
        lines.append(f"{path:32}{layer['zeros']:>10,}{layer['size']:>9,}{100 * layer['sparsity']:>9.2f}%")
    return "\n".join(lines)
