"""Figures as files: matplotlib on its file-only backend, and PNGs written atomically with reproducible bytes.

    plt = pyplot()                       # imported only when a run draws something
    fig, ax = plt.subplots()
    save_figure(fig, "loss_curve.png")   # written atomically, then closed
"""

from __future__ import annotations

import os
from typing import Any

from minitrain.common.io import atomic_write


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (no display needed); imported only when plotting."""
    import matplotlib

    matplotlib.use("Agg")  # must come before pyplot is imported
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, png_path: str | os.PathLike) -> None:
    """Write `fig` as a PNG atomically and close it."""
    # No "Software" entry: the PNG bytes then depend only on the picture, not on the matplotlib build.
    atomic_write(png_path, lambda f: fig.savefig(f, format="png", metadata={"Software": None}))
    pyplot().close(fig)
