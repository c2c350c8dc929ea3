"""The `data:` section of the training config: where the splits and the vocabulary live, and which of its keys a
run reads (a language model on characters, a table task, a fine-tune of a pretrained base on text records).
loader.py leaves the keys a run does not read out of its resolved config; `Config` puts a text run's defaults in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from minitrain.common.strict import PositiveInt, Section
from minitrain.config.table_sections import AugmentationStep, PreprocessingStep, SplitConfig
from minitrain.data.formats import TABLE_FORMATS
from minitrain.data.gpt2_base import is_gpt2_base
from minitrain.models.registry import FAMILIES

BPE_SPECIALS = 3  # <pad>, <bos>, <eos>: the ids of minitrain/data/tokenizer.py, before bpe.py's 256 bytes


class TokenizerSection(Section):
    """`data.tokenizer`: how a language model on the verb corpus reads text. `char` (the default): one id per
    character, from data.vocab_path. `bpe`: a byte-level BPE (minitrain/data/bpe.py) trained on data.train_path
    up to `vocab_size` ids (the 3 specials and 256 bytes, then one per merge), so at least 259."""

    type: Literal["char", "bpe"] = "char"
    vocab_size: PositiveInt | None = Field(None, description="bpe: the ids to train up to, at least 259")

    @model_validator(mode="after")
    def _size_for_bpe(self) -> TokenizerSection:
        least = BPE_SPECIALS + 256
        if self.type == "bpe" and (self.vocab_size is None or self.vocab_size < least):
            got = "none" if self.vocab_size is None else self.vocab_size
            raise ValueError(f"a bpe tokenizer needs vocab_size >= {least} (3 special tokens + 256 bytes), got {got}")
        if self.type == "char" and self.vocab_size is not None:
            raise ValueError("a char tokenizer's ids come from data.vocab_path; leave vocab_size out")
        return self


class DataConfig(Section):
    """Where the splits and the vocabulary live and which target positions count in the loss.

    Paths are relative to the working directory. dev_path and vocab_path default to `dev<ext>` and `vocab.json`
    beside train_path (data/processed/dev.jsonl and data/processed/vocab.json for the defaults). The dev split is
    optional: training does not read it, and it is checked only when the file exists.

    `tokenizer` (TokenizerSection) chooses characters or a BPE trained on the training split.

    Tables (model.type sequential): `source` (a file, a folder or hf://datasets/user/name) split by `split`, or
    train_path/val_path/test_path; `target` names the column to predict; `preprocessing` and `augmentation` are
    lists of steps (config/table_sections.py). `format` left out is `auto` with a source (each file's extension
    says), and a table's split files are read by their extension too.
    """

    format: Literal[(*TABLE_FORMATS, "auto")] = "jsonl"  # the formats' records (minitrain/data/formats.py)
    source: str | None = Field(None, min_length=1, description="a file, a folder or hf://datasets/user/name[/path]")
    target: str = Field("label", min_length=1, description="tables: the column to predict")
    split: SplitConfig | None = Field(None, description="ratios to split data.source into train, val and test")
    preprocessing: list[PreprocessingStep] = Field(default_factory=list, description="tables: fitted on train")
    augmentation: list[AugmentationStep] = Field(default_factory=list, description="training batches only")
    image_shape: list[PositiveInt] | None = Field(None, min_length=2, max_length=3,
                                                  description="[height, width(, channels)] of image rows")
    train_path: str = Field("data/processed/train.jsonl", min_length=1)
    val_path: str = Field("data/processed/val.jsonl", min_length=1)
    dev_path: str | None = Field(None, min_length=1, description="default: dev<ext> beside train_path")
    vocab_path: str | None = Field(None, min_length=1, description="default: vocab.json beside train_path")
    test_path: str | None = Field(None, min_length=1, description="optional split scored once, after training")
    tokenizer: TokenizerSection | None = Field(None, description="char (default, vocab_path) or bpe with vocab_size")
    heldout_policy: Literal["verbs_4", "none"] = "verbs_4"
    loss_on: Literal["answer", "all", "completion"] = Field("answer", description="pretrained base: all, completion")
    packing: Literal["pack", "pad"] | None = Field(None, description="pretrained base: default pack (minigpt: pad)")
    overflow: Literal["error", "truncate", "split"] | None = Field(None, description="pretrained base: default error")

    @model_validator(mode="after")
    def _beside_train(self) -> DataConfig:
        # object.__setattr__: a derived default is not something the user wrote (model_fields_set stays honest).
        if "format" not in self.model_fields_set and self.source is not None:
            object.__setattr__(self, "format", "auto")
        train = Path(self.train_path)
        if self.dev_path is None:
            object.__setattr__(self, "dev_path", str(train.with_name(f"dev{train.suffix}")))
        if self.vocab_path is None:
            object.__setattr__(self, "vocab_path", str(train.with_name("vocab.json")))
        return self

    @property
    def uses_bpe(self) -> bool:
        """`data.tokenizer: bpe`: ids from a BPE trained on train_path, so no vocab_path is read and a perplexity
        is per BPE token, not per character."""
        return self.tokenizer is not None and self.tokenizer.type == "bpe"


CHARACTER_DATA_KEYS = ("dev_path", "vocab_path", "heldout_policy")  # what a run on a pretrained base does not read
LANGUAGE_DATA_KEYS = (*CHARACTER_DATA_KEYS, "loss_on")  # what a table task does not read
TEXT_DATA_DEFAULTS = {"vocab_path": None, "dev_path": None, "heldout_policy": "none", "loss_on": "all",
                      "packing": "pack", "overflow": "error"}  # ... and its own defaults


def on_pretrained_base(model: Any) -> bool:
    """A model section that fine-tunes a pretrained base (its family's record says which: `pretrained`): `type:
    llama` with `init_from` (a Hugging Face folder, a Hub id or a .gguf file), or `type: minigpt` with `init_from`
    a GPT-2 that brings its own tokenizer (minitrain/data/gpt2_base.py). Such a run reads text records with the
    base's own tokenizer, never characters."""
    bases = FAMILIES[model.type].pretrained
    return model.init_from is not None and (bases == "any" or (bases == "gpt2" and is_gpt2_base(model.init_from)))


def text_data_defaults(model: Any) -> dict[str, Any]:
    """TEXT_DATA_DEFAULTS for a run on `model`'s base: MiniGPT pads (it has no segment ids, so packed documents
    would attend to each other)."""
    return TEXT_DATA_DEFAULTS if FAMILIES[model.type].packs_rows else {**TEXT_DATA_DEFAULTS, "packing": "pad"}
