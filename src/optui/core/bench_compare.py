"""Comparing benchmark results honestly: repeats grouped, medians and spread, deltas in %
against the workload's baseline, a verdict that says "inconclusive" inside the noise, and
scaling efficiency across concurrency.

Definitions:

- A *group* is the results of one point of one run (same ``extra["run_id"]``, same
  workload key): its repeats. Results stored without a run id are groups of one.
- For each metric a group has a :class:`Sample`: median, min, max, n (ok results only).
- The *baseline* of a workload is the group holding its pinned result, else its first
  group with an ok result (as ``Journal.baseline_for``).
- ``delta_pct = 100 * (median - base_median) / base_median``.
- Verdict: "inconclusive" when the [min, max] ranges of the two groups overlap and at least
  one of them has n >= 2 (the change is inside the noise of the repeats); otherwise
  "better"/"worse" by the metric's direction (:data:`~optui.core.bench_result.DIRECTION`:
  throughput up is good, latency up is bad); None (no verdict) when both groups are single
  runs, since the noise is unknown.
- Scaling efficiency of a point at concurrency N: ``T(N) / (N * T(1))`` with T the median
  output throughput (tok/s), T(1) from the same run when it measured concurrency 1, else from
  the newest group of the same workload at concurrency 1. 1.0 = perfect linear scaling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from optui.core.bench_result import DIRECTION, BenchResult, Workload
from optui.core.stats import percentile

#: Metrics compared in the results view, in column order (dotted: latency statistic).
METRICS = (
    "output_throughput_tok_s",
    "total_throughput_tok_s",
    "request_throughput",
    "ttft_ms.median",
    "ttft_ms.p99",
    "itl_ms.median",
    "tpot_ms.median",
    "e2e_ms.median",
)
#: Short column titles of :data:`METRICS` (units in the title).
METRIC_TITLES = {
    "output_throughput_tok_s": "out tok/s",
    "total_throughput_tok_s": "total tok/s",
    "request_throughput": "req/s",
    "ttft_ms.median": "TTFT p50 ms",
    "ttft_ms.p99": "TTFT p99 ms",
    "itl_ms.median": "ITL p50 ms",
    "tpot_ms.median": "TPOT p50 ms",
    "e2e_ms.median": "E2E p50 ms",
}
THROUGHPUT = "output_throughput_tok_s"


def direction(metric: str) -> int:
    """+1 when higher is better, -1 when lower is better (``ttft_ms.p99`` → ``ttft_ms``)."""
    return DIRECTION.get(metric.partition(".")[0], 0)


@dataclass(frozen=True, slots=True)
class Sample:
    """One metric over a group's runs: ``median``, ``lo`` (min), ``hi`` (max), ``n``
    values; all None / 0 when no run had the metric."""

    median: float | None = None
    lo: float | None = None
    hi: float | None = None
    n: int = 0

    @property
    def spread_pct(self) -> float | None:
        """Half the range relative to the median, in % (``±`` this); None for n < 2."""
        if self.n < 2 or not self.median:
            return None
        return 100.0 * (self.hi - self.lo) / 2.0 / abs(self.median)


def sample(values: Iterable[float | None]) -> Sample:
    """A :class:`Sample` of the finite values (None and nan/inf skipped)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return Sample()
    return Sample(percentile(vals, 50.0), min(vals), max(vals), len(vals))


@dataclass(frozen=True, slots=True)
class Delta:
    """The change of a metric against the baseline: ``pct`` (None when not computable),
    ``verdict`` "better" | "worse" | "inconclusive" | None, ``good`` True/False/None
    for colouring (the direction-adjusted sign of ``pct``)."""

    pct: float | None = None
    verdict: str | None = None
    good: bool | None = None


def compare(current: Sample, base: Sample, sign: int) -> Delta:
    """The :class:`Delta` of ``current`` against ``base`` for a metric of direction
    ``sign`` (see module doc for the verdict rule)."""
    if current.median is None or base.median is None or base.median == 0:
        return Delta()
    pct = 100.0 * (current.median - base.median) / abs(base.median)
    good = None if pct == 0 or sign == 0 else (pct * sign > 0)
    if current.n < 2 and base.n < 2:
        return Delta(pct, None, good)
    if current.lo <= base.hi and base.lo <= current.hi:
        return Delta(pct, "inconclusive", good)
    return Delta(pct, "better" if good else "worse", good)


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored result as the comparison sees it: journal ``id``, ``result``, ``bench``
    preset name, ``pinned`` (the workload's pinned baseline)."""

    id: int
    result: BenchResult
    bench: str | None = None
    pinned: bool = False

    @property
    def run_id(self) -> str:
        """The run the result belongs to (``extra["run_id"]``), else a run of its own."""
        run = self.result.extra.get("run_id")
        return str(run) if run else f"#{self.id}"


@dataclass(frozen=True, slots=True)
class Group:
    """The repeats of one point of one run (see module doc); ``entries`` oldest first."""

    run_id: str
    workload_key: str
    entries: tuple[Entry, ...]

    @property
    def result(self) -> BenchResult:
        """The newest result of the group (its workload, tool, status)."""
        return self.entries[-1].result

    @property
    def ids(self) -> tuple[int, ...]:
        """Journal ids of the group's results, oldest first."""
        return tuple(e.id for e in self.entries)

    @property
    def bench(self) -> str | None:
        """The preset name of the newest result."""
        return self.entries[-1].bench

    @property
    def pinned(self) -> bool:
        """The group holds its workload's pinned baseline."""
        return any(e.pinned for e in self.entries)

    @property
    def ok(self) -> tuple[BenchResult, ...]:
        """The results with status "ok"."""
        return tuple(e.result for e in self.entries if e.result.status == "ok")

    @property
    def concurrency(self) -> int | None:
        """Concurrency cap of the point (result first, then workload)."""
        r = self.result
        return r.max_concurrency if r.max_concurrency is not None else r.workload.max_concurrency

    def sample(self, metric: str) -> Sample:
        """The :class:`Sample` of ``metric`` over the group's ok results."""
        return sample(r.metric(metric) for r in self.ok)


def group_entries(entries: Iterable[Entry]) -> list[Group]:
    """Group entries by (run id, workload key); groups ordered by their first entry's id."""
    buckets: dict[tuple[str, str], list[Entry]] = {}
    for entry in sorted(entries, key=lambda e: e.id):
        buckets.setdefault((entry.run_id, entry.result.workload.key()), []).append(entry)
    return [Group(run, key, tuple(items)) for (run, key), items in buckets.items()]


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a results table: a group, its baseline group (None when the group *is*
    the baseline or the workload has none), deltas per metric of :data:`METRICS`, and the
    scaling efficiency (None when not computable)."""

    group: Group
    baseline: Group | None
    is_baseline: bool
    samples: dict[str, Sample] = field(default_factory=dict)
    deltas: dict[str, Delta] = field(default_factory=dict)
    scaling: float | None = None


def baselines(groups: Sequence[Group]) -> dict[str, Group]:
    """Workload key → its baseline group (pinned, else the first with an ok result)."""
    out: dict[str, Group] = {}
    for group in groups:
        if group.pinned:
            out[group.workload_key] = group
    for group in groups:
        if group.workload_key not in out and group.ok:
            out[group.workload_key] = group
    return out


def family_key(workload: Workload) -> str:
    """The key of a workload with the concurrency cap left out: the points of one
    concurrency sweep share it."""
    return replace(workload, max_concurrency=None).key()


def build_rows(groups: Sequence[Group], history: Sequence[Group] | None = None,
               metrics: Sequence[str] = METRICS) -> list[Row]:
    """Rows for ``groups`` (in their order), compared against baselines found in
    ``history`` (all known groups; defaults to ``groups``)."""
    history = list(history if history is not None else groups)
    base_of = baselines(history)
    one_of = _concurrency_one(history)
    cache: dict[int, dict[str, Sample]] = {}  # id(group) -> its samples (baselines recur)

    def samples_of(group: Group) -> dict[str, Sample]:
        found = cache.get(id(group))
        if found is None:
            found = cache[id(group)] = {m: group.sample(m) for m in metrics}
        return found

    rows = []
    for group in groups:
        base = base_of.get(group.workload_key)
        is_base = base is not None and base.run_id == group.run_id and base.workload_key == group.workload_key
        samples = samples_of(group)
        deltas = {}
        if base is not None and not is_base:
            base_samples = samples_of(base)
            deltas = {m: compare(samples[m], base_samples[m], direction(m)) for m in metrics}
        rows.append(Row(group, None if is_base else base, is_base, samples, deltas,
                        scaling_efficiency(group, one_of, samples[THROUGHPUT], samples_of)))
    return rows


def _concurrency_one(history: Sequence[Group]) -> Callable[[Group], Group | None]:
    """A lookup: group → the group measuring T(1) for its scaling efficiency."""
    by_run: dict[tuple[str, str], Group] = {}
    by_key: dict[str, Group] = {}
    for group in history:  # oldest first: later ones win
        if group.concurrency == 1 and group.ok:
            by_run[(group.run_id, family_key(group.result.workload))] = group
            by_key[group.workload_key] = group

    def lookup(group: Group) -> Group | None:
        wl = group.result.workload
        same_run = by_run.get((group.run_id, family_key(wl)))
        if same_run is not None:
            return same_run
        return by_key.get(replace(wl, max_concurrency=1).key())

    return lookup


def scaling_efficiency(group: Group, one_of: Callable[[Group], Group | None], throughput: Sample | None = None,
                       samples_of: Callable[[Group], dict[str, Sample]] | None = None) -> float | None:
    """``T(N) / (N * T(1))`` for the group's concurrency N (see module doc); None when N
    is unknown, there is no T(1), or a throughput is missing. ``throughput`` and
    ``samples_of`` pass already computed samples."""
    n = group.concurrency
    if not n or n < 1:
        return None
    one = one_of(group)
    if one is None:
        return None
    t_n = (throughput or group.sample(THROUGHPUT)).median
    t_1 = (samples_of(one)[THROUGHPUT] if samples_of else one.sample(THROUGHPUT)).median
    if t_n is None or not t_1:
        return None
    return t_n / (n * t_1)


def sweep_series(rows: Sequence[Row], family: str) -> list[Row]:
    """The newest row per concurrency of workload family ``family`` (see
    :func:`family_key`), ordered by concurrency: the points of a throughput/TTFT chart."""
    newest: dict[int, Row] = {}
    for row in rows:
        conc = row.group.concurrency
        if conc is None or family_key(row.group.result.workload) != family or not row.group.ok:
            continue
        current = newest.get(conc)
        if current is None or row.group.ids[-1] > current.group.ids[-1]:
            newest[conc] = row
    return [newest[c] for c in sorted(newest)]
