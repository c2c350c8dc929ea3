"""`minitrain merge RUN_DIR OUT_DIR [--base-model PATH|user/repo]`: fold a LoRA run's adapters into its base and
write the merged model as a run folder (minitrain/hub/fold_adapters.py)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    merge = subparsers.add_parser("merge", help="fold a LoRA run's adapters into its base model")
    merge.add_argument("source", help="LoRA run folder (or its adapter model file)")
    merge.add_argument("out_dir", help="new folder: the merged model as a run folder")
    merge.add_argument("--base-model", metavar="PATH|user/repo",
                       help="the base the adapters were trained on, when the run does not record it (or it moved)")
    merge.set_defaults(handler=merge_command)


def merge_command(args: argparse.Namespace) -> int:
    from minitrain.hub.fold_adapters import MERGED_FILE, merge_run  # the Hub client is only needed here

    facts = merge_run(args.source, args.out_dir, base=args.base_model)
    print(f"merged {facts['source']} into its base {facts['base']}: {args.out_dir}/{MERGED_FILE}")
    print(f"  max |logit difference| merged vs adapted over {facts['positions']:,} val positions: "
          f"{facts['max_abs_logit_difference']:.2e}")
    return 0
