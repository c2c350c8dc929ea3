"""`minitrain lock CONFIG [--set k=v]... [-o FILE|-] [--force]`: pin the resolved config, the data files' sha256
and the library versions, for `train --strict`.

The lock goes to `<config stem>.lock.yaml` beside the config, to FILE, or (`-o -`) to stdout, which then holds the
lock and nothing else (`minitrain lock c.yaml -o - > c.lock.yaml`). It never replaces the config it reads, and it
replaces another file only when that file is an earlier lock (re-locking refreshes it), is empty (what a shell's
`> FILE` leaves) or `--force` says so: a config written over by mistake is lost with its comments and templates."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minitrain.commands.common import add_set, check_files, load
from minitrain.commands.lock_file import data_files, lock_contents, lock_path_for, lock_text, write_lock
from minitrain.common.errors import UserError
from minitrain.common.io import check_output
from minitrain.config.loader import is_lock
from minitrain.config.yaml_lines import load_yaml_file

STDOUT = "-"


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config")
    add_set(parser)
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="lock file (default: <config stem>.lock.yaml; -: print it to stdout)")
    parser.add_argument("--force", action="store_true", help="replace FILE even if it holds something else")
    parser.set_defaults(handler=lock_command)


def lock_command(args: argparse.Namespace) -> int:
    out = Path(args.output) if args.output else lock_path_for(args.config)
    if args.output != STDOUT:
        check_target(Path(args.config), out, force=args.force)
    cfg = load(args)
    check_files(cfg)
    if args.output == STDOUT:
        sys.stdout.write(lock_text(lock_contents(cfg)))
        return 0
    write_lock(cfg, out)
    print(f"wrote {out}: resolved config, sha256 of {len(data_files(cfg))} data files, library versions",
          file=sys.stderr)  # stdout stays clean for `lock CONFIG > FILE` scripts
    return 0


def check_target(config: Path, out: Path, *, force: bool) -> None:
    """Refuse (exit 2) a lock over its own config, whatever --force says; over a file that is neither an earlier
    lock nor empty, unless `force`; and a path through a file."""
    existing = out.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # the folders missing below it are made by the write
    if not existing.is_dir():
        raise UserError(f"-o {out}: {existing} exists and is not a folder", 2)
    check_output(out, [config], force=force, flag="lock -o", ours=_holds_a_lock)


def _holds_a_lock(path: Path) -> bool:
    try:
        return is_lock(load_yaml_file(path, "lock file"))
    except UserError:  # unreadable or not YAML: not a lock
        return False
