"""Heatmaps of a failure's Jacobian blocks (matplotlib, drawn off-screen to PNG).

Panels: the numerical and the analytical block (real and imaginary parts for complex blocks,
on a second row), and |analytical − numerical| against the tolerance, as
log10(|a − n| / (atol + rtol·|n|)): above 0 (red) an element is outside the tolerance. The
largest violation is marked on every panel; axes are Jacobian rows (input elements) and
columns (output elements), in the whole block's numbering when the blocks are a window of it.
Each colour bar says what its colours measure, and the figure's title which block it shows.
Drawn at :data:`PANEL_INCHES` a panel and :data:`DPI` (about 480 × 420 pixels a panel): the
report shows the picture at its page's width.
"""

from __future__ import annotations

import io

import numpy as np

from distcheck.reduce.failure_blocks import FailureBlocks
from distcheck.storage.blocks import CaseBlocks

DPI = 100
PANEL_INCHES = (4.8, 4.2)  # width, height of one panel
ANNOTATED = 36  # blocks of at most this many elements show their values
TICKED = 10  # rows (columns) of at most this many are numbered each
TITLE, LABEL, TICKS = 12, 10, 9  # font sizes


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


def _panels(blocks: FailureBlocks) -> list[list[tuple[str, np.ndarray, str]]]:
    """Rows of panels: the values (real parts, then imaginary parts on a row of their own for
    complex blocks) with the excess at the end of the first row."""
    n, a = blocks.numerical, blocks.analytical
    excess_panel = ("log10(|a − n| / (atol + rtol·|n|))", excess(blocks), "excess")
    if np.iscomplexobj(n) or np.iscomplexobj(a):
        real = [("numerical, real part", np.real(n)), ("analytical, real part", np.real(a))]
        imaginary = [("numerical, imaginary part", np.imag(n)), ("analytical, imaginary part", np.imag(a))]
        rows = [real, imaginary]
    else:
        rows = [[("numerical", n), ("analytical", a)]]
    panels = [[(title, np.asarray(v, dtype=float), "values") for title, v in row] for row in rows]
    panels[0].append(excess_panel)
    return panels


def _draw(plt, axis, blocks: CaseBlocks, title: str, data: np.ndarray, kind: str, limit: float) -> None:
    from matplotlib.ticker import MaxNLocator

    rows, columns = data.shape
    extent = (blocks.col0 - 0.5, blocks.col0 + columns - 0.5, blocks.row0 + rows - 0.5, blocks.row0 - 0.5)
    if kind == "excess":
        shown = np.clip(data, -6, 6)
        image = axis.imshow(shown, cmap="RdBu_r", vmin=-6, vmax=6, extent=extent, aspect="auto")
        label = "log10 of difference / allowed (> 0: outside)"
    else:
        image = axis.imshow(data, cmap="viridis", vmin=-limit, vmax=limit, extent=extent, aspect="auto")
        label = "Jacobian entry"
    bar = plt.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    bar.set_label(label, fontsize=LABEL)
    bar.ax.tick_params(labelsize=TICKS)
    if rows * columns <= ANNOTATED:  # a tiny block: its numbers too
        for (r, c), value in np.ndenumerate(data):
            axis.text(blocks.col0 + c, blocks.row0 + r, f"{value:.3g}", ha="center", va="center", fontsize=TICKS)
    for ruler, first, count in ((axis.xaxis, blocks.col0, columns), (axis.yaxis, blocks.row0, rows)):
        if count <= TICKED:  # every element numbered (a locator puts fractions on a block of one)
            ruler.set_ticks(range(first, first + count))
        else:
            ruler.set_major_locator(MaxNLocator(integer=True))
    worst_row, worst_column = blocks.worst
    axis.plot([worst_column], [worst_row], marker="s", markersize=12, markerfacecolor="none", color="#ff00ff", mew=2.5)
    axis.set_title(title, fontsize=TITLE)
    axis.set_xlabel(f"column: output {blocks.window.output_index} element", fontsize=LABEL)
    axis.set_ylabel(f"row: input {blocks.window.input_index} element", fontsize=LABEL)
    axis.tick_params(labelsize=TICKS)


def figure_png(blocks: CaseBlocks) -> bytes:
    """The heatmaps of ``blocks`` as one PNG."""
    plt = _pyplot()
    panels = _panels(blocks.window)
    finite = [np.abs(d[np.isfinite(d)]) for row in panels for _, d, kind in row if kind == "values"]
    limit = max((float(x.max()) for x in finite if x.size), default=1.0) or 1.0
    rows, columns = len(panels), max(len(row) for row in panels)
    width, height = PANEL_INCHES
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows + 0.5), dpi=DPI, squeeze=False)
    try:
        for axes_row, row in zip(axes, panels):
            for axis, (title, data, kind) in zip(axes_row, row):
                _draw(plt, axis, blocks, title, data, kind, limit)
            for axis in axes_row[len(row) :]:
                axis.set_visible(False)
        window = blocks.window
        figure.suptitle(
            f"Jacobian of output {window.output_index} with respect to input {window.input_index}"
            f" ({window.mode} mode); magenta square: the largest violation",
            fontsize=TITLE,
        )
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
