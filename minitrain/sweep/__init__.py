"""Hyperparameter sweeps: many ordinary training runs over a search space, on a local process pool or on Ray.

    from minitrain.sweep import SweepSpec, run_sweep
    summary, rows = run_sweep(SweepSpec(base="experiments/18-train-mini/config.yaml",
                                        grid={"optimizer.lr_max": [1e-4, 3e-4, 1e-3]}, seeds=[42, 43, 44]))

space.py (the definition and its trials), trials.py (one trial = one run folder), process_pool.py and ray_backend.py
(where trials run), results.py (the table, the best trial, the plots), runner.py (all of it, in order).
docs/sweeps.md explains the file, the command and running on a Ray cluster.
"""

from minitrain.sweep.runner import run_sweep
from minitrain.sweep.space import SweepSpec, Trial, expand, load_sweep_file

__all__ = ["SweepSpec", "Trial", "expand", "load_sweep_file", "run_sweep"]
