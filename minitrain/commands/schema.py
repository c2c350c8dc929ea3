"""`minitrain schema`: the config's JSON Schema, for editor autocompletion."""

from __future__ import annotations

import argparse
import json

from minitrain.config.schema import Config


def register(subparsers: argparse._SubParsersAction) -> None:
    schema = subparsers.add_parser("schema", help="print the config's JSON Schema (for editor autocompletion)")
    schema.set_defaults(handler=schema_command)


def schema_command(args: argparse.Namespace) -> int:
    print(json.dumps(Config.model_json_schema(), indent=2, ensure_ascii=False))
    return 0
