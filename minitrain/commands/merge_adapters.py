"""`minitrain merge-adapters RUN_DIR OUT_DIR [--base-model PATH|user/repo]`: fold a LoRA run's adapters into its
base and write the merged model as a run folder (minitrain/hub/fold_adapters.py). Merging several models is `minitrain
merge` (minitrain/commands/merge.py)."""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="LoRA run folder (or its adapter model file)")
    parser.add_argument("out_dir", help="new folder: the merged model as a run folder")
    parser.add_argument("--base-model", metavar="PATH|user/repo",
                        help="the base the adapters were trained on, when the run does not record it (or it moved)")
    parser.set_defaults(handler=merge_adapters_command)


def merge_adapters_command(args: argparse.Namespace) -> int:
    from minitrain.hub.fold_adapters import MERGED_FILE, merge_run  # the Hub client is only needed here

    facts = merge_run(args.source, args.out_dir, base=args.base_model)
    print(f"merged {facts['source']} into its base {facts['base']}: {args.out_dir}/{MERGED_FILE}")
    print(f"  max |logit difference| merged vs adapted over {facts['positions']:,} val positions: "
          f"{facts['max_abs_logit_difference']:.2e}")
    return 0
