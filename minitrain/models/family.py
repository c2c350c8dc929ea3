"""What minitrain knows of a model family, in one record: everything else is derived from it.

    FAMILY = ModelFamily(
        name="mlp_lm",                      # model.type in a config
        model=MLPLanguageModel,             # built as model(**keys, rng=, dtype=); its signature gives the keys
        keys=MLPLMKeys,                     # the family's own `model:` keys (a strict pydantic section)
        file_schema=file_schema_of("mlp_lm", MLPLanguageModel, MLPLMKeys),  # what its model files hold
        file_prefix="mlp-lm",               # models/mlp-lm-<hash>.safetensors
        reads="text",                       # trained on text (a language model) or on "table" rows
        parameter_shapes=mlp_lm_shapes,     # config -> [(name, shape)], without building the model
        width=mlp_lm_width,                 # config -> the width of its typical matrix product
        example={"type": "mlp_lm", "vocab_size": 64, "max_seq_len": 32, "context": 4, "d_embed": 8, "hidden": [16]},
    )

Its keys are declared once, as its `model:` keys typed; the file schema derives from them. What it can do is on
the record too (the fields below the example), so no other room names a family: `check` holds its keys' joint rules
(`validate`, `train` and a model file's check run it), and registry.py `refusal` words a missing capability.

minitrain/models/registry.py lists the families, one line each. The config schema's `model.type` choices and
`model:` keys, a run folder's file checks, the model file names, `minitrain schema` and the docs' tables all read
that list, so a new family is one new file (its model and its record) plus one line there. tests/models/test_families.py
trains, saves, loads, samples and resumes every registered family with every optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo

from minitrain.common.errors import ArgumentError
from minitrain.common.registry import keyword_defaults
from minitrain.common.strict import PositiveInt

Shapes = list[tuple[str, tuple[int | None, ...]]]
DropoutRate = Annotated[float, Field(ge=0.0, lt=1.0)]
Rules = Callable[[Mapping[str, Any]], Iterator[tuple[str, str]]]  # config -> (key, why) of each rule it breaks
# The keys a family may share with others without declaring them, as a model file holds them.
SHARED_KEYS = {"n_layer": PositiveInt, "n_head": PositiveInt, "d_model": PositiveInt, "d_ff": PositiveInt,
               "vocab_size": PositiveInt, "max_seq_len": PositiveInt}


def no_rules(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The `check` of a family whose keys have no joint rules."""
    return iter(())


class FileSchema(BaseModel):
    """What every family's `file_schema` is: the keys it lists are type-checked strictly (a `"8"` is not a number),
    any other key a file holds is kept, and the keys obey the family's `check` (bound by its record)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
    family_check: ClassVar[Rules] = staticmethod(no_rules)

    @model_validator(mode="after")
    def _keys_agree(self) -> FileSchema:
        for _, why in self.family_check(self.model_dump()):
            raise ValueError(why)
        return self


def file_schema_of(name: str, model: type, keys: type[BaseModel], optional: Collection[str] = (),
                   typed: bool = True) -> type[FileSchema]:
    """What a model file of the family holds: `type: name` (unless not `typed`) and every keyword argument of its
    constructor, typed as its `model:` key (or SHARED_KEYS) is but never None, and required (the file holds what
    the model was built with) but the `optional` keys (None or absent) and dropout (0.0 in files older than it)."""
    fields: dict[str, Any] = {"type": (Literal[name], ...)} if typed else {}
    for key in keyword_defaults(model, skip=("rng", "dtype")):
        declared = keys.model_fields.get(key)
        kind = SHARED_KEYS.get(key) if declared is None else _file_type(declared)
        fields[key] = (DropoutRate, 0.0) if key == "dropout" else (kind | None, None) if key in optional else kind
    return create_model(f"{name}_file", __base__=FileSchema, __module__=model.__module__, **fields)


def _file_type(field: FieldInfo) -> Any:
    """A `model:` key's type as a model file holds it: never None, with the key's constraints."""
    kind = field.annotation
    if get_origin(kind) in (Union, UnionType):
        kind = Union[tuple(arg for arg in get_args(kind) if arg is not NoneType)]  # noqa: UP007 (built from a list)
    return Annotated[(kind, *field.metadata)] if field.metadata else kind


def heads_divide_width(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """A transformer's rule: each of the n_head heads gets d_model / n_head dimensions."""
    if config["d_model"] % config["n_head"]:
        yield "n_head", (f"d_model {config['d_model']} is not divisible by n_head {config['n_head']}; each head "
                         "needs d_model / n_head dimensions")


def enforce(check: Rules, config: Mapping[str, Any]) -> None:
    """What a model's constructor runs: its family's `check` (the rules `validate` runs, written once), raising
    ArgumentError `model.KEY: why` for the first rule that `config` breaks."""
    for key, why in check(config):
        raise ArgumentError(f"model.{key}: {why}")


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
    # The dotted paths of its linear layers (LoRA targets, quantization), without building the model; default: every
    # 2-D `weight` with a `bias` beside it (true of a family whose linear layers all have biases).
    linear_paths: Callable[[Mapping[str, Any]], list[str]] | None = None
    # The rules its keys obey together ("heads divide the width"); a key left out takes the constructor's default.
    check: Rules = no_rules
    packs_rows: bool = False  # reads packed rows: segment ids keep each document's attention to itself
    # Which init_from is a pretrained base (its own tokenizer, text records): "any" (Hugging Face folder, Hub id or
    # .gguf), "gpt2" (a GPT-2 with its own tokenizer), None (none).
    pretrained: Literal["any", "gpt2"] | None = None
    learned_positions: bool = False  # one row per position: a fine-tune keeps its base's max_seq_len exactly
    lora_targets: tuple[str, ...] = ()  # `init --base`'s default lora.target_modules (empty: every linear layer)
    fan_in_fan_out: bool = True  # its linear weights are transformers' [in, out] (GPT-2's Conv1D): PEFT's flag
    # The layout of its exports, config -> the Hugging Face model_type that is also the GGUF general.architecture
    # (llama, qwen2, gpt2); None: no transformers or llama.cpp twin.
    layout: Callable[[Mapping[str, Any]], str] | None = None

    def __post_init__(self) -> None:
        if issubclass(self.file_schema, FileSchema):  # a model file's config obeys the rules a config's does
            self.file_schema.family_check = staticmethod(self.check)
