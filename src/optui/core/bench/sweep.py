"""Sweeps and repeats: which points a benchmark run measures, and how many times each.

A sweep varies one knob: the concurrency cap (``--max-concurrency`` / the load generator's
``concurrency``) or the request rate in req/s (``--request-rate``; ``inf`` = all at once).
Each point runs ``repeats`` times in a row; every run gives one result.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

KINDS = ("concurrency", "request_rate")
_KIND_WORDS = {"c": "concurrency", "conc": "concurrency", "concurrency": "concurrency",
               "r": "request_rate", "rate": "request_rate", "rps": "request_rate", "request_rate": "request_rate"}
_REPEAT_RE = re.compile(r"\s*[x×*]\s*(\d+)\s*$", re.I)
_KIND_RE = re.compile(r"^\s*([a-z_]+)\s*[:=\s]\s*", re.I)
MAX_POINTS = 64
MAX_REPEATS = 50


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """``kind`` "concurrency" or "request_rate"; ``values`` in order (ints for concurrency,
    req/s for rates, ``math.inf`` allowed); ``repeats`` runs per point (>= 1)."""

    kind: str
    values: tuple[float, ...]
    repeats: int = 1

    def describe(self) -> str:
        """``"concurrency 1,2,4 ×3"`` (the form :func:`parse_sweep` reads back)."""
        name = "concurrency" if self.kind == "concurrency" else "rate"
        values = ",".join(_fmt(v) for v in self.values)
        return f"{name} {values}" + (f" x{self.repeats}" if self.repeats > 1 else "")


@dataclass(frozen=True, slots=True)
class Point:
    """One run of a plan: ``index`` of the point, ``repeat`` (0-based) of ``repeats``, and
    the overrides (None = as configured)."""

    index: int
    repeat: int = 0
    repeats: int = 1
    concurrency: int | None = None
    request_rate: float | None = None

    def label(self) -> str:
        """``"c=4"``, ``"rate=2"``, plus ``" run 2/3"`` for repeats; ``""`` for a plain run."""
        parts = []
        if self.concurrency is not None:
            parts.append(f"c={self.concurrency}")
        if self.request_rate is not None:
            parts.append(f"rate={_fmt(self.request_rate)}")
        if self.repeats > 1:
            parts.append(f"run {self.repeat + 1}/{self.repeats}")
        return " ".join(parts)


def _fmt(value: float) -> str:
    if math.isinf(value):
        return "inf"
    return str(int(value)) if value == int(value) else f"{value:g}"


def parse_sweep(text: str) -> SweepSpec:
    """Read a sweep typed by the operator: ``"1,2,4,8,16"`` (concurrency), ``"rate 1,2,4"``,
    ``"rate:0.5,1,inf"``, ``"c=1 2 4"``; a trailing ``"x3"`` repeats each point 3 times.
    Raises ValueError with the reason (unknown kind, bad number, concurrency < 1, rate <= 0,
    more than 64 points or 50 repeats)."""
    body = text.strip()
    repeats = 1
    match = _REPEAT_RE.search(body)
    if match:
        repeats = int(match.group(1))
        body = body[: match.start()]
    kind = "concurrency"
    match = _KIND_RE.match(body)
    if match and not match.group(1).replace("_", "").isdigit():
        word = match.group(1).lower()
        if word not in _KIND_WORDS and word != "inf":
            raise ValueError(f"unknown sweep kind {match.group(1)!r} (use 'concurrency 1,2,4' or 'rate 1,2,4')")
        if word != "inf":
            kind = _KIND_WORDS[word]
            body = body[match.end():]
    tokens = [t for t in re.split(r"[,\s]+", body) if t]
    if not tokens:
        raise ValueError("no sweep values (e.g. 1,2,4,8,16 or rate 1,2,4)")
    values = []
    for token in tokens:
        try:
            value = float(token)
        except ValueError:
            raise ValueError(f"not a number in the sweep: {token!r}") from None
        if math.isnan(value):
            raise ValueError(f"not a number in the sweep: {token!r}")
        values.append(value)
    return sweep_spec(kind, values, repeats)


def sweep_spec(kind: str, values, repeats: int = 1) -> SweepSpec:
    """A validated :class:`SweepSpec` (same checks as :func:`parse_sweep`)."""
    if kind not in KINDS:
        raise ValueError(f"sweep kind must be one of {', '.join(KINDS)}, got {kind!r}")
    values = tuple(float(v) for v in values)
    if not values:
        raise ValueError("a sweep needs at least one value")
    if len(values) > MAX_POINTS:
        raise ValueError(f"a sweep has at most {MAX_POINTS} points, got {len(values)}")
    if not 1 <= repeats <= MAX_REPEATS:
        raise ValueError(f"repeats must be within 1..{MAX_REPEATS}, got {repeats}")
    if kind == "concurrency":
        bad = [v for v in values if v < 1 or math.isinf(v) or v != int(v)]
        if bad:
            raise ValueError(f"concurrency values must be whole numbers >= 1, got {_fmt(bad[0])}")
    elif any(v <= 0 for v in values):
        raise ValueError("request rates must be > 0 req/s (inf = all at once)")
    return SweepSpec(kind, values, repeats)


def plan_points(spec: SweepSpec | None, repeats: int = 1) -> list[Point]:
    """The runs of a plan in order: each point ``repeats`` times in a row (``spec.repeats``
    when a spec is given). ``spec`` None: one point with no override."""
    if spec is None:
        return [Point(0, r, repeats) for r in range(repeats)]
    out = []
    for i, value in enumerate(spec.values):
        for r in range(spec.repeats):
            if spec.kind == "concurrency":
                out.append(Point(i, r, spec.repeats, concurrency=int(value)))
            else:
                out.append(Point(i, r, spec.repeats, request_rate=value))
    return out
