"""Rules about runs on a pretrained base (`model.type: llama` with `model.init_from`, or minigpt with a GPT-2
base): text records read with the base's own tokenizer, packed or padded into rows (minitrain/config/rule.py).

The data keys of the two kinds of language-model run, side by side:

    key              character corpus (data.vocab_path)    pretrained base (model.init_from)
    vocab_path       the character vocabulary               refused: the base's tokenizer is the only right one
    loss_on          answer (default) | all                 all (default) | completion
    packing          refused (one record per row)           pack (default; llama only) | pad (minigpt's default)
    overflow         refused                                error (default) | truncate | split
"""

from __future__ import annotations

from minitrain.config.data_section import on_pretrained_base
from minitrain.config.problems import Problem
from minitrain.config.rule import RuleBook, given
from minitrain.models.registry import refusal

RULES = RuleBook()
rule = RULES.rule


@rule("model", "data")
def _pretrained_base_brings_its_tokenizer(sections, raw):
    """A pretrained base (model.init_from) trains on its own tokenizer's ids from train_path/val_path (both given):
    no data.vocab_path, and none of the character corpus's other keys (dev_path, heldout_policy, format)."""
    if not on_pretrained_base(sections["model"]):
        return
    base = f"model.init_from {sections['model'].init_from} is a pretrained base"
    if given(raw, "data", "vocab_path"):
        yield Problem(("data", "vocab_path"), f"{base}: it is trained on the ids of its own tokenizer, never on "
                                              "character ids (its embedding rows mean its tokens); leave "
                                              "data.vocab_path out")
    if given(raw, "data", "train_path") and not given(raw, "data", "val_path"):
        yield Problem(("data", "train_path"), f"{base}: give its held-out records as data.val_path too (the "
                                              "default is the course's verb corpus)")
    for key, why in (("tokenizer", "it reads text with its own tokenizer"),
                     ("dev_path", "its runs read data.train_path and data.val_path only"),
                     ("heldout_policy", "the held-out verbs are the character corpus's split"),
                     ("format", "its text files are read by their extension (.jsonl, .json, .txt, .md, .csv, "
                                ".parquet, .arrow)")):
        if given(raw, "data", key):
            yield Problem(("data", key), f"{base}: {why}; leave data.{key} out")


@rule("model", "data")
def _packing_needs_a_pretrained_base(sections, raw):
    """data.packing and data.overflow are for a pretrained base's text records (packed rows: llama only)."""
    model = sections["model"]
    cannot = refusal(model.type, "packing")
    if on_pretrained_base(model):
        if cannot and sections["data"].packing == "pack":
            yield Problem(("data", "packing"), f"pack: {cannot}; use pad (its default)")
        return
    for key in ("packing", "overflow"):
        if not given(raw, "data", key):
            continue
        if cannot:
            why = f"{cannot}; packing is for a pretrained base (model.init_from)"
        else:
            why = ("packing applies to text records read with a pretrained base's tokenizer (model.init_from); the "
                   "character corpus is padded, one record per row")
        yield Problem(("data", key), why)


@rule("model", "data")
def _loss_on_fits_the_records(sections, raw):
    """data.loss_on: answer or all for a character run's verb records; all or completion for text records."""
    loss_on = sections["data"].loss_on  # the schema's default is the character corpus's: answer
    if on_pretrained_base(sections["model"]) and loss_on == "answer" and given(raw, "data", "loss_on"):
        yield Problem(("data", "loss_on"), "answer counts the verb form of the character corpus; text records of a "
                                           "pretrained base count all tokens (all) or the completion / assistant "
                                           "turns (completion)")
    elif not on_pretrained_base(sections["model"]) and loss_on == "completion":
        yield Problem(("data", "loss_on"), "completion is for text records of a pretrained base (model.type llama "
                                           "with model.init_from); the verb records count their answer with answer, "
                                           "or all")


@rule("model", "data", "training", "quantize")
def _pretrained_base_runs_what_it_can(sections, raw):
    """A pretrained base reads its text records from files or one data.source (split by ratios without
    stratify); no exact_match, cross-validation or quantize (yet)."""
    if not on_pretrained_base(sections["model"]):
        return
    split = sections["data"].split
    if split is not None and split.stratify is not None:
        yield Problem(("data", "split", "stratify"), "text records have no column to stratify by")
    training = sections["training"]
    if "exact_match" in training.val_metrics:
        yield Problem(("training", "val_metrics"), "exact_match decodes verb forms of the character corpus; a run "
                                                   "on a pretrained base logs loss and perplexity (and "
                                                   "token_accuracy)")
    if training.cross_validation is not None:
        yield Problem(("training", "cross_validation"), "not for a run on a pretrained base")
    if sections["quantize"].enabled:
        yield Problem(("quantize", "enabled"), "not for a run on a pretrained base yet (QLoRA: lora.quantize_base)")
