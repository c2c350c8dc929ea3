"""The base of every config section: unknown keys are errors, values are checked strictly (no silent coercion)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PositiveInt = Annotated[int, Field(ge=1)]


class Section(BaseModel):
    """Base of every section: unknown keys are errors, values are checked strictly (no silent coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True, allow_inf_nan=False)
