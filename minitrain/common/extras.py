"""Optional integrations (Ray, MLflow, TensorBoard, pyarrow, psutil, matplotlib, rich) are pip extras, imported where
used.

    ray = require("ray", "ray", "--backend ray")       # the module, or one UserError saying what to install
    installed("psutil")                                 # whether it can be imported, without importing it

(minitrain/config/missing_extras.py names, before a run, each setting of a config whose extra is not installed.)

pyproject.toml's extras: minitrain[ray], [mlflow], [tensorboard], [parquet], [system], [plots], [tui]; the dev extra
installs them all, so the test suite runs against the real libraries.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from minitrain.common.errors import UserError

EXIT_MISSING = 2  # like a config that asks for something this installation cannot do


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import `module`, or raise a UserError naming what needs it and the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(missing_message(module, extra, purpose) + f" ({exc})", EXIT_MISSING) from None


def missing_message(module: str, extra: str, purpose: str) -> str:
    return (f"{purpose} needs the {module.split('.')[0]} package, which is not installed here: "
            f"pip install 'minitrain[{extra}]'")


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
        return False
