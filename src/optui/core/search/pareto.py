"""A flag search's Pareto view (pure): throughput against latency of every configuration
measured, the ones no other beats on both (the front) marked, on fixed scales from 0 to a
"nice" maximum (:func:`~optui.core.bench.chart.nice_max`) so two views of one search compare
by eye. Returns the points with their marks; the UI plots them (:mod:`optui.ui.plots`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from optui.core.bench.chart import nice_max
from optui.core.search.spec import point_text
from optui.core.search.strategies import Standing

FRONT, OTHER, INFEASIBLE = "●", "○", "✗"


def front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the Pareto front of ``(latency, throughput)`` points: lower latency and
    higher throughput are better; a point is on it when no other is at least as good on
    both and better on one. In ascending latency."""
    out = []
    for i, (x, y) in enumerate(points):
        beaten = any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i)
        if not beaten:
            out.append(i)
    return sorted(out, key=lambda i: points[i])


@dataclass(frozen=True, slots=True)
class ParetoView:
    """The points (``(latency, throughput, mark)``, mark one of :data:`FRONT`, :data:`OTHER`,
    :data:`INFEASIBLE`), the axes' maxima, the front as text lines (flags, throughput,
    latency), and how many configurations have no point (failed)."""

    points: tuple[tuple[float, float, str], ...]
    x_max: float
    y_max: float
    front: tuple[str, ...]
    unplotted: int


def pareto_view(table: Sequence[Standing], x_metric: str = "ttft_p99_ms", y_metric: str = "output_tok_s") -> ParetoView:
    """The view of a search's standings (:func:`~optui.core.search.strategies.standings`):
    each configuration with both metrics is a point (feasible ``●`` on the front, ``○`` off
    it, ``✗`` breaking a constraint: the front is of the feasible ones); failed ones are
    counted, not drawn."""
    pts = [(s, s.values.get(x_metric), s.values.get(y_metric)) for s in table]
    drawn = [(s, x, y) for s, x, y in pts if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
    feasible = [(s, x, y) for s, x, y in drawn if s.feasible]
    on_front = {id(feasible[i][0]) for i in front([(x, y) for _, x, y in feasible])}
    x_max = nice_max(max((x for _, x, _ in drawn), default=0.0))
    y_max = nice_max(max((y for _, _, y in drawn), default=0.0))
    points = tuple((x, y, FRONT if id(s) in on_front else OTHER if s.feasible else INFEASIBLE) for s, x, y in drawn)
    listed = sorted((t for t in feasible if id(t[0]) in on_front), key=lambda t: t[1])
    lines = tuple(f"{point_text(s.point) or '(fixed flags)'}: {y:,.1f} {y_metric} at {x:,.1f} {x_metric}"
                  for s, x, y in listed)
    return ParetoView(points, x_max, y_max, lines, len(table) - len(drawn))
