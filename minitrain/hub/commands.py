"""The command-line face of minitrain.hub: `export`, `publish` (alias `push`) and `sample`.

    minitrain export RUN_DIR|MODEL_FILE OUT_DIR [--repo user/name] [--vocab PATH]
    minitrain publish --repo user/name [RUN_DIR] [--private] [--dry-run]
    minitrain sample SOURCE --prompt "comer|R1|" [--temperature T] [--top-k K] [--seed S] [-n N]

The handlers are thin: they call the library and print what it returns. Errors are `UserError`s, which the CLI
turns into one line on stderr and the error's exit code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from minitrain.data.tokenizer import CharTokenizer
from minitrain.errors import UserError
from minitrain.hub.export import export_model
from minitrain.hub.publish import publish
from minitrain.hub.sources import load_model
from minitrain.sampling import generate

RUNS = Path("runs")


def latest_run(root: Path = RUNS) -> Path:
    """The run folder under `root` whose results.json was written last (publish's default RUN_DIR)."""
    finished = sorted(root.glob("*/results.json"), key=lambda p: (p.stat().st_mtime_ns, str(p)))
    if not finished:
        raise UserError(f"publish: no RUN_DIR given and no finished run (with results.json) under {root}/")
    return finished[-1].parent


def _export(args: argparse.Namespace) -> int:
    for path in export_model(args.source, args.out_dir, repo_id=args.repo, vocab_path=args.vocab):
        print(path)
    return 0


def _publish(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir) if args.run_dir else latest_run()
    if not args.run_dir:
        print(f"Publishing the latest run: {run_dir}")
    publish(run_dir, args.repo, private=args.private, dry_run=args.dry_run)
    return 0


def _sample(args: argparse.Namespace) -> int:
    model, vocab = load_model(args.source)
    vocab = args.vocab or vocab
    if vocab is None:
        raise UserError(f"sample {args.source}: the source does not say which vocabulary it uses; pass --vocab")
    tokenizer = CharTokenizer.load(vocab)
    room = model.config["max_seq_len"] - 1 - len(args.prompt)  # what is left of the context after BOS + prompt
    max_new = args.max_new_tokens or max(room, 1)
    rng = np.random.default_rng(args.seed)  # one generator: -n samples differ, yet the seed reproduces them all
    for _ in range(args.n):
        print(args.prompt + generate(model, tokenizer, args.prompt, max_new, args.temperature, args.top_k, rng))
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the export, publish/push and sample subcommands; each sets `handler` to its function."""
    export = subparsers.add_parser("export", help="write a run as a Hugging Face GPT-2 folder")
    export.add_argument("source", help="run folder, checkpoint or model file")
    export.add_argument("out_dir", help="folder to write (config.json, model.safetensors, tokenizer, README.md)")
    export.add_argument("--repo", help="user/name the model card's loading snippet refers to")
    export.add_argument("--vocab", help="vocab.json, when the source does not record it")
    export.set_defaults(handler=_export)

    push = subparsers.add_parser("publish", aliases=["push"], help="export a run and upload it to the Hub")
    push.add_argument("--repo", required=True, help="Hub model repo, user/name (created if needed)")
    push.add_argument("run_dir", nargs="?", help="run folder (default: the latest finished run under runs/)")
    push.add_argument("--private", action="store_true", help="create the repo as private")
    push.add_argument("--dry-run", action="store_true", help="build the folder and list it; upload nothing")
    push.set_defaults(handler=_publish)

    sample = subparsers.add_parser("sample", help="generate text from a trained model")
    sample.add_argument("source", help="run folder, model file, export folder or Hub id user/name")
    sample.add_argument("--prompt", required=True, help='text to continue, e.g. "comer|R1|"')
    sample.add_argument("--temperature", type=_non_negative_float, default=0.0, help="0 = greedy (default)")
    sample.add_argument("--top-k", type=_positive_int, default=None, help="sample only among the k likeliest")
    sample.add_argument("--seed", type=int, default=None, help="seed for sampling (temperature > 0)")
    sample.add_argument("-n", type=_positive_int, default=1, help="number of samples (default 1)")
    sample.add_argument("--max-new-tokens", type=_positive_int, default=None,
                        help="stop after this many tokens (default: fill the context)")
    sample.add_argument("--vocab", help="vocab.json, when the source does not record it")
    sample.set_defaults(handler=_sample)
