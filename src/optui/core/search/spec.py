"""The search spec (pure): which server, which flags and their values, the benchmark, the
objective and the constraints of a flag search; read from ``[search.NAME]`` in optui.toml
or from a TOML file of its own (the same keys at its top level)::

    [search.batch]
    server = "demo"
    bench = "tiny"                       # a [benchmarks.NAME] preset
    strategy = "grid"                    # grid | random (seeded) | optuna (TPE) | sla (largest load under the SLA)
    objective = "max output_tok_s @ c=8" # max|min METRIC (see METRICS) @ the preset's workload it is measured on
    constraints = ["ttft_p99_ms <= 2000 @ c=8", "itl_p99_ms <= 50 @ c=1", "gpu_mem_mib <= 80000"]
    budget = 12                          # trials at most (grid: all of them when unset)
    fixed = { "--schedule-policy" = "lpm", "--enable-metrics" = true }
    [search.batch.flags]
    "--max-running-requests" = [16, 32, 64]                     # a list of values
    "--chunked-prefill-size" = { range = [1024, 4096], step = 1024 }
    "--disable-radix-cache" = "on/off"                           # a switch: passed or not

A flag value in a point is its text (``"64"``), True (a switch passed) or False (not
passed). A preset that measures several workloads (``concurrency = [1, 2, 4, 8]``)
needs the objective's (``@ c=8``, or ``@ rate=4``): a trial's score is that workload's
runs only, never a pool of concurrencies; a constraint without ``@`` holds at the
objective's workload. Bad specs raise :class:`~optui.config_file.ConfigError` naming
``FILE:LINE: search.NAME.FIELD: problem`` as optui.toml's own errors do.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from optui.config_file import ConfigError, format_validation, load_toml
from optui.core.bench.result import LATENCY_METRICS, BenchResult
from optui.core.flags.argv import is_flag_token

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


def _workloads_of(result: BenchResult) -> tuple[Workload, ...]:
    conc = result.max_concurrency if result.max_concurrency is not None else result.workload.max_concurrency
    rate = result.request_rate if result.request_rate is not None else result.workload.request_rate
    return Workload.of(conc, rate)


@dataclass(frozen=True, slots=True)
class TrialValues:
    """What one trial measured (:func:`trial_values`): ``values`` (the objective's
    workload's medians under their :data:`METRICS` names, and every workload's under
    ``METRIC@c=N``), ``run_scores`` (the objective's metric of each run at its workload),
    ``error`` (why there is no score: the objective's workload was not measured; "" when
    there is one)."""

    values: dict[str, float]
    run_scores: tuple[float, ...]
    error: str = ""


def trial_values(objective: Objective, results: Sequence[BenchResult]) -> TrialValues:
    """The values of a trial's benchmark runs (``results``: every run of the preset, at
    every workload it measures). The score is never a pool of workloads: with a workload
    in the objective only its runs count; without one the runs must all be one workload
    (else ``error`` asks to name one)."""
    by_label: dict[str, list[dict[str, float]]] = {}
    labels_of = []
    for r in results:
        wls = _workloads_of(r)
        labels_of.append(wls)
        label = str(wls[0]) if wls else "?"
        by_label.setdefault(label, []).append(measurements(r))

    def medians(runs: list[dict[str, float]]) -> dict[str, float]:
        return {k: statistics.median([v[k] for v in runs if k in v]) for k in sorted({k for v in runs for k in v})}

    values: dict[str, float] = {}
    for label, runs in by_label.items():
        if label != "?":
            values.update({f"{k}@{label}": v for k, v in medians(runs).items()})
    wl = objective.workload
    if wl is None:
        if len(by_label) > 1:
            return TrialValues(values, (), f"the benchmark measured {len(by_label)} workloads ({', '.join(by_label)}): "
                               f"the objective names the one it is measured on (\"{objective} @ {next(iter(by_label))}\")")
        mine = [measurements(r) for r in results]
    else:
        picked = [(r, wls) for r, wls in zip(results, labels_of, strict=True) if wl in wls]
        if not picked:
            measured = ", ".join(by_label) or "nothing"
            return TrialValues(values, (), f"no run at the objective's workload {wl} (measured: {measured})")
        spans = sorted({str(wls[0]) for _, wls in picked})
        if len(spans) > 1:  # a rate every concurrency point shares: still a pool
            return TrialValues(values, (), f"the runs at {wl} span {', '.join(spans)}: name one of them in the objective")
        mine = [measurements(r) for r, _ in picked]
    values.update(medians(mine))
    return TrialValues(values, tuple(v[objective.metric] for v in mine if objective.metric in v))


def _metric(name: str) -> str:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r} (known: {', '.join(METRICS)})")
    return name


_WORKLOAD = re.compile(r"^\s*(c|rate)\s*=\s*([0-9.eE+]+|inf)\s*$")


@dataclass(frozen=True, slots=True)
class Workload:
    """The one workload of a preset an objective or a constraint is measured on (issue 29):
    ``kind`` "concurrency" (``c=8``: requests in flight) or "request_rate" (``rate=4``:
    req/s, ``inf`` all at once), and its ``value``."""

    kind: Literal["concurrency", "request_rate"]
    value: float

    @classmethod
    def parse(cls, text: str) -> Workload:
        """``"c=8"`` / ``"rate=4"`` → Workload; ValueError naming what is wrong."""
        m = _WORKLOAD.match(text)
        if not m:
            raise ValueError(f"expected a workload 'c=N' (concurrency) or 'rate=R' (req/s), got {text.strip()!r}")
        try:
            value = float(m.group(2))
        except ValueError:
            raise ValueError(f"{text.strip()!r}: not a number") from None
        if not value > 0:
            raise ValueError(f"{text.strip()!r}: a workload's concurrency or rate is above 0")
        if m.group(1) == "c":
            if not value.is_integer():
                raise ValueError(f"{text.strip()!r}: a concurrency is a whole number of requests")
            return cls("concurrency", value)
        return cls("request_rate", value)

    @classmethod
    def of(cls, max_concurrency: int | None, request_rate: float | None) -> tuple[Workload, ...]:
        """The workloads a benchmark result measured (its concurrency, its finite rate)."""
        out = []
        if max_concurrency is not None:
            out.append(cls("concurrency", float(max_concurrency)))
        if request_rate is not None:
            out.append(cls("request_rate", float(request_rate)))
        return tuple(out)

    def __str__(self) -> str:
        if self.kind == "concurrency":
            return f"c={int(self.value)}"
        return f"rate={self.value:g}"


def _split_at(text: str) -> tuple[str, Workload | None]:
    """``"max output_tok_s @ c=8"`` → ``("max output_tok_s", Workload)``."""
    if "@" not in text:
        return text, None
    head, _, tail = text.partition("@")
    return head, Workload.parse(tail)


def at_key(metric: str, workload: Workload | None) -> str:
    """The key of ``metric`` measured at ``workload`` in a trial's values: ``ttft_p99_ms@c=1``
    (None: the bare metric, measured at the objective's workload)."""
    return metric if workload is None else f"{metric}@{workload}"


@dataclass(frozen=True, slots=True)
class Objective:
    """``max METRIC`` or ``min METRIC``, optionally ``@ c=N`` / ``@ rate=R``: what a trial's
    score is, and the workload of the preset it is measured on (None: the preset's only one).
    ``METRIC @ c=N`` alone takes the metric's own direction (``output_tok_s``: max)."""

    goal: Literal["max", "min"]
    metric: str
    workload: Workload | None = None

    @classmethod
    def parse(cls, text: str) -> Objective:
        """``"max output_tok_s @ c=8"`` → Objective; ValueError naming what is wrong."""
        head, workload = _split_at(text)
        parts = head.split()
        if len(parts) == 1 and workload is not None:
            metric = _metric(parts[0])
            return cls("max" if METRICS[metric][1] else "min", metric, workload)
        if len(parts) != 2 or parts[0] not in ("max", "min"):
            raise ValueError(f"expected 'max METRIC' or 'min METRIC' (optionally '@ c=N' or '@ rate=R'), got {text!r}")
        return cls(parts[0], _metric(parts[1]), workload)  # type: ignore[arg-type]

    def better(self, a: float, b: float) -> bool:
        """``a`` is a better score than ``b``."""
        return a > b if self.goal == "max" else a < b

    def sort_key(self, score: float) -> float:
        """Ascending order puts the best first."""
        return -score if self.goal == "max" else score

    def __str__(self) -> str:
        return f"{self.goal} {self.metric}" + (f" @ {self.workload}" if self.workload else "")


@dataclass(frozen=True, slots=True)
class Constraint:
    """``METRIC OP LIMIT`` (``ttft_p99_ms <= 2000``), optionally ``@ c=N`` / ``@ rate=R``:
    the workload it holds at (None: the objective's). A trial missing the metric breaks it."""

    metric: str
    op: str
    limit: float
    workload: Workload | None = None

    @classmethod
    def parse(cls, text: str) -> Constraint:
        """``"itl_p99_ms <= 50 @ c=1"`` → Constraint; ValueError naming what is wrong."""
        head, workload = _split_at(text)
        m = _CONSTRAINT.match(head)
        if not m:
            raise ValueError(f"expected 'METRIC <= LIMIT' (or <, >=, >; optionally '@ c=N'), got {text!r}")
        try:
            limit = float(m.group(3))
        except ValueError:
            raise ValueError(f"{text!r}: the limit is not a number") from None
        return cls(_metric(m.group(1)), m.group(2), limit, workload)

    @property
    def key(self) -> str:
        """Where its value is in a trial's values (:func:`at_key`)."""
        return at_key(self.metric, self.workload)

    def holds(self, values: Mapping[str, float]) -> bool:
        """The constraint holds for measured ``values`` (False when the metric is missing)."""
        value = values.get(self.key)
        return value is not None and _OPS[self.op](value, self.limit)

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.limit:g}" + (f" @ {self.workload}" if self.workload else "")


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
            if self.goal.workload is not None or any(c.workload is not None for c in self.rules):
                raise ValueError("strategy 'sla' varies the load itself: no '@ c=N' in its objective or constraints")
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


def spec_file_name(text: str, fallback: str) -> str:
    """The name a spec file's search runs under: its one ``[search.NAME]`` table's NAME
    (``[search.mrr]`` in ``s1.toml`` runs as ``mrr.1``, as it would from optui.toml), else
    ``fallback`` (the file's stem: a file of top-level keys names no search). Never raises:
    :func:`parse_search_text` reports what is wrong with the text."""
    try:
        data = load_toml(text, fallback)  # bounded like every spec read (depth, size)
    except ConfigError:
        return fallback
    searches = data.get("search")
    if set(data) == {"search"} and isinstance(searches, dict) and len(searches) == 1:
        name = next(iter(searches))
        return name if isinstance(name, str) and name.strip() else fallback
    return fallback


def parse_search_text(text: str, filename: str, name: str | None = None) -> SearchSpec:
    """The spec in TOML ``text``: ``[search.NAME]`` when ``name`` is given (optui.toml),
    else the whole file: its top-level keys, or its one ``[search.NAME]`` table (the README's
    example copied into a file of its own). Raises ConfigError ``FILE:LINE: FIELD: problem``
    (one line per problem), or naming the searches the file has when ``name`` is not one of
    them or a spec file holds more than one."""
    data = load_toml(text, filename)
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
        raise ConfigError(format_validation(exc, text, filename)) from None
