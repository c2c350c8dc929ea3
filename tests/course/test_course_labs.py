"""The labs as students do them (minitrain/course/): every checker passes on the library's own files and reference
runs, fails every item of a fresh starter with a reason, and names each typical student bug by its check."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minitrain import seam
from minitrain.common.errors import UserError
from minitrain.course.checks import Checklist, Failed, Outcome, format_outcome
from minitrain.course.labs import LABS, checklist, grade, start, typed

REPO = Path(__file__).resolve().parents[2]


def failures(outcomes) -> dict[str, str]:
    return {o.name: o.reason for o in outcomes if not o.passed}


@pytest.mark.slow
@pytest.mark.parametrize("lab", list(LABS))
def test_the_library_passes_every_check_of_every_lab(lab):
    _, outcomes = grade(lab)
    assert outcomes and not failures(outcomes), failures(outcomes)


@pytest.mark.parametrize("lab", list(LABS))
def test_a_fresh_starter_fails_every_item_with_a_reason(lab, tmp_path):
    start(lab, tmp_path / "ws")
    _, outcomes = grade(lab, tmp_path / "ws")
    assert [o.name for o in outcomes] == [c.name for c in checklist(lab).checks]
    for outcome in outcomes:
        assert not outcome.passed, f"lab {lab}: {outcome.name!r} passed on the starter"
        assert outcome.hint
        assert outcome.reason.startswith(("not written yet: it raises NotImplementedError (TODO lab",
                                          "not run: fix first: ", "no run folder at ")) or \
            "NotImplementedError: TODO lab" in outcome.reason, outcome.reason


@pytest.mark.parametrize("lab", list(LABS))
def test_the_starter_is_the_contract_without_the_code(lab, tmp_path):
    written = start(lab, tmp_path / "ws")
    assert (tmp_path / "ws" / "README.md") in written
    for path, names in LABS[lab].pieces.items():
        tree = ast.parse((tmp_path / "ws" / path).read_text(encoding="utf-8"))
        defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert set(defined) == set(names), f"{path}: the starter defines {sorted(defined)}"
        functions = [n for node in defined.values() for n in ast.walk(node) if isinstance(n, ast.FunctionDef)]
        for function in functions:
            assert ast.get_docstring(function), f"{path}: {function.name} has no docstring (its contract)"
            assert isinstance(function.body[-1], ast.Raise) and "NotImplementedError" in ast.unparse(
                function.body[-1]), f"{path}: {function.name} is not a stub"
    readme = (tmp_path / "ws" / "README.md").read_text(encoding="utf-8")
    assert f"minitrain lab check {lab} {tmp_path / 'ws'}" in readme
    for command in (LABS[lab].prepare, LABS[lab].train, *LABS[lab].commands):  # test_lab09 checks `typed`
        if command:
            assert typed(command, str(tmp_path / "ws")) in readme


@pytest.mark.parametrize("lab", [number for number, lab in LABS.items() if lab.solution])
def test_a_solution_folder_keeps_the_librarys_contract(lab):
    """A lab whose solution lives apart from the library's files (lab 07) states the same contract: its starter,
    made from either, is the same text but for the imports (the module docstring, signatures, docstrings)."""
    from minitrain.course.starter import stub_module

    def contract(folder: str, path: str, names) -> list[str]:
        text = stub_module((REPO / folder / path).read_text(encoding="utf-8"), names, lab, "x")
        return [line for line in text.splitlines() if not line.startswith(("from ", "import "))]

    for path, names in LABS[lab].pieces.items():
        assert contract(LABS[lab].solution, path, names) == contract("", path, names), path


def test_start_never_overwrites_a_students_work(tmp_path):
    start("01", tmp_path / "ws")
    mine = tmp_path / "ws" / "minitrain" / "loop.py"
    mine.write_text("# my work\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"loop\.py.* already exist; start the lab in an empty folder"):
        start("01", tmp_path / "ws")
    assert mine.read_text(encoding="utf-8") == "# my work\n"


def workspace_with_reference(lab: str, folder: Path, bug: tuple | None = None) -> Path:
    """A workspace holding the library's own files for the lab (its `solution` folder's, where it has one: lab 07);
    `bug` = (path, (text, replacement), ...) edits one of them, each text found exactly once."""
    source = REPO / (LABS[lab].solution or "")
    for path in LABS[lab].pieces:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / path, folder / path)
    if bug is not None:
        path, *edits = bug
        text = (folder / path).read_text(encoding="utf-8")
        for old, new in edits:
            assert text.count(old) == 1, f"the bug's text is not in {path} once: {old!r}"
            text = text.replace(old, new)
        (folder / path).write_text(text, encoding="utf-8")
    return folder


# Labs 00, 01 and 02: tests/course/test_lab_commands.py checks a workspace holding the library's files, after training
# its run folder (lab 01's through the student's script and loop, cut to 700 steps), with every item passing.
@pytest.mark.parametrize("lab", ["03", "04", "05", "07", "08", "09"])
def test_the_library_files_in_a_workspace_pass_every_check_but_the_run_folder(lab, tmp_path):
    ws = workspace_with_reference(lab, tmp_path / "ws")
    _, outcomes = grade(lab, ws, only=lambda name: not name.startswith("run folder"))
    assert outcomes and not failures(outcomes), failures(outcomes)


LOOP, BATCHER, CHECKPOINT = "minitrain/loop.py", "minitrain/data/batcher.py", "minitrain/checkpoint.py"
CURVES, STOPPING = "minitrain/monitor/curves.py", "minitrain/monitor/early_stopping.py"
LORA, GRID = "minitrain/nn/lora.py", "minitrain/quant/grid.py"
BPE = "minitrain/data/bpe.py"
STEP_BY_STEP = "train, merge by merge: the most frequent pair each time, a new id for each, vocab_size ids in all"
NORM, ROTARY = "minitrain/nn/rms_norm.py", "minitrain/nn/apply_rotary.py"
SWIGLU, ATTENTION = "minitrain/nn/llama_mlp.py", "minitrain/nn/llama_attention.py"
MASK, ANSWERS = "minitrain/data/answer_mask.py", "minitrain/evaluation/answers.py"
TIES, DARE = "minitrain/merging/ties.py", "minitrain/merging/dare.py"
TIES_ITEM = ("ties = θ_base + λ · elect_and_mean of each model's trimmed task vector (τ_i in float64), in the base's "
             "dtype")
DELTAS_ITEM = "dare_deltas drops model i's task vector with mask_rng(seed, i, name) and its own density"
# (lab, the bug as (file, text, replaced by), the check that must catch it, words of its reason)
BUGS = [
    ("00", (BATCHER, ('text.rindex("|") + 1', 'text.rindex("|") + 2')),
     "encode_split: loss_mask counts the form and EOS, on target positions (loss_on='answer')",
     "marks where the INPUT holds the form (positions 12–17)"),
    ("00", (BATCHER, ("loss_mask[row, first:steps] = True", "loss_mask[row, first:] = True")),
     "encode_split: loss_mask counts the form and EOS, on target positions (loss_on='answer')",
     "counts padding positions after EOS"),
    ("00", (BATCHER, ("        self._epoch_rng_state = self._rng.bit_generator.state\n"
                      "        self._order = self._rng.permutation(self.num_records) if self.shuffle else "
                      "np.arange(self.num_records)\n",
                      "        self._order = self._rng.permutation(self.num_records) if self.shuffle else "
                      "np.arange(self.num_records)\n"
                      "        self._epoch_rng_state = self._rng.bit_generator.state\n")),
     "TrainBatcher: a state_dict taken mid-epoch resumes the very same batches",
     "Saving the RNG state after the permutation makes a resume draw the NEXT epoch's order"),
    ("00", (BATCHER, ("range(0, self.num_records, self.batch_size)",
                      "range(0, self.num_records - self.batch_size + 1, self.batch_size)")),
     "EvalBatcher: one pass in file order, the last batch smaller, every record once",
     "(the last, partial batch was dropped)"),
    ("01", (LOOP, ("        return loss_value, clip_grad_norm_(model.buffer, clip_norm)\n",
                   "        clip_grad_norm_(model.buffer, clip_norm)\n")),
     "train_step returns the gradient norm measured before clipping", "returned the norm AFTER clipping"),
    ("01", (LOOP, ("weight = count / total", "weight = 1.0")),
     "train_step weights micro-batches by their counted tokens (gradient accumulation)",
     "summed the micro-batch losses"),
    ("01", (LOOP, ("    optimizer.zero_grad()\n    batches =", "    batches =")),
     "train_step starts from a zero gradient", "the gradient left from before the step was still in .grad"),
    ("01", (LOOP, ("for batch in map(trim_padding, val_iter):", "for batch in val_iter:"),
            ("batch.target, batch.loss_mask)", "batch.target, np.ones_like(batch.loss_mask))")),
     "evaluate averages over exactly the loss_mask positions of the whole split",
     "your evaluate() counted padding positions: expected the mean over 1,299 counted tokens, got the mean over "
     "all 4,608 positions"),
    ("01", (LOOP, ("batch.target, batch.loss_mask)", "batch.target, batch.attn_pad_mask)")),
     "evaluate averages over exactly the loss_mask positions of the whole split", "counted the prompt too"),
    ("01", (LOOP, ("with inference(model):", "with contextlib.nullcontext():"),
            ("from __future__ import annotations\n", "from __future__ import annotations\n\nimport contextlib\n")),
     "evaluate records nothing on the tape", "operations on the tape"),
    ("01", (LOOP, ("with inference(model):", "with contextlib.nullcontext():"),
            ("from __future__ import annotations\n", "from __future__ import annotations\n\nimport contextlib\n")),
     "evaluate runs in eval mode (no dropout) and puts the model back in its mode", "dropout was on"),
    ("02", (CHECKPOINT, ("    batcher.load_state_dict(batcher_sd)\n", "")),
     "the data RNG and its position come back", "after loading, the next batch differs"),
    ("02", (CHECKPOINT, ('"optimizer": optimizer_json,', '"optimizer": {**optimizer_json, "step": 0},')),
     "the optimizer's moments and step count come back", "AdamW's bias correction restarts"),
    ("02", (CHECKPOINT, ("    model.load_state_dict(model_sd)\n",
                         "    for name, p in model.named_parameters():\n        p.data = model_sd[name].copy()\n")),
     "weights are copied into the model's own arrays, not rebound", "is no longer a view of the model's flat buffer"),
    ("02", (CHECKPOINT, ("    data = encode(tensors, meta)\n    atomic_write_bytes(path, data)\n",
                         "    data = encode(tensors, meta)\n    Path(path).open(\"wb\").writelines(data)\n")),
     "save_checkpoint writes atomically: a failed save leaves the old file whole", "left a changed file behind"),
    ("02", (CHECKPOINT, ('if config_hash is not None and meta["config_hash"] != config_hash:', "if False:")),
     "a checkpoint written under another config is refused, and nothing changes", "must be refused"),
    ("03", (CURVES, ("values[max(0, i - window + 1) : i + 1]",
                     "values[max(0, i - window // 2) : i + window // 2 + 1]")),
     "moving_average is the trailing mean of the last `window` values", "is centred"),
    ("03", (CURVES, ('smoothed = moving_average([r["loss"] for r in rows if "loss" in r], window)',
                     'smoothed = [math.log(v) for v in moving_average([math.exp(r["loss"]) for r in rows if "loss" '
                     'in r], window)]')),
     "train_val_gap averages the losses of the last `window` train rows, then takes exp",
     "the mean of the two rows' perplexities"),
    ("03", (CURVES, ("train_ppl = math.exp(smoothed[seen - 1])",
                     "train_ppl = math.exp(smoothed[min(seen, len(smoothed) - 1)])")),
     "train_val_gap uses only train rows logged at or before each validation",
     "it used the row of step 30, after the validation"),
    ("03", (CURVES, ('return best["step"] if', 'return gaps[-1]["step"] if')),
     "overfitting_onset names the step of the lowest val PPL when val ended clearly above it", "(the last step)"),
    ("04", (STOPPING, ("return value < best - min_delta", "return value <= best - min_delta")),
     "an evaluation that only ties the best does not improve", "ties are not improvements"),
    ("04", (STOPPING, ("self.best, self.best_step, self.bad_evaluations = float(value), step, 0",
                       "self.best, self.best_step = float(value), step")),
     "an improvement resets the count, and best / best_step follow it", "each improvement (2.0, 1.5) starts"),
    ("04", (STOPPING, ("return value < best - min_delta", "return value < best + min_delta")),
     "min_delta and mode 'max' are honoured", "neither drop beats 2.0 by more than 0.1"),
    ("04", (STOPPING, ('"bad_evaluations": self.bad_evaluations}', "}"),
            ('int(state["bad_evaluations"])', '0')),
     "state_dict / load_state_dict: a restored stopper stops exactly where the original does",
     "did not stop at the third evaluation without improvement"),
    ("05", (LORA, ("Parameter(np.zeros((rank, base_layer.out_features)), dtype=dtype)",
                   "Parameter(rng.normal(0.0, 0.02, (rank, base_layer.out_features)), dtype=dtype)")),
     "a fresh LoRALinear computes exactly its base layer: lora_B starts at zero", "lora_B is not all zeros"),
    ("05", (LORA, ("self.scaling = rank, alpha, alpha / rank", "self.scaling = rank, alpha, alpha")),
     "forward adds (alpha/rank)·x·A·B to x·W + b", "your update was scaled by alpha (6), not alpha/rank (3)"),
    ("05", (LORA, ("return (self.scaling * (self.lora_A.data @ self.lora_B.data))",
                   "return ((self.lora_A.data @ self.lora_B.data))")),
     "delta_weight is (alpha/rank)·A·B: the merged layer computes what the adapted one did",
     "the scale alpha/rank is missing"),
    ("05", (LORA, ("return (self.scaling * (self.lora_A.data @ self.lora_B.data))",
                   "return np.nan * (self.scaling * (self.lora_A.data @ self.lora_B.data))")),
     "delta_weight is (alpha/rank)·A·B: the merged layer computes what the adapted one did", "by up to nan"),
    ("05", (LORA, ("return F.linear(F.linear(self.lora_dropout(x), self.lora_A) * self.scaling, self.lora_B)",
                   "return Tensor(self.lora_dropout(x).data @ self.lora_A.data @ self.lora_B.data * self.scaling)")),
     "gradients reach lora_A and lora_B, and match central differences", "the update was computed off the tape"),
    ("05", (GRID, ("scale = np.maximum(-lo, hi) / scheme.qmax",
                   "scale = np.maximum(-lo, hi) / 2 ** (scheme.bits - 1)")),
     "scale_and_zero, symmetric: s = max(|lo|, |hi|) / (2^(bits−1) − 1), z = 0", "divided by 2^(bits−1) = 8"),
    ("05", (GRID, ("np.round(units / scale[:, None, :])", "np.trunc(units / scale[:, None, :])")),
     "quantize_units rounds to the nearest level, clamps to [qmin, qmax], stores q − qmin as uint8",
     "you truncated w / s"),
    ("05", (GRID, ("np.round(units / scale[:, None, :])", "np.round(units / scale[:, :, None])")),
     "each unit's scale applies to its own values: (G, C) scales broadcast over the unit's g rows",
     "the scale of column c was applied to row c"),
    ("05", (GRID, ("q = codes.astype(np.int32) + scheme.qmin - zero[:, None, :]",
                   "q = codes.astype(np.int32) + scheme.qmin")),
     "dequantize_units gives (q − z)·s: a round trip is off by at most s/2", "you left out the zero point"),
    ("06", (BPE, ("counts = Counter(word for text in texts for word in pretokenize(text))", "counts = Counter(texts)")),
     "train merges only inside words: it pretokenizes first", "it joins `x` and `|`, two words"),
    ("06", (BPE, ("pairs[pair] += n", "pairs[pair] += 1")),
     "train weights each word's pairs by how often the word occurs", "your counts took each distinct word once"),
    ("06", (BPE, ("best = min(pairs, key=lambda pair: (-pairs[pair], pair))", "best = max(pairs, key=pairs.get)")),
     "train breaks a tie by the smallest (left id, right id), as tokenizers does", "'b' + 'a' was seen first"),
    ("06", (BPE, ("best = min(pairs, key=lambda pair: (-pairs[pair], pair))",
                  "best = min(pairs, key=lambda pair: (-pairs[pair], [tokenizer.vocab[i] for i in pair]))")),
     "train breaks a tie by the smallest (left id, right id), as tokenizers does", "as bytes C3 A0 < C3 A9"),
    # the three off-by-ones (issue 49): the last pair never counted, one merge too many, an id that never advances
    ("06", (BPE, ("for pair in pairwise(word):", "for pair in pairwise(word[:-1]):")), STEP_BY_STEP,
     "your train made no merge 3 (new id 262); expected 'abcd' + 'e' (ids 261, 71): 'abcd' + 'e' is the last pair"),
    ("06", (BPE, ("while tokenizer.vocab_size + len(merges) < vocab_size:",
                  "while tokenizer.vocab_size + len(merges) <= vocab_size:")), STEP_BY_STEP,
     "your merge 3 (new id 262) is 'abcd' + 'e' (ids 261, 71): one merge too many"),
    ("06", (BPE, ("new_id = tokenizer.vocab_size + len(merges)", "new_id = tokenizer.vocab_size")), STEP_BY_STEP,
     "your merge 2 (new id 261) is 'ab' + 'd' (ids 259, 70); expected 'abc' + 'd' (ids 260, 70): id 259 is merge 0's"),
    ("06", (BPE, ("for pair in pairwise(word):", "for pair in set(pairwise(word)):")),
     "train counts overlapping pairs (aaa holds a + a twice) and merges left to right",
     "counted once per word they tie"),
    ("06", (BPE, ("best = min(ranked, key=self.rank.__getitem__)", "best = ranked[0]")),
     "encode applies the merges by rank inside each word and gives tokenizers' ids", "; tokenizers gives"),
    ("06", (BPE, ('"|".join(map(re.escape, longest_first))) if self.special_tokens', '"|".join(map(re.escape, '
                  'longest_first))) if False')),
     "special tokens are whole: never split, never merged, wherever they are in the text", "encode('<bos>hablo<eos>')"),
    ("06", (BPE, ('b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")',
                  '"".join(self.vocab[i].decode("utf-8", errors="replace") for i in ids)')),
     "decode(encode(s)) == s for 300 random UTF-8 strings: bytes are joined, then decoded once", "decode(encode("),
    ("07", (NORM, ("mean_square = (x * x)", "x = x - x.mean(axis=-1, keepdims=True)\n        mean_square = (x * x)")),
     "RMSNorm divides each row by √(mean(x²) + eps) and multiplies by weight", "your rows are centred first"),
    ("07", (NORM, ("(mean_square + self.eps) ** -0.5", "mean_square ** -0.5")),
     "RMSNorm divides each row by √(mean(x²) + eps) and multiplies by weight", "eps is missing"),
    ("07", (NORM, ("mean_square = (x * x).mean(axis=-1, keepdims=True)  # no centring: that is LayerNorm",
                   "from minitrain.autograd import functional as F\n        return F.rms_norm(x, self.weight, "
                   "self.eps)")),
     "RMSNorm divides each row by √(mean(x²) + eps) and multiplies by weight", "calls functional.rms_norm"),
    ("07", (ROTARY, ("concat([-x[..., half:], x[..., :half]], axis=-1)", "concat([x[..., half:], -x[..., :half]], "
                                                                        "axis=-1)")),
     "apply_rotary rotates each pair (x₁[i], x₂[i]) by its angle: x·cos + rotate_half(x)·sin",
     "every pair turned the other way"),
    ("07", (ATTENTION, ("v = self.v_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim)",
                        "v = apply_rotary(self.v_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim), cos, "
                        "sin)")),
     "LlamaAttention with H_kv = H: rotary q and k, causal softmax(q·k/√D)·v, o_proj, as the library's",
     "v was rotated too"),
    ("07", (SWIGLU, ("gate = self.gate_proj(x)", "gate = self.up_proj(x)"),
            ("* self.up_proj(x)))", "* self.gate_proj(x)))")),
     "LlamaMLP is down_proj(silu(gate_proj(x)) · up_proj(x)), SwiGLU", "gate and up are swapped"),
    ("07", (ATTENTION, ("q.reshape(batch, time, self.n_kv_head, group, self.head_dim).transpose(0, 2, 3, 1, 4)",
                        "q.reshape(batch, time, group, self.n_kv_head, self.head_dim).transpose(0, 3, 2, 1, 4)"),
            ("heads = (weights @ v).transpose(0, 3, 1, 2, 4)", "heads = (weights @ v).transpose(0, 3, 2, 1, 4)")),
     "grouped-query attention, H = 4 query heads over H_kv = 2 and 1 key/value heads", "(tiled)"),
    ("07", (ATTENTION, ("            keys, values = cache.update(k.data, v.data)\n", "            keys, values = "
                        "k.data, v.data\n            cache.update(k.data, v.data)\n")),
     "with a KV cache, feeding tokens one at a time gives the logits of one pass over the whole sequence",
     "new token 1 (5 cached) raised"),
    ("07", (ATTENTION, ("  keys, values = cache.update(k.data, v.data)", "  keys, values = cache.update(self.k_proj("
                        "x).reshape(batch, time, self.n_kv_head, self.head_dim).data, v.data)"),
            ("k, v = Tensor(keys, dtype=keys.dtype), Tensor(values",
             "k, v = apply_rotary(Tensor(keys, dtype=keys.dtype), cos, sin), Tensor(values")),
     "with a KV cache, feeding tokens one at a time gives the logits of one pass over the whole sequence",
     "each rotated at its own position"),
    ("07", (ATTENTION, ("masked_fill(scores, blocked, -1e9)", "masked_fill(scores, blocked, -np.inf)")),
     "with a KV cache, feeding tokens one at a time gives the logits of one pass over the whole sequence",
     "a softmax over a row of −inf is 0/0"),
    ("08", (MASK, ('mask += [loss_on == "all"] * len(piece)', 'mask += [True] * len(piece)')),
     "answer_mask counts the answer and its end token, nothing of the question (a SmolLM2 conversation)",
     "it counted the question (the system and user turns) too"),
    ("08", (MASK, ("mask += [True] * counted + [False] * (len(piece) - counted)",
                   "mask += [False] + [True] * (counted - 1) + [False] * (len(piece) - counted)")),
     "answer_mask counts the answer and its end token, nothing of the question (a SmolLM2 conversation)",
     "it missed the first token of each answer"),
    ("08", (MASK, ("        if eos_id is not None and eos_id in piece:", "        if False:")),
     "answer_mask counts the answer and its end token, nothing of the question (a SmolLM2 conversation)",
     "it counted the newline after <|im_end|>"),
    ("08", (MASK, ('if loss_on == "all" or k % 2 == 0:', 'if loss_on == "all" or k != 1:')),
     "answer_mask agrees with the library's on 200 random conversations (several turns, system messages, empty "
     "and multi-line answers)", "it skipped answer 2"),
    ("08", (ANSWERS, ('    scores = token_loss(model, pack(examples, width, "pad", pad_id_of(tokenizer)), '
                      'model.config["vocab_size"])\n',
                      '    each = [token_loss(model, pack([e], width, "pad", pad_id_of(tokenizer)), '
                      'model.config["vocab_size"]) for e in examples]\n'
                      '    scores = {"loss": sum(s["loss"] for s in each) / len(each), '
                      '"tokens": sum(s["tokens"] for s in each)}\n'
                      '    scores["ppl"] = math.exp(scores["loss"])\n')),
     "answer_scores: the mean −log p per counted answer token over all the records, and its exp",
     "you averaged the records' losses"),
    ("08", (ANSWERS, (".strip() for ids in new]", " for ids in new]")),
     "exact_match: the greedy answer to the generation prompt, stripped, equals the answer",
     "you compared without stripping"),
    ("09", (TIES, ('keep = np.argsort(-np.abs(flat), kind="stable")[:k]',
                   'keep = np.abs(flat) >= np.sort(np.abs(flat))[::-1][k - 1]')),
     "trim keeps exactly k entries when |τ| ties at the k-th: the earlier ones first", "passed a threshold"),
    ("09", (TIES, ('keep = np.argsort(-np.abs(flat), kind="stable")[:k]',
                   'keep = np.argsort(np.abs(flat), kind="stable")[::-1][:k]')),
     "trim keeps exactly k entries when |τ| ties at the k-th: the earlier ones first",
     "the contract keeps the earlier ones"),
    ("09", (TIES, ('keep = np.argsort(-np.abs(flat), kind="stable")[:k]', "keep = np.argsort(-np.abs(flat))[:k]")),
     "trim keeps exactly k entries when |τ| ties at the k-th: the earlier ones first",
     "of |τ| = 0.3 you kept positions [2, 4, 5, 7, 9, 10, 13, 14]"),
    ("09", (TIES, ("k = round(density * delta.size)", "k = int(density * delta.size)")),
     "trim keeps the k = round(density · size) largest |τ| of the whole tensor, signs and places kept",
     "int() truncates"),
    ("09", (TIES, ("sign = np.sign((w * stacked).sum(axis=0))", "sign = np.sign((w * np.sign(stacked)).sum(axis=0))")),
     "elect_and_mean elects each entry's sign by total mass, sgn(Σ w_i τ_i), not by a count of signs",
     "elected by count"),
    ("09", (TIES, ("agree = (np.sign(stacked) == sign) & (stacked != 0)", "agree = np.ones_like(stacked, dtype=bool)")),
     "elect_and_mean averages only the models that agree with the elected sign (a disjoint mean)",
     "the mean over all 3 models"),
    ("09", (TIES, ("agree = (np.sign(stacked) == sign) & (stacked != 0)", "agree = np.sign(stacked) != -sign")),
     "elect_and_mean averages only the models that agree with the elected sign (a disjoint mean)",
     "the models that left it at 0 counted"),
    ("09", (TIES, ("sign = np.sign((w * stacked).sum(axis=0))",
                   "sign = np.where((w * stacked).sum(axis=0) >= 0, 1.0, -1.0)")),
     "elect_and_mean gives 0 where the changes sum to exactly 0 (no sign) or no model changed the entry",
     "sum to exactly 0: no sign is elected"),
    ("09", (TIES, ("np.divide(total, weight_sum, out=np.zeros_like(total), where=weight_sum > 0)",
                   "total / weight_sum")),
     "elect_and_mean gives 0 where the changes sum to exactly 0 (no sign) or no model changed the entry", "(0/0"),
    ("09", (TIES, ("total = (w * stacked * agree).sum(axis=0)", "total = (stacked * agree).sum(axis=0)")),
     "elect_and_mean weights model i by w_i, in the vote and in the mean; random tensors as the paper", "7/3"),
    ("09", (TIES, ("lam * elect_and_mean(trimmed, weights)", "elect_and_mean(trimmed, weights)")),
     TIES_ITEM,
     "λ was not applied"),
    ("09", (TIES, ("lam * elect_and_mean(trimmed, weights)).astype(base.dtype)",
                   "lam * elect_and_mean(trimmed, weights))")),
     TIES_ITEM,
     "cast the merge back"),
    ("09", (DARE, ('    return np.random.default_rng([seed, model_index, zlib.crc32(name.encode("utf-8"))])',
                   "    return np.random.default_rng(seed)")),
     "mask_rng(seed, i, name) is default_rng([seed, i, crc32(name)]): one stream per model and tensor",
     "seeded by the seed alone"),
    ("09", (DARE, ("return np.where(keep, delta / density, 0.0)", "return np.where(keep, delta, 0.0)")),
     "drop_and_rescale keeps an entry where rng.random(shape) < density and divides it by density",
     "were not divided by density"),
    ("09", (DARE, ("return np.where(keep, delta / density, 0.0)", "return np.where(keep, 0.0, delta / density)")),
     "drop_and_rescale keeps an entry where rng.random(shape) < density and divides it by density",
     "those are the dropped ones"),
    ("09", (DARE, ("keep = rng.random(delta.shape) < density",
                   "keep = rng.permutation(delta.size).reshape(delta.shape) < round(density * delta.size)")),
     "drop_and_rescale keeps an entry where rng.random(shape) < density and divides it by density", "; expected [0,"),
    # a task vector of the other sign (θ_base − θ_i), and one taken in float32 then cast (the fresh walk's, issue 49)
    ("09", (TIES, ("zip(task_vectors(base, tensors), densities",
                   "zip([-d for d in task_vectors(base, tensors)], densities")),
     TIES_ITEM, "the task vectors have the wrong sign"),
    ("09", (TIES, ("zip(task_vectors(base, tensors), densities",
                   "zip([(t - base).astype(np.float64) for t in tensors], densities")),
     TIES_ITEM, "τ was taken in float32, where 0.5 + 2⁻²⁵ rounds to 0.5"),
    ("09", (DARE, ("zip(task_vectors(base, tensors), densities",
                   "zip([-d for d in task_vectors(base, tensors)], densities")),
     DELTAS_ITEM, "the task vectors have the wrong sign"),
    ("09", (DARE, ("zip(task_vectors(base, tensors), densities",
                   "zip([(t - base).astype(np.float64) for t in tensors], densities")),
     DELTAS_ITEM, "equal to float32's precision only"),
    ("09", (DARE, ("    return [drop_and_rescale(d, p, mask_rng(seed, i, name))\n",
                   "    rng = mask_rng(seed, 0, name)\n    return [drop_and_rescale(d, p, rng)\n")),
     "dare_deltas drops model i's task vector with mask_rng(seed, i, name) and its own density",
     "one generator for all the models"),
    ("09", (DARE, ("from minitrain.merging.ties import elect_and_mean",
                   "from minitrain.merging.ties import elect_and_mean, trim"),
            ("merged = elect_and_mean(dare_deltas(base, tensors, densities, seed, name), weights)",
             "merged = elect_and_mean([trim(d, p) for d, p in zip(dare_deltas(base, tensors, densities, seed, name), "
             "densities)], weights)")),
     "dare_ties = θ_base + λ · elect_and_mean of the τ̃_i: DARE's drop in place of TIES's trim", "trimmed as well"),
]


@pytest.mark.parametrize(("lab", "bug", "check", "words"), BUGS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BUGS)])
def test_each_typical_bug_is_caught_by_its_named_check(lab, bug, check, words, tmp_path):
    assert check in {c.name for c in checklist(lab).checks}
    ws = workspace_with_reference(lab, tmp_path / "ws", bug)
    _, (outcome,) = grade(lab, ws, limits=None, only=lambda name: name == check)  # the sandbox: its own tests
    assert not outcome.passed, f"{check!r} did not catch {bug}"
    assert words in outcome.reason, outcome.reason


def test_every_lab_has_at_least_three_named_bugs():
    counts = {lab: sum(b[0] == lab for b in BUGS) for lab in LABS}
    assert min(counts.values()) >= 3, counts


def test_a_check_that_crashes_is_a_failure_that_says_where():
    checks = Checklist()

    @checks.check("divides", hint="h")
    def _divides(subject):
        return 1 / subject

    @checks.check("fails", hint="h2", needs=(_divides,))
    def _fails(subject):
        raise Failed("never")

    first, second = checks.run(0)
    assert not first.passed and first.reason.startswith("ZeroDivisionError: division by zero at ")
    assert second.reason == "not run: fix first: divides" and second.hint == "h2"
    assert [o.passed for o in checks.run(1)] == [True, False]


def test_an_object_returned_where_a_number_is_expected_is_the_students_mistake(tmp_path):
    """train_step returning the loss Tensor, not loss.item(): the object stays in the child, and float() of it says
    so in the student's terms, never that the checker failed."""
    ws = workspace_with_reference("01", tmp_path / "ws", (LOOP, ("loss_value = loss.item()", "loss_value = loss")))
    item = "train_step returns the batch's token-mean loss"
    _, (outcome,) = grade("01", ws, only=lambda name: name == item)
    assert outcome.reason == "your code returned an object of type Tensor, where a number was expected", outcome.reason
    assert outcome.hint == checklist("01").checks[0].hint


def test_a_passing_check_shows_what_it_measured_under_its_tick():
    checks = Checklist()

    @checks.check("measures", hint="h")
    def _measures(subject):
        return f"your PPL {subject:.4f}\nthe table's 1.2500"

    (outcome,) = checks.run(1.25)
    assert outcome.passed and format_outcome(outcome) == "  ✓ measures\n      your PPL 1.2500\n      the table's 1.2500"
    assert format_outcome(Outcome("quiet", True)) == "  ✓ quiet"


def test_lab_check_refuses_to_run_under_the_seam(tmp_path):
    env = {**__import__("os").environ, seam.LAB_DIR_VARIABLE: str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "minitrain.cli", "lab", "check", "00"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "error: unset MINITRAIN_LAB_DIR before `minitrain lab check`; give the workspace as DIR\n"


def test_the_cli_prints_the_checklist_and_exits_1_on_a_starter(tmp_path, capsys):
    from minitrain.cli import main

    assert main(["lab", "start", "04", str(tmp_path / "ws")]) == 0
    assert "lab 04: wrote" in capsys.readouterr().out
    assert main(["lab", "check", "04", str(tmp_path / "ws")]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"lab 04 · Early stopping and checkpoint selection: checking {tmp_path / 'ws'}\n")
    assert "  ✗ is_better: lower wins in mode 'min', higher in 'max', by more than min_delta\n" in out
    assert out.rstrip().endswith("0 of 10 passed.")
    assert main(["lab", "check", "04", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


@pytest.mark.parametrize("lab", list(LABS))
def test_each_lab_text_lists_the_names_a_student_writes(lab):
    """The lab text (both languages) names every function and class the checker and the library need from the
    student, and the files they go in."""
    for text in (LABS[lab].text, LABS[lab].text.replace(".md", ".es.md")):
        page = (REPO / text).read_text(encoding="utf-8")
        for path, names in LABS[lab].pieces.items():
            assert f"`{path}`" in page, f"{text} does not name the file {path}"
            for name in names:
                assert f"`{name}`" in page or f"`{name}(" in page, f"{text} does not list `{name}`"


def test_a_bug_is_named_by_its_own_check_only(tmp_path):
    """evaluate averaging batch means fails the averaging check, and not the checks of eval mode and the tape (a
    student once saw it reported as dropout)."""
    bug = (LOOP, ("meter = PerplexityMeter()", "means = []"),
           ("meter.update(F.log_softmax(logits).data, batch.target, batch.loss_mask)",
            "one = PerplexityMeter()\n            one.update(F.log_softmax(logits).data, batch.target, "
            "batch.loss_mask)\n            means.append(one.mean_nll)"),
           ("return meter.mean_nll, meter.ppl", "return float(np.mean(means)), float(np.exp(np.mean(means)))"))
    ws = workspace_with_reference("01", tmp_path / "ws", bug)
    _, outcomes = grade("01", ws, only=lambda name: name.startswith("evaluate"))
    assert failures(outcomes) == {
        "evaluate averages over exactly the loss_mask positions of the whole split":
            "your evaluate() averaged the 8 batch means: the last batch has 4 records, not 20, so each token must "
            "weigh the same"}
