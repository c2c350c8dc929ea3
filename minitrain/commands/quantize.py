"""`minitrain quantize SOURCE OUT --bits 8|4|2 [--force] [--scheme ...] [--granularity ...] [--group-size N]
[--exclude NAME ...] [--calibration-samples N --method minmax|percentile|mse --percentile P]`: a trained model's
linear weights in integers, written to OUT and scored on the run's val split against float32
(minitrain/training/ptq.py)."""

from __future__ import annotations

import argparse

from minitrain.commands.common import percent, positive_int, read_from
from minitrain.common.errors import UserError
from minitrain.common.io import check_output
from minitrain.quant.scheme import BITS, GRANULARITIES, METHODS, SCHEMES, Scheme


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run folder or model file")
    parser.add_argument("out", help="the quantized model file to write (.safetensors)")
    parser.add_argument("--bits", type=int, choices=BITS, required=True)
    parser.add_argument("--scheme", choices=SCHEMES, default="symmetric")
    parser.add_argument("--granularity", choices=GRANULARITIES, default="per_channel")
    parser.add_argument("--group-size", type=positive_int, default=None, help="per_group: inputs per scale")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="NAME", help="linear layers kept in float32")
    parser.add_argument("--calibration-samples", type=int, default=0, metavar="N",
                        help="training records whose inputs weigh the mse method's error")
    parser.add_argument("--method", choices=METHODS, default="minmax", help="how each unit's range is chosen")
    parser.add_argument("--percentile", type=float, default=99.99, help="percentile method: the range's percentile")
    parser.add_argument("--vocab", help="vocab.json, when the source does not record it")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists (never the input)")
    parser.set_defaults(handler=quantize_command)


def quantize_command(args: argparse.Namespace) -> int:
    from minitrain.training.ptq import quantize_run

    if args.granularity == "per_group" and args.group_size is None:
        raise UserError("--granularity per_group needs --group-size", 2)
    if args.calibration_samples and args.method != "mse":
        raise UserError(f"--calibration-samples: method {args.method} reads the weights alone; samples weigh the "
                        "error of --method mse", 2)
    if args.calibration_samples < 0:
        raise UserError("--calibration-samples must be >= 0", 2)
    try:
        scheme = Scheme(args.bits, args.scheme, args.granularity, args.group_size, args.method, args.percentile)
    except ValueError as e:
        raise UserError(f"quantize: {e}", 2) from None
    check_output(args.out, read_from(args.source, args.vocab), force=args.force, flag="quantize OUT",
                 suffix=".safetensors")
    row = quantize_run(args.source, args.out, scheme, args.exclude, args.calibration_samples, args.vocab)
    print(format_row(row))
    print(f"wrote {args.out}")
    return 0


def format_row(row: dict) -> str:
    """The comparison `quantize` prints: size, val PPL and exact match, float32 against the quantized file."""
    name = f"int{row['bits']} {row['scheme']} {row['granularity']}" + (
        f" (group {row['group_size']})" if "group_size" in row else "")
    return "\n".join([
        f"{'':28}{'bytes':>10}{'val PPL':>10}{'exact match':>13}",
        f"{'float32':28}{row['float32_bytes']:>10,}{row['float32_val_ppl']:>10.3f}{percent(row['float32_val_exact_match']):>13}",
        f"{name:28}{row['file_bytes']:>10,}{row['val_ppl']:>10.3f}{percent(row['val_exact_match']):>13}",
    ])
