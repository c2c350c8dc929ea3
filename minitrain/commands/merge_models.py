"""`minitrain merge-models CONFIG.yaml -o OUT`: merge fine-tunes of one base by linear averaging, task arithmetic,
TIES, DARE or SLERP, from a mergekit-style config (minitrain/merging/, docs/merging.md). `minitrain merge` is
another thing: it folds one LoRA run's adapters into its base."""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="merge config (YAML: merge_method, base_model, models, parameters, seed)")
    parser.add_argument("-o", "--out", required=True,
                        help="the merged model: a .safetensors model file (minitrain models) or a new folder "
                             "(pretrained bases: a Hugging Face folder)")
    parser.set_defaults(handler=merge_models_command)


def merge_models_command(args: argparse.Namespace) -> int:
    from minitrain.merging import merge_models  # the Hub client is only needed here

    facts = merge_models(args.config, args.out)
    models = ", ".join(m["model"] for m in facts["models"])
    base = f" onto {facts['base_model']}" if facts["base_model"] else ""
    print(f"merged {models}{base} by {facts['merge_method']}: {facts['out']} "
          f"({facts['tensors']} tensors, {facts['weights']:,} weights)")
    return 0
