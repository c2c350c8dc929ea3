"""The merge config: mergekit's YAML shape, checked strictly (an unknown key is refused by name, with its line).

    merge_method: ties                 # a record of minitrain/merging/methods.py
    base_model: models/base.safetensors
    models:
      - model: runs/lora-imperfect     # any source minitrain reads (run folder, model file, export, HF folder)
        parameters: {weight: 1.0, density: 0.5}
      - model: runs/lora-future
        parameters: {weight: 1.0, density: 0.5}
    parameters: {lambda: 1.0}          # defaults for every model's weight/density, and the method's own keys
    dtype: float32
    seed: 0                            # DARE's drop masks

A model's own `parameters` win over the top-level ones. Which keys each method reads, whether it needs
base_model and how many models it merges is its record's (MergeMethod); a key it does not read is refused rather
than ignored. An entry of `models` naming base_model itself (mergekit allows it) adds nothing: its task vector is
zero, so it is left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from minitrain.common.errors import UserError
from minitrain.common.strict import Section
from minitrain.config.loader import parse_with_source
from minitrain.config.problems import ConfigError, Problem, from_validation_error
from minitrain.config.yaml_lines import read_yaml_text
from minitrain.merging.methods import MERGE_METHODS

Density = Annotated[float, Field(gt=0.0, le=1.0)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class TFilter(Section):
    """One entry of slerp's `t` list: `value` for the tensors whose name contains `filter` (the first entry that
    matches wins; an entry without `filter` matches every tensor)."""

    filter: str | None = None
    value: Fraction


class ModelParameters(Section):
    weight: float | None = None
    density: Density | None = None


class Parameters(ModelParameters):
    lambda_: float | None = Field(default=None, alias="lambda")
    normalize: bool | None = None
    t: Fraction | list[TFilter] | None = None


class ModelEntry(Section):
    model: str
    parameters: ModelParameters = ModelParameters()


class MergeSpec(Section):
    merge_method: Literal[tuple(MERGE_METHODS)]  # the records' names (minitrain/merging/methods.py)
    base_model: str | None = None
    models: list[ModelEntry] = Field(min_length=1)
    parameters: Parameters = Parameters()
    dtype: Literal["float32"] = "float32"  # minitrain computes in float32; a half-precision merge is not offered
    seed: Annotated[int, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _method_keys(self) -> MergeSpec:
        method, record = self.merge_method, MERGE_METHODS[self.merge_method]
        if record.needs_base and self.base_model is None:
            raise ValueError(f"merge_method {method} needs base_model (the model the task vectors are taken from)")
        given = {k for k, v in self.parameters if v is not None}
        given |= {k for m in self.models for k, v in m.parameters if v is not None}
        key = lambda k: "lambda" if k == "lambda_" else k  # noqa: E731  (the YAML's spelling)
        if extra := sorted(given - record.reads):
            raise ValueError(f"merge_method {method} does not read {', '.join(map(key, extra))} (it reads "
                             f"{', '.join(sorted(map(key, record.reads))) or 'no parameters'})")
        if missing := sorted(record.requires - given):
            raise ValueError(f"merge_method {method} needs parameters.{', '.join(map(key, missing))}")
        (least, most), count = record.models, len(self.inputs())
        if count < least or (most is not None and count > most):
            amount = f"exactly {least}" if least == most else f"at least {least}"
            besides = " besides base_model" if record.needs_base else ""
            raise ValueError(f"merge_method {method} merges {amount} model{'s' * (least != 1)}{besides} (got {count})")
        return self

    def others(self) -> list[ModelEntry]:
        """The models merged into the base: `models` without an entry naming base_model itself."""
        return [m for m in self.models if m.model != self.base_model]

    def base(self) -> str | None:
        """The base the task vectors are taken from: base_model, unless the method needs none (linear)."""
        return self.base_model if MERGE_METHODS[self.merge_method].needs_base else None

    def inputs(self) -> list[ModelEntry]:
        """The models whose tensors are merged (with the base's, when there is one)."""
        return self.others() if self.base() is not None else self.models

    def value(self, entry: ModelEntry, key: str, default: float) -> float:
        """A model's `weight` or `density`: its own, else the top-level parameters', else `default`."""
        own = getattr(entry.parameters, key)
        top = getattr(self.parameters, key)
        return own if own is not None else top if top is not None else default

    def t_for(self, name: str) -> float:
        """slerp's t for tensor `name` (TFilter); 0.5 is never guessed: a list must end with a default entry."""
        t = self.parameters.t
        if not isinstance(t, list):
            return float(t)
        for entry in t:
            if entry.filter is None or entry.filter in name:
                return entry.value
        raise UserError(f"merge: parameters.t: no entry matches tensor {name}; end the list with one without "
                        "filter", 2)


def read_spec(path: str | Path) -> MergeSpec:
    """The merge config at `path`, validated; every problem at once as a ConfigError (exit code 2) naming the key
    and its line."""
    parsed, source = parse_with_source(read_yaml_text(path, "merge config"), path)
    source.lines.update(parsed.lines)
    data = parsed.data
    if not isinstance(data, dict):
        raise ConfigError([Problem((), "the top level must be a mapping (merge_method:, models:, ...)")], source)
    try:
        return MergeSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(from_validation_error(MergeSpec, exc), source) from None
