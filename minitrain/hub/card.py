"""The model card (README.md of an exported model), written from what the run recorded.

A Hugging Face model card is Markdown with YAML front matter. The front matter is built with
`huggingface_hub.ModelCardData`, so its keys (`library_name`, `license`, `language`, `tags`, `pipeline_tag`,
`base_model`, and `model-index` with the evaluation results) are spelled the way the Hub expects and parse back
with `huggingface_hub.ModelCard`. The body reports the run's facts and nothing else: a number the run did not
record is printed as "not recorded", never guessed. No dates, so the same run always gives the same card.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCardData

from minitrain.hub.run_folder import RunInfo

LICENSE = "mit"
TAGS = ["minitrain", "gpt2", "numpy", "spanish", "verb-conjugation", "character-level", "education"]
TASK = "text-generation"
DATASET_TYPE = "spanish-verb-conjugation"
DATASET_NAME = "Spanish verb conjugations (minitrain corpus)"
MISSING = "not recorded"


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return MISSING
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def _pct(value: Any) -> str:
    return f"{100 * value:.1f} %" if isinstance(value, int | float) and not isinstance(value, bool) else MISSING


def count_split(path: Path | None) -> tuple[int, int] | None:
    """(records, tokens) of a JSONL split, counting [BOS] + characters + [EOS] per record."""
    if path is None or not path.is_file():
        return None
    records = tokens = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                records += 1
                tokens += len(json.loads(line)["text"]) + 2  # char-level: one token per character
    return records, tokens


def eval_results(info: RunInfo) -> list[EvalResult]:
    """The model-index entries: val perplexity, held-out exact match and train perplexity, when recorded."""
    r = info.results
    wanted = [
        ("val", "perplexity", "Val perplexity (held-out verbs, answer tokens)", r.get("val_ppl")),
        ("val", "exact_match", "Held-out exact match (greedy)", r.get("val_exact_match")),
        ("train", "perplexity", "Train perplexity (answer tokens)", r.get("train_ppl")),
    ]
    return [
        EvalResult(task_type=TASK, task_name="Spanish verb conjugation", dataset_type=DATASET_TYPE,
                   dataset_name=DATASET_NAME, dataset_split=split, metric_type=metric, metric_name=name,
                   metric_value=round(float(value), 4))
        for split, metric, name, value in wanted
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ]


def card_data(info: RunInfo, model_name: str) -> ModelCardData:
    init_from = info.section("model").get("init_from")
    is_hub_id = isinstance(init_from, str) and not Path(init_from).exists() and init_from.count("/") == 1
    return ModelCardData(
        library_name="minitrain",
        license=LICENSE,
        language="es",
        tags=list(TAGS),
        pipeline_tag=TASK,
        base_model=init_from if is_hub_id else None,
        model_name=model_name,
        eval_results=eval_results(info) or None,
    )


def get(section: dict[str, Any], key: str) -> Any:
    return section.get(key, MISSING)


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])


def _data_table(info: RunInfo) -> str:
    rows = []
    for split in ("train", "val", "dev"):
        counted = count_split(info.find(info.section("data").get(f"{split}_path")))
        rows.append((split, *(map(_num, counted) if counted else (MISSING, MISSING))))
    return _table(("split", "records", "tokens"), rows)


def _training_table(info: RunInfo) -> str:
    opt, sched, train = info.section("optimizer"), info.section("scheduler"), info.section("training")
    m, r = info.manifest, info.results
    hw = m.get("hardware") if isinstance(m.get("hardware"), dict) else {}
    versions = m.get("versions") if isinstance(m.get("versions"), dict) else {}
    steps = m.get("steps_done", sched.get("total_steps", train.get("total_steps")))
    rows = [
        ("optimizer", f"{get(opt, 'type')}, lr {get(opt, 'lr_max')} -> {get(opt, 'lr_min')}, "
                      f"betas ({get(opt, 'beta1')}, {get(opt, 'beta2')}), weight decay {get(opt, 'weight_decay')}"),
        ("gradient clipping (global norm)", opt.get("clip") or train.get("clip") or "none"),
        ("schedule", f"{get(sched, 'type')}, warmup {get(sched, 'warmup_steps')} steps"),
        ("steps", _num(steps)),
        ("batch size", f"{get(train, 'batch_size')} sequences"),
        ("loss counted on", f"{get(info.section('data'), 'loss_on')} tokens"),
        ("seeds", f"training {m.get('seed', get(train, 'rng_seed'))}, "
                  f"data {m.get('data_seed', get(train, 'data_seed'))}"),
        ("hardware", f"{get(hw, 'cpu_model')}, {get(hw, 'cpu_cores')} cores, {get(hw, 'ram_gb')} GB RAM"),
        ("wall time", f"{_num(r.get('wall_seconds', m.get('train_wall_seconds')), 1)} s"),
        ("run status", get(m, "status")),
        ("code", f"minitrain {get(versions, 'minitrain')}, commit {m.get('git_sha') or MISSING}"),
    ]
    return _table(("setting", "value"), rows)


def _results_table(info: RunInfo) -> str:
    r = info.results
    beats = r.get("beats_baseline")
    rows = [
        ("train PPL", _num(r.get("train_ppl"))),
        ("val PPL (held-out verbs)", _num(r.get("val_ppl"))),
        ("character n-gram baseline, val PPL", _num(r.get("ngram_baseline_val_ppl"))),
        ("beats the n-gram baseline", MISSING if beats is None else ("yes" if beats else "no")),
        ("held-out exact match (greedy)", _pct(r.get("val_exact_match"))),
    ]
    return _table(("metric", "value"), rows)


def build_card(info: RunInfo, vocab_size: int, repo_id: str | None = None) -> str:
    """The whole README.md: front matter, then the sections a reader of the model needs."""
    name = repo_id or "minigpt"
    repo = repo_id or "user/name"
    mc = info.model_config
    init_from = info.section("model").get("init_from")
    origin = (f"Initialised from `{init_from}`, then trained with minitrain." if init_from else
              "Trained from scratch (random initialisation) with minitrain, a pure-NumPy teaching library.")
    if info.adapter is not None:
        origin = _adapter_origin(info)
    heldout = info.section("data").get("heldout_policy", MISSING)
    body = f"""
# {name}

A character-level GPT-2 that conjugates Spanish verbs: given `verb|T#|` (tense letter T, person 1-6) it writes
the conjugated form, e.g. `comer|R1|` -> `comí`. {origin}

## Model

- Architecture: GPT-2 decoder (pre-LayerNorm blocks, tanh-GELU MLP, learned positions, output layer tied to
  the token embedding): {mc['n_layer']} layers, {mc['n_head']} heads, width {mc['d_model']}, MLP width {mc['d_ff']}.
- Parameters: {info.num_parameters:,}{" (the adapter's; the base's are in the base model)" if info.adapter else ""}.
- Context length: {mc['max_seq_len']} tokens.
- Tokenizer: one token per character, {vocab_size} symbols including `<pad>` (0), `<bos>` (1) and `<eos>` (2);
  the embedding has {mc['vocab_size']} rows. `tokenizer.json` holds the same vocabulary in the Hugging Face
  tokenizers format.

## Data

Spanish verb conjugations, one `verb|T#|form` record per line. The val split holds verbs never seen in
training (held-out policy `{heldout}`), so val measures how well the model generalises to new verbs.

{_data_table(info)}

## Training

{_training_table(info)}

## Results

Perplexity is exp(mean negative log-likelihood) over the counted tokens (the conjugated form and its EOS).

{_results_table(info)}

## Intended use and limitations

Made for teaching: it shows, end to end, how a small transformer is trained, evaluated against a baseline and
shared. It knows only the prompt format above and the patterns of its training verbs; it will confidently
produce wrong forms for unusual verbs, and it is not a general Spanish language model.

{_peft_loading(info) if info.adapter else _model_loading(repo)}"""
    return f"---\n{card_data(info, name).to_yaml()}\n---\n{body}"


def _adapter_origin(info: RunInfo) -> str:
    a = info.adapter
    quantized = f" held in 4-bit {a.quant_type} blocks (QLoRA)" if a.quantize_base else ""
    return (f"This repo holds a LoRA adapter (rank {a.rank}, alpha {a.alpha:g}, on {len(a.targets)} linear layers) "
            f"trained with minitrain on the frozen base `{a.base}`{quantized}.")


def _peft_loading(info: RunInfo) -> str:
    """How to put the adapter on its base with PEFT (a section of an adapter's card)."""
    return f"""## How to load it

This folder is in PEFT's layout (adapter_config.json, adapter_model.safetensors). The base must be the model the
adapter was trained on, `{info.adapter.base}`, as `minitrain export` writes it:

```python
from peft import PeftModel
from transformers import GPT2LMHeadModel

model = PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained("BASE_EXPORT"), "THIS_FOLDER_OR_REPO")
```

`minitrain merge RUN_DIR OUT_DIR` folds the adapter into its base instead, and `minitrain publish
--merge-adapters` publishes the merged model.
"""


def _model_loading(repo: str) -> str:
    """How to load a whole model with minitrain or transformers."""
    return f"""## How to load it

With minitrain, as the starting point of a run (the weights are checked against the config when they load) or
to conjugate a verb:

```yaml
model:
  init_from: {repo}
```

```bash
minitrain sample {repo} --prompt "comer|R1|"
```

With transformers (PyTorch):

```python
from transformers import AutoTokenizer, GPT2LMHeadModel

model = GPT2LMHeadModel.from_pretrained("{repo}")
tokenizer = AutoTokenizer.from_pretrained("{repo}")
ids = tokenizer("comer|R1|", return_tensors="pt").input_ids  # starts with <bos>
out = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=2, pad_token_id=0)
print(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
```
"""
