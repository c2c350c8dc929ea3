"""Optional integrations (Ray, MLflow, TensorBoard, pyarrow, psutil) are pip extras, imported only where used.

    ray = require("ray", "ray", "--backend ray")       # the module, or one UserError saying what to install

pyproject.toml's extras: minitrain[ray], [mlflow], [tensorboard], [parquet], [system]; the dev extra installs
them all, so the test suite runs against the real libraries.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from minitrain.errors import UserError

EXIT_MISSING = 2  # like a config that asks for something this installation cannot do


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import `module`, or raise a UserError naming what needs it and the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(f"{purpose} needs the {module.split('.')[0]} package, which is not installed here "
                        f"({exc}): pip install 'minitrain[{extra}]'", EXIT_MISSING) from None
