"""`minitrain sample SOURCE --prompt "comer|R1|" [--temperature T] [--top-k K] [--seed S] [-n N]
[--max-new-tokens N] [--vocab PATH] [--chat]`: generate text from a run folder, model file, export folder or Hub
id. A run on a pretrained base (its RUN/tokenizer/) samples in its base's tokens; --chat wraps the prompt in the
chat template."""

from __future__ import annotations

import argparse

import numpy as np

from minitrain.commands.common import non_negative_float, non_negative_int, positive_int
from minitrain.common.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    sample = subparsers.add_parser("sample", help="generate text from a trained model")
    sample.add_argument("source", help="run folder, model file, export folder or Hub id user/name")
    sample.add_argument("--prompt", required=True, help='text to continue, e.g. "comer|R1|"')
    sample.add_argument("--temperature", type=non_negative_float, default=0.0, help="0 = greedy (default)")
    sample.add_argument("--top-k", type=positive_int, default=None, help="sample only among the k likeliest")
    sample.add_argument("--seed", type=non_negative_int, default=None, help="seed for sampling (temperature > 0)")
    sample.add_argument("-n", type=positive_int, default=1, help="number of samples (default 1)")
    sample.add_argument("--max-new-tokens", type=positive_int, default=None,
                        help="stop after this many tokens (default: fill the context)")
    sample.add_argument("--vocab", help="vocab.json, when the source does not record it")
    sample.add_argument("--chat", action="store_true",
                        help="a run on a pretrained base: send the prompt as a user message through the tokenizer's "
                             "chat template, and print the answer")
    sample.set_defaults(handler=sample_command)


def sample_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    if (Path(args.source) / "tokenizer" / "tokenizer.json").is_file():
        return _sample_pretrained_run(args)
    if args.chat:
        raise UserError(f"sample {args.source}: --chat is for a run on a pretrained base (its tokenizer has the "
                        "chat template)", 2)
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.hub.sources import load_model
    from minitrain.models.sampling import generate

    model, vocab = load_model(args.source)
    if model.config.get("type") == "sequential":
        raise UserError(f"sample {args.source}: a table model predicts rows, it does not write text; use "
                        f"`minitrain predict {args.source} ROWS.csv -o OUT.csv`", 2)
    vocab = args.vocab or vocab
    if vocab is None:
        raise UserError(f"sample {args.source}: the source does not say which vocabulary it uses; pass --vocab", 2)
    tokenizer = CharTokenizer.load(vocab)
    room = model.config["max_seq_len"] - 1 - len(args.prompt)  # what is left of the context after BOS + prompt
    max_new = args.max_new_tokens or max(room, 1)
    rng = np.random.default_rng(args.seed)  # one generator: -n samples differ, yet the seed reproduces them all
    for _ in range(args.n):
        print(args.prompt + generate(model, tokenizer, args.prompt, max_new, args.temperature, args.top_k, rng))
    return 0


def _sample_pretrained_run(args: argparse.Namespace) -> int:
    """A run on a pretrained base (RUN/tokenizer/): the prompt in the base's own tokens (as a chat turn with
    --chat), continued through the Llama KV cache, stopped at the tokenizer's EOS."""
    from minitrain.hub.pretrained_runs import run_model

    model, tokenizer = run_model(args.source)
    if args.chat:
        if tokenizer.chat_template is None:
            raise UserError(f"sample {args.source}: its tokenizer has no chat template; leave out --chat", 2)
        text = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}], add_generation_prompt=True)
        ids = tokenizer.encode(text)
    else:
        ids = tokenizer.encode(args.prompt, add_special_tokens=True)
    room = model.config["max_seq_len"] - len(ids)
    if room < 1:
        raise UserError(f"sample {args.source}: the prompt is {len(ids)} tokens; max_seq_len is "
                        f"{model.config['max_seq_len']}", 2)
    max_new = min(args.max_new_tokens or room, room)
    rng = np.random.default_rng(args.seed)
    for _ in range(args.n):
        new = model.generate(ids, max_new, args.temperature, args.top_k, eos_id=tokenizer.eos_id, rng=rng,
                             vocab_limit=tokenizer.vocab_size)[0]
        answer = tokenizer.decode(new, skip_special_tokens=True)
        print(f"{args.prompt}\n{answer}" if args.chat else args.prompt + answer)
    return 0
