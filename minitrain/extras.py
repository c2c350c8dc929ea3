"""Optional integrations (Ray, MLflow, TensorBoard, pyarrow, psutil) are pip extras, imported only where used.

    ray = require("ray", "ray", "--backend ray")       # the module, or one UserError saying what to install
    missing_extras(cfg)                                 # before a run: each key whose extra is not installed

pyproject.toml's extras: minitrain[ray], [mlflow], [tensorboard], [parquet], [system]; the dev extra installs
them all, so the test suite runs against the real libraries.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

from minitrain.config.problems import Problem
from minitrain.errors import UserError

EXIT_MISSING = 2  # like a config that asks for something this installation cannot do
# What each optional setting imports, and the extra that installs it.
TRACKING_MODULES = {"mlflow": (("mlflow", "sqlalchemy"), "mlflow"), "tensorboard": (("tensorboardX",), "tensorboard"),
                    "jsonl": ((), "")}


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import `module`, or raise a UserError naming what needs it and the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(_missing(module, extra, purpose) + f" ({exc})", EXIT_MISSING) from None


def _missing(module: str, extra: str, purpose: str) -> str:
    return (f"{purpose} needs the {module.split('.')[0]} package, which is not installed here: "
            f"pip install 'minitrain[{extra}]'")


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
        return False


def missing_extras(cfg: Any) -> list[Problem]:
    """A problem for each setting of the config whose optional package is not installed."""
    wanted = []
    tracking = cfg.monitoring.tracking
    if tracking is not None and tracking.enabled:
        modules, extra = TRACKING_MODULES[tracking.backend]
        wanted += [(("monitoring", "tracking", "backend"), m, extra, f"backend {tracking.backend}") for m in modules]
    if cfg.monitoring.system is not None and cfg.monitoring.system.enabled:
        wanted.append((("monitoring", "system"), "psutil", "system", "system metrics"))
    if cfg.output.metrics.format == "parquet":
        wanted.append((("output", "metrics", "format"), "pyarrow", "parquet", "parquet"))
    problems: dict[tuple, Problem] = {}  # one per setting: the first of its packages that is missing
    for path, module, extra, purpose in wanted:
        if path not in problems and not installed(module):
            problems[path] = Problem(path, _missing(module, extra, purpose))
    return list(problems.values())
