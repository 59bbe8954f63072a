"""The "nice" maximum of a plot's scale (1, 2, 2.5 or 5 × 10^k at or above the largest
value), so a scale's top is a round number and two plots of one kind compare by eye. The
plots themselves are drawn by plotext (:mod:`optui.ui.plots`).
"""

from __future__ import annotations

import math


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
