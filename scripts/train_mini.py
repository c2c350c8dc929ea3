"""Lab 01's entry point: train MiniGPT from a YAML config and write the run folder.

    .venv/bin/python scripts/train_mini.py --config experiments/18-train-mini/config.yaml \
        --out-dir runs/lab01 --models-dir runs/lab01/models --seed 42

A thin wrapper (lab 01, Block B): it runs exactly `minitrain train CONFIG ...` (minitrain/commands/train.py →
minitrain/training/run.py), so both give the same results. `--out-dir`, `--models-dir` and `--seed` override output.dir,
output.models_dir and training.rng_seed; `--resume` takes a run folder or a checkpoint file; `--overwrite`
replaces a run the folder already holds (without it, such a folder is refused). A mistake (bad config, missing
data file, diverged run) prints one line `error: ...` and exits non-zero, without a traceback.
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags of `argv` (default: the command line's) as a Namespace with the attributes
    `config` (str, --config, required), `out_dir` (--out-dir), `models_dir` (--models-dir), `seed` (int,
    --seed), `resume` (--resume): None when not given; `overrides` (a list of "KEY=VALUE", one per --set,
    [] by default) and `quiet` (bool, --quiet). A missing --config or a bad value exits with code 2 and a usage
    message, as argparse does."""
    parser = argparse.ArgumentParser(description="Train MiniGPT (lab 01) from a YAML config.")
    parser.add_argument("--config", required=True, help="the YAML config, e.g. experiments/18-train-mini/config.yaml")
    parser.add_argument("--out-dir", help="run folder (default: the config's output.dir, else runs/<name>)")
    parser.add_argument("--models-dir", metavar="DIR",
                        help="folder for the final model file (default: the config's output.models_dir, else models/)")
    parser.add_argument("--seed", type=int, help="training RNG seed (overrides training.rng_seed)")
    parser.add_argument("--resume", metavar="PATH", help="continue from a run folder or a checkpoint file")
    parser.add_argument("--overwrite", action="store_true",
                        help="the run folder holds another run: delete that run's files first")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="override a config value, e.g. --set optimizer.lr_max=1e-3 (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    return parser.parse_args(argv)


def to_cli_args(args: argparse.Namespace) -> list[str]:
    """The equivalent `minitrain train` command line."""
    argv = ["train", args.config]
    for override in args.overrides:
        argv += ["--set", override]
    flags = (("--out-dir", args.out_dir), ("--models-dir", args.models_dir), ("--seed", args.seed),
             ("--resume", args.resume))
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    return argv + (["--overwrite"] if args.overwrite else []) + (["--quiet"] if args.quiet else [])


def main(argv: list[str] | None = None) -> int:
    """Train from the flags in `argv` (default: the command line's); return the exit code (0: the run finished).

    Runs what `minitrain train CONFIG [flags]` runs: `minitrain.cli.main(["train", config, "--set", KEY=VALUE,
    ..., "--out-dir", DIR, ...], command=typed)` with each flag that was given, where `typed` is this command
    line as the user typed it (for instance `[sys.executable, sys.argv[0], *sys.argv[1:]]`), which a run that
    stops prints back, with `--resume`, as the way to resume it. A mistake is one `error: ...` line and a
    non-zero code, never a traceback (minitrain.cli.main sees to that).
    """
    args = parse_args(argv)
    try:
        # Loading minitrain (NumPy, the numba kernels) takes a moment; Ctrl-C then is no error to trace.
        from minitrain.cli import main as minitrain_main
        from minitrain.common.paths import recorded_path
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    typed = [recorded_path(sys.executable), recorded_path(__file__), *(sys.argv[1:] if argv is None else argv)]
    return minitrain_main(to_cli_args(args), command=typed)


if __name__ == "__main__":
    sys.exit(main())
