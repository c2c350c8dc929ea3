"""What minitrain knows of a model family, in one record: everything else is derived from it.

    FAMILY = ModelFamily(
        name="mlp_lm",                      # model.type in a config
        model=MLPLanguageModel,             # built as model(**keys, rng=, dtype=); its signature gives the keys
        keys=MLPLMKeys,                     # the family's own `model:` keys (a strict pydantic section)
        file_schema=MLPLMFile,              # the model_config a model file of this family must hold (a FileSchema)
        file_prefix="mlp-lm",               # models/mlp-lm-<hash>.safetensors
        reads="text",                       # trained on text (a language model) or on "table" rows
        parameter_shapes=mlp_lm_shapes,     # config -> [(name, shape)], without building the model
        width=mlp_lm_width,                 # config -> the width of its typical matrix product
        example={"type": "mlp_lm", "vocab_size": 64, "max_seq_len": 32, "context": 4, "d_embed": 8, "hidden": [16]},
    )

What it can do is on the record too (each field's comment below), so no other room names a family: `check` is the
one place its keys' joint rules live (`validate`, `train` and a model file's check all run it), and a family
without a capability a config asks for is refused by `validate` with one reason (registry.py `refusal`).

minitrain/models/registry.py lists the families, one line each. The config schema's `model.type` choices and
`model:` keys, a run folder's file checks, the model file names, `minitrain schema` and the docs' tables all read
that list, so a new family is one new file (its model and its record) plus one line there. tests/test_families.py
trains, saves, loads, samples and resumes every registered family with every optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Shapes = list[tuple[str, tuple[int | None, ...]]]
DropoutRate = Annotated[float, Field(ge=0.0, lt=1.0)]  # a model file's dropout: `dropout: DropoutRate = 0.0`


class FileSchema(BaseModel):
    """What every family's `file_schema` is: the keys it lists are type-checked strictly (a `"8"` is not a number),
    any other key a file holds is kept, and the keys obey the family's `check` (bound by its record)."""

    model_config = ConfigDict(extra="allow", strict=True)
    family_check: ClassVar[Callable[[Mapping[str, Any]], Iterator[tuple[str, str]]] | None] = None

    @model_validator(mode="after")
    def _keys_agree(self) -> FileSchema:
        for _, why in self.family_check(self.model_dump()) if self.family_check else ():
            raise ValueError(why)
        return self


def heads_divide_width(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """A transformer's rule: each of the n_head heads gets d_model / n_head dimensions."""
    if config["d_model"] % config["n_head"]:
        yield "n_head", (f"d_model {config['d_model']} is not divisible by n_head {config['n_head']}; each head "
                         "needs d_model / n_head dimensions")


@dataclass(frozen=True)
class ModelFamily:
    """A model family's record (the module docstring shows each field)."""

    name: str
    model: type
    keys: type[BaseModel]
    file_schema: type[FileSchema]
    file_prefix: str
    reads: Literal["text", "table"]
    parameter_shapes: Callable[[Mapping[str, Any]], Shapes]
    width: Callable[[Mapping[str, Any]], int]
    example: Mapping[str, Any]  # a small `model:` section of the family: the contract test trains it
    # How many tensors, without listing them (a damaged file may claim a million layers); default: count the list.
    tensor_count: Callable[[Mapping[str, Any]], int] | None = None
    # The dotted paths of its linear layers (LoRA targets, quantization), without building the model; default: every
    # 2-D `weight` with a `bias` beside it (true of a family whose linear layers all have biases).
    linear_paths: Callable[[Mapping[str, Any]], list[str]] | None = None
    # The rules its keys obey together ("heads divide the width"): config -> (key, why) of each broken one; a key
    # left out of the config takes the constructor's default.
    check: Callable[[Mapping[str, Any]], Iterator[tuple[str, str]]] | None = None
    packs_rows: bool = False  # reads packed rows: segment ids keep each document's attention to itself
    # Which init_from is a pretrained base (its own tokenizer, text records): "any" (a Hugging Face folder, Hub id
    # or .gguf of the family), "gpt2" (a GPT-2 with its own tokenizer), None (only minitrain's own files).
    pretrained: Literal["any", "gpt2"] | None = None
    learned_positions: bool = False  # one row per position: a fine-tune keeps its base's max_seq_len exactly
    lora_targets: tuple[str, ...] = ()  # `init --base`'s default lora.target_modules (empty: every linear layer)
    fan_in_fan_out: bool = True  # its linear weights are transformers' [in, out] (GPT-2's Conv1D): PEFT's flag
    # The layout of its exports, config -> the Hugging Face model_type that is also the GGUF general.architecture
    # (llama, qwen2, gpt2); None: no transformers or llama.cpp twin.
    layout: Callable[[Mapping[str, Any]], str] | None = None

    def __post_init__(self) -> None:
        if issubclass(self.file_schema, FileSchema):  # a model file's config obeys the rules a config's does
            self.file_schema.family_check = staticmethod(self.check) if self.check else None
