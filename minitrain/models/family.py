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

minitrain/models/registry.py lists the families, one line each. The config schema's `model.type` choices and
`model:` keys, a run folder's file checks, the model file names, `minitrain schema` and the docs' tables all read
that list, so a new family is one new file (its model and its record) plus one line there. tests/test_families.py
trains, saves, loads, samples and resumes every registered family with every optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Shapes = list[tuple[str, tuple[int | None, ...]]]
DropoutRate = Annotated[float, Field(ge=0.0, lt=1.0)]  # a model file's dropout: `dropout: DropoutRate = 0.0`


class FileSchema(BaseModel):
    """What every family's `file_schema` is: the keys it lists are type-checked strictly (a `"8"` is not a number),
    any other key a file holds is kept."""

    model_config = ConfigDict(extra="allow", strict=True)


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
