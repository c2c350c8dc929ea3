"""`minitrain schema`: the config's JSON Schema, for editor autocompletion."""

from __future__ import annotations

import argparse
import json

from minitrain.config.schema import Config
from minitrain.config.spec_shape import json_schema


def register(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=schema_command)


def schema_command(args: argparse.Namespace) -> int:
    """The one schema's JSON Schema, lab 01's keys and the spec's side by side."""
    print(json.dumps(json_schema(Config.model_json_schema()), indent=2, ensure_ascii=False))
    return 0
