"""`minitrain merge CONFIG.yaml -o OUT [--force]`: merge fine-tunes of one base by linear averaging, task arithmetic,
TIES, DARE or SLERP, from a mergekit-style config (minitrain/merging/, docs/merging.md). Folding one LoRA run's
adapters into its base is `minitrain merge-adapters` (minitrain/commands/merge_adapters.py)."""

from __future__ import annotations

import argparse
import os

from minitrain.commands.common import read_from
from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import check_output


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=merge_config,
                        help="merge config (YAML: merge_method, base_model, models, parameters, seed)")
    parser.add_argument("-o", "--out", required=True,
                        help="the merged model: a .safetensors model file (minitrain models) or a new folder "
                             "(pretrained bases: a Hugging Face folder)")
    parser.add_argument("--force", action="store_true", help="replace the model file OUT if it exists (never an "
                                                             "input)")
    parser.set_defaults(handler=merge_command)


def merge_config(path: str) -> str:
    """argparse type of CONFIG: a run folder or model file is the old `merge RUN_DIR OUT_DIR` (told before -o)."""
    if os.path.isdir(path) or path.endswith(".safetensors"):
        raise UserError(f"minitrain merge merges models from a merge config (YAML); to fold a LoRA run's adapters "
                        f"into its base use: minitrain merge-adapters {path} OUT_DIR", BAD_INPUT)
    return path


def merge_command(args: argparse.Namespace) -> int:
    from minitrain.merging import merge_models  # the Hub client is only needed here
    from minitrain.merging.spec import read_spec

    spec = read_spec(args.config)
    inputs = read_from(args.config, spec.base(), *(entry.model for entry in spec.inputs()))
    # A folder OUT (pretrained bases) is refused by merging/merge.py unless new or empty, --force or not.
    check_output(args.out, inputs, force=args.force, flag="merge -o", folder=True, ours=os.path.isdir)
    facts = merge_models(args.config, args.out)
    models = ", ".join(m["model"] for m in facts["models"])
    base = f" onto {facts['base_model']}" if facts["base_model"] else ""
    print(f"merged {models}{base} by {facts['merge_method']}: {facts['out']} "
          f"({facts['tensors']} tensors, {facts['weights']:,} weights)")
    return 0
