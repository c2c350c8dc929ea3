"""`minitrain init [--template minimal|lab01|lora|qlora|full] [--data DIR] [--base PATH|user/repo]
[--method full|lora|qlora] [-o FILE] [--force]`: write a config for a data folder, validated before it is written.
The spec's template names lora, qlora and full are `--template minimal --method NAME` (lora needs a --base).

With a pretrained Llama-family base (a .gguf file, a Hugging Face folder or Hub id of a llama, qwen2 or mistral
model) the config fine-tunes it on text/chat records (minitrain/commands/init_base.py): it is written to
config.yaml unless -o says otherwise (`-o -` prints it), and a summary of what was found is printed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minitrain.commands.init_base import DEFAULT_OUTPUT, init_base_config
from minitrain.commands.init_template import DEFAULT_DATA, METHODS, TEMPLATES, BaseModel, init_config
from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_text, check_output


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--template", choices=(*TEMPLATES, *METHODS), default="minimal",
                        help="minimal (default) or lab01; the spec's lora, qlora, full: minimal with --method NAME")
    parser.add_argument("--data", default=DEFAULT_DATA, metavar="DIR", help=f"data folder (default {DEFAULT_DATA})")
    parser.add_argument("--base", metavar="PATH|user/repo",
                        help="start from this model: its shape fills the model section, its weights model.init_from")
    parser.add_argument("--method", choices=METHODS,
                        help="full: train every weight; lora/qlora: a lora: section for --base (qlora: 4-bit base)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of printing (-: print)")
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    parser.set_defaults(handler=init_command)


def init_command(args: argparse.Namespace) -> int:
    if args.template in METHODS:  # the spec's template names are minitrain's methods
        if args.method not in (None, args.template):
            raise UserError(f"init: --template {args.template} means --method {args.template}, not {args.method}", 2)
        if args.base is None and args.template != "full":
            raise UserError(f"init --template {args.template}: LoRA adapts a trained model, and there is no default "
                            "one; name it with --base PATH|user/repo (a .gguf, a Hugging Face folder or Hub id)", 2)
        args.template, args.method = "minimal", args.template
    on_base = False
    if args.base is not None:
        from minitrain.hub.text_models import is_pretrained_base  # the Hub client is only needed here

        on_base = is_pretrained_base(args.base)
    if on_base and args.template != "minimal":
        raise UserError(f"--template {args.template} is a MiniGPT config; a pretrained base has its own", 2)
    output = args.output if args.output is not None else DEFAULT_OUTPUT if on_base else None
    out = Path(output) if output not in (None, "-") else None  # `-o -` prints, as lock's does
    if out is not None:
        check_output(out, [args.data, args.base], force=args.force, flag="init -o")
    if on_base:
        text, summary = init_base_config(args.base, args.method, args.data, str(out or "<stdout>"))
        done = "\n".join([f"Created {out} with:", *summary, f"Next: minitrain train {out}"])
    else:
        base = None
        if args.base is not None:
            from minitrain.hub.sources import model_section_from_base

            base = BaseModel(args.base, *model_section_from_base(args.base))
        text = init_config(args.template, args.data, out.name if out else "config.yaml", base=base, method=args.method)
        summary, done = [], f"wrote {out}; next: minitrain validate {out}"
    if out is None:
        print(text, end="")
        if summary:
            print("\n".join(summary), file=sys.stderr)
        return 0
    atomic_write_text(out, text)
    print(done)
    return 0
