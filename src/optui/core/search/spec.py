"""The search spec (pure): which server, which flags and their values, the benchmark, the
objective and the constraints of a flag search; read from ``[search.NAME]`` in optui.toml
or from a TOML file of its own (the same keys at its top level)::

    [search.batch]
    server = "demo"
    bench = "tiny"                       # a [benchmarks.NAME] preset
    strategy = "grid"                    # grid | random (seeded) | optuna (TPE) | sla (largest load under the SLA)
    objective = "max output_tok_s"       # max|min METRIC (see METRICS)
    constraints = ["ttft_p99_ms <= 2000", "itl_p99_ms <= 50", "gpu_mem_mib <= 80000"]
    budget = 12                          # trials at most (grid: all of them when unset)
    fixed = { "--schedule-policy" = "lpm", "--enable-metrics" = true }
    [search.batch.flags]
    "--max-running-requests" = [16, 32, 64]                     # a list of values
    "--chunked-prefill-size" = { range = [1024, 4096], step = 1024 }
    "--disable-radix-cache" = "on/off"                           # a switch: passed or not

A flag value in a point is its text (``"64"``), True (a switch passed) or False (not
passed). Bad specs raise :class:`~optui.config_file.ConfigError` naming
``FILE:LINE: search.NAME.FIELD: problem`` as optui.toml's own errors do.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from optui.config_file import ConfigError, toml_syntax_error
from optui.core.bench.result import LATENCY_METRICS, BenchResult
from optui.core.flags import is_flag_token

#: One flag's value in a point: the text passed after it, True (a switch passed), False (left out).
FlagValue = str | bool
#: A configuration of the search: (flag, value) pairs in the spec's flag order.
Point = tuple[tuple[str, FlagValue], ...]

_SCALARS = {"output_tok_s": "output_throughput_tok_s", "total_tok_s": "total_throughput_tok_s",
            "input_tok_s": "input_throughput_tok_s", "request_s": "request_throughput"}
_STATS = {"p50": "median", "mean": "mean", "p90": "p90", "p95": "p95", "p99": "p99"}
#: Metric names of objectives and constraints → (unit, higher is better). The latency ones
#: are ``{ttft,tpot,itl,e2e}_{p50,mean,p90,p95,p99}_ms``; ``goodput_req_s`` is the client's
#: request goodput (SGLang/vLLM ``--goodput``); ``gpu_mem_mib`` the peak GPU memory used
#: on the server's GPUs during the trial (measured by the runner, not the client).
METRICS: dict[str, tuple[str, bool]] = {
    "output_tok_s": ("tok/s", True), "total_tok_s": ("tok/s", True), "input_tok_s": ("tok/s", True),
    "request_s": ("req/s", True), "goodput_req_s": ("req/s", True), "gpu_mem_mib": ("MiB", False),
    **{f"{lat.removesuffix('_ms')}_{stat}_ms": ("ms", False) for lat in LATENCY_METRICS for stat in _STATS},
}
_OPS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b}
_CONSTRAINT = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")
_MAX_POINTS = 100_000  # a grid larger than this is a typo (a step of 1 over a range of tokens)


def measurements(result: BenchResult) -> dict[str, float]:
    """A benchmark result's values under :data:`METRICS` names (those it has; no
    ``gpu_mem_mib``: the runner adds it)."""
    out: dict[str, float] = {}
    for name, attr in _SCALARS.items():
        value = result.metric(attr)
        if value is not None:
            out[name] = float(value)
    goodput = result.extra.get("request_goodput")
    if isinstance(goodput, (int, float)) and not isinstance(goodput, bool):
        out["goodput_req_s"] = float(goodput)
    for lat in LATENCY_METRICS:
        for stat, key in _STATS.items():
            value = (getattr(result, lat, None) or {}).get(key)
            if isinstance(value, (int, float)) and math.isfinite(value):
                out[f"{lat.removesuffix('_ms')}_{stat}_ms"] = float(value)
    return out


def _metric(name: str) -> str:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r} (known: {', '.join(METRICS)})")
    return name


@dataclass(frozen=True, slots=True)
class Objective:
    """``max METRIC`` or ``min METRIC``: what a trial's score is."""

    goal: Literal["max", "min"]
    metric: str

    @classmethod
    def parse(cls, text: str) -> Objective:
        """``"max output_tok_s"`` → Objective; ValueError naming what is wrong."""
        parts = text.split()
        if len(parts) != 2 or parts[0] not in ("max", "min"):
            raise ValueError(f"expected 'max METRIC' or 'min METRIC', got {text!r}")
        return cls(parts[0], _metric(parts[1]))  # type: ignore[arg-type]

    def better(self, a: float, b: float) -> bool:
        """``a`` is a better score than ``b``."""
        return a > b if self.goal == "max" else a < b

    def sort_key(self, score: float) -> float:
        """Ascending order puts the best first."""
        return -score if self.goal == "max" else score

    def __str__(self) -> str:
        return f"{self.goal} {self.metric}"


@dataclass(frozen=True, slots=True)
class Constraint:
    """``METRIC OP LIMIT`` (``ttft_p99_ms <= 2000``): a trial missing the metric breaks it."""

    metric: str
    op: str
    limit: float

    @classmethod
    def parse(cls, text: str) -> Constraint:
        """``"itl_p99_ms <= 50"`` → Constraint; ValueError naming what is wrong."""
        m = _CONSTRAINT.match(text)
        if not m:
            raise ValueError(f"expected 'METRIC <= LIMIT' (or <, >=, >), got {text!r}")
        try:
            limit = float(m.group(3))
        except ValueError:
            raise ValueError(f"{text!r}: the limit is not a number") from None
        return cls(_metric(m.group(1)), m.group(2), limit)

    def holds(self, values: Mapping[str, float]) -> bool:
        """The constraint holds for measured ``values`` (False when the metric is missing)."""
        value = values.get(self.metric)
        return value is not None and _OPS[self.op](value, self.limit)

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.limit:g}"


def _value_text(value: object, where: str) -> FlagValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value!r} is not a finite number")
        return repr(round(value, 10))
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ValueError(f"{where}: expected a string, a number or true/false, got {value!r}"[:160])


def _range_values(data: Mapping) -> tuple[FlagValue, ...]:
    unknown = set(data) - {"range", "step"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} (a range is {{ range = [LOW, HIGH], step = STEP }})")
    bounds, step = data.get("range"), data.get("step", 1)
    numbers = (int, float)
    if (not isinstance(bounds, list) or len(bounds) != 2
            or not all(isinstance(b, numbers) and not isinstance(b, bool) for b in [*bounds, step])):
        raise ValueError("a range is { range = [LOW, HIGH], step = STEP } with numbers")
    low, high = bounds
    if not (math.isfinite(low) and math.isfinite(high) and math.isfinite(step)) or step <= 0 or high < low:
        raise ValueError(f"range [{low}, {high}] step {step}: needs LOW <= HIGH and STEP > 0")
    count = int(math.floor((high - low) / step + 1e-9)) + 1
    if count > _MAX_POINTS:
        raise ValueError(f"range [{low}, {high}] step {step} has {count} values (at most {_MAX_POINTS})")
    whole = all(isinstance(v, int) for v in (low, high, step))
    return tuple(_value_text(low + i * step if whole else float(low + i * step), "range") for i in range(count))


def _domain_values(data: object) -> tuple[FlagValue, ...]:
    """A flag's values from a list, ``{ values = [...] }``, a range or ``"on/off"``."""
    if isinstance(data, str):
        if data.replace(" ", "") in ("on/off", "off/on"):
            return (True, False) if data.replace(" ", "").startswith("on") else (False, True)
        raise ValueError(f'expected a list of values, {{ range = [LOW, HIGH], step = STEP }} or "on/off", got {data!r}')
    if isinstance(data, list):
        if not data:
            raise ValueError("the list of values is empty")
        values = tuple(_value_text(v, f"value {i + 1}") for i, v in enumerate(data))
    elif isinstance(data, Mapping) and "values" in data and len(data) == 1:
        values = data["values"] if isinstance(data["values"], tuple) else _domain_values(data["values"])
    elif isinstance(data, Mapping):
        values = _range_values(data)
    else:
        raise ValueError(f"expected a list of values, a range or \"on/off\", got {data!r}"[:160])
    if len(set(values)) != len(values):
        raise ValueError(f"a value is listed twice: {list(values)}")
    return values


class FlagDomain(BaseModel):
    """The values one flag takes in the search, in order (from a list, a range with step,
    or ``"on/off"``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    values: tuple[FlagValue, ...]

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: object) -> dict:
        return {"values": _domain_values(data)}


class SlaLoad(BaseModel):
    """The load the ``sla`` strategy bisects: the benchmark's concurrency (whole requests)
    or request rate (req/s), between ``low`` and ``high``, to within ``tolerance``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    kind: Literal["concurrency", "request_rate"] = "concurrency"
    low: float = Field(1, gt=0)
    high: float = Field(..., gt=0)
    tolerance: float | None = Field(None, gt=0, description="stop when the bracket is this narrow (concurrency: 1)")

    @model_validator(mode="after")
    def _check(self) -> SlaLoad:
        if self.high <= self.low:
            raise ValueError(f"high ({self.high:g}) must be above low ({self.low:g})")
        if self.kind == "concurrency" and not (float(self.low).is_integer() and float(self.high).is_integer()):
            raise ValueError("a concurrency is a whole number of requests")
        return self

    @field_validator("low", "high", "tolerance", mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class SearchSpec(BaseModel):
    """One flag search (see module doc). The benchmark runs a trial as often as its
    preset's ``repeat`` says (as in any experiment); ``confirm_top``: how many of the best configurations are run again (``confirm_runs``
    times each) before a winner is named; ``seed``: the random strategy's draws."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    server: str = Field(..., min_length=1)
    bench: str = Field(..., min_length=1, description="a [benchmarks.NAME] preset")
    strategy: Literal["grid", "random", "optuna", "sla"] = "grid"
    flags: dict[str, FlagDomain] = Field(default_factory=dict)
    points: list[dict[str, str | bool | int | float]] = Field(
        default_factory=list, description="explicit configurations searched instead of the flags' grid "
        "(each a table of flag → value; vLLM's --serve-params are read into these)")
    fixed: dict[str, str | bool | int | float] = Field(default_factory=dict)
    objective: str = "max output_tok_s"
    constraints: list[str] = Field(default_factory=list)
    budget: int | None = Field(None, ge=1, le=10_000, description="trials at most (grid, random: every point when "
                               "unset; optuna: 20)")
    seed: int = 0
    confirm_top: int = Field(2, ge=0, le=100)
    confirm_runs: int = Field(1, ge=1, le=50)
    sla: SlaLoad | None = None

    @field_validator("flags", mode="before")
    @classmethod
    def _flags(cls, value: object) -> object:
        if isinstance(value, Mapping):
            for name in value:
                if not isinstance(name, str) or not is_flag_token(name) or "=" in name:
                    raise ValueError(f"{name!r} is not a flag name (flags start with - or --)")
        return value

    @field_validator("points")
    @classmethod
    def _points(cls, value: list[dict]) -> list[dict]:
        for i, point in enumerate(value):
            if not point:
                raise ValueError(f"configuration {i + 1} is empty")
            for name, v in point.items():
                if not is_flag_token(name) or "=" in name:
                    raise ValueError(f"configuration {i + 1}: {name!r} is not a flag name (flags start with - or --)")
                _value_text(v, name)
        return value

    @field_validator("fixed")
    @classmethod
    def _fixed(cls, value: dict) -> dict:
        for name, v in value.items():
            if not is_flag_token(name) or "=" in name:
                raise ValueError(f"{name!r} is not a flag name (flags start with - or --)")
            _value_text(v, name)
        return value

    @field_validator("objective")
    @classmethod
    def _objective(cls, value: str) -> str:
        Objective.parse(value)
        return value

    @field_validator("constraints")
    @classmethod
    def _constraints(cls, value: list[str]) -> list[str]:
        for text in value:
            Constraint.parse(text)
        return value

    @model_validator(mode="after")
    def _check(self) -> SearchSpec:
        both = set(self.flags) & set(self.fixed)
        if self.points and self.flags:
            raise ValueError("give flags (a grid) or points (a list of configurations), not both")
        if self.points and self.strategy in ("optuna", "sla"):
            raise ValueError(f"strategy {self.strategy!r} searches flags, not a list of points")
        if both:
            raise ValueError(f"{', '.join(sorted(both))}: both searched (flags) and fixed")
        if self.strategy == "sla":
            if self.sla is None:
                raise ValueError("strategy 'sla' needs an [sla] table (kind, low, high)")
            if not self.constraints:
                raise ValueError("strategy 'sla' needs constraints (the SLA the load must meet)")
            if any(len(d.values) > 1 for d in self.flags.values()):
                raise ValueError("strategy 'sla' measures one configuration: give its flags in fixed")
        elif not self.flags and not self.points:
            raise ValueError(f"strategy {self.strategy!r} needs flags (or points) to search")
        elif math.prod(len(d.values) for d in self.flags.values()) > _MAX_POINTS:
            raise ValueError(f"the flags span more than {_MAX_POINTS} configurations")
        return self

    # ------------------------------------------------------------ derived
    @property
    def goal(self) -> Objective:
        """The parsed objective."""
        return Objective.parse(self.objective)

    @property
    def rules(self) -> tuple[Constraint, ...]:
        """The parsed constraints."""
        return tuple(Constraint.parse(c) for c in self.constraints)

    def size(self) -> int:
        """How many configurations the flags span (or the points list)."""
        return len(self.points) if self.points else math.prod(len(d.values) for d in self.flags.values())

    def point_at(self, index: int) -> Point:
        """Configuration number ``index`` (0 ≤ index < :meth:`size`) in grid order: the
        first flag's values vary slowest; with ``points``, the index-th of them."""
        if self.points:
            return tuple((name, _value_text(v, name)) for name, v in self.points[index].items())
        out: list[tuple[str, FlagValue]] = []
        for name, domain in reversed(list(self.flags.items())):
            index, i = divmod(index, len(domain.values))
            out.append((name, domain.values[i]))
        return tuple(reversed(out))

    def change(self, point: Point) -> tuple[dict[str, str | None], list[str]]:
        """The fixed flags plus ``point`` as an experiment's change: ``set`` (flag → text,
        None for a switch passed) and ``unset`` (switches left out)."""
        sets: dict[str, str | None] = {}
        unset: list[str] = []
        for name, raw in [*self.fixed.items(), *point]:
            value = _value_text(raw, name)
            if value is False:
                unset.append(name)
            else:
                sets[name] = None if value is True else value
        return sets, unset


def point_text(point: Point) -> str:
    """``--max-running-requests 64 --enable-metrics !--disable-radix-cache`` (``!``: left out)."""
    return " ".join(name if v is True else f"!{name}" if v is False else f"{name} {v}" for name, v in point)


def point_from_json(data: Sequence) -> Point:
    """A point stored as JSON (``[[flag, value], ...]``) back as a Point."""
    return tuple((str(name), value if isinstance(value, bool) else str(value)) for name, value in data)


_IN_CONFIG = TypeAdapter(dict[str, dict[str, SearchSpec]])


def parse_search_text(text: str, filename: str, name: str | None = None) -> SearchSpec:
    """The spec in TOML ``text``: ``[search.NAME]`` when ``name`` is given (optui.toml),
    else the whole file: its top-level keys, or its one ``[search.NAME]`` table (the README's
    example copied into a file of its own). Raises ConfigError ``FILE:LINE: FIELD: problem``
    (one line per problem), or naming the searches the file has when ``name`` is not one of
    them or a spec file holds more than one."""
    from optui.config import _format_validation  # optui.toml's own error format (line of each field)

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_syntax_error(exc, filename, text) from exc
    try:
        searches = data.get("search")
        if name is None and set(data) == {"search"} and isinstance(searches, dict) and searches:
            if len(searches) > 1:
                raise ConfigError(f"{filename}: {len(searches)} searches ({', '.join(searches)}): a spec file holds "
                                  "one (put the others in files of their own, or in optui.toml)")
            name = next(iter(searches))
        if name is None:
            return SearchSpec.model_validate(data)
        if not isinstance(searches, dict) or name not in searches:
            known = ", ".join(searches) if isinstance(searches, dict) else ""
            raise ConfigError(f"{filename}: no [search.{name}] (searches there: {known or 'none'})")
        return _IN_CONFIG.validate_python({"search": {name: searches[name]}})["search"][name]
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, text, filename)) from None
