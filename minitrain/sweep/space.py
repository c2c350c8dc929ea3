"""A sweep's definition (SWEEP.yaml or the command line) and the trials it expands to.

    base: experiments/18-train-mini/config.yaml      # the training config every trial starts from
    set: {training.checkpoint.save_every: null}      # overrides for every trial
    grid:                                            # every combination of these values ...
      optimizer.lr_max: [1.0e-4, 3.0e-4, 1.0e-3]
    random:                                          # ... times `samples` draws from these distributions ...
      model.dropout: uniform(0.0, 0.2)
    samples: 4
    seeds: [42, 43, 44]                              # ... times each seed (training.rng_seed, as --seed)
    metric: val_ppl                                  # what "best" means: a key of results.json
    mode: min

Trials are numbered in that order (grid outermost, seeds innermost), and the random draws come from their own
generator (`sampler_seed`), so the same file always gives the same trials with the same ids: a restarted sweep
finds its trials again. A distribution is one of four written forms, parsed (never evaluated):
`uniform(a, b)`, `loguniform(a, b)` (uniform in log space), `randint(a, b)` (integers a..b inclusive) and
`choice(x, y, ...)`. Draws are rounded to 4 significant digits, so they read well in folder names.

The number of trials is the product of the factors (each grid key's values, `samples`, the seeds), counted
without building them: a space of more than MAX_TRIALS is refused before anything is drawn or written, naming
the largest factor (4 grid keys of 100 values are 10^8 trials, not a sweep anyone can run). `expand` then
makes the trials one at a time from the factors, never a product of lists.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, Field, ValidationError, model_validator

from minitrain.common.errors import UserError
from minitrain.common.strict import PositiveInt, Section
from minitrain.config.loader import parse_with_source
from minitrain.config.problems import ConfigError, Problem, from_validation_error, suggest
from minitrain.config.source import ConfigSource
from minitrain.config.yaml_lines import YamlSyntaxError, parse_scalar, read_yaml_text

_DISTRIBUTION = re.compile(r"^\s*(uniform|loguniform|randint|choice)\s*\((.*)\)\s*$", re.DOTALL)
MAX_TRIALS = 10_000  # each trial is a run folder and a training run; docs/sweeps.md says so
VAL_ROW_METRICS = ("val_loss", "val_ppl", "val_token_accuracy", "val_exact_match")  # reported at validations


def parse_distribution(text: str) -> tuple[str, list[Any]]:
    """("loguniform", [0.0001, 0.01]) for "loguniform(1e-4, 1e-2)"; ValueError saying what is wrong."""
    match = _DISTRIBUTION.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a distribution; write uniform(a, b), loguniform(a, b), randint(a, b) "
                         "or choice(x, y, ...)")
    kind, inner = match.groups()
    try:
        args = parse_scalar(f"[{inner}]")
    except YamlSyntaxError as exc:
        raise ValueError(f"{text!r}: cannot read its arguments ({exc})") from None
    numbers = all(isinstance(a, int | float) and not isinstance(a, bool) and math.isfinite(a) for a in args)
    if kind == "choice":
        if not args:
            raise ValueError(f"{text!r}: choice needs at least one value")
    elif len(args) != 2 or not numbers:
        raise ValueError(f"{text!r}: {kind} takes two numbers, low and high")
    elif args[0] > args[1] or (args[0] == args[1] and kind != "randint"):
        raise ValueError(f"{text!r}: low must be below high")
    elif kind == "loguniform" and args[0] <= 0:
        raise ValueError(f"{text!r}: loguniform needs low > 0")
    elif kind == "randint" and not all(isinstance(a, int) for a in args):
        raise ValueError(f"{text!r}: randint takes two integers")
    return kind, args


def draw(kind: str, args: list[Any], rng: np.random.Generator) -> Any:
    """One value from a parsed distribution."""
    if kind == "choice":
        return args[int(rng.integers(len(args)))]
    if kind == "randint":
        return int(rng.integers(args[0], args[1] + 1))
    low, high = (math.log(a) for a in args) if kind == "loguniform" else args
    value = rng.uniform(low, high)
    return float(f"{math.exp(value) if kind == 'loguniform' else value:.4g}")


def _check_distribution(text: str) -> str:
    parse_distribution(text)
    return text


Distribution = Annotated[str, AfterValidator(_check_distribution)]
ConfigKey = Annotated[str, Field(pattern=r"^[A-Za-z_][\w]*(\.[\w]+)*$")]


class SchedulerSpec(Section):
    """Ray Tune's ASHA (asynchronous successive halving): at each rung, keep the best 1/reduction_factor of the
    trials that got there. Rungs are counted in training steps from `grace_period` (default: a quarter of the
    run) up to the run's length."""

    type: Literal["asha"]
    grace_period: PositiveInt | None = Field(None, description="steps every trial trains before it can be stopped")
    reduction_factor: float = Field(3.0, gt=1)


class SweepSpec(Section):
    """A sweep: the base config, the search space, what "best" means and where and how trials run."""

    base: str = Field(min_length=1, description="the training config every trial starts from")
    name: str | None = Field(None, min_length=1, description="default: the sweep file's (or base config's) name")
    set: dict[ConfigKey, Any] = Field(default_factory=dict, description="overrides for every trial")
    grid: dict[ConfigKey, list[Any]] = Field(default_factory=dict)
    random: dict[ConfigKey, Distribution] = Field(default_factory=dict)
    samples: PositiveInt | None = Field(None, description="draws from `random` (required with it)")
    sampler_seed: int = Field(0, ge=0)
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=list)
    metric: str = Field("val_ppl", min_length=1, description="a key of results.json")
    mode: Literal["min", "max"] = "min"
    out_dir: str | None = Field(None, min_length=1, description="default runs/sweeps/<name>")
    workers: PositiveInt | None = Field(None, description="trials at a time; default: the CPU cores")
    backend: Literal["local", "ray"] = "local"
    address: str | None = Field(None, min_length=1, description="ray: an existing cluster (auto, ray://host:port)")
    scheduler: SchedulerSpec | None = None

    def factors(self) -> dict[str, int]:
        """How many values each part of the space contributes: `grid KEY`, `samples`, `seeds`."""
        sizes = {f"grid {key}": len(values) for key, values in self.grid.items()}
        return {**sizes, "samples": self.samples or 1, "seeds": len(self.seeds) or 1}

    def count(self) -> int:
        """The number of trials: the product of the factors (nothing is built)."""
        return math.prod(self.factors().values())

    def too_big(self) -> str | None:
        """Why the space is more than a sweep runs (MAX_TRIALS trials), or None."""
        if self.count() <= MAX_TRIALS:
            return None
        sizes = self.factors()
        largest = max(sizes, key=lambda name: sizes[name])
        return (f"the space has {self.count():,} trials, more than a sweep runs ({MAX_TRIALS:,}); "
                f"shrink {largest} ({sizes[largest]:,} values)")

    @model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        for key, values in self.grid.items():
            if not values:
                raise ValueError(f"grid {key} has no values")
        if self.too_big():
            raise ValueError(self.too_big())
        if bool(self.random) != (self.samples is not None):
            raise ValueError("random and samples go together: `samples` draws from the `random` distributions")
        both = (set(self.grid) | set(self.random)) & ({"training.rng_seed", "seed"} if self.seeds else set())
        if both:
            raise ValueError(f"{sorted(both)[0]} is also set by seeds; give the seeds in one place")
        if set(self.grid) & set(self.random):
            raise ValueError(f"{sorted(set(self.grid) & set(self.random))[0]} is in both grid and random")
        if self.scheduler is not None and self.backend != "ray":
            raise ValueError("scheduler asha runs in Ray Tune: give backend ray (--backend ray)")
        if self.scheduler is not None and self.metric not in VAL_ROW_METRICS:
            raise ValueError(f"ASHA compares trials at each validation, so metric must be one of "
                             f"{', '.join(VAL_ROW_METRICS)} (got {self.metric})")
        if self.address is not None and self.backend != "ray":
            raise ValueError("address is a Ray cluster's: give backend ray (--backend ray)")
        return self


def spec_problems(data: Mapping[str, Any], source: ConfigSource) -> SweepSpec:
    """The validated SweepSpec of `data`; a ConfigError naming every problem (with lines when `source` has them)."""
    try:
        return SweepSpec.model_validate(dict(data))
    except ValidationError as exc:
        problems = [_sweep_message(p) for p in from_validation_error(SweepSpec, exc)]
        raise ConfigError(problems, source) from None


def _sweep_message(problem: Problem) -> Problem:
    """A problem as a sweep file's reader needs it: unknown keys matched against the sweep's own keys only (not
    a training config's), a model validator's message without pydantic's "Value error, "."""
    message = problem.message.removeprefix("Value error, ")
    if message.startswith("unknown key") and len(problem.path) == 1:
        close = suggest(str(problem.path[0]), SweepSpec.model_fields)
        message = f"unknown key — did you mean '{close}'?" if close else \
            f"unknown key; a sweep file has {', '.join(SweepSpec.model_fields)}"
    return Problem(problem.path, message)


def read_sweep_file(path: str | Path) -> tuple[dict[str, Any], ConfigSource]:
    """The mapping a YAML file holds, and its source (lines for messages); a ConfigError if it is no mapping.
    A sweep file names its `base` config; a training config (no `base`) is the base of a sweep of flags."""
    parsed, source = parse_with_source(read_yaml_text(path, "sweep file or config"), path)
    source.lines.update(parsed.lines)
    if not isinstance(parsed.data, dict):
        raise ConfigError([Problem((), "a sweep file is a mapping: base, grid, random, seeds, ...")], source)
    return parsed.data, source


def load_sweep_file(path: str | Path) -> SweepSpec:
    """The validated spec of a sweep file; a ConfigError (exit 2) naming the key and line at fault."""
    return spec_problems(*read_sweep_file(path))


@dataclass(frozen=True)
class Trial:
    """One training run of the sweep: its number, the values it sets and its seed (None: the config's own)."""

    index: int
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    @property
    def id(self) -> str:
        """`003-lr_max=0.001-seed=42`: the number, then each value under its key's last part."""
        parts = [f"{key.rsplit('.', 1)[-1]}={format_value(value)}" for key, value in self.params.items()]
        parts += [f"seed={self.seed}"] if self.seed is not None else []
        return re.sub(r"[^\w.=+-]", "_", "-".join([f"{self.index:03d}", *parts]))[:120]

    def overrides(self) -> list[str]:
        """`--set` texts for the trial's values (JSON is YAML, so every value reads back as itself)."""
        return [f"{key}={json.dumps(value)}" for key, value in self.params.items()]


def format_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else json.dumps(value) if not isinstance(value, str) else value


def expand(spec: SweepSpec) -> list[Trial]:
    """Every trial of the sweep, in order: grid points × random draws × seeds (spec.count() of them, at most
    MAX_TRIALS). Validation refuses a bigger space; checked again here for a spec changed since, by
    `model_copy(update=...)` say, which pydantic does not validate."""
    if spec.too_big():
        raise UserError(f"sweep: {spec.too_big()}", 2)
    rng = np.random.Generator(np.random.PCG64(spec.sampler_seed))
    parsed = {key: parse_distribution(text) for key, text in spec.random.items()}
    draws = [{key: draw(*parsed[key], rng) for key in spec.random} for _ in range(spec.samples or 1)]
    seeds: list[int | None] = list(spec.seeds) or [None]
    combos = itertools.product(itertools.product(*spec.grid.values()), draws, seeds)  # lazy: one at a time
    return [Trial(i, {**dict(zip(spec.grid, point, strict=True)), **sample}, seed)
            for i, (point, sample, seed) in enumerate(combos)]
