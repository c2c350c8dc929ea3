"""`minitrain eval SOURCE --data FILE [--json] [--max-seq-len N] [--loss-on all|completion] [--vocab PATH]
[--answers [--max-new-tokens N]]`: the mean token loss, perplexity and number of tokens scored of a model on a text
or chat file, with the model's own tokenizer; with `--answers`, on chat records, the answer's scores and greedy
exact match instead (minitrain/evaluation/answers.py, lab 08: per token, per character, and the share of answers
written exactly). A greedy answer runs until EOS or `--max-new-tokens`, by default the longest expected answer in
the model's tokens plus ANSWER_MARGIN (room for whitespace around it, and to show how an answer runs on), within
what the context leaves after the longest prompt; the first SHOWN answers are printed beside the expected ones.

SOURCE is a pretrained base (a .gguf file, a Hugging Face folder, a Hub id) or a minitrain run, model file or
export (minitrain/hub/text_models.py). FILE holds text, prompt/completion or chat records (minitrain/data/
text_records.py: JSONL, JSON, parquet, a .txt document, a folder of them). A character model (the course's
MiniGPT) scores the verb corpus's JSONL instead; its `--loss-on completion` is the conjugated form and EOS. A
record longer than the context is scored in windows of `--max-seq-len` positions, each window on its own.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minitrain.commands.common import positive_int
from minitrain.common.errors import BAD_INPUT, UserError

LOSS_ON = ("all", "completion")
DEFAULT_CONTEXT = 512  # positions per window, unless the model's context is shorter or --max-seq-len says
ANSWER_MARGIN, SHOWN = 8, 3  # --answers: new tokens past the longest expected answer; answers printed


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="a .gguf file, a Hugging Face folder or Hub id, or a minitrain run / model")
    parser.add_argument("--data", required=True, help="text, prompt/completion or chat records (file or folder)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--max-seq-len", type=positive_int, default=None,
                        help=f"positions per window (default: the model's context, at most {DEFAULT_CONTEXT})")
    parser.add_argument("--loss-on", choices=LOSS_ON, default="all",
                        help="score every token (default) or only completions / assistant turns")
    parser.add_argument("--vocab", help="a character model's vocab.json, when the source does not record it")
    parser.add_argument("--answers", action="store_true",
                        help="chat records: score each last (assistant) message, and greedy exact match of it")
    parser.add_argument("--max-new-tokens", type=positive_int, default=None,
                        help=f"--answers: new tokens per greedy answer, which stops at EOS (default: the longest "
                             f"expected answer's tokens + {ANSWER_MARGIN}, within the context)")
    parser.set_defaults(handler=eval_command)


def eval_command(args: argparse.Namespace) -> int:
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.hub.text_models import load_text_model

    if args.max_new_tokens and not args.answers:
        raise UserError("--max-new-tokens: only --answers generates (add --answers, or leave it out)", BAD_INPUT)
    loaded = load_text_model(args.source, args.vocab)
    width = min(args.max_seq_len or DEFAULT_CONTEXT, loaded.model.config["max_seq_len"])
    if args.answers:
        result, shown = _answers(loaded, args, width)
    else:
        from minitrain.evaluation.text_loss import token_loss

        rows = (_char_rows if isinstance(loaded.tokenizer, CharTokenizer) else text_rows)(loaded.tokenizer, args.data,
                                                                                          args.loss_on, width)
        scores = token_loss(loaded.model, rows, loaded.model.config["vocab_size"])
        result = {"source": args.source, "data": args.data, "loss": scores["loss"], "ppl": scores["ppl"],
                  "tokens": scores["tokens"], "loss_on": args.loss_on, "max_seq_len": width}
        shown = (f"{args.source} on {args.data}: loss {result['loss']:.4f}  ppl {result['ppl']:.4f}  "
                 f"({result['tokens']} tokens, loss on {args.loss_on}, windows of {width})")
    print(json.dumps(result) if args.json else shown)
    return 0


def _answers(loaded, args: argparse.Namespace, width: int) -> tuple[dict, str]:
    """`--answers`: (the JSON result, the lines printed without --json: the scores, then the first SHOWN answers
    beside the expected ones)."""
    from minitrain.data.text_records import read_file
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.evaluation.answers import answer_scores, exact_match

    records = read_file(Path(args.data))
    if isinstance(loaded.tokenizer, CharTokenizer) or any(r.kind != "chat" for r in records):
        raise UserError(f"{args.data}: --answers scores chat records with a pretrained model's chat template",
                        BAD_INPUT)
    scores = answer_scores(loaded.model, loaded.tokenizer, records, width)
    budget = _new_tokens(loaded, records, args.max_new_tokens)
    matched = exact_match(loaded.model, loaded.tokenizer, records, budget)
    expected = [r.data["messages"][-1]["content"] for r in records]
    right = round(matched["exact_match"] * len(records))
    result = {"source": args.source, "data": args.data, **scores, "exact_match": matched["exact_match"],
              "matched": right, "max_new_tokens": budget}
    shown = [f"  expected {want!r}, wrote {got!r}" for want, got in zip(expected[:SHOWN], matched["answers"][:SHOWN],
                                                                         strict=True)]
    return result, "\n".join([
        f"{args.source} on {args.data}: answer loss {scores['answer_loss']:.4f}  ppl {scores['answer_ppl']:.4f} "
        f"({scores['answer_tokens']} tokens), per character {scores['answer_ppl_per_char']:.4f}, exact match "
        f"{matched['exact_match']:.1%} ({right} of {len(records)}, greedy, up to {budget} new tokens)", *shown])


def _new_tokens(loaded, records, asked: int | None) -> int:
    """The new tokens a greedy answer may take: `asked`, or the longest expected answer's tokens + ANSWER_MARGIN
    within what the model's context leaves after the longest prompt (a UserError when none fit)."""
    tokenizer, context = loaded.tokenizer, loaded.model.config["max_seq_len"]
    prompt = max((len(tokenizer.encode(tokenizer.apply_chat_template(r.data["messages"][:-1],
                                                                       add_generation_prompt=True))) for r in records),
                 default=0)
    longest = max((len(tokenizer.encode(r.data["messages"][-1]["content"])) for r in records), default=0)
    budget = asked or min(longest + ANSWER_MARGIN, context - prompt)
    if budget < 1 or prompt + budget > context:
        raise UserError(f"--max-new-tokens {budget}: the longest prompt has {prompt} tokens and the model's context "
                        f"is {context}, which leaves {max(context - prompt, 0)}", BAD_INPUT)
    return budget


def text_rows(tokenizer, data: str | Path, loss_on: str, width: int):
    """The PackedBatch `minitrain eval` scores: every record of `data` encoded with `tokenizer`
    (text_examples.encode_records), one per row, a longer one split into windows of `width` positions that share
    one token (packing.pack, overflow="split"), so each token is a target once. scripts/check_eval_parity.py
    checks these rows against transformers' tokenizer."""
    from minitrain.data.locate import data_files
    from minitrain.data.packing import pack, pad_id_of
    from minitrain.data.text_examples import encode_records
    from minitrain.data.text_records import RECORD_FORMATS, check_one_kind, read_file, read_files

    path = Path(data)
    records = read_files(data_files(path, RECORD_FORMATS)) if path.is_dir() else read_file(path)
    examples = encode_records(check_one_kind(records), tokenizer, loss_on)
    return pack(examples, width, "pad", pad_id_of(tokenizer), overflow="split")


def _char_rows(tokenizer, data: str | Path, loss_on: str, width: int):
    """The verb corpus's rows a character model is scored on: a record's answer is its completion (the conjugated
    form and EOS)."""
    from minitrain.data.batcher import encode_split
    from minitrain.data.corpus import load_records

    return encode_split(load_records(data), tokenizer, width, "answer" if loss_on == "completion" else "all")
