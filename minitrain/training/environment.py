"""environment.yaml: where a run ran — Python, library versions, CPU, RAM, OS and the BLAS NumPy calls.

The spec's artifact list (§15.3) puts it beside config.yaml and the manifest. manifest.json already records the
versions that shape a run's numbers; this file is the fuller picture someone reproducing the run on another
machine wants, optional libraries included ("not installed" when absent).
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from minitrain.common.io import atomic_write_text
from minitrain.common.runtime import get_blas_threads
from minitrain.common.versions import library_versions
from minitrain.training.artifacts import hardware_info

FILE = "environment.yaml"
LIBRARIES = ("numpy", "numba", "pyyaml", "safetensors", "matplotlib", "huggingface_hub", "tqdm", "pydantic",
             "ray", "mlflow-skinny", "mlflow", "tensorboardX", "tensorboard", "pyarrow", "psutil")


def blas_info() -> dict[str, Any]:
    """The BLAS NumPy was built with (name, version, configuration) and the threads it may use now."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except (KeyError, TypeError, ValueError):
        blas = {}
    info = {key: blas[key] for key in ("name", "version", "openblas configuration") if key in blas}
    return {**info, "threads": get_blas_threads()}


def environment() -> dict[str, Any]:
    hardware = hardware_info()
    return {
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "libraries": library_versions(LIBRARIES),
        "os": {"platform": hardware["platform"], "system": platform.system(), "release": platform.release()},
        "cpu": {"model": hardware["cpu_model"], "logical_cores": hardware["cpu_cores"],
                "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None},
        "ram_gb": hardware["ram_gb"],
        "blas": blas_info(),
    }


def write_environment(run_dir: str | os.PathLike) -> None:
    atomic_write_text(Path(run_dir) / FILE, yaml.safe_dump(environment(), sort_keys=False, allow_unicode=True))
