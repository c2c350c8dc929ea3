"""The model card (README.md of an exported model), written from what the run (or a pretrained base) recorded.

A Hugging Face model card is Markdown with YAML front matter. The front matter is built with
`huggingface_hub.ModelCardData`, so its keys (`library_name`, `license`, `language`, `tags`, `pipeline_tag`,
`base_model`, and `model-index` with the evaluation results) are spelled the way the Hub expects and parse back
with `huggingface_hub.ModelCard`. The body reports the run's facts and nothing else: a number the run did not
record is printed as "not recorded", never guessed. No dates, so the same run always gives the same card.

What the card says was trained comes from the run's config (`describe`): the verb corpus of the labs (JSONL
records, held-out verbs), plain text (one example per line), or a table (model.type sequential: a classifier
or regressor of the column it names). Only MiniGPT has a transformers twin, so only its card shows how to load
it with transformers. A family is described from its record: its export layout (GPT-2's words for gpt2), else the
first sentence of its model's docstring (`Fixed-context MLP language model.`).

A pretrained base (`pretrained_card`: a Llama-family or GPT-2 base exported as it is, or a run that fine-tuned one)
is another kind of subject: a base someone else pretrained, its own byte-level BPE tokenizer (not characters), text
or chat records counted in the base's tokens, and `LlamaForCausalLM` / `Qwen2ForCausalLM` (a GPT-2 base:
`GPT2LMHeadModel`) as its transformers class; its license is the base's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCardData

from minitrain.common.errors import UserError
from minitrain.common.io import parse_json, read_text
from minitrain.common.paths import shown_path
from minitrain.formats.hf_config import ARCHITECTURES
from minitrain.hub.pretrained import is_base_id
from minitrain.hub.run_folder import RunInfo
from minitrain.lora.peft import quantized_base_note
from minitrain.models.registry import family_of, layout_of, model_type

LICENSE = "mit"
LICENSE_NOTE = "the base model's license applies (see its own model card)"
MISSING = "not recorded"
VERBS, TEXT, TABLE = "verbs", "text", "table"


@dataclass
class Subject:
    """What the run trained on and for, in the words the card uses."""

    kind: str  # VERBS, TEXT or TABLE
    summary: str  # the card's first paragraph
    task: str  # the Hub's pipeline tag
    task_name: str
    dataset_type: str
    dataset_name: str
    tags: list[str] = field(default_factory=list)
    language: str | None = None


def describe(info: RunInfo) -> Subject:
    """The subject of the run in `info`, from its model family and data section."""
    data, family = info.section("data"), family_of(info.model_config)
    base = ["minitrain", "numpy", "education"]
    if family.reads == "table":
        pipeline = info.pipeline
        task = pipeline.get("task", MISSING)
        source = shown_path(data.get("source") or data.get("train_path") or MISSING)
        return Subject(TABLE, f"A {_layer_summary(info.model_config)} network ({task}) that predicts the column "
                              f"`{pipeline.get('target', MISSING)}` of the table `{source}` from "
                              f"{len(pipeline.get('features', [])) or MISSING} features.",
                       f"tabular-{task}", f"Tabular {task}", "table", str(source), [*base, f"tabular-{task}"])
    gpt2 = layout_of(info.model_config) == "gpt2"  # transformers' GPT-2 is its twin
    what = "GPT-2" if gpt2 else " ".join(_family_sentence(info.model_config).split()[1:])  # without its modifier
    tags = [*base, *(["gpt2"] if gpt2 else []), "character-level"]
    if data.get("format") == "text" or data.get("heldout_policy") == "none":
        train = shown_path(data.get("train_path", MISSING))
        return Subject(TEXT, f"A character-level {what} trained on plain text (`{train}`, one example per line): "
                             "it continues a prompt one character at a time.",
                       "text-generation", "Character-level language modelling", "text", str(train), tags)
    return Subject(VERBS, f"A character-level {what} that conjugates Spanish verbs: given `verb|T#|` (tense letter "
                          "T, person 1-6) it writes the conjugated form, e.g. `comer|R1|` -> `comí`.",
                   "text-generation", "Spanish verb conjugation", "spanish-verb-conjugation",
                   "Spanish verb conjugations (minitrain corpus)", [*tags, "spanish", "verb-conjugation"], "es")


def _family_sentence(model_config: dict[str, Any]) -> str:
    """The family's words for itself: the first sentence of its model class's docstring, without the period."""
    return (family_of(model_config).model.__doc__ or "").strip().split(".")[0]


def _layer_summary(model_config: dict[str, Any]) -> str:
    """`64 → 64 → 10` from a sequential model's linear layers."""
    widths = []
    for layer in model_config.get("layers", []):
        (kind, options), = layer.items()
        if kind == "linear":
            widths += [options["in_features"]] if not widths else []
            widths.append(options["out_features"])
    return " → ".join(map(str, widths)) or "sequential"


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return MISSING
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def _pct(value: Any) -> str:
    return f"{100 * value:.1f} %" if isinstance(value, int | float) and not isinstance(value, bool) else MISSING


def count_split(path: Path | None, fmt: str = "jsonl") -> tuple[int, int] | None:
    """(records, tokens) of a text split, counting [BOS] + characters + [EOS] per record: JSONL records' "text", or
    the non-empty lines of a plain-text file. None when the file is missing or not of that shape."""
    if path is None or not path.is_file():
        return None
    records = tokens = 0
    try:
        for line in read_text(path, "data file").splitlines():
            if line.strip():
                text = parse_json(line, str(path), "record")["text"] if fmt == "jsonl" else line
                records += 1
                tokens += len(text) + 2  # char-level: one token per character
    except (UserError, KeyError, TypeError):
        return None
    return records, tokens


def _metric_rows(info: RunInfo, subject: Subject) -> list[tuple[str, str, str, Any]]:
    """(split, metric type, name, value) of the evaluation results the run recorded."""
    r = info.results
    if subject.kind == TABLE:
        names = ("accuracy", "f1", "auc_roc", "mse", "mae", "r2")
        return [(split, name, f"{split.capitalize()} {name}", r.get(f"{split}_{name}"))
                for split in ("test", "val") for name in names]
    val = "Val perplexity (held-out verbs, answer tokens)" if subject.kind == VERBS else "Val perplexity"
    rows = [("val", "perplexity", val, r.get("val_ppl"))]
    if subject.kind == VERBS:
        rows.append(("val", "exact_match", "Held-out exact match (greedy)", r.get("val_exact_match")))
    train = "Train perplexity (answer tokens)" if subject.kind == VERBS else "Train perplexity"
    return [*rows, ("train", "perplexity", train, r.get("train_ppl"))]


def eval_results(info: RunInfo, subject: Subject) -> list[EvalResult]:
    """The model-index entries: the metrics the run recorded (perplexities, exact match, or a table's scores)."""
    return [
        EvalResult(task_type=subject.task, task_name=subject.task_name, dataset_type=subject.dataset_type,
                   dataset_name=subject.dataset_name, dataset_split=split, metric_type=metric, metric_name=name,
                   metric_value=round(float(value), 4))
        for split, metric, name, value in _metric_rows(info, subject)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ]


def card_data(info: RunInfo, model_name: str, subject: Subject) -> ModelCardData:
    init_from = info.section("model").get("init_from")
    return ModelCardData(
        library_name="minitrain",
        license=LICENSE,
        language=subject.language,
        tags=list(subject.tags),
        pipeline_tag=subject.task,
        base_model=init_from if is_base_id(init_from) else None,
        model_name=model_name,
        eval_results=eval_results(info, subject) or None,
    )


def base_name(base: str) -> str:
    """A base as a card names it: its Hub id (or URL), else its file or folder's name, never a path."""
    return base if is_base_id(base) or "://" in base else Path(base).name


def get(section: dict[str, Any], key: str) -> Any:
    return section.get(key, MISSING)


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])


def _data_section(info: RunInfo, subject: Subject) -> str:
    data = info.section("data")
    if subject.kind == TABLE:
        splits = info.manifest.get("data", {}).get("splits", {}) if isinstance(info.manifest.get("data"), dict) else {}
        rows = [(split, _num(splits.get(split, {}).get("rows")), f"`{splits.get(split, {}).get('sha256', MISSING)}`")
                for split in ("train", "val", "test") if split in splits or split != "test"]
        classes = info.pipeline.get("classes")
        described = f"{len(classes)} classes: {', '.join(map(str, classes[:20]))}" if classes else "values"
        steps = ", ".join(step["kind"] for step in info.pipeline.get("preprocessing", [])) or "none"
        return (f"Rows of `{shown_path(data.get('source') or data.get('train_path', MISSING))}`; the target "
                f"`{info.pipeline.get('target', MISSING)}` has {described}. Preprocessing (fitted on the training "
                f"split, saved in the model file): {steps}.\n\n" + _table(("split", "rows", "sha256"), rows))
    rows = []
    for split in ("train", "val", "dev"):
        counted = count_split(info.find(data.get(f"{split}_path")), data.get("format", "jsonl"))
        rows.append((split, *(map(_num, counted) if counted else (MISSING, MISSING))))
    table = _table(("split", "records", "tokens"), rows)
    if subject.kind == TEXT:
        return f"Plain text, one example per non-empty line.\n\n{table}"
    return (f"Spanish verb conjugations, one `verb|T#|form` record per line. The val split holds verbs never seen "
            f"in training (held-out policy `{data.get('heldout_policy', MISSING)}`), so val measures how well the "
            f"model generalises to new verbs.\n\n{table}")


def _model_section(info: RunInfo, vocab_size: int) -> str:
    mc = info.model_config
    lines = [parameters_line(info)]
    if family_of(mc).reads == "table":
        layers = ", ".join(f"{k} {v}" if not isinstance(v, dict) else k for layer in mc["layers"]
                           for k, v in layer.items())
        lines.insert(0, f"- Architecture: a stack of layers ({_layer_summary(mc)}): {layers}. A last softmax is "
                        "folded into the cross-entropy loss; the model outputs logits.")
        return "\n".join(lines)
    if layout_of(mc) == "gpt2":
        lines.insert(0, "- Architecture: GPT-2 decoder (pre-LayerNorm blocks, tanh-GELU MLP, learned positions, "
                        f"output layer tied to\n  the token embedding): {mc['n_layer']} layers, {mc['n_head']} heads, "
                        f"width {mc['d_model']}, MLP width {mc['d_ff']}.")
    else:  # the family's own words and `model:` keys (a fixed-context model's: its context and widths)
        words, own = _family_sentence(mc), family_of(mc).keys.model_fields
        details = (f"{mc['context']} characters of {mc.get('d_embed')} dimensions, hidden {mc.get('hidden')}"
                   if "context" in mc else ", ".join(f"{k} {mc[k]}" for k in own if k in mc))
        lines.insert(0, f"- Architecture: {words[:1].lower()}{words[1:]} ({details}).")
    lines += [f"- Context length: {mc['max_seq_len']} tokens.",
              f"- Tokenizer: one token per character, {vocab_size} symbols including `<pad>` (0), `<bos>` (1) and "
              f"`<eos>` (2);\n  the embedding has {mc['vocab_size']} rows. `tokenizer.json` holds the same vocabulary "
              "in the Hugging Face\n  tokenizers format."]
    return "\n".join(lines)


def parameters_line(info: RunInfo) -> str:
    """The whole model's parameters (a QLoRA base's 4-bit weights too) and the share the run trained, as its
    manifest counted them; a bare model file's own tensors (an adapter file: the adapter's alone)."""
    m = info.manifest
    counts = [m.get(key, 0) for key in ("parameters", "quantized_parameters", "trainable_parameters")]
    if not all(type(n) is int and n >= 0 for n in counts) or not m.get("parameters"):  # none, or a damaged one
        own = f"{info.num_parameters:,}"
        return f"- Parameters: {f'{MISSING} (the adapter file holds {own})' if info.adapter else own}."
    total = m["parameters"] + m.get("quantized_parameters", 0)
    trained = m.get("trainable_parameters", total)
    share = f" ({trained:,} trained by the run, {100 * trained / total:.2f} %; the rest frozen)"
    return f"- Parameters: {total:,}{share if trained < total else ''}."


def _training_table(info: RunInfo, subject: Subject) -> str:
    opt, sched, train = info.section("optimizer"), info.section("scheduler"), info.section("training")
    m, r = info.manifest, info.results
    hw = m.get("hardware") if isinstance(m.get("hardware"), dict) else {}
    versions = m.get("versions") if isinstance(m.get("versions"), dict) else {}
    steps = m.get("steps_done", sched.get("total_steps", train.get("total_steps")))
    unit = "rows" if subject.kind == TABLE else "sequences"
    rows = [
        ("optimizer", f"{get(opt, 'type')}, lr {get(opt, 'lr_max')} -> {get(opt, 'lr_min')}, "
                      f"betas ({get(opt, 'beta1')}, {get(opt, 'beta2')}), weight decay {get(opt, 'weight_decay')}"),
        ("gradient clipping (global norm)", opt.get("clip") or train.get("clip") or "none"),
        ("schedule", f"{get(sched, 'type')}, warmup {get(sched, 'warmup_steps')} steps"),
        ("steps", _num(steps)),
        ("batch size", f"{get(train, 'batch_size')} {unit}"),
        *([] if subject.kind == TABLE else [("loss counted on", f"{get(info.section('data'), 'loss_on')} tokens")]),
        ("seeds", f"training {m.get('seed', get(train, 'rng_seed'))}, "
                  f"data {m.get('data_seed', get(train, 'data_seed'))}"),
        ("hardware", f"{get(hw, 'cpu_model')}, {get(hw, 'cpu_cores')} cores, {get(hw, 'ram_gb')} GB RAM"),
        ("wall time", f"{_num(r.get('wall_seconds', m.get('train_wall_seconds')), 1)} s"),
        ("run status", get(m, "status")),
        ("code", f"minitrain {get(versions, 'minitrain')}, commit {m.get('git_sha') or MISSING}"),
    ]
    return _table(("setting", "value"), rows)


def _results_section(info: RunInfo, subject: Subject) -> str:
    r = info.results
    if subject.kind == TABLE:
        names = [n for n in ("loss", "accuracy", "precision", "recall", "f1", "auc_roc", "mse", "mae", "r2")
                 if any(f"{s}_{n}" in r for s in ("train", "val", "test"))]
        rows = [(name, *(_num(r.get(f"{s}_{name}"), 4) for s in ("train", "val", "test"))) for name in names]
        return ("Precision, recall and F1 are macro averages over the classes; AUC-ROC is one-vs-rest.\n\n"
                + _table(("metric", "train", "val", "test"), rows or [(MISSING, MISSING, MISSING, MISSING)]))
    beats = r.get("beats_baseline")
    rows = [
        ("train PPL", _num(r.get("train_ppl"))),
        ("val PPL (held-out verbs)" if subject.kind == VERBS else "val PPL", _num(r.get("val_ppl"))),
    ]
    if "ngram_baseline_val_ppl" in r:  # the course's runs are compared with the baseline; a fine-tune's are not
        rows += [("character n-gram baseline, val PPL", _num(r.get("ngram_baseline_val_ppl"))),
                 ("beats the n-gram baseline", MISSING if beats is None else ("yes" if beats else "no"))]
    if subject.kind == VERBS:
        rows.append(("held-out exact match (greedy)", _pct(r.get("val_exact_match"))))
    counted = "the conjugated form and its EOS" if subject.kind == VERBS else "every character and the EOS"
    return (f"Perplexity is exp(mean negative log-likelihood) over the counted tokens ({counted}).\n\n"
            + _table(("metric", "value"), rows))


_USE = {
    VERBS: "Made for teaching: it shows, end to end, how a small transformer is trained, evaluated against a "
           "baseline and\nshared. It knows only the prompt format above and the patterns of its training verbs; it "
           "will confidently\nproduce wrong forms for unusual verbs, and it is not a general Spanish language model.",
    TEXT: "Made for teaching: a small character-level model of its training text. It continues prompts in the style "
          "of that\ntext and knows nothing beyond it; it is not a general language model.",
    TABLE: "Made for teaching: a small network trained with a hand-written NumPy library. It expects rows with the "
           "columns\nit was trained on, preprocessed by the saved pipeline (`minitrain predict` applies it); its "
           "scores above are\nits only guarantee.",
}


def _how_to_load(info: RunInfo, subject: Subject, repo: str) -> str:
    if subject.kind == TABLE:
        return ("With minitrain, from the run folder or the model file (it holds the fitted preprocessing and the "
                "classes):\n\n```bash\nminitrain predict RUN_DIR rows.csv -o predictions.csv\n```\n")
    prompt = "comer|R1|" if subject.kind == VERBS else "The "
    text = (f"With minitrain, as the starting point of a run (the weights are checked against the config when they "
            f"load) or\nto continue a prompt:\n\n```yaml\nmodel:\n  init_from: {repo}\n```\n\n```bash\n"
            f'minitrain sample {repo} --prompt "{prompt}"\n```\n')
    if layout_of(info.model_config) != "gpt2":
        return text
    return text + f"""
With transformers (PyTorch):

```python
from transformers import AutoTokenizer, GPT2LMHeadModel

model = GPT2LMHeadModel.from_pretrained("{repo}")
tokenizer = AutoTokenizer.from_pretrained("{repo}")
ids = tokenizer("{prompt}", return_tensors="pt").input_ids  # starts with <bos>
out = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=2, pad_token_id=0)
print(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
```
"""


def build_card(info: RunInfo, vocab_size: int | None, repo_id: str | None = None) -> str:
    """The whole README.md: front matter, then the sections a reader of the model needs (`vocab_size`: the
    tokenizer's, for a language model)."""
    subject = describe(info)
    name = repo_id or model_type(info.model_config)
    repo = repo_id or "user/name"
    init_from = info.section("model").get("init_from")
    origin = (f"Initialised from `{base_name(init_from)}`, then trained with minitrain." if init_from else
              "Trained from scratch (random initialisation) with minitrain, a pure-NumPy teaching library.")
    if info.adapter is not None:
        origin = _adapter_origin(info)
    loading = _peft_loading(info) if info.adapter else f"## How to load it\n\n{_how_to_load(info, subject, repo)}"
    body = f"""
# {name}

{subject.summary} {origin}

## Model

{_model_section(info, vocab_size)}

## Data

{_data_section(info, subject)}

## Training

{_training_table(info, subject)}

## Results

{_results_section(info, subject)}

## Intended use and limitations

{_USE[subject.kind]}

{loading}"""
    return f"---\n{card_data(info, name, subject).to_yaml()}\n---\n{body}"


def _adapter_origin(info: RunInfo) -> str:
    a = info.adapter
    quantized = f" (QLoRA), {quantized_base_note(a)}" if a.quantize_base else ""
    return (f"This repo holds a LoRA adapter (rank {a.rank}, alpha {a.alpha:g}, on {len(a.targets)} linear layers) "
            f"trained with minitrain on the frozen base `{base_name(a.base or MISSING)}`{quantized}.")


def _peft_loading(info: RunInfo) -> str:
    """How to put the adapter on its base with PEFT (a section of an adapter's card)."""
    return f"""## How to load it

This folder is in PEFT's layout (adapter_config.json, adapter_model.safetensors). The base must be the model the
adapter was trained on, `{base_name(info.adapter.base or MISSING)}`, as `minitrain export` writes it:

```python
from peft import PeftModel
from transformers import GPT2LMHeadModel

model = PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained("BASE_EXPORT"), "THIS_FOLDER_OR_REPO")
```

`minitrain merge-adapters RUN_DIR OUT_DIR` folds the adapter into its base instead, and `minitrain publish
--merge-adapters` publishes the merged model.
"""


def _data_files(info: RunInfo) -> str:
    """The files the run read, as its manifest fingerprinted them (by name: no path of the training machine)."""
    files = info.manifest.get("data_sha256")
    rows = [(f"`{Path(entry['path']).name}`", f"`{entry.get('sha256', MISSING)}`") for entry in files.values()
            if isinstance(entry, dict) and isinstance(entry.get("path"), str)] if isinstance(files, dict) else []
    return _table(("file read", "sha256"), rows or [(MISSING, MISSING)])


# --- a pretrained base, or a run that fine-tuned one ------------------------------------------------------------

def architecture_name(model_config: dict[str, Any]) -> str:
    """The transformers class an export of this config loads as (formats/hf_config.py `to_hf_config`)."""
    return {**ARCHITECTURES, "gpt2": "GPT2LMHeadModel"}[layout_of(model_config)]


def describe_architecture(mc: dict[str, Any]) -> str:
    if layout_of(mc) == "gpt2":
        return (f"GPT-2 (GPT2LMHeadModel: LayerNorm, learned positions, GELU MLP, output layer tied to the token "
                f"embedding): {mc['n_layer']} layers, {mc['n_head']} heads, width {mc['d_model']}, MLP width "
                f"{mc['d_ff']}, {mc['vocab_size']} embedding rows")
    head = "tied to the token embedding" if mc.get("tie_embeddings", True) else "its own output matrix"
    scaling = f", rope_scaling {mc['rope_scaling']['rope_type']}" if mc.get("rope_scaling") else ""
    bias = ", biases on q/k/v (Qwen2)" if mc.get("attention_bias") else ""
    return (f"Llama-family decoder ({architecture_name(mc)}: RMSNorm, rotary positions θ {mc.get('rope_theta')}"
            f"{scaling}, grouped-query attention, SwiGLU MLP{bias}, output layer {head}): {mc['n_layer']} layers, "
            f"{mc['n_head']} query heads and {mc.get('n_kv_head') or mc['n_head']} key/value heads of "
            f"{mc.get('head_dim')}, width {mc['d_model']}, MLP width {mc['d_ff']}, {mc['vocab_size']} embedding rows")


def pretrained_card(model_config: dict[str, Any], vocab_size: int, repo_id: str | None, base: str | None,
                    info: RunInfo | None = None, chat: bool = False,
                    merge_gap: tuple[bool, float, int] | None = None, adapter: bool = False) -> str:
    """README.md for the export of a pretrained base: of a run (`info`) fine-tuned from `base`, or of `base`;
    `merge_gap` (a QLoRA run): (merged into the float base?, max |Δlogit| between its two merges, positions);
    `adapter`: the export is the run's LoRA adapter in PEFT's layout, loaded onto `base`."""
    repo = repo_id or "user/name"
    name = repo_id or architecture_name(model_config)
    shown = base_name(base or MISSING)
    origin = (f"Fine-tuned with minitrain (a pure-NumPy teaching library) from the pretrained base `{shown}`."
              if info is not None else f"The pretrained model `{shown}`, converted to float32 by minitrain.")
    if adapter:
        origin = _adapter_origin(info) + " It is in PEFT's layout, and loads onto that base."
    elif info is not None and info.adapter is not None and merge_gap is not None:
        onto, other = (("the float base (`export --float-base`): not what the run computed", "the NF4 base") if
                       merge_gap[0] else ("that quantized base, dequantized: what the run computed", "the float base"))
        origin += (f" The run's LoRA adapter was {quantized_base_note(info.adapter)}. These weights are the adapter "
                   f"folded into {onto}; folded into {other} instead, the logits differ by up to {merge_gap[1]:.4g} "
                   f"(max |Δlogit| over {merge_gap[2]} positions of random token ids).")
    body = [
        f"# {name}", "", origin, "", "## Model", "",
        f"- Architecture: {describe_architecture(model_config)}.",
        parameters_line(info) if info is not None else None,
        f"- Context length used: {model_config['max_seq_len']} tokens.",
        f"- Tokenizer: the base's own ({vocab_size:,} tokens{', with its chat template' if chat else ''}); its "
        "files are the base's, byte for byte where it had them.",
    ]
    if info is not None:
        data, results = info.section("data"), info.results
        splits = ["train", "val", *(["test"] if "test_ppl" in results else [])]
        where = (f"`{shown_path(data['source'])}`" if data.get("source") else
                 f"`{shown_path(data.get('train_path', MISSING))}` (validation: "
                 f"`{shown_path(data.get('val_path', MISSING))}`)")
        body += ["", "## Data and training", "",
                 f"Records of {where}, encoded with the base's tokenizer, `packing: {data.get('packing', MISSING)}`, "
                 f"loss counted on `{data.get('loss_on', MISSING)}` tokens; {info.manifest.get('steps_done', MISSING)} "
                 "steps.", "", _data_files(info), "",
                 _table(("split", "loss", "perplexity"),
                        [(s, results.get(f"{s}_loss", MISSING), results.get(f"{s}_ppl", MISSING)) for s in splits])]
    prompt = ('messages = [{"role": "user", "content": "Hola"}]\n'
              'ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")'
              if chat else 'ids = tokenizer("Hola", return_tensors="pt").input_ids')
    body += ["", "## How to load it", "", "With transformers (PyTorch):", "", "```python",
             *(["from peft import AutoPeftModelForCausalLM  # the base adapter_config.json names, then this"]
               if adapter else []), f"from transformers import {'' if adapter else 'AutoModelForCausalLM, '}"
             "AutoTokenizer", "", f'model = Auto{"Peft" if adapter else ""}ModelForCausalLM.from_pretrained("{repo}")',
             f'tokenizer = AutoTokenizer.from_pretrained("{repo}")', prompt,
             "out = model.generate(ids, max_new_tokens=32, do_sample=False)",
             "print(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))", "```", "",
             *(["`minitrain export RUN_DIR OUT_DIR --merge-adapters` writes the base with the adapter merged in."]
               if adapter else ["With minitrain:", "", "```bash",
                                f'minitrain sample {repo}{" --chat" if chat else ""} --prompt "Hola"',
                                f"minitrain eval {repo} --data test.jsonl", "```"]), "",
             "## License", "", f"The weights derive from `{shown}`: {LICENSE_NOTE}.", ""]
    family = "gpt2" if layout_of(model_config) == "gpt2" else family_of(model_config).name
    meta = ModelCardData(library_name="minitrain", tags=["minitrain", family, "text-generation"],
                         pipeline_tag="text-generation", base_model=base if is_base_id(base) else None,
                         model_name=name)
    return f"---\n{meta.to_yaml()}\n---\n\n" + "\n".join(line for line in body if line is not None)
