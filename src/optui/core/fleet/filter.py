"""The fleet grid's ``/`` filter, pure: host globs and GPU thresholds in one line.

An operator types terms separated by spaces (``gpu-a* free>40G util<10``):

- a **host glob** (``gpu-a*``, fnmatch, case-sensitive): the host's name matches one of the
  globs given (none given: every host);
- a **threshold** ``FIELD OP VALUE``, OP one of ``<``, ``<=``, ``>``, ``>=``, ``=`` (spaces
  around it allowed): ``free`` / ``used`` (memory, with a unit: ``G``/``GiB`` = 1024 MiB,
  ``M``/``MiB``, ``T``/``TiB``, or ``%`` of the GPU's total), ``util`` (utilization %, ``%``
  optional), ``temp`` (°C, ``C`` optional), ``power`` (W, ``W`` optional);
- ``idle``: the GPU is idle but holds memory (:func:`idle_holding`).

A host is shown when its name matches and **one of its GPUs meets every threshold and**
``idle`` **at once** (``free>40G util<10``: a GPU with 40 GiB free that is nearly idle). A GPU
whose value is missing (n/a) or that is stale never meets a threshold. A term that is none of
these raises :class:`FilterError` naming it.
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from optui.core.fleet.readings import FleetGpu

#: An idle GPU: utilization under this (%).
IDLE_UTIL_PCT = 5.0
#: A GPU that holds memory: more than this (%) of its memory used.
HOLDING_PCT = 10.0

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq}
#: field → (the FleetGpu attribute, whether it is memory in MiB)
FIELDS = {"free": ("mem_free_mib", True), "used": ("mem_used_mib", True), "util": ("util_gpu_pct", False),
          "temp": ("temp_c", False), "power": ("power_w", False)}
_MEM_UNITS = {"m": 1.0, "mib": 1.0, "g": 1024.0, "gib": 1024.0, "t": 1024.0 ** 2, "tib": 1024.0 ** 2}
_PLAIN_UNITS = {"util": ("", "%"), "temp": ("", "c", "°c"), "power": ("", "w")}
_TERM = re.compile(r"^([A-Za-z_]*)(<=|>=|<|>|=)(.*)$")
_NUMBER = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(.*)$")


class FilterError(ValueError):
    """A filter term optui does not understand; the message names it and what is accepted."""


def idle_holding(gpu: FleetGpu) -> bool:
    """An idle GPU that holds memory: utilization < :data:`IDLE_UTIL_PCT` % and more than
    :data:`HOLDING_PCT` % of its memory used (False where either is unknown)."""
    total = gpu.mem_total_mib
    if gpu.util_gpu_pct is None or gpu.mem_used_mib is None or not total:
        return False
    return gpu.util_gpu_pct < IDLE_UTIL_PCT and 100.0 * gpu.mem_used_mib / total > HOLDING_PCT


@dataclass(frozen=True, slots=True)
class Threshold:
    """``field op value`` on one GPU: ``value`` in MiB, %, °C or W (``percent``: memory as %
    of the GPU's total); ``text`` as typed, normalized (``free>40G``)."""

    field: str
    op: str
    value: float
    percent: bool
    text: str

    def met_by(self, gpu: FleetGpu) -> bool:
        """Whether ``gpu``'s value meets this (False when the value or, for %, the total is unknown)."""
        value = getattr(gpu, FIELDS[self.field][0])
        if value is None:
            return False
        if self.percent:
            total = gpu.mem_total_mib
            if not total:
                return False
            value = 100.0 * value / total
        return _OPS[self.op](value, self.value)


@dataclass(frozen=True, slots=True)
class HostFilter:
    """A parsed filter (:func:`parse_host_filter`); the empty one shows every host."""

    globs: tuple[str, ...] = ()
    thresholds: tuple[Threshold, ...] = ()
    idle: bool = False

    @property
    def text(self) -> str:
        """The filter as one normalized line (``gpu-a* free>40G``; ``''``: none)."""
        return " ".join([*self.globs, *(t.text for t in self.thresholds), *(["idle"] if self.idle else [])])

    def gpu_matches(self, gpu: FleetGpu) -> bool:
        """Whether one GPU meets every threshold (and ``idle``); any GPU does without them."""
        if not self.thresholds and not self.idle:
            return True
        if gpu.stale:
            return False
        return (not self.idle or idle_holding(gpu)) and all(t.met_by(gpu) for t in self.thresholds)

    def matches(self, host: str, gpus: Iterable[FleetGpu]) -> bool:
        """Whether host ``host`` with ``gpus`` is shown: its name matches a glob (if any) and
        one of its GPUs meets every threshold (if any)."""
        if self.globs and not any(fnmatch.fnmatchcase(host, glob) for glob in self.globs):
            return False
        if not self.thresholds and not self.idle:
            return True
        return any(self.gpu_matches(gpu) for gpu in gpus)


def _threshold(term: str, name: str, op: str, rest: str) -> Threshold:
    field = name.lower()
    if field not in FIELDS:
        raise FilterError(f"filter: unknown field {name!r} in {term!r} (fields: {', '.join(FIELDS)})")
    number = _NUMBER.match(rest)
    if number is None:
        raise FilterError(f"filter: {term!r} needs a number after {op!r} (e.g. {field}{op}{_example(field)})")
    value, unit = float(number.group(1)), number.group(2).lower()
    percent = False
    if FIELDS[field][1]:
        if unit == "%":
            percent = True
            if value > 100:
                raise FilterError(f"filter: {term!r}: a share of memory is 0-100 %")
        elif unit in _MEM_UNITS:
            value *= _MEM_UNITS[unit]
        elif not unit:
            raise FilterError(f"filter: {term!r} needs a unit: G, GiB, M, MiB, T or % (e.g. {field}{op}40G)")
        else:
            raise FilterError(f"filter: unknown unit {number.group(2)!r} in {term!r} (G, GiB, M, MiB, T or %)")
    elif unit not in _PLAIN_UNITS[field]:
        units = ", ".join(u for u in _PLAIN_UNITS[field] if u) or "none"
        raise FilterError(f"filter: unknown unit {number.group(2)!r} in {term!r} (for {field}: {units})")
    return Threshold(field, op, value, percent, f"{field}{op}{number.group(1)}{number.group(2)}")


def _example(field: str) -> str:
    return {"free": "40G", "used": "1G", "util": "10", "temp": "80", "power": "300"}[field]


def parse_host_filter(text: str) -> HostFilter:
    """``text`` as typed after ``/`` (see the module doc) → a :class:`HostFilter`; ``''`` or
    spaces: the empty filter. Raises :class:`FilterError` naming the first bad term."""
    # "free > 40G" is one term: spaces around an operator are dropped
    text = re.sub(r"\s*(<=|>=|<|>|=)\s*", r"\1", text.strip())
    globs: list[str] = []
    thresholds: list[Threshold] = []
    idle = False
    for term in text.split():
        match = _TERM.match(term)
        if match is not None:
            name, op, rest = match.groups()
            if not name:
                raise FilterError(f"filter: {term!r} needs a field before {op!r} ({', '.join(FIELDS)})")
            thresholds.append(_threshold(term, name, op, rest))
        elif term.lower() == "idle":
            idle = True
        elif re.search(r"[<>=]", term):
            raise FilterError(f"filter: cannot read {term!r}")
        else:
            globs.append(term)
    return HostFilter(tuple(globs), tuple(thresholds), idle)
