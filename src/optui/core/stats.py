"""Small statistics helpers (no numpy): percentiles and the latency summary dicts.

:func:`percentile` is the standard library's ``statistics.quantiles(method="inclusive")``,
which is ``numpy.percentile(values, q)``'s default "linear" method, so numbers agree with
SGLang's and vLLM's benchmark clients.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from fractions import Fraction

from optui.core.bench.result import STATS, empty_stats


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation between the two
    nearest ranks (numpy's default): ``statistics.quantiles(values, n, method="inclusive")``
    at the cut point ``q`` / 100 (``n`` the denominator of that fraction, at most 10,000).
    Raises ValueError on an empty sequence or ``q`` outside 0..100."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    if len(values) == 1 or q == 0.0:
        return float(min(values))
    if q == 100.0:
        return float(max(values))
    cut = Fraction(q / 100.0).limit_denominator(10_000)
    return statistics.quantiles(values, n=cut.denominator, method="inclusive")[cut.numerator - 1]


def summarize(values: Sequence[float]) -> dict[str, float | None]:
    """A latency dict (keys :data:`~optui.core.bench.result.STATS`: mean, median, p90,
    p95, p99) in the unit of ``values``; every statistic None for an empty sequence."""
    if not values:
        return empty_stats()
    out: dict[str, float | None] = {"mean": sum(values) / len(values)}
    for stat in STATS:
        if stat == "median":
            out[stat] = percentile(values, 50.0)
        elif stat.startswith("p"):
            out[stat] = percentile(values, float(stat[1:]))
    return out
