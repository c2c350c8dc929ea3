"""The `minitrain` command line: `minitrain --help` lists the commands (minitrain.commands.COMMANDS), `minitrain
COMMAND --help` one command's flags, and docs/yaml-mode.md's table says what each does.

Each command is one small file in `minitrain/commands/` (the top floor: nothing below imports it), imported only
when that command runs: `minitrain --help` lists the commands without loading any. Adding a command is one line:
write a module with a `register(parser)` function that adds its arguments (with `set_defaults(handler=...)`, a
function of the parsed arguments returning the exit code), then add its name and one-line help to
`minitrain.commands.COMMANDS`.

A UserError anywhere (a bad config, a missing file) prints `error: <message>` on stderr and exits with the
error's exit code (2 for an invalid config); no traceback. So do Ctrl-C outside training (exit 130), running out
of memory (exit 1), and an exception raised from a lab workspace's file (MINITRAIN_LAB_DIR): one line naming the
file, function and line (exit 1; minitrain/seam.py). The teaching core (autograd, nn, models, optim) knows nothing
of exit codes: it refuses a bad argument with an `ArgumentError` (a ValueError), which a config check usually
catches first; one that gets here is its `error:` line, exit code 2. Any other ValueError is a bug and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from collections.abc import Sequence

from minitrain import __version__, seam
from minitrain.commands import ALIASES, COMMANDS, RENAMED
from minitrain.common.errors import BAD_INPUT, ArgumentError, UserError
from minitrain.common.lifeline import die_with_parent_if_asked
from minitrain.common.paths import recorded_path


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; only the command `argv` names has its module imported and its arguments added
    (every command's, when argv is None), so `minitrain --help` imports no command module."""
    parser = argparse.ArgumentParser(prog="minitrain", description=(
        "Train, fine-tune, evaluate and export models from YAML configs, in NumPy on the CPU: pretrained language "
        "models (the Llama family from a Hugging Face folder, a Hub id or a GGUF file, and GPT-2), fine-tuned in "
        "full or with LoRA / QLoRA on your own text or chat records, and the course's MiniGPT and table models. "
        "A fine-tune starts with `minitrain init --base MODEL --data DIR`, then `minitrain train CONFIG`."))
    parser.add_argument("--version", action="version", version=f"minitrain {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = next((word for word in argv if not word.startswith("-")), None) if argv is not None else None
    if named in RENAMED:
        raise UserError(f"`minitrain {named}` is now `minitrain {RENAMED[named]}` (the same arguments)", BAD_INPUT)
    for name, summary in COMMANDS.items():
        aliases = [alias for alias, command in ALIASES.items() if command == name]
        command = subparsers.add_parser(name, help=summary, aliases=aliases)
        if argv is None or named in (name, *aliases):  # the top-level options take no value: this is the command
            importlib.import_module(f"minitrain.commands.{name.replace('-', '_')}").register(command)
    return parser


def _invocation(argv: Sequence[str] | None) -> list[str]:
    """The command line as typed: sys.argv for a real command line (`minitrain` when that is on PATH), else
    `minitrain ARGV` for a call from Python."""
    if argv is not None:
        return ["minitrain", *argv]
    program = sys.argv[0]
    on_path = shutil.which(os.path.basename(program))
    if on_path is not None and os.path.exists(program) and os.path.samefile(on_path, program):
        program = os.path.basename(program)  # `minitrain`, as typed with the venv active
    else:
        program = recorded_path(program)  # `.venv/bin/minitrain`
    return [program, *sys.argv[1:]]


def main(argv: Sequence[str] | None = None, *, command: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code.

    `command` is the command line the user typed (`scripts/train_mini.py` passes its own), which messages
    such as "resume with: ..." repeat; by default it is worked out from sys.argv or `argv`.
    """
    die_with_parent_if_asked()  # a `lab check` run: ends with the check, even a killed one
    try:
        words = sys.argv[1:] if argv is None else argv
        args = build_parser(words).parse_args(words)  # imports the command's module (pydantic...): Ctrl-C may land here
        args.command_line = list(command) if command is not None else _invocation(argv)
        return args.handler(args)
    except (UserError, ArgumentError) as exc:  # ArgumentError: the teaching core refused a setting (no exit codes)
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, UserError) else BAD_INPUT
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
    except Exception as exc:
        # Raised from a lab workspace's file (MINITRAIN_LAB_DIR): the student's code, one line naming where.
        line = seam.lab_error_line(exc)
        if line is None:
            raise  # a bug of the library's: its traceback
        print(f"error: {line}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
