"""MLflow: params, metrics per step, status and the run's files, through MlflowClient (minitrain[mlflow]).

    uri      sqlite:///ABS/PATH/mlflow.db (default: mlflow.db in the run folder), or any tracking URI the user
             gives: another SQLite file, http://host:5000 ...
    experiment, project, tags   the MLflow experiment (created when missing, tagged with the project); the run
             is named after the run folder (a sweep's trial id), tagged with the config's tags

A SQLite store keeps artifacts in `mlflow-artifacts/` beside the database file; a server keeps them where it
says. Metrics are buffered and sent in batches (at each validation and at the end), so tracking costs the loop
a few milliseconds per validation, not a database write per step. A resumed run continues the MLflow run it
started (its id is kept in the run folder's tracking.json). Read a run back with

    MlflowClient("sqlite:///runs/x/mlflow.db").get_metric_history(run_id, "val_ppl")

or browse them: `mlflow ui --backend-store-uri sqlite:///runs/x/mlflow.db` (the extra installs the full mlflow).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.extras import require
from minitrain.common.io import atomic_write_json
from minitrain.tracking.tracker import Destination, Tracker, numeric

# How a minitrain run's status reads in MLflow.
STATUS = {"completed": "FINISHED", "early_stopped": "FINISHED", "diverged": "FAILED", "halted": "FAILED",
          "interrupted": "KILLED"}
MAX_METRICS, MAX_PARAMS = 1000, 100  # MLflow's limits for one log_batch call
STATE_FILE = "tracking.json"


def metric_name(key: str) -> str:
    """`key` in the characters MLflow allows in a metric name (`lr/transformer.h.*` -> `lr/transformer.h._`)."""
    return re.sub(r"[^\w\-. /]", "_", key)


def artifact_location(uri: str) -> str | None:
    """Beside a SQLite database: <its folder>/mlflow-artifacts; None (the server's choice) for other stores."""
    if uri.startswith("sqlite:///"):
        return str(Path(uri.removeprefix("sqlite:///")).parent / "mlflow-artifacts")
    return None


def client_for(uri: str) -> Any:
    """An MlflowClient on `uri`, with MLflow's and its database migrations' INFO chatter silenced; a UserError
    when the store cannot be opened (a SQLite file in a folder that cannot be written...)."""
    require("mlflow", "mlflow", "monitoring.tracking backend mlflow")
    require("sqlalchemy", "mlflow", "an MLflow SQLite store")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    try:
        client = MlflowClient(tracking_uri=uri)  # opens the store: a bad URI fails here, not mid-run
    except Exception as exc:
        raise UserError(f"monitoring.tracking: the MLflow store {uri} cannot be used ({type(exc).__name__}: "
                        f"{exc})", 2) from None
    return client


def experiment_id(client: Any, name: str, project: str | None) -> str:
    """The id of experiment `name`, created (beside a SQLite store's file, tagged with the project) if missing."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    from mlflow.exceptions import MlflowException

    try:
        return client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri),
                                        tags={"project": project} if project else None)
    except MlflowException:  # another process created it first
        return client.get_experiment_by_name(name).experiment_id


def prepare_store(tracking: Any) -> None:
    """Create the store and experiment of `tracking` (a TrackingConfig) once, before a sweep's trials in parallel
    processes would race to (TRACKER_BACKENDS' `prepare`)."""
    try:
        experiment_id(client_for(tracking.uri), tracking.experiment, tracking.project)
    except Exception as exc:  # whatever the store raises; client_for's own UserError says it already
        raise exc if isinstance(exc, UserError) else UserError(
            f"monitoring.tracking: the MLflow store {tracking.uri} cannot be used ({exc})", 2) from None


class MlflowTracker(Tracker):
    def __init__(self, to: Destination) -> None:
        self.client = client_for(to.uri)
        self.uri, self.run, self.experiment, self.project = to.uri, to.run, to.experiment, to.project
        self.state_path = to.run_dir / STATE_FILE
        self.run_id = self._previous_run_id() if to.resume_step is not None else None
        self._pending: list[Any] = []
        self._lock = threading.Lock()  # system metrics arrive from their own thread
        self.broken = False

    def _store(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        """A call to the MLflow store. A failure once training runs (a server gone, a full disk) is reported once
        and switches tracking off: the run goes on, and train_log.jsonl keeps every value."""
        if self.broken:
            return None
        try:
            return call(*args, **kwargs)
        except Exception as exc:  # MlflowException, a connection or database error: whatever the store raises
            self.broken = True
            print(f"warning: MLflow tracking stopped: {what} failed ({type(exc).__name__}: {exc}); training goes "
                  "on and train_log.jsonl keeps every value", file=sys.stderr, flush=True)
            return None

    def _previous_run_id(self) -> str | None:
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return state.get("run_id") if state.get("uri") == self.uri else None

    def start(self, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        """Create the MLflow run (continue it, on a resume); a UserError before training if the store fails."""
        try:
            self._start(params, tags)
        except Exception as exc:
            raise UserError(f"monitoring.tracking: the MLflow store {self.uri} cannot be used ({type(exc).__name__}: "
                            f"{exc})", 2) from None

    def _start(self, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        if self.run_id is not None:  # a resume: same run, params already logged
            self.client.update_run(self.run_id, status="RUNNING")
            return
        run = self.client.create_run(experiment_id(self.client, self.experiment, self.project),
                                     run_name=self.run, tags={**tags, **({"project": self.project}
                                                                          if self.project else {})})
        self.run_id = run.info.run_id
        atomic_write_json(self.state_path, {"backend": "mlflow", "uri": self.uri, "run_id": self.run_id,
                                            "experiment": self.experiment})
        items = [Param(key[:250], str(value)[:6000]) for key, value in params.items()]
        for i in range(0, len(items), MAX_PARAMS):
            self.client.log_batch(self.run_id, params=items[i: i + MAX_PARAMS])

    def log_metrics(self, step: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        with self._lock:
            self._pending += [Metric(metric_name(key), value, now, step) for key, value in values.items()]
            due = len(self._pending) >= MAX_METRICS or any(key.startswith("val_") for key in values)
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for i in range(0, len(pending), MAX_METRICS):
            self._store("sending metrics", self.client.log_batch, self.run_id, metrics=pending[i: i + MAX_METRICS])

    def log_text(self, tag: str, text: str, step: int) -> None:
        self._store("sending text", self.client.log_text, self.run_id, text, f"{tag}/step-{step}.txt")

    def finish(self, status: str, results: Mapping[str, Any], files: list[Path]) -> None:
        step = int(results.get("steps", 0))
        self.log_metrics(step, {f"results.{key}": value for key, value in numeric(results).items()})
        self.flush()
        for path in files:
            # the model file under model/, the run's own files at the top
            self._store(f"uploading {path.name}", self.client.log_artifact, self.run_id, str(path),
                        "model" if path.suffix == ".safetensors" else None)
        self._store("ending the run", self.client.set_terminated, self.run_id, STATUS.get(status, "FAILED"))

    def close(self) -> None:
        if self.run_id is not None:
            self.flush()
