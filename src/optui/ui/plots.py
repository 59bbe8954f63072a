"""Terminal plots with axes, ticks and units, drawn by plotext (https://github.com/piccolomo/plotext,
a maintained pure-Python terminal plotting library): the Pareto view of a flag search and a
sweep's out tok/s and TTFT against concurrency (results screen).

A plot is text: plotext builds it without colour (theme ``clear``), then each series'
marker is coloured with a theme variable, so a plot follows the theme like the rest of optui.
The y axis' name and unit head the plot (``out tok/s ↑``), the x axis' name and unit are
under its ticks (``TTFT p99 (ms) →``), and a legend line names each marker. Scales run from 0
to a "nice" maximum (:func:`~optui.core.bench.chart.nice_max`) with ticks at round steps, so
two plots of one search compare by eye.

Cost: building a 60x20 plot takes ~1.5 ms (plotext 5.3, a loaded 2-core machine), well under a
frame, so it is drawn on the event loop. plotext keeps one figure in module state: every
build holds :data:`_LOCK`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import App

from optui.core.bench.chart import nice_max
from optui.ui.colors import style

_LOCK = threading.Lock()
#: the smallest plot that still reads (ticks, a few rows of points)
MIN_WIDTH, MIN_HEIGHT = 24, 8


@dataclass(frozen=True, slots=True)
class Series:
    """One series: ``name`` for the legend, ``points`` (x, y) in the axes' units, its
    ``marker`` (one cell), ``colour`` (a theme variable, :func:`optui.ui.colors.style`), and
    ``joined``: a line through the points in x order (a sweep), else a scatter."""

    name: str
    points: tuple[tuple[float, float], ...]
    marker: str
    colour: str
    joined: bool = False


def tick_text(value: float) -> str:
    """A tick label: ``0``, ``250``, ``1.5k``, ``12k``, ``0.25``."""
    if abs(value) >= 10_000:
        return f"{value / 1000:g}k"
    if abs(value) >= 1000:
        return f"{value / 1000:.3g}k"
    return f"{value:.3g}" if value else "0"


def round_ticks(top: float) -> list[float]:
    """Ticks from 0 to ``top`` at a round step (1, 2, 2.5 or 5 × 10^k, 4 to 6 ticks past 0):
    5000 → 0, 1k ... 5k."""
    step = nice_max(top / 5)
    count = int(top / step + 1e-9)
    return [step * i for i in range(count + 1)]


def plot_text(app: App, series: Sequence[Series], *, x_label: str, y_label: str, width: int, height: int,
              x_max: float | None = None, y_max: float | None = None,
              x_ticks: Sequence[tuple[float, str]] | None = None) -> Text:
    """The plot of ``series`` as ``height`` + 2 lines of at most ``width`` cells: the y axis'
    label, the plot (axes with ticks; ``x_ticks`` (value, label) pairs, else round steps to
    ``x_max``), then the legend. ``x_max``/``y_max`` default to :func:`nice_max` of the
    largest value; the axes start at 0. Width and height are raised to :data:`MIN_WIDTH` /
    :data:`MIN_HEIGHT`."""
    import plotext as plt

    width, height = max(width, MIN_WIDTH), max(height, MIN_HEIGHT)
    finite = [(x, y) for s in series for x, y in s.points if math.isfinite(x) and math.isfinite(y)]
    x_top = x_max or nice_max(max((x for x, _ in finite), default=0.0))
    y_top = y_max or nice_max(max((y for _, y in finite), default=0.0))
    with _LOCK:
        plt.clf()
        plt.theme("clear")
        plt.limitsize(False, False)  # plotext clamps to the size of the terminal it runs in (80x24 without one)
        plt.plotsize(width, height)
        for s in series:
            pts = sorted(p for p in s.points if math.isfinite(p[0]) and math.isfinite(p[1]))
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            (plt.plot if s.joined and len(pts) > 1 else plt.scatter)(xs, ys, marker=s.marker)
        plt.xlim(0, x_top)
        plt.ylim(0, y_top)
        ticks = list(x_ticks) if x_ticks is not None else [(v, tick_text(v)) for v in round_ticks(x_top)]
        plt.xticks([v for v, _ in ticks], [label for _, label in ticks])
        plt.yticks(round_ticks(y_top), [tick_text(v) for v in round_ticks(y_top)])
        plt.xlabel(f"{x_label} →")
        built = plt.build()
    body = Text.from_ansi(built).plain.rstrip("\n")
    out = Text(f"{y_label} ↑\n", style="bold")
    colours = {s.marker: style(app, s.colour) for s in series}
    for line in body.split("\n"):
        line = line.rstrip()
        start = len(out)
        out.append(line + "\n")
        # markers inside the frame only (a tick label or an axis name may hold the same character)
        left = min((i for i in (line.find("│"), line.find("┤")) if i >= 0), default=-1)
        right = line.rfind("│")
        for i, ch in enumerate(line):
            if ch in colours and left < i < right:
                out.stylize(colours[ch], start + i, start + i + 1)
    for n, s in enumerate(series):
        if n:
            out.append("  ")
        out.append(s.marker, style=colours[s.marker])
        out.append(f" {s.name}")
    return out
