"""Reading a run folder back: one reader per file a run writes, each checked against a schema before use.

    read_manifest(path)            manifest.json          status, seeds, run id, the resolved config, ...
    read_results(path)             results.json           the headline numbers and the model file they belong to
    read_run_config(path)          config.resolved.yaml   the config as the run resolved it
    check_model_file_meta(meta, where)                    a checkpoint's or model file's metadata (checkpoint.py)

Every reader goes through `minitrain.common.io` (regular files only, a size cap, UTF-8, JSON that parses and nests
shallowly), then validates the values the code uses with pydantic. So any damage, whether bytes that are not
UTF-8, a list where an object belongs, a string `wall_seconds`, an integer `model_path`, a path with a NUL byte or
a model with zero heads, is one `UserError` (exit code 2) naming the file and the key:

    runs/x/results.json: wall_seconds: input should be a valid number, got a string ('12.5')

The schemas list only what the code reads; other keys are kept as they are (a newer minitrain may record more).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import json_type, read_json_object
from minitrain.config.yaml_lines import load_yaml_file
from minitrain.models.registry import DEFAULT_TYPE, FAMILIES

MANIFEST, RESULTS, RESOLVED_CONFIG = "manifest.json", "results.json", "config.resolved.yaml"

# How a run stands or ended (manifest.json "status"). The loop reports the first five when it stops; the run adds
# "running" (training), "finishing" (training done, the final evaluation and model file being written) and
# "failed" (an error the run could not go on from, e.g. a full disk; the manifest's "error" says which).
Status = Literal["running", "finishing", "completed", "early_stopped", "diverged", "interrupted", "halted", "failed"]
RUNNING, FINISHING, FAILED = "running", "finishing", "failed"
COMPLETED, EARLY_STOPPED, DIVERGED, INTERRUPTED, HALTED = (
    "completed", "early_stopped", "diverged", "interrupted", "halted",
)
FINISHED = (COMPLETED, EARLY_STOPPED)  # a run that ended well: it has a final model to save and publish

PathText = Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00]*$")]
Count = Annotated[int, Field(ge=0)]
Seed = Annotated[int, Field(ge=0, lt=2**63)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Record(BaseModel):
    """A JSON object a run wrote: the listed keys are type-checked strictly, any other key is kept."""

    model_config = ConfigDict(extra="allow", strict=True)


class ModelSection(Record):
    n_layer: Annotated[int, Field(ge=1)] | None = None
    n_head: Annotated[int, Field(ge=1)] | None = None
    d_model: Annotated[int, Field(ge=1)] | None = None
    d_ff: Annotated[int, Field(ge=1)] | None = None
    vocab_size: Annotated[int, Field(ge=1)] | None = None
    max_seq_len: Annotated[int, Field(ge=1)] | None = None
    init_from: PathText | None = None


class DataSection(Record):
    train_path: PathText | None = None
    val_path: PathText | None = None
    dev_path: PathText | None = None
    vocab_path: PathText | None = None
    heldout_policy: str | None = None
    loss_on: str | None = None
    format: str | None = None


class RunConfig(Record):
    """The resolved config a run recorded (config.resolved.yaml, or manifest.json's "config")."""

    name: str | None = None
    model: ModelSection | None = None
    data: DataSection | None = None
    optimizer: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    training: dict[str, Any] | None = None


class Resume(Record):
    checkpoint: PathText
    step: Count


class Manifest(Record):
    run_id: str | None = None
    status: Status | None = None
    error: str | None = None
    seed: Seed | None = None
    data_seed: Seed | None = None
    config: RunConfig | None = None
    config_hash: str | None = None
    data_manifest_hash: str | None = None
    total_steps: Count | None = None
    steps_done: Count | None = None
    stopped_at: Count | None = None
    wall_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    train_wall_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    checkpoint: PathText | None = None
    model_path: PathText | None = None
    model_sha256: Sha256 | None = None
    resumes: list[Resume] | None = None
    hardware: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    git_sha: str | None = None


class Results(Record):
    run_id: str | None = None
    status: Status | None = None
    model_path: PathText | None = None
    model_sha256: Sha256 | None = None
    steps: Count | None = None
    best_val_step: Count | None = None
    beats_baseline: bool | None = None
    train_ppl: float | None = None
    val_ppl: float | None = None
    best_val_ppl: float | None = None
    ngram_baseline_val_ppl: float | None = None
    ppl_improvement_pct: float | None = None
    val_exact_match: float | None = None
    train_loss: float | None = None
    val_loss: float | None = None
    wall_seconds: float | None = None
    peak_rss_mb: float | None = None
    ms_per_step: float | None = None


# Each model family's file schema, by its `type` (a config without one is a MiniGPT): its record says it.
SHAPES: dict[str, type[BaseModel]] = {name: family.file_schema for name, family in FAMILIES.items()}


def _family(config: Any) -> str | None:
    return config.get("type", DEFAULT_TYPE) if isinstance(config, dict) else None


AnyShape = Annotated[
    Union[tuple(Annotated[schema, Tag(name)] for name, schema in SHAPES.items())],  # noqa: UP007 (built from a list)
    Discriminator(_family, custom_error_type="model_family",
                  custom_error_message=f"type must name a model family ({', '.join(SHAPES)})"),
]


class ModelFileMeta(Record):
    """The metadata of a minitrain safetensors file (checkpoint.py), JSON values decoded."""

    format_version: Count
    kind: Literal["model", "checkpoint", "quantized"]
    shape: AnyShape = Field(alias="model_config")


class CheckpointMeta(ModelFileMeta):
    step: Count
    config_hash: str
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    batcher: dict[str, Any]
    train_rng: dict[str, Any]
    extra: dict[str, Any]


def check_model_file_meta(metadata: dict[str, Any], where: str) -> dict[str, Any]:
    """A checkpoint's or model file's metadata, checked against the schema of its kind."""
    validate(metadata, ModelFileMeta, where)
    return validate(metadata, CheckpointMeta, where) if metadata["kind"] == "checkpoint" else metadata


def problem_text(error: ValidationError) -> str:
    """The first problem pydantic found, as `key.path: what was expected, got what` (one line)."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"] if part not in SHAPES) or "the top level"
    got = first.get("input")
    shown = "" if first["type"] == "missing" else f", got {json_type(got)} ({_short(got)})"
    more = len(error.errors()) - 1
    return f"{where}: {first['msg'].lower()}{shown}" + (f" (and {more} more)" if more else "")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(data: Any, schema: type[BaseModel], where: str) -> dict[str, Any]:
    """`data` unchanged once `schema` accepts it; otherwise one UserError naming `where` and the key."""
    try:
        schema.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{where}: {problem_text(e)}", BAD_INPUT) from None
    return data


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    return validate(read_json_object(path, "run manifest"), Manifest, str(path))


def read_results(path: str | os.PathLike) -> dict[str, Any]:
    return validate(read_json_object(path, "results file"), Results, str(path))


def read_run_config(path: str | os.PathLike) -> dict[str, Any]:
    """config.resolved.yaml, read within the bounds every YAML file minitrain reads keeps (regular file, size,
    aliases, nesting, number length: minitrain/config/yaml_lines.py), then checked like the other run files."""
    data = load_yaml_file(path, "resolved config")
    if not isinstance(data, dict):
        raise UserError(f"{path}: the run's config must be a mapping, not {json_type(data)}", BAD_INPUT)
    return validate(data, RunConfig, str(path))


