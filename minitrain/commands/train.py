"""`minitrain train CONFIG [--set k=v]... [--out-dir] [--models-dir] [--seed] [--resume] [--overwrite] [--dry-run]
[--strict] [--quiet | --tui] [--address]`: validate, check the data, then train into a run folder
(minitrain.training.run) and publish if asked."""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path

from minitrain import seam
from minitrain.commands.common import add_set, check_files, load
from minitrain.commands.lock_file import check_strict, lock_path_for
from minitrain.common.errors import UserError
from minitrain.config.loader import is_lock
from minitrain.config.schema import Config
from minitrain.config.yaml_lines import load_yaml_file


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?",
                        help="config YAML (or a lock file written by `minitrain lock`); left out with --resume RUN, "
                             "the run's recorded config.resolved.yaml")
    add_set(parser)
    parser.add_argument("--out-dir", help="run folder (overrides output.dir)")
    parser.add_argument("--models-dir", metavar="DIR",
                        help="folder for the final model file (overrides output.models_dir)")
    parser.add_argument("--seed", type=int, help="training RNG seed (overrides training.rng_seed)")
    parser.add_argument("--resume", metavar="PATH", help="a run folder or checkpoint to continue from")
    parser.add_argument("--overwrite", action="store_true",
                        help="the run folder holds another run: delete that run's files first")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    parser.add_argument("--strict", action="store_true", help="refuse to run if the lock file does not match")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--quiet", action="store_true", help="no progress display")
    shown.add_argument("--tui", action="store_true",
                       help="a live dashboard (`minitrain watch`'s) instead of the progress display (minitrain[tui])")
    parser.add_argument("--address", dest="data_parallel_address", metavar="ADDRESS",
                        help="the Ray cluster data-parallel workers run on (auto, ray://head:10001): sets "
                             "runtime.data_parallel.address and backend ray")
    parser.add_argument("--devices", metavar="IDS", help="the spec's GPU list: refused, minitrain trains on one CPU")
    parser.set_defaults(handler=train_command)


def _lock_file_for(config_path: str) -> Path:
    # A lock file given as CONFIG is its own lock; a plain config's lock sits beside it.
    return Path(config_path) if is_lock(load_yaml_file(config_path)) else lock_path_for(config_path)


def train_command(args: argparse.Namespace) -> int:
    if args.devices is not None:
        raise UserError(f"--devices {args.devices}: minitrain trains in one process on the CPU with NumPy; for "
                        "GPUs, `minitrain export` the model to a Hugging Face folder and train it with PyTorch", 2)
    problem = seam.check_lab_dir()
    if problem:
        raise UserError(problem, 2)
    _resume_in_its_folder(args)
    cfg = load(args)
    if args.dry_run:  # what it does before each slow part, as it goes (minitrain.training.plan)
        print("dry run: checking the data", file=sys.stderr, flush=True)
    summary = check_files(cfg)  # before the other checks; the run reuses it rather than reading the data again
    if args.strict:
        check_strict(cfg, _lock_file_for(args.config))
    from minitrain.training.plan import plan_run  # the engine loads numba kernels: import it only to train
    from minitrain.training.run import run_training

    if args.dry_run:
        print(format_plan(plan_run(cfg, summary)))
        return 0
    if seam.replaced():
        print(f"training with your lab files from {seam.lab_dir()}: {', '.join(seam.replaced())}", file=sys.stderr)
    if cfg.publish is not None:
        _warn_if_no_token(cfg.publish.repo)
    # A run that diverges, is interrupted or is halted raises a UserError here, so it never reaches publishing.
    with _dashboard(cfg) if args.tui else nullcontext():
        results = run_training(
            cfg, cfg.output.dir, resume=args.resume, overwrite=args.overwrite,
            progress=not (args.quiet or args.tui), strict=args.strict, config_path=args.config,
            overrides=cfg.source.overrides, summary=summary,
            command=_without_resume(getattr(args, "command_line", None)),
        )
    print(f"run folder: {cfg.output.dir}")
    for key, value in results.items():
        if not isinstance(value, dict | list):
            print(f"  {key}: {value}")
    for key, mean in results.get("mean", {}).items():  # a cross-validation: each metric over the folds
        print(f"  {key}: {mean:.4f} ± {results['std'][key]:.4f}")
    if cfg.output.model_format == "gguf":
        _write_gguf(cfg, results)
    from minitrain.hub.final_model import is_spec_run_dir, write_final_model  # the publish spec's ./output files

    if is_spec_run_dir(cfg.output.dir):
        print("\n".join(f"  saved: {path}" for path in write_final_model(cfg.output.dir)))
    if cfg.publish is not None:
        _publish_run(cfg, results["status"], quiet=args.quiet)
    return 0


def _dashboard(cfg: Config):
    """--tui: the dashboard of the run folder, drawn on a thread that only reads the run's files."""
    from minitrain.monitor.dashboard import live_dashboard

    return live_dashboard(cfg.output.dir, cfg.monitoring.dashboard)


def _resume_in_its_folder(args: argparse.Namespace) -> None:
    """`--resume RUN` continues the run in its folder (unless --out-dir says another), with the config it recorded
    when no CONFIG is given."""
    if args.resume is None:
        if args.config is None:
            raise UserError("train needs a CONFIG, or --resume RUN to continue a run with its recorded config", 2)
        return
    if not Path(args.resume).exists():
        raise UserError(f"--resume {args.resume}: no such run folder or checkpoint", 2)
    from minitrain.training.resume import recorded_run, run_dir_of

    folder = Path(args.resume) if Path(args.resume).is_dir() else run_dir_of(Path(args.resume))
    if args.config is None:
        folder, config = recorded_run(args.resume)
        args.config = str(config)
    if args.out_dir is None and folder is not None:
        args.out_dir = str(folder)


def _without_resume(command: list[str] | None) -> list[str] | None:
    """The command line without its `--resume PATH` (a stopped run's message adds the checkpoint to resume) and
    without `--overwrite` (continuing a run in its folder must not clear it)."""
    if command is None:
        return None
    kept, skip = [], False
    for word in command:
        if skip:
            skip = False
        elif word == "--resume":
            skip = True
        elif not word.startswith("--resume=") and word != "--overwrite":
            kept.append(word)
    return kept


def _warn_if_no_token(repo: str) -> None:
    # Say it before training rather than only after it: the user can still log in while the run trains.
    from minitrain.hub.upload import missing_token

    problem = missing_token(repo)
    if problem:
        print(f"warning: {problem}. Training goes ahead, but publishing after it fails unless a token is set by "
              "then", file=sys.stderr)


def _publish_run(cfg: Config, status: str, quiet: bool) -> None:
    """The config's `publish:` section, after a finished run. A failure to publish leaves the run folder as
    training completed it; the error says how to publish it later."""
    from minitrain.hub.upload import maybe_publish_after_training  # the Hub client is only needed here

    try:
        maybe_publish_after_training(cfg, cfg.output.dir, status, quiet=quiet)
    except UserError as exc:
        flags = {"--private": cfg.publish.private, "--merge-adapters": cfg.publish.merge_adapters,
                 "--no-model-card": not cfg.publish.model_card}
        later = " ".join(["minitrain publish --repo", cfg.publish.repo, *(f for f, on in flags.items() if on),
                          str(cfg.output.dir)])
        raise UserError(f"{exc}. Training finished and its run folder {cfg.output.dir} is complete; publish it "
                        f"later with: {later}", exc.exit_code) from None


def _write_gguf(cfg: Config, results: dict) -> None:
    """`output.model_format: gguf`: the final model as a GGUF too. A failure leaves the run folder complete."""
    from minitrain.hub.export_gguf import gguf_after_training

    try:
        path = gguf_after_training(cfg.output.dir, results, cfg.output.gguf_dtype)
    except UserError as exc:
        later = f"minitrain export {cfg.output.dir} OUT.gguf --format gguf --dtype {cfg.output.gguf_dtype}"
        raise UserError(f"{exc}. Training finished and its run folder {cfg.output.dir} is complete; write the GGUF "
                        f"later with: {later}", exc.exit_code) from None
    print(f"  gguf: {path}" if path else "  gguf: not written (the run has no final model)")


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
