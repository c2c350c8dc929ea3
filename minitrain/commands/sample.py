"""`minitrain sample SOURCE --prompt "comer|R1|" [--chat] [--temperature T] [--top-k K] [--top-p P] [--seed S]
[-n N] [--max-new-tokens N] [--vocab PATH]`: generate text from a run folder, model file, export folder or Hub id,
or from a pretrained base (a .gguf file, a Hugging Face folder or Hub id of a Llama-family model or a GPT-2).

A pretrained base, and a run that fine-tuned one (its RUN/tokenizer/), sample in the base's own tokens (a Llama
through its KV cache, a GPT-2 re-running the prefix as MiniGPT does; minitrain/hub/text_models.py loads the model
with its tokenizer) and stop at its EOS; `--chat` sends the prompt as one user message through the tokenizer's chat
template with the generation prompt, and prints the answer under it. A character model (MiniGPT) continues the
prompt character by character, as before."""

from __future__ import annotations

import argparse

import numpy as np

from minitrain.commands.common import non_negative_float, non_negative_int, positive_int, probability
from minitrain.common.errors import ArgumentError, UserError

TEXT_MAX_NEW = 256  # a pretrained model's default answer length (its context may be 8192 positions)


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run folder, model file, export folder, Hub id user/name, or a pretrained "
                                       "base (.gguf, Hugging Face folder or Hub id)")
    parser.add_argument("--prompt", required=True, help='text to continue, e.g. "comer|R1|"')
    parser.add_argument("--chat", action="store_true",
                        help="a pretrained model: send the prompt as a user message through its chat template and "
                             "print the answer")
    parser.add_argument("--temperature", type=non_negative_float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-k", type=positive_int, default=None, help="sample only among the k likeliest")
    parser.add_argument("--top-p", type=probability, default=None,
                        help="a pretrained model: sample from the smallest set of tokens whose probability is ≥ p")
    parser.add_argument("--seed", type=non_negative_int, default=None, help="seed for sampling (temperature > 0)")
    parser.add_argument("-n", type=positive_int, default=1, help="number of samples (default 1)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=None,
                        help=f"stop after this many tokens (default: fill the context; a pretrained model "
                             f"{TEXT_MAX_NEW})")
    parser.add_argument("--vocab", help="vocab.json, when the source does not record it")
    parser.set_defaults(handler=sample_command)


def sample_command(args: argparse.Namespace) -> int:
    from minitrain.hub.text_models import is_text_source

    if is_text_source(args.source):
        return _sample_text_model(args)
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.hub.sources import load_model
    from minitrain.models.registry import family_of

    model, vocab = load_model(args.source)
    if family_of(model.config).reads == "table":
        raise UserError(f"sample {args.source}: a table model predicts rows, it does not write text; use "
                        f"`minitrain predict {args.source} ROWS.csv -o OUT.csv`", 2)
    vocab = args.vocab or vocab
    if vocab is None:
        raise UserError(f"sample {args.source}: the source does not say which vocabulary it uses; pass --vocab", 2)
    return _sample_chars(args, model, CharTokenizer.load(vocab))


def _sample_chars(args: argparse.Namespace, model, tokenizer) -> int:
    """A character model continues the prompt (BOS + its characters)."""
    from minitrain.models.sampling import generate

    if args.chat or args.top_p is not None:
        raise UserError(f"sample {args.source}: --chat and --top-p are for a pretrained model or a run on one (its "
                        "tokenizer has the chat template); a character model continues the prompt", 2)
    room = model.config["max_seq_len"] - 1 - len(args.prompt)  # what is left of the context after BOS + prompt
    max_new = args.max_new_tokens or max(room, 1)
    rng = np.random.default_rng(args.seed)  # one generator: -n samples differ, yet the seed reproduces them all
    try:
        for _ in range(args.n):
            print(args.prompt + generate(model, tokenizer, args.prompt, max_new, args.temperature, args.top_k, rng))
    except ArgumentError as e:  # logits that are not numbers: say which model
        raise UserError(f"sample {args.source}: {e}", 2) from None
    return 0


def prompt_ids(tokenizer, prompt: str, chat: bool, where: str) -> list[int]:
    """The prompt in the model's tokens: as a user turn with the generation prompt (`chat`), else as text with
    the tokenizer's own BOS when its model expects one."""
    if not chat:
        return tokenizer.encode(prompt, add_special_tokens=True)
    if tokenizer.chat_template is None:
        raise UserError(f"sample {where}: its tokenizer has no chat template; leave out --chat", 2)
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
    return tokenizer.encode(text)


def _sample_text_model(args: argparse.Namespace) -> int:
    """A pretrained base or a run on one: its tokens, its KV cache, stopped at its EOS (module docstring)."""
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.hub.text_models import load_text_model
    from minitrain.models.sampling import continue_ids

    loaded = load_text_model(args.source)
    model, tokenizer = loaded.model, loaded.tokenizer
    if isinstance(tokenizer, CharTokenizer):  # a MiniGPT GGUF minitrain wrote: its character vocabulary
        return _sample_chars(args, model, tokenizer)
    ids = prompt_ids(tokenizer, args.prompt, args.chat, args.source)
    room = model.config["max_seq_len"] - len(ids)
    if room < 1:
        raise UserError(f"sample {args.source}: the prompt is {len(ids)} tokens; the model reads at most "
                        f"{model.config['max_seq_len']}", 2)
    max_new = min(args.max_new_tokens or TEXT_MAX_NEW, room)
    rng = np.random.default_rng(args.seed)
    for _ in range(args.n):
        new = continue_ids(model, ids, max_new, args.temperature, args.top_k, args.top_p, tokenizer.eos_id, rng,
                           tokenizer.vocab_size)
        answer = tokenizer.decode(new, skip_special_tokens=True)
        print(f"{args.prompt}\n{answer}" if args.chat else args.prompt + answer)
    return 0
