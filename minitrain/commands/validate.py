"""`minitrain validate CONFIG [--set k=v]... [--no-data]`: every check `train` makes before training, and a
checklist of what passed."""

from __future__ import annotations

import argparse

from minitrain.commands.common import add_set, load
from minitrain.config.datacheck import DataSummary, check_data
from minitrain.config.rules import RULES
from minitrain.config.schema import Config


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser("validate", help="check a config (and its data) and print a checklist")
    validate.add_argument("config")
    add_set(validate)
    validate.add_argument("--no-data", action="store_true", help="skip the checks that read the data files")
    validate.set_defaults(handler=validate_command)


def validate_command(args: argparse.Namespace) -> int:
    cfg = load(args)
    summary = None if args.no_data else check_data(cfg)
    print(checklist(cfg, summary))
    return 0


def checklist(cfg: Config, summary: DataSummary | None) -> str:
    """The ✓ list `minitrain validate` prints for a valid config."""
    source = cfg.source
    n_lines = len(source.text.splitlines()) if source and source.text else 0
    steps = cfg.total_steps or (f"{cfg.training.epochs} epoch(s)" if cfg.training.epochs else cfg.training.duration)
    lines = [
        f"✓ YAML read safely: {source.path if source else 'config'} ({n_lines} lines)",
        "✓ every key known; types and ranges valid",
        f"✓ {len(RULES)} cross-field rules pass",
        "✓ templates rendered" + (f"; overrides: {', '.join(source.overrides)}" if source and source.overrides else ""),
    ]
    if summary is None:
        lines.append("– data files not checked (--no-data)")
    else:
        counts = ", ".join(f"{split} {n} records" for split, n in summary.records.items())
        lines += [
            f"✓ data: {counts}",
            f"✓ tokenizer {summary.tokenizer_size} ids ≤ vocab_size {cfg.model.vocab_size}; longest record "
            f"{summary.longest_input} positions ≤ max_seq_len {cfg.model.max_seq_len}",
        ]
    opt = cfg.optimizer
    lines.append(
        f"✓ run: {steps} steps of batch {cfg.training.batch_size} × {cfg.training.grad_accumulation}, "
        f"{opt.type} lr {opt.lr_max:g} → {opt.lr_min:g} ({cfg.scheduler.type}), output {cfg.output.dir}"
    )
    return "\n".join(lines) + "\nconfig is valid."
