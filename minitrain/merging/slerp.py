"""SLERP: spherical linear interpolation between two models, one tensor at a time (Shoemake 1985; the merge
mergekit popularised).

For one tensor of the two endpoints θ_0 (t = 0, the base) and θ_1 (t = 1), each flattened to a vector:

    cos Ω = ⟨θ_0/‖θ_0‖, θ_1/‖θ_1‖⟩                 (the angle between them)
    θ(t) = sin((1 − t)Ω)/sin Ω · θ_0 + sin(tΩ)/sin Ω · θ_1

It walks the arc between the two directions at constant angular speed, where linear interpolation cuts the
chord and shrinks the norm midway (two orthogonal unit vectors average to norm 0.71). When the vectors are
nearly parallel or antiparallel (|cos Ω| > 0.9995, mergekit's threshold), sin Ω ≈ 0 makes the formula 0/0 (and
no one arc joins v and −v): θ(t) = (1 − t)θ_0 + tθ_1, as mergekit. A zero tensor takes the same fallback.
"""

from __future__ import annotations

import numpy as np

DOT_THRESHOLD = 0.9995


def slerp(t: float, v0: np.ndarray, v1: np.ndarray, threshold: float = DOT_THRESHOLD) -> np.ndarray:
    """θ(t) between v0 (t = 0) and v1 (t = 1), of their shape and dtype (module docstring). Computed in float64."""
    a, b = v0.astype(np.float64).ravel(), v1.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    dot = float(a @ b / (na * nb)) if na > 0 and nb > 0 else 1.0
    if abs(dot) > threshold:
        out = (1.0 - t) * a + t * b
    else:
        omega = np.arccos(np.clip(dot, -1.0, 1.0))
        out = (np.sin((1.0 - t) * omega) * a + np.sin(t * omega) * b) / np.sin(omega)
    return out.reshape(v0.shape).astype(v0.dtype)
