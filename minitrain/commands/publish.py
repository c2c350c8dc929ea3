"""`minitrain publish --repo user/name [RUN_DIR] [--private] [--dry-run] [--merge-adapters] [--base-model SPEC]
[--float-base] [--vocab PATH] [--format hf|safetensors|gguf] [--dtype f32|f16|q8_0|q4_0|q5_k|q4_k_m]
[--[no-]model-card]` (alias `push`): export a run or model file and upload it to the Hub; without RUN_DIR, ./output
(the publish spec's default: a spec-shaped manifest's run folder) when it holds a finished run, else the latest
finished run under runs/. A LoRA run uploads its adapter (its base must be a Hub id), or with --merge-adapters its
base with the adapters merged in (a QLoRA run into its NF4 base, or with --float-base the float one). `--format gguf`
uploads one GGUF file (REPO-NAME-DTYPE.gguf, a LoRA run merged) instead of the Hugging Face folder (the spec's
safetensors is hf). `--no-model-card` leaves README.md out of the upload."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from minitrain.commands.export import FORMATS, GGUF_DTYPES, SPEC_FORMATS, format_name
from minitrain.common.errors import BAD_INPUT, UserError

RUNS, SPEC_OUTPUT = Path("runs"), Path("output")  # SPEC_OUTPUT: the spec's `./output`


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True, help="Hub model repo, user/name (created if needed)")
    parser.add_argument("run_dir", nargs="?", help="run folder or model file (default: ./output when it holds a "
                                                   "finished run, else the latest finished run under runs/)")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--dry-run", action="store_true", help="build the folder and list it; upload nothing")
    parser.add_argument("--merge-adapters", action="store_true",
                        help="a LoRA run: publish its base with the adapters merged in (default: the adapter in "
                             "PEFT's layout; a GGUF is always merged)")
    parser.add_argument("--base-model", metavar="PATH|user/repo",
                        help="the base the adapters were trained on, when the run does not record it (or it moved); "
                             "an adapter on the Hub names its base by this Hub id")
    parser.add_argument("--float-base", action="store_true", help="a QLoRA run on a Llama-family base: merge its "
                        "adapter (implies --merge-adapters) into the float base, not its NF4 base (the gap is printed)")
    parser.add_argument("--vocab", help="vocab.json, when the source (a bare model file) does not record it")
    parser.add_argument("--format", choices=(*FORMATS, *SPEC_FORMATS), default="hf", type=format_name,
                        help="hf (or safetensors): the Hugging Face folder (default); gguf: one GGUF for llama.cpp")
    parser.add_argument("--model-card", action=argparse.BooleanOptionalAction, default=True,
                        help="upload README.md, the model card written from the run's records (default: yes)")
    parser.add_argument("--dtype", choices=tuple(GGUF_DTYPES), default=None,
                        help="--format gguf: how the matrices are stored (default f32)")
    parser.set_defaults(handler=publish_command)


def latest_run(root: Path = RUNS) -> Path:
    """The run folder under `root` whose results.json was written last (publish's default RUN_DIR without a finished
    run in ./output)."""
    # lstat: a results.json that is a dangling link is still a candidate, and read_run then says what is wrong.
    finished = sorted(root.glob("*/results.json"), key=lambda p: (p.lstat().st_mtime_ns, str(p)))
    if not finished:
        raise UserError(f"publish: no RUN_DIR given and no finished run (with results.json) under {root}/")
    return finished[-1].parent


def publish_command(args: argparse.Namespace) -> int:
    from minitrain.hub.upload import publish  # the Hub client is only needed here

    if args.dtype is not None and args.format != "gguf":
        raise UserError("publish --dtype: only a GGUF (--format gguf) stores other dtypes than float32", BAD_INPUT)
    if args.float_base and args.format == "gguf":
        raise UserError("publish --float-base: for the Hugging Face folder; a GGUF holds the NF4 merge", BAD_INPUT)
    spec_output = not args.run_dir and os.path.lexists(SPEC_OUTPUT / "results.json")
    run_dir = Path(args.run_dir) if args.run_dir else SPEC_OUTPUT if spec_output else latest_run()
    if args.run_dir and run_dir.resolve() == SPEC_OUTPUT.resolve() and not os.path.lexists(run_dir):
        raise UserError(f"publish {args.run_dir}: no such folder: a run goes to runs/<name> unless its config's "
                        "output.dir says ./output; give the run folder `train` printed", BAD_INPUT)
    if not args.run_dir:
        print(f"Publishing {'./output (the default folder)' if spec_output else f'the latest run: {run_dir}'}")
    publish(run_dir, args.repo, private=args.private, dry_run=args.dry_run, merge_adapters=args.merge_adapters,
            base_model=args.base_model, vocab_path=args.vocab, model_format=args.format, dtype=args.dtype or "f32",
            float_base=args.float_base, model_card=args.model_card)
    return 0
