"""The YAML-mode commands of `minitrain`: train, validate, schema, init, lock, info.

Each handler parses nothing itself (argparse did) and does little itself: it calls the config loader, the data
checks, the lock helpers or the training engine (`minitrain.run`). Every user mistake surfaces as a UserError,
which `minitrain.cli.main` prints without a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from minitrain.config.datacheck import DataSummary, check_data
from minitrain.config.init_template import DEFAULT_DATA, TEMPLATES, init_config
from minitrain.config.loader import is_lock, load_config
from minitrain.config.lock import check_strict, data_files, lock_path_for, write_lock
from minitrain.config.rules import RULES
from minitrain.config.schema import Config
from minitrain.errors import UserError
from minitrain.io import atomic_write_text
from minitrain.monitor.summary import run_summary


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add train, validate, schema, init, lock and info to the `minitrain` parser."""
    train = subparsers.add_parser("train", help="train from a YAML config")
    train.add_argument("config", help="config YAML (or a lock file written by `minitrain lock`)")
    _add_set(train)
    train.add_argument("--out-dir", help="run folder (overrides output.dir)")
    train.add_argument("--models-dir", metavar="DIR",
                       help="folder for the final model file (overrides output.models_dir)")
    train.add_argument("--seed", type=int, help="training RNG seed (overrides training.rng_seed)")
    train.add_argument("--resume", metavar="PATH", help="a run folder or checkpoint to continue from")
    train.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    train.add_argument("--strict", action="store_true", help="refuse to run if the lock file does not match")
    train.add_argument("--quiet", action="store_true", help="no progress display")
    train.set_defaults(handler=train_command)

    validate = subparsers.add_parser("validate", help="check a config (and its data) and print a checklist")
    validate.add_argument("config")
    _add_set(validate)
    validate.add_argument("--no-data", action="store_true", help="skip the checks that read the data files")
    validate.set_defaults(handler=validate_command)

    schema = subparsers.add_parser("schema", help="print the config's JSON Schema (for editor autocompletion)")
    schema.set_defaults(handler=schema_command)

    init = subparsers.add_parser("init", help="write a config for a data folder")
    init.add_argument("--template", choices=TEMPLATES, default="minimal")
    init.add_argument("--data", default=DEFAULT_DATA, metavar="DIR", help=f"data folder (default {DEFAULT_DATA})")
    init.add_argument("--base", metavar="PATH|user/repo",
                      help="start from this model: its shape fills the model section, its weights model.init_from")
    init.add_argument("-o", "--output", metavar="FILE", help="write here instead of printing")
    init.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    init.set_defaults(handler=init_command)

    lock = subparsers.add_parser("lock", help="pin the resolved config, data hashes and library versions")
    lock.add_argument("config")
    _add_set(lock)
    lock.add_argument("-o", "--output", metavar="FILE", help="lock file (default: <config stem>.lock.yaml)")
    lock.set_defaults(handler=lock_command)

    info = subparsers.add_parser("info", help="summarise a run folder")
    info.add_argument("run_dir")
    info.set_defaults(handler=info_command)


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
        help="override a config value, e.g. --set optimizer.lr_max=1e-3 (repeatable; VALUE is read as YAML)",
    )


def _load(args: argparse.Namespace) -> Config:
    values = {}
    if getattr(args, "seed", None) is not None:
        values["training.rng_seed"] = args.seed
    if getattr(args, "out_dir", None) is not None:
        values["output.dir"] = args.out_dir
    if getattr(args, "models_dir", None) is not None:
        values["output.models_dir"] = args.models_dir
    return load_config(args.config, args.overrides, values=values)


def _lock_file_for(config_path: str) -> Path:
    # A lock file given as CONFIG is its own lock; a plain config's lock sits beside it.
    text = Path(config_path).read_text(encoding="utf-8")
    return Path(config_path) if is_lock(yaml.safe_load(text)) else lock_path_for(config_path)


def train_command(args: argparse.Namespace) -> int:
    cfg = _load(args)
    summary = check_data(cfg)  # before the other checks; the run reuses it rather than reading the data again
    if args.strict:
        check_strict(cfg, _lock_file_for(args.config))
    if args.resume is not None and not Path(args.resume).exists():
        raise UserError(f"--resume {args.resume}: no such run folder or checkpoint", 2)
    from minitrain.run import plan_run, run_training  # the engine loads numba kernels: import it only to train

    if args.dry_run:
        print(format_plan(plan_run(cfg, summary)))
        return 0
    if cfg.publish is not None:
        _warn_if_no_token(cfg.publish.repo)
    # A run that diverges, is interrupted or is halted raises a UserError here, so it never reaches publishing.
    results = run_training(
        cfg, cfg.output.dir, resume=args.resume, progress=not args.quiet, strict=args.strict,
        config_path=args.config, overrides=cfg.source.overrides, summary=summary,
    )
    print(f"run folder: {cfg.output.dir}")
    for key, value in results.items():
        if not isinstance(value, dict | list):
            print(f"  {key}: {value}")
    if cfg.publish is not None:
        _publish_run(cfg, results["status"])
    return 0


def _warn_if_no_token(repo: str) -> None:
    # Say it before training rather than only after it: the user can still log in while the run trains.
    from minitrain.hub.publish import missing_token

    problem = missing_token(repo)
    if problem:
        print(f"warning: {problem}. Training goes ahead, but publishing after it fails unless a token is set by "
              "then", file=sys.stderr)


def _publish_run(cfg: Config, status: str) -> None:
    """The config's `publish:` section, after a finished run. A failure to publish leaves the run folder as
    training completed it; the error says how to publish it later."""
    from minitrain.hub.publish import maybe_publish_after_training  # the Hub client is only needed here

    try:
        maybe_publish_after_training(cfg, cfg.output.dir, status)
    except UserError as exc:
        later = f"minitrain publish --repo {cfg.publish.repo} {cfg.output.dir}"
        raise UserError(f"{exc}. Training finished and its run folder {cfg.output.dir} is complete; publish it "
                        f"later with: {later}", exc.exit_code) from None


def format_plan(plan: dict) -> str:
    """The dry-run plan, one `key: value` per line, nested dicts indented."""
    lines = ["dry run (nothing written):"]
    for key, value in plan.items():
        if isinstance(value, dict):
            lines.append(f"  {key}:")
            lines += [f"    {k}: {v}" for k, v in value.items()]
        else:
            lines.append(f"  {key}: {value}")
    return "\n".join(lines)


def validate_command(args: argparse.Namespace) -> int:
    cfg = _load(args)
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


def schema_command(args: argparse.Namespace) -> int:
    print(json.dumps(Config.model_json_schema(), indent=2, ensure_ascii=False))
    return 0


def init_command(args: argparse.Namespace) -> int:
    out = Path(args.output) if args.output else None
    if out is not None and out.exists() and not args.force:
        raise UserError(f"{out} exists; pass --force to overwrite it", 2)
    text = init_config(args.template, args.data, out.name if out else "config.yaml", base=args.base)
    if out is None:
        print(text, end="")
    else:
        atomic_write_text(out, text)
        print(f"wrote {out}; next: minitrain validate {out}")
    return 0


def lock_command(args: argparse.Namespace) -> int:
    cfg = _load(args)
    check_data(cfg)
    out = Path(args.output) if args.output else lock_path_for(args.config)
    write_lock(cfg, out)
    print(f"wrote {out}: resolved config, sha256 of {len(data_files(cfg))} data files, library versions")
    return 0


def info_command(args: argparse.Namespace) -> int:
    print(run_summary(args.run_dir))
    return 0
