"""Comparing benchmark results honestly: repeats grouped, medians and spread, deltas in %
against the workload's baseline, a verdict that says "inconclusive" inside the noise, and
scaling efficiency across concurrency.

Definitions:

- A *group* is the results of one point of one run (same ``extra["run_id"]``, same
  workload key): its repeats. Results stored without a run id are groups of one.
- For each metric a group has a :class:`Sample`: median, min, max, n (comparable results
  only: status "ok" and failed requests within the threshold, see
  :func:`~optui.core.bench.result.comparable`).
- The *baseline* of a workload is the group holding its pinned result, else its first
  group with a comparable result (as ``Journal.baseline_for``).
- ``delta_pct = 100 * (median - base_median) / base_median``.
- Verdict (:func:`judge`, the one noise model of optui, also used by
  :mod:`optui.core.journal.experiments`; :data:`STATISTIC` names it): the *median of the repeats*
  of each side, tested with the exact two-sided *Mann-Whitney U* test on the per-run
  values. A change is "better"/"worse" (by the metric's direction,
  :data:`~optui.core.bench.result.DIRECTION`) only when p <= :data:`ALPHA` (0.10) *and*
  ``|delta_pct|`` exceeds the noise threshold: :data:`NOISE_FLOOR_PCT` (2 %) or the
  restart-to-restart spread where measured, whichever is larger. Otherwise it is "same"
  (shown "inconclusive" in the results table: inside the noise). "untested noise" when
  either side has fewer than 2 runs, or too few for the test to ever reach ALPHA
  (2 against 2 runs: the smallest p is 1/3; 3 against 3: 0.10, i.e. the two sets of
  repeats must not overlap at all).
- Scaling efficiency of a point at concurrency N: ``T(N) / (N * T(1))`` with T the median
  output throughput (tok/s), T(1) from the same run when it measured concurrency 1, else from
  the newest group of the same workload at concurrency 1 measured on the same experiment
  (server configuration; never another's). 1.0 = perfect linear scaling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from optui.core.bench.result import DIRECTION, BenchResult, Workload, cache_share_note, comparable, request_totals
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
        if self.n < 2 or not self.median or self.hi is None or self.lo is None:
            return None
        return 100.0 * (self.hi - self.lo) / 2.0 / abs(self.median)


def sample(values: Iterable[float | None]) -> Sample:
    """A :class:`Sample` of the finite values (None and nan/inf skipped)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return Sample()
    return Sample(percentile(vals, 50.0), min(vals), max(vals), len(vals))


def run_medians(results: Iterable[BenchResult]) -> tuple[int, int, dict[str, float | None]]:
    """The figures of one benchmark of several runs, as a results table's row shows them:
    ``(comparable, runs, medians)`` — how many of ``results`` are compared
    (:func:`~optui.core.bench.result.comparable`), how many there are, and each metric of
    :data:`METRICS` (ms, tok/s) as the median of the comparable runs' values, each metric
    on its own (never the numbers of one run picked by another metric); None where no
    comparable run has the metric. Name it "median of N runs"."""
    runs = list(results)
    ok = [r for r in runs if comparable(r)]
    return len(ok), len(runs), {m: sample(r.metric(m) for r in ok).median for m in METRICS}


def runs_label(comparable_runs: int, runs: int) -> str:
    """``"median of 3 runs"``, ``"median of 2 of 3 runs"`` (one not comparable), ``"3 runs,
    none comparable"``: what the figures of :func:`run_medians` are."""
    if not comparable_runs:
        return f"{runs} run{'s' if runs != 1 else ''}, none comparable"
    if comparable_runs == runs:
        return f"median of {runs} run{'s' if runs != 1 else ''}"
    return f"median of {comparable_runs} of {runs} runs"


#: Significance level of the Mann-Whitney U test (two-sided, exact): the smallest level
#: 3 against 3 repeats can reach (p = 2 / C(6, 3) = 0.10).
ALPHA = 0.10
#: |delta| of a median below this many % is never a change, whatever the test says.
NOISE_FLOOR_PCT = 2.0
#: The statistic, as the README and the findings report name it.
STATISTIC = ("median of the repeats; exact two-sided Mann-Whitney U test on the per-run values "
             f"(p <= {ALPHA:.2f}), and |Δ median| above {NOISE_FLOOR_PCT:g} % or the restart-to-restart spread "
             "where measured; fewer than 2 runs a side (or too few for p to reach "
             f"{ALPHA:.2f}): untested noise")
#: How every spread is written (text, JSON, CSV): ± half the min-max range, in % of the median.
SPREAD_NOTATION = "± half the range, % of the median"
#: The verdicts of :func:`judge`.
VERDICTS = ("better", "worse", "same", "untested noise")
UNTESTED_NOISE = "untested noise"
#: The overall verdict of an experiment whose workloads disagree: better at one, worse at another
#: (:func:`overall_verdict`).
MIXED = "mixed"
_EXACT_MAX = 2500  # n1 * n2 up to this: exact U distribution; above, the normal approximation


@lru_cache(maxsize=256)
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many of the C(n1+n2, n1) orderings (no ties) give each U = 0 .. n1*n2."""
    # f[i][j] = counts for sizes (i, j); f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u)
    prev = [[1] for _ in range(n2 + 1)]  # i = 0: U is 0 whatever j
    for i in range(1, n1 + 1):
        cur = [[1]]  # j = 0: U is 0
        for j in range(1, n2 + 1):
            a, b = prev[j], cur[j - 1]  # a shifted by j, b as is
            size = i * j + 1
            row = [0] * size
            for u, c in enumerate(a):
                row[u + j] += c
            for u, c in enumerate(b):
                row[u] += c
            cur.append(row)
        prev = cur
    return tuple(prev[n2])


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test of samples ``x`` and ``y`` (any
    units, same for both): exact from the U distribution without ties (ties count half)
    for ``len(x) * len(y) <= 2500``, else the normal approximation. 1.0 when a side is
    empty."""
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        return 1.0
    u = sum((1.0 if a > b else 0.5 if a == b else 0.0) for a in x for b in y)
    mu = n1 * n2 / 2.0
    dist = abs(u - mu)
    if n1 * n2 > _EXACT_MAX:
        sigma = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
        return min(1.0, math.erfc(max(0.0, dist - 0.5) / sigma / math.sqrt(2.0)))
    counts = _u_counts(n1, n2)
    total = sum(counts)
    extreme = sum(c for k, c in enumerate(counts) if abs(k - mu) >= dist - 1e-9)
    return min(1.0, extreme / total)


def min_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact test can give for sizes ``n1``, ``n2``:
    ``2 / C(n1 + n2, n1)`` (1.0 when a side is empty)."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict with its evidence: ``verdict`` one of :data:`VERDICTS`; ``delta_pct`` the
    change of the medians in % (None when not computable); ``n``/``base_n`` runs per side;
    ``spread_pct``/``base_spread_pct`` half the min-max range around each median in % (None
    below 2 runs); ``p`` the Mann-Whitney p-value (None when untested);
    ``restart_spread_pct`` the restart-to-restart spread used (None: not measured);
    ``threshold_pct`` the |delta| a change had to exceed; ``good`` the direction-adjusted
    sign of the delta (True = improvement) for colouring."""

    verdict: str
    delta_pct: float | None = None
    n: int = 0
    base_n: int = 0
    spread_pct: float | None = None
    base_spread_pct: float | None = None
    p: float | None = None
    restart_spread_pct: float | None = None
    threshold_pct: float = NOISE_FLOOR_PCT
    good: bool | None = None

    @property
    def restart_half_pct(self) -> float | None:
        """The restart-to-restart spread in the notation every output uses, ± half the range
        (%; the threshold a change must exceed is the whole range, :attr:`threshold_pct`);
        None: not measured."""
        return None if self.restart_spread_pct is None else self.restart_spread_pct / 2

    @property
    def decided(self) -> bool:
        """The change is outside the noise ("better" or "worse")."""
        return self.verdict in ("better", "worse")

    def evidence(self, *, compact: bool = False) -> str:
        """``"n=3 vs 3, ±0.8 % / ±1.1 %, p=0.10"``, + ``", restarts ±3.1 %, threshold 6.2 %"``
        when the restart-to-restart spread was measured (± half its range, as the runs'
        spreads; its whole range the |Δ| a change had to exceed); ``compact`` (a table's
        cell): ``", restarts |Δ|>6.2 %"``. p to 2 significant digits (``p=0.0022``),
        ``p<0.001`` below (never ``p=0.00``)."""
        def spread(v: float | None) -> str:
            return "±?" if v is None else f"±{v:.1f} %"
        parts = [f"n={self.n} vs {self.base_n}"]
        if self.n >= 2 or self.base_n >= 2:
            parts.append(f"{spread(self.spread_pct)} / {spread(self.base_spread_pct)}")
        if self.p is not None:
            parts.append("p<0.001" if self.p < 0.001 else f"p={self.p:.2g}" if self.p < 0.1 else f"p={self.p:.2f}")
        if self.restart_half_pct is not None:
            parts.append(f"restarts |Δ|>{self.threshold_pct:.1f} %" if compact else
                         f"restarts ±{self.restart_half_pct:.1f} %, threshold {self.threshold_pct:.1f} %")
        return ", ".join(parts)

    def to_json(self) -> dict:
        """The evidence as JSON (``verdict``, ``delta_pct``, ``n``, ``base_n``, ``spread_pct``,
        ``base_spread_pct``, ``p``, ``restart_spread_pct``, ``threshold_pct``, ``spread``,
        ``statistic``). Every spread in the notation of the text, ± half the range in %
        (``spread``: :data:`SPREAD_NOTATION` says so); ``threshold_pct`` the |Δ| that decided
        (the floor, or the restart spread's whole range: ``restarts ±3.1 %`` is a 6.1 %
        threshold)."""
        return {"verdict": self.verdict, "delta_pct": self.delta_pct, "n": self.n, "base_n": self.base_n,
                "spread_pct": self.spread_pct, "base_spread_pct": self.base_spread_pct, "p": self.p,
                "restart_spread_pct": self.restart_half_pct, "threshold_pct": self.threshold_pct,
                "spread": SPREAD_NOTATION, "statistic": STATISTIC}


def judge(values: Iterable[float | None], base_values: Iterable[float | None], sign: int, *,
          restart_spread_pct: float | None = None, floor_pct: float = NOISE_FLOOR_PCT,
          alpha: float = ALPHA) -> Judgement:
    """The verdict of per-run ``values`` against the baseline's per-run ``base_values``
    (same unit; None/nan skipped) for a metric of direction ``sign`` (+1 higher is better,
    -1 lower is better): see the module doc. ``restart_spread_pct`` is the full range of
    same-flags restarts' medians in % of their median (None: not measured)."""
    values, base_values = _finite(values), _finite(base_values)
    cur, base = sample(values), sample(base_values)
    threshold = max(floor_pct, restart_spread_pct or 0.0)
    common: dict[str, Any] = dict(n=cur.n, base_n=base.n, spread_pct=cur.spread_pct, base_spread_pct=base.spread_pct,
                                  restart_spread_pct=restart_spread_pct, threshold_pct=threshold)
    if cur.median is None or base.median is None or base.median == 0:
        return Judgement(UNTESTED_NOISE, **common)
    pct = 100.0 * (cur.median - base.median) / abs(base.median)
    good = None if pct == 0 or sign == 0 else (pct * sign > 0)
    if cur.n < 2 or base.n < 2 or min_p(cur.n, base.n) > alpha + 1e-12:
        return Judgement(UNTESTED_NOISE, pct, good=good, **common)
    p = mann_whitney_p(values, base_values)
    if p <= alpha + 1e-12 and abs(pct) > threshold and sign != 0:
        verdict = "better" if good else "worse"
    else:
        verdict = "same"
    return Judgement(verdict, pct, p=p, good=good, **common)


def overall_verdict(verdicts: Iterable[str | None]) -> str:
    """The one verdict of a configuration over its workloads (a preset at one concurrency or
    request rate and one length mix), from each workload's :func:`judge` verdict against the
    baseline — the one rule every reader uses (issue 29):

    - ``"better"``: some workload better, none worse;
    - ``"worse"``: some worse, none better;
    - ``"mixed"`` (:data:`MIXED`): some better and some worse (a flag that helps at high
      concurrency and costs at low);
    - ``"same"``: every workload ``same`` (inside the noise);
    - ``"untested noise"``: none decided and some with too few runs on a side;
    - ``"untested"``: no workload compared (``verdicts`` empty, or only None).

    ``verdicts``: :data:`VERDICTS` (None: a workload with nothing to compare, skipped).
    ValueError for anything else (a verdict of another vocabulary passed by mistake)."""
    seen = [v for v in verdicts if v is not None]
    unknown = sorted({v for v in seen if v not in VERDICTS})
    if unknown:
        raise ValueError(f"not a workload verdict: {', '.join(map(repr, unknown))} (one of {', '.join(VERDICTS)})")
    better, worse = "better" in seen, "worse" in seen
    if better and worse:
        return MIXED
    if better or worse:
        return "better" if better else "worse"
    if not seen:
        return "untested"
    return "same" if all(v == "same" for v in seen) else UNTESTED_NOISE


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


@dataclass(frozen=True, slots=True)
class Delta:
    """The change of a metric against the baseline: ``pct`` (None when not computable),
    ``verdict`` "better" | "worse" | "inconclusive" (inside the noise) | "untested noise"
    | None (nothing to compare), ``good`` True/False/None for colouring (the
    direction-adjusted sign of ``pct``), ``judgement`` the evidence (None when nothing was
    compared)."""

    pct: float | None = None
    verdict: str | None = None
    good: bool | None = None
    judgement: Judgement | None = None


def compare_values(values: Sequence[float | None], base_values: Sequence[float | None], sign: int, *,
                   restart_spread_pct: float | None = None) -> Delta:
    """The :class:`Delta` of per-run ``values`` against the baseline's (see :func:`judge`;
    ``restart_spread_pct``: the workload's restart-to-restart spread, None: not measured)."""
    j = judge(values, base_values, sign, restart_spread_pct=restart_spread_pct)
    if j.delta_pct is None:
        return Delta(judgement=j)
    verdict = "inconclusive" if j.verdict == "same" else j.verdict
    return Delta(j.delta_pct, verdict, j.good, j)


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored result as the comparison sees it: journal ``id``, ``result``, ``bench``
    preset name, ``pinned`` (the workload's pinned baseline), ``experiment`` (the
    ``exp-NNNN`` whose server configuration it measured; None: imported, or older), ``ts``
    when it was stored (Unix s; None: not known)."""

    id: int
    result: BenchResult
    bench: str | None = None
    pinned: bool = False
    experiment: str | None = None
    ts: float | None = None

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
    def experiment(self) -> str | None:
        """The experiment (server configuration) the group measured: its newest result's."""
        return self.entries[-1].experiment

    @property
    def pinned(self) -> bool:
        """The group holds its workload's pinned baseline."""
        return any(e.pinned for e in self.entries)

    @property
    def ok(self) -> tuple[BenchResult, ...]:
        """The comparable results: status "ok" and failed requests within the threshold
        (:func:`~optui.core.bench.result.comparable`); the others are never compared."""
        return tuple(e.result for e in self.entries if comparable(e.result))

    @property
    def requests(self) -> tuple[int, int] | None:
        """``(ok, total)`` requests over the group's runs (``15/400 ok``); None when no
        run counted them."""
        return request_totals(e.result for e in self.entries)

    @property
    def concurrency(self) -> int | None:
        """Concurrency cap of the point (result first, then workload)."""
        r = self.result
        return r.max_concurrency if r.max_concurrency is not None else r.workload.max_concurrency

    def values(self, metric: str) -> list[float | None]:
        """``metric`` of each comparable result, oldest first (per-run values)."""
        return [r.metric(metric) for r in self.ok]

    def sample(self, metric: str) -> Sample:
        """The :class:`Sample` of ``metric`` over the group's comparable results."""
        return sample(self.values(metric))


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
    #: the prefix cache served this group and its baseline differently (a warning line)
    cache_note: str | None = None


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
            deltas = {m: compare_values(group.values(m), base.values(m), direction(m)) for m in metrics}
        note = cache_share_note(group.result, base.result) if deltas and base is not None else None
        rows.append(Row(group, None if is_base else base, is_base, samples, deltas,
                        scaling_efficiency(group, one_of, samples[THROUGHPUT], samples_of), note))
    return rows


def with_restart_spreads(rows: Sequence[Row], spreads: Mapping[str, float],
                         same_flags: Collection[str] = ()) -> tuple[Row, ...]:
    """``rows`` with the out tok/s change of each judged against its workload's
    restart-to-restart spread too (``spreads``: workload key → the full range of same-flags
    experiments' medians in %, as the experiments' verdicts use it:
    :func:`~optui.core.journal.experiments.restart_spreads`). A row judged without it read
    ``-6.4% ✗`` (outside the noise) where its experiment's verdict, with restarts ±7.2 %, was
    ``same``. Rows whose workload has no measured spread are returned as they are. The rows
    of experiments in ``same_flags`` (the baseline's flags started again:
    :func:`~optui.core.journal.experiments.baseline_flags_again`) change nothing but the
    restart: each of their changes is ``inconclusive``, as their verdict is ``same`` (one read
    ``+2.1% ✓`` while the spread it measured was 2.1 %)."""
    out = []
    for row in rows:
        if row.group.experiment in same_flags and row.deltas:
            out.append(replace(row, deltas={k: replace(d, verdict="inconclusive") if d.verdict in ("better", "worse") else d
                                            for k, d in row.deltas.items()}))
            continue
        spread = spreads.get(row.group.workload_key)
        if spread is None or row.baseline is None or THROUGHPUT not in row.deltas:
            out.append(row)
            continue
        delta = compare_values(row.group.values(THROUGHPUT), row.baseline.values(THROUGHPUT), direction(THROUGHPUT),
                               restart_spread_pct=spread)
        out.append(replace(row, deltas={**row.deltas, THROUGHPUT: delta}))
    return tuple(out)


def pinned_first(rows: Sequence[Row], most: int = 2) -> tuple[tuple[Row, ...], int]:
    """``rows`` with the pinned baselines of their workloads first (the newest ``most``,
    oldest first), then the others in their order; and how many lead. A pinned baseline
    older than the rows (``rows`` is the newest few) leads as a row of its own (no scaling:
    its sweep is not among them). A table that keeps its leading rows fixed never scrolls
    the reference away."""
    shown = {id(r.group) for r in rows}
    bases: dict[int, Row] = {}
    for r in rows:
        if r.is_baseline and r.group.pinned:
            bases.setdefault(id(r.group), r)
        elif r.baseline is not None and r.baseline.pinned and id(r.baseline) not in shown:
            b = r.baseline
            bases.setdefault(id(b), Row(b, None, True, {m: b.sample(m) for m in r.samples}))
    lead = sorted(bases.values(), key=lambda r: r.group.ids[-1])[-most:] if most > 0 else []
    lead_ids = {id(r.group) for r in lead}
    return (*lead, *(r for r in rows if id(r.group) not in lead_ids)), len(lead)


def _concurrency_one(history: Sequence[Group]) -> Callable[[Group], Group | None]:
    """A lookup: group → the group measuring T(1) for its scaling efficiency."""
    by_run: dict[tuple[str, str], Group] = {}
    by_key: dict[tuple[str, str | None], Group] = {}  # (workload, experiment): never another configuration's
    for group in history:  # oldest first: later ones win
        if group.concurrency == 1 and group.ok:
            by_run[(group.run_id, family_key(group.result.workload))] = group
            by_key[(group.workload_key, group.experiment)] = group

    def lookup(group: Group) -> Group | None:
        wl = group.result.workload
        same_run = by_run.get((group.run_id, family_key(wl)))
        if same_run is not None:
            return same_run
        return by_key.get((replace(wl, max_concurrency=1).key(), group.experiment))

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


def sweep_series(rows: Sequence[Row], family: str, experiment: str | None) -> list[Row]:
    """The newest row per concurrency of workload family ``family`` (see
    :func:`family_key`) measured on ``experiment`` (one server configuration: a chart never
    mixes them), ordered by concurrency: the points of a throughput/TTFT chart."""
    newest: dict[int, Row] = {}
    for row in rows:
        conc = row.group.concurrency
        if (conc is None or family_key(row.group.result.workload) != family or not row.group.ok
                or row.group.experiment != experiment):
            continue
        current = newest.get(conc)
        if current is None or row.group.ids[-1] > current.group.ids[-1]:
            newest[conc] = row
    return [newest[c] for c in sorted(newest)]
