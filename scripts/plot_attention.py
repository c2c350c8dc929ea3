"""Draw where a trained MiniGPT attends, one heatmap per head and layer, for one line it completes.

    python scripts/plot_attention.py RUN_DIR --prompt "vender|C4|" [--out FILE] [--no-complete] [--vocab PATH]

RUN_DIR is anything `minitrain sample` takes (a run folder, a model file, an export folder, a Hub id). The prompt
is completed greedily and the whole line is drawn (minitrain/models/attention_map.py); without --out the figure goes to
attention.png in the current folder. A mistake prints one `error:` line and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Heatmaps of a MiniGPT's attention over one line.")
    parser.add_argument("source", help="run folder, model file, export folder or Hub id")
    parser.add_argument("--prompt", required=True, help='the start of the line, e.g. "vender|C4|"')
    parser.add_argument("--out", default="attention.png", help="PNG to write (default attention.png)")
    parser.add_argument("--no-complete", action="store_true", help="draw the prompt only, without the answer")
    parser.add_argument("--vocab", help="vocab.json, when the source does not record it")
    args = parser.parse_args(argv)
    from minitrain.common.errors import BAD_INPUT, ArgumentError, UserError
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.hub.sources import load_model
    from minitrain.models.attention_map import attention_figure

    try:
        model, vocab = load_model(args.source)
        if (args.vocab or vocab) is None:
            raise UserError(f"{args.source}: the source does not say which vocabulary it uses; pass --vocab")
        tokenizer = CharTokenizer.load(args.vocab or vocab)
        path, answer = attention_figure(model, tokenizer, args.prompt, args.out, complete=not args.no_complete)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ArgumentError as exc:  # the prompt does not fit the model, as `minitrain` reports it
        print(f"error: {exc}", file=sys.stderr)
        return BAD_INPUT
    print(f"{args.prompt}{answer} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
