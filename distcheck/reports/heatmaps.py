"""Heatmaps of a failure's Jacobian blocks (matplotlib, drawn off-screen to PNG).

Panels: the numerical and the analytical block (real and imaginary parts for complex blocks),
and |analytical − numerical| against the tolerance, as log10(|a − n| / (atol + rtol·|n|)):
above 0 (red) an element is outside the tolerance. The largest violation is marked on every
panel; axes are Jacobian rows (input elements) and columns (output elements), in the whole
block's numbering when the blocks are a window of it.
"""

from __future__ import annotations

import io

import numpy as np

from distcheck.reduce.failure_blocks import FailureBlocks
from distcheck.runner.artifacts import CaseBlocks

DPI = 72
ANNOTATED = 36  # blocks of at most this many elements show their values


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # off-screen: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


def excess(blocks: FailureBlocks) -> np.ndarray:
    """log10 of |analytical − numerical| over the allowed difference (> 0: outside the tolerance)."""
    difference = np.abs(blocks.analytical - blocks.numerical)
    allowed = blocks.atol + blocks.rtol * np.abs(blocks.numerical)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log10(difference / allowed)
    return np.nan_to_num(ratio, nan=np.inf, posinf=np.inf, neginf=-12.0)


def _panels(blocks: FailureBlocks) -> list[tuple[str, np.ndarray, str]]:
    n, a = blocks.numerical, blocks.analytical
    if np.iscomplexobj(n) or np.iscomplexobj(a):
        values = [
            ("numerical (real part)", np.real(n)),
            ("analytical (real part)", np.real(a)),
            ("numerical (imaginary part)", np.imag(n)),
            ("analytical (imaginary part)", np.imag(a)),
        ]
    else:
        values = [("numerical", n), ("analytical", a)]
    panels = [(title, np.asarray(v, dtype=float), "values") for title, v in values]
    return panels + [("log10(|a − n| / (atol + rtol·|n|))", excess(blocks), "excess")]


def _draw(plt, axis, blocks: CaseBlocks, title: str, data: np.ndarray, kind: str, limit: float) -> None:
    from matplotlib.ticker import MaxNLocator

    rows, columns = data.shape
    extent = (blocks.col0 - 0.5, blocks.col0 + columns - 0.5, blocks.row0 + rows - 0.5, blocks.row0 - 0.5)
    if kind == "excess":
        shown = np.clip(data, -6, 6)
        image = axis.imshow(shown, cmap="RdBu_r", vmin=-6, vmax=6, extent=extent, aspect="auto")
    else:
        image = axis.imshow(data, cmap="viridis", vmin=-limit, vmax=limit, extent=extent, aspect="auto")
    plt.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    if rows * columns <= ANNOTATED:  # a tiny block: its numbers too
        for (r, c), value in np.ndenumerate(data):
            axis.text(blocks.col0 + c, blocks.row0 + r, f"{value:.3g}", ha="center", va="center", fontsize=7)
    for ruler in (axis.xaxis, axis.yaxis):
        ruler.set_major_locator(MaxNLocator(integer=True))
    worst_row, worst_column = blocks.worst
    axis.plot([worst_column], [worst_row], marker="s", markersize=9, markerfacecolor="none", color="#ff00ff", mew=2)
    axis.set_title(title, fontsize=9)
    axis.set_xlabel(f"column (output {blocks.window.output_index} element)", fontsize=8)
    axis.set_ylabel(f"row (input {blocks.window.input_index} element)", fontsize=8)
    axis.tick_params(labelsize=7)


def figure_png(blocks: CaseBlocks) -> bytes:
    """The heatmaps of ``blocks`` as one PNG."""
    plt = _pyplot()
    panels = _panels(blocks.window)
    finite = [np.abs(d[np.isfinite(d)]) for _, d, kind in panels if kind == "values"]
    limit = max((float(x.max()) for x in finite if x.size), default=1.0) or 1.0
    columns = 3 if len(panels) == 3 else 5
    figure, axes = plt.subplots(1, columns, figsize=(3.6 * columns, 3.3), dpi=DPI, squeeze=False)
    try:
        for axis, (title, data, kind) in zip(axes[0], panels):
            _draw(plt, axis, blocks, title, data, kind, limit)
        figure.tight_layout()
        out = io.BytesIO()
        figure.savefig(out, format="png", dpi=DPI)
        return out.getvalue()
    finally:
        plt.close(figure)


def caption(blocks: CaseBlocks) -> str:
    """What the pictures show, in words (window, worst element)."""
    rows, columns = blocks.shape
    window = blocks.window
    shown_rows, shown_columns = window.numerical.shape
    part = (
        f", {window.part} part of complex {'inputs' if window.mode == 'forward' else 'outputs'}" if window.part else ""
    )
    where = (
        f"the whole {rows} × {columns} block"
        if (shown_rows, shown_columns) == (rows, columns)
        else f"rows {blocks.row0}–{blocks.row0 + shown_rows - 1}, "
        f"columns {blocks.col0}–{blocks.col0 + shown_columns - 1} "
        f"of a {rows} × {columns} block (a window around the worst element)"
    )
    return (
        f"Jacobian of output {window.output_index} with respect to input {window.input_index} "
        f"({window.mode} mode{part}): {where}; largest violation (magenta square) at row {blocks.worst[0]}, "
        f"column {blocks.worst[1]}; atol {window.atol:g}, rtol {window.rtol:g}."
    )
