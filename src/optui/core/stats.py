"""Small statistics helpers (no numpy): percentiles and the latency summary dicts.

:func:`percentile` matches ``numpy.percentile(values, q)`` with the default "linear"
method, so numbers agree with SGLang's and vLLM's benchmark clients.
"""

from __future__ import annotations

from collections.abc import Sequence

from optui.core.bench.result import STATS, empty_stats


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation between
    the two nearest ranks (numpy's default). Raises ValueError on an empty sequence."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    frac = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * frac


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
