"""`minitrain lock CONFIG [--set k=v]... [-o FILE]`: pin the resolved config, the data files' sha256 and the
library versions, for `train --strict`."""

from __future__ import annotations

import argparse
from pathlib import Path

from minitrain.commands.common import add_set, check_files, load
from minitrain.commands.lock_file import data_files, lock_path_for, write_lock


def register(subparsers: argparse._SubParsersAction) -> None:
    lock = subparsers.add_parser("lock", help="pin the resolved config, data hashes and library versions")
    lock.add_argument("config")
    add_set(lock)
    lock.add_argument("-o", "--output", metavar="FILE", help="lock file (default: <config stem>.lock.yaml)")
    lock.set_defaults(handler=lock_command)


def lock_command(args: argparse.Namespace) -> int:
    cfg = load(args)
    check_files(cfg)
    out = Path(args.output) if args.output else lock_path_for(args.config)
    write_lock(cfg, out)
    print(f"wrote {out}: resolved config, sha256 of {len(data_files(cfg))} data files, library versions")
    return 0
