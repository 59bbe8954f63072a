"""A small fixed-scale text chart: one horizontal bar per point (e.g. throughput and TTFT
against concurrency). The scale runs from 0 to a "nice" maximum (1, 2, 2.5 or 5 × 10^k)
at or above the largest value, so bars are comparable across points and the axis label
is a round number. Pure: returns rows; the UI colours them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

EIGHTHS = " ▏▎▍▌▋▊▉█"


def nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k that is >= ``value`` (1.0 for value <= 0)."""
    if not value or value <= 0 or not math.isfinite(value):
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        candidate = step * 10.0**exp
        if candidate >= value * (1 - 1e-12):
            return candidate
    return 10.0 ** (exp + 1)


def bar(value: float | None, scale: float, width: int) -> str:
    """A bar of ``width`` cells for ``value`` on 0..``scale`` (eighth-cell resolution),
    padded with spaces; ``""`` padded for None."""
    if value is None or not math.isfinite(value) or scale <= 0 or width <= 0:
        return " " * max(width, 0)
    eighths = round(max(0.0, min(value / scale, 1.0)) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part else "")
    return text.ljust(width)


@dataclass(frozen=True, slots=True)
class ChartRow:
    """One bar: point ``label`` (e.g. "c=8"), the ``bar`` text, the ``value``."""

    label: str
    bar: str
    value: float | None


@dataclass(frozen=True, slots=True)
class Chart:
    """A titled bar chart: ``title`` (with unit), ``scale`` (the axis maximum), ``rows``."""

    title: str
    scale: float
    rows: tuple[ChartRow, ...]


def bar_chart(title: str, points: Sequence[tuple[str, float | None]], width: int = 30) -> Chart:
    """A :class:`Chart` of ``points`` (label, value) scaled to :func:`nice_max` of the
    largest value."""
    values = [v for _, v in points if v is not None and math.isfinite(v)]
    scale = nice_max(max(values)) if values else 1.0
    rows = tuple(ChartRow(label, bar(value, scale, width), value) for label, value in points)
    return Chart(title, scale, rows)
