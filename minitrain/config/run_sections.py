"""The sections about a run rather than what it trains: how it is watched (`monitoring:` progress and alerts),
where its files go (`output:`), where it is published (`publish:`) and how the process runs (`runtime:`). None
of them enters the training config hash (minitrain/training/parts.py), so a resume may change them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from minitrain.common.strict import PositiveInt, Section
from minitrain.config.fields import AlertRule, RepoId
from minitrain.config.observing import DashboardConfig, MetricsOutput, ReportOutput, SystemConfig, TrackingConfig
from minitrain.config.problems import UNION_TAGS
from minitrain.evaluation.alerts import Alert, parse_alert
from minitrain.formats.gguf_dtypes import GGUF_DTYPES


class AlertSpec(Section):
    """An alert in the spec's mapping form: `{condition: "loss > 10", action: warn, message: "..."}`."""

    condition: str = Field(min_length=1)
    action: Literal["warn", "halt"]
    message: str | None = None

    @model_validator(mode="after")
    def _parses(self) -> AlertSpec:
        parse_alert(self.rule_text())
        return self

    def rule_text(self) -> str:
        return f"{self.condition}: {self.action}"


def _alert_form(value: Any) -> str:
    return UNION_TAGS[1] if isinstance(value, dict | AlertSpec) else UNION_TAGS[0]


# Either form; the tag picks the one to validate, so a bad rule gets the rule's message, not two union errors.
# The tags appear in pydantic's error locations; problems.py drops them.
AlertEntry = Annotated[
    Annotated[AlertRule, Tag(UNION_TAGS[0])] | Annotated[AlertSpec, Tag(UNION_TAGS[1])], Discriminator(_alert_form)
]


class MonitoringConfig(Section):
    """Progress display, declarative alerts (grammar in minitrain/evaluation/alerts.py), experiment tracking,
    system metrics and the live dashboard (config/observing.py)."""

    progress: Literal["auto", "bar", "plain", "none"] = "auto"
    alerts: list[AlertEntry] = Field(default_factory=list, description="e.g. 'loss > 10: warn', 'nan: halt', or "
                                                                       "{condition, action, message}")
    tracking: TrackingConfig | None = None
    system: SystemConfig | None = None
    dashboard: DashboardConfig | None = Field(None, description="what `train --tui` and `watch` show; absent: "
                                                                 "the default dashboard")

    def alert_rules(self) -> list[Alert]:
        """Every alert parsed, in order, each with its message (what `AlertMonitor` takes)."""
        return [parse_alert(a) if isinstance(a, str) else parse_alert(a.rule_text(), a.message or "")
                for a in self.alerts]


class OutputConfig(Section):
    """Where the run folder goes (`train --out-dir` overrides it; null means runs/<name>, ./output for a
    spec-shaped manifest) and where the final model file goes (`train --models-dir` overrides it; null means
    $MINITRAIN_MODELS_DIR, else the run folder's models/)."""

    dir: str | None = Field(None, min_length=1)
    models_dir: str | None = Field(None, min_length=1, description="folder for the final model file; default "
                                                                   "$MINITRAIN_MODELS_DIR or RUN/models")
    metrics: MetricsOutput = Field(default_factory=MetricsOutput)
    report: ReportOutput = Field(default_factory=ReportOutput)
    plots: bool = Field(True, description="false: no loss_curve.png, dashboard.png or confusion_matrix.png (about "
                                          "0.5 s a run: sweeps of many trials, tests); report.md then shows none")
    model_format: Literal["safetensors", "gguf"] = Field(
        "safetensors", description="gguf: a finished run also writes its final model as a GGUF beside the model file "
                                   "(minitrain export --format gguf)")
    gguf_dtype: Literal[tuple(GGUF_DTYPES)] = Field("f32", description="the GGUF's matrices (model_format gguf)")


class PublishConfig(Section):
    """Publish the model to the Hugging Face Hub after a successful run (used by minitrain.hub)."""

    repo: RepoId = Field(description="user/name on the Hub")
    private: bool = False
    merge_adapters: bool = Field(False, description="a LoRA run: publish the base with the adapters merged in")
    model_card: bool = Field(True, description="false: README.md, the model card, is left out of the upload")


class DataParallelConfig(Section):
    """Data parallelism (minitrain/parallel/): each step's `training.grad_accumulation` micro-batches are computed
    by `workers` workers, grad_accumulation / workers each (local: the training process and workers − 1 processes),
    and their gradients summed in micro-batch order, so the run's bytes are those of one process at 1 BLAS thread.
    `backend` local: processes on this machine with shared memory; ray: Ray actors, on the cluster at `address`
    (none: a Ray started on this machine)."""

    workers: PositiveInt = Field(
        description="workers (local: this process and workers − 1 more); must divide training.grad_accumulation")
    backend: Literal["local", "ray"] = Field("local", description="local (processes, shared memory) or ray (actors)")
    address: str | None = Field(None, min_length=1, description="ray only: the cluster (auto, ray://host:10001)")
    oversubscribe: bool = Field(False, description="local: allow more workers than this machine's usable cores")
    timeout: float = Field(120.0, gt=0, description="local: seconds a step waits for a silent worker, then stops")

    @model_validator(mode="after")
    def _address_is_ray_s(self) -> DataParallelConfig:
        if self.address is not None and self.backend != "ray":
            raise ValueError(f"address is the Ray cluster's: it needs backend ray (got backend {self.backend})")
        return self


class RuntimeConfig(Section):
    """How the process computes, not what: BLAS threads and data parallelism. `threads: rule` (the default) picks
    them from the model's size (minitrain/common/runtime.py); a number fixes them; `measure` times a few training
    steps on each count and measures again when the step time drifts (minitrain/callbacks/thread_choice.py). Thread
    counts change a product's last bits, so `measure` makes a run's numbers depend on the machine's load: its logs
    and weights are not byte-reproducible. `data_parallel` (above) spreads each step's micro-batches over workers;
    with `measure` (backend local) it is one more candidate, N workers × 1 thread (minitrain/parallel/switch.py)."""

    threads: Literal["rule", "measure"] | PositiveInt = Field(
        "rule", description="rule (by model size), measure (timed steps, not byte-reproducible) or a count")
    data_parallel: DataParallelConfig | None = None
