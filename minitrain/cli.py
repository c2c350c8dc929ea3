"""The `minitrain` command line.

    minitrain train CONFIG [--set key=value ...] [--out-dir DIR] [--models-dir DIR] [--seed N] [--resume PATH]
                           [--dry-run] [--strict] [--quiet]
    minitrain validate CONFIG          minitrain schema
    minitrain init [--template minimal|lab01] [--base PATH|user/repo] [--method full|lora|qlora] [--data DIR]
                   [-o FILE]
    minitrain lock CONFIG              minitrain info RUN_DIR
    minitrain export SOURCE OUT_DIR    minitrain publish --repo user/name [RUN_DIR] [--merge-adapters]
    minitrain sample SOURCE --prompt TEXT
    minitrain merge LORA_RUN OUT_DIR   minitrain quantize SOURCE OUT --bits 8|4|2 [...]

Each command is one small file in `minitrain/commands/` (the top floor: nothing below imports it). Adding a
command is one line: write a module with a `register(subparsers)` function that adds its subcommand (with
`set_defaults(handler=...)`, a function of the parsed arguments returning the exit code), then add its name to
`minitrain.commands.COMMANDS`.

A UserError anywhere (a bad config, a missing file) prints `error: <message>` on stderr and exits with the
error's exit code (2 for an invalid config); no traceback. So do Ctrl-C outside training (exit 130) and running
out of memory (exit 1).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from minitrain import __version__
from minitrain.commands import COMMANDS
from minitrain.errors import UserError

COMMAND_MODULES = [f"minitrain.commands.{name}" for name in COMMANDS]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minitrain", description="Train and inspect MiniGPT from YAML configs.")
    parser.add_argument("--version", action="version", version=f"minitrain {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    try:
        args = build_parser().parse_args(argv)  # imports the command modules (pydantic...): Ctrl-C may land here
        return args.handler(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except MemoryError as exc:
        # A model or batch too large for this machine is a setting the user can change, not a bug to trace.
        detail = f" ({exc})" if str(exc) else ""
        print(f"error: out of memory{detail}; make the model (model.*) or the batch (training.batch_size) smaller",
              file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`minitrain schema | head`); stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
