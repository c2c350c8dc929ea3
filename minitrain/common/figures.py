"""Figures as files: matplotlib figures that belong to no window, and PNGs written atomically with reproducible bytes.

    fig, ax = subplots(figsize=(8, 4.8), dpi=100)   # matplotlib (the `plots` extra) imported only when drawing
    ax.plot(steps, losses)
    save_figure(fig, "loss_curve.png")              # written atomically

A `matplotlib.figure.Figure` made directly, rather than through pyplot, is drawn by the Agg renderer when saved
and is never registered with pyplot's figure manager: there is no backend to choose, no global list of open
figures to close, and a run does not pay for importing pyplot (about 0.15 s per process).
"""

from __future__ import annotations

import os
from typing import Any

from minitrain.common.extras import require
from minitrain.common.io import atomic_write


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], dpi: int, layout: str | None = None,
             **kwargs: Any) -> tuple[Any, Any]:
    """(figure, axes) as `matplotlib.pyplot.subplots(nrows, ncols, figsize=, dpi=, layout=, **kwargs)` returns them
    (`sharex`, `squeeze`, `gridspec_kw`, ... go to `Figure.subplots`), on a figure of its own."""
    fig = require("matplotlib.figure", "plots", "drawing a PNG").Figure(figsize=figsize, dpi=dpi, layout=layout)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def colormap(name: str) -> Any:
    """matplotlib's registered colormap `name` ("viridis")."""
    return require("matplotlib", "plots", "drawing a PNG").colormaps[name]


def save_figure(fig: Any, png_path: str | os.PathLike) -> None:
    """Write `fig` as a PNG atomically."""
    # No "Software" entry: the PNG bytes then depend only on the picture, not on the matplotlib build.
    atomic_write(png_path, lambda f: fig.savefig(f, format="png", metadata={"Software": None}))
