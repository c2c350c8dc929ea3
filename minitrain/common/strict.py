"""Strict pydantic bases for anything read from YAML: the config's sections, and the keys a model family adds to
`model:` (minitrain/models/registry.py). Unknown keys are errors, never silently ignored, and values are checked
strictly: a quoted "8" is not a number and `true` is not an integer.

    class LinearLayer(Section):          # {out_features: 32, bias: false}
        out_features: PositiveInt
        bias: bool = True

    class LayerSpec(OneOf):              # `- linear: {...}`, `- dropout: 0.2`: exactly one key names the kind
        linear: LinearLayer | None = None
        dropout: Ratio | None = None
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

MAX_COUNT = 2**31 - 1  # the most any step count, size or index of a config may be: far past any run, and int32-safe
PositiveInt = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Ratio = Annotated[float, Field(ge=0.0, lt=1.0)]


class Section(BaseModel):
    """Base of every section: unknown keys are errors, values are checked strictly (no silent coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True, allow_inf_nan=False)


class OneOf(Section):
    """A mapping of exactly one key, naming the kind of the entry; the others stay None and are not dumped."""

    @model_validator(mode="after")
    def _exactly_one(self) -> OneOf:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            kinds = ", ".join(type(self).model_fields)
            raise ValueError(f"write one of {kinds} per entry (got {', '.join(given) or 'none'})")
        return self

    @model_serializer(mode="wrap")
    def _only_the_given_one(self, handler: Any) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}

    @property
    def kind(self) -> str:
        return next(name for name in type(self).model_fields if getattr(self, name) is not None)

    @property
    def options(self) -> Any:
        return getattr(self, self.kind)
