"""Before a run: each setting of a config whose optional package (a pip extra) is not installed, as a problem
naming the key and the extra that installs it (minitrain/common/extras.py imports them where they are used)."""

from __future__ import annotations

from typing import Any

from minitrain.common.extras import installed, missing_message
from minitrain.config.observing import TRACKER_BACKENDS
from minitrain.config.problems import Problem


def missing_extras(cfg: Any) -> list[Problem]:
    """A problem for each setting of the config whose optional package is not installed."""
    wanted = []
    tracking = cfg.monitoring.tracking
    if tracking is not None and tracking.enabled:
        to = TRACKER_BACKENDS[tracking.backend]
        wanted += [(("monitoring", "tracking", "backend"), m, to.extra, f"backend {to.name}") for m in to.modules]
    if cfg.monitoring.system is not None and cfg.monitoring.system.enabled:
        wanted.append((("monitoring", "system"), "psutil", "system", "system metrics"))
    parallel = cfg.runtime.data_parallel
    if parallel is not None and parallel.backend == "ray":
        wanted.append((("runtime", "data_parallel", "backend"), "ray", "ray", "backend ray"))
    if cfg.output.metrics.format == "parquet":
        wanted.append((("output", "metrics", "format"), "pyarrow", "parquet", "parquet"))
    problems: dict[tuple, Problem] = {}  # one per setting: the first of its packages that is missing
    for path, module, extra, purpose in wanted:
        if path not in problems and not installed(module):
            problems[path] = Problem(path, missing_message(module, extra, purpose))
    return list(problems.values())
