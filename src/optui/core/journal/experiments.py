"""Experiments: what happened to one server between two restarts, and how it compared.

**Definition.** An experiment begins with an ``experiment.started`` event — a restart with
new (or the same) flags, or the first benchmark of a server that optui found running — and
lasts until the next experiment of the same server begins. Every event of that stretch
(``server.restart``, ``flags.changed``, ``server.stopped`` of the old process,
``server.starting``, phases, ``server.ready`` | ``server.failed``, ``rollback``,
``bench.*``, notes, verdicts) carries its id (``exp-0007``) in the journal's
``experiment`` column, and so do the bench results measured on it. The id is the single
grouping key: todo items, exports and agents refer to experiments by it.

**Baseline.** Per server and workload (``Workload.key()``), the reference result is the
pinned one (``bench_results.baseline``), else the first comparable result. The server's
baseline experiment is the one holding the reference result of its most-measured workload,
else its first experiment that became ready. Values are *medians* over an experiment's
comparable runs of one workload (repeats), compared with the reference experiment's. An
experiment whose configuration (:func:`config_key`) an earlier one of its server had is
that configuration again (``same_config_as``): the runs of all its experiments are judged
together (n adds up; each of them shows the same numbers and verdict), except the
baseline's configuration, whose instances are compared one by one with the baseline
(``same``: they are the restart-to-restart spread's evidence, below).
A run is comparable when its status is "ok" and its failed requests are within the
threshold (:func:`~optui.core.bench.result.comparable`); a "degraded", "invalid" (measured
while the server was HUNG or DEGRADED: :mod:`optui.core.bench.validity`) or failed run is
listed with its ok/total request counts and never compared, nor ever a workload's baseline.

**Verdict** (computed): ``baseline``; ``failed`` (crashed, timed out, bad flag...);
per *workload* (a preset at one concurrency or request rate and one length mix),
``better`` / ``worse`` / ``same`` by :func:`optui.core.bench.compare.judge` on the primary
metric's per-run values (median of the repeats, exact Mann-Whitney U at p <= 0.10, |Δ|
above 2 % or the restart-to-restart spread: :data:`~optui.core.bench.compare.STATISTIC`);
``untested noise`` when a side has fewer runs than the test needs (one run never gets
better/worse) (:func:`workload_verdict`, listed by :func:`workload_summaries`). The
experiment's verdict is the one rule :func:`~optui.core.bench.compare.overall_verdict` over
its workloads: ``better`` (some better, none worse), ``worse``, ``mixed`` (better at one,
worse at another), ``same`` (all same), ``untested noise``; ``untested`` (ready, no
comparable result compared); ``incomplete`` (neither ready nor failed). The baseline's own flags benchmarked again are ``same`` whatever the numbers
say (nothing changed but the instance). The restart-to-restart spread of a workload is
measured where the same flags
were restarted and benchmarked more than once: the full range of those experiments'
medians in % of their median (the largest over such flag sets). The evidence (n per side,
spreads, p, baseline) is the workload's :class:`~optui.core.bench.compare.Judgement`.
The operator's decision (``verdict`` event: keep | reject | inconclusive) is kept beside
it. Pure: no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from optui.core.bench.compare import (
    MIXED,
    UNTESTED_NOISE,
    Judgement,
    Row,
    compare_values,
    direction,
    judge,
    overall_verdict,
    sample,
    with_restart_spreads,
)
from optui.core.bench.result import IMPORTED_KEY, BenchResult, Workload, cache_share_note, comparable, request_totals
from optui.core.flags.argv import Arg, FlagChange, Flags, canonical_name
from optui.core.journal import events as ev
from optui.core.journal.events import Event
from optui.core.server.effective_config import mismatch_lines

DECISIONS = ("keep", "reject", "inconclusive")
#: the event types :func:`build_experiments` reads (the rest of an experiment is narrative)
#: (``server.state`` too, but only for experiments without a ready/failed event: see
#: :func:`unsettled`; state events are the bulk of a long journal)
EXPERIMENT_EVENT_TYPES = (ev.EXPERIMENT_STARTED, ev.RESTART_REQUESTED, ev.SERVER_READY, ev.SERVER_FAILED,
                          ev.ROLLBACK, ev.BENCH_FINISHED, ev.NOTE, ev.VERDICT)


def unsettled(events: Iterable[Event]) -> list[str]:
    """Experiments among ``events`` with neither ``server.ready`` nor ``server.failed``:
    their ``server.state`` events decide whether they became ready."""
    started, settled = [], set()
    for e in events:
        if e.type == ev.EXPERIMENT_STARTED and e.experiment:
            started.append(e.experiment)
        elif e.type in (ev.SERVER_READY, ev.SERVER_FAILED):
            settled.add(e.experiment)
    return [x for x in started if x not in settled]


def experiment_id(n: int) -> str:
    """The id of the ``n``-th experiment of a campaign: ``exp-0007``."""
    return f"exp-{n:04d}"


#: flags that only say where a server listens (SGLang, vLLM, llama.cpp): a new port is not a
#: new configuration, so they are never part of an experiment's change
LISTEN_FLAGS = frozenset({"--host", "--port", "--uds"})


def config_changes(old: Flags, new: Flags, *, short: bool = False, first: Flags | None = None,
                   lead: str | None = None) -> list[str]:
    """The flag diff lines from ``old`` to ``new`` (``~ --tp-size: 4 → 8``; ``short``: the
    flags as they run, ``--tp-size 8``, :meth:`FlagChange.short <optui.core.flags.argv.FlagChange.short>`)
    that change the configuration: :data:`LISTEN_FLAGS` left out. A flag given more than
    once (``--lora a --lora b``) is compared by all its occurrences in order, not only its
    last one (:func:`config_key`): ``~ --lora: a b → x b``. ``first``: the previous
    configuration; the flags that differ from it come first (a cell that folds the others
    into ``+N`` still shows the change just made, e.g. the one that made a start fail);
    ``lead``: a flag name put before all (the one a ``bad_flag`` crash names)."""
    return [c.short() if short else c.describe() for c in ordered_changes(old, new, first=first, lead=lead)]


def ordered_changes(old: Flags, new: Flags, *, first: Flags | None = None, lead: str | None = None) -> list[FlagChange]:
    """The changes of :func:`config_changes` from ``old`` to ``new`` in the order every view
    shows them (the experiments' rows, the Servers panel's): ``lead`` (a flag name: the one a
    ``bad_flag`` crash names) first, then the flags that differ from ``first`` (the previous
    configuration: the change just made, e.g. the one that made a start fail), then the
    others; each part in diff order. A cell that folds flags into ``+N`` folds the last ones."""
    changes = _flag_changes(old, new)
    if first is not None or lead:
        just_changed = {c.name for c in _flag_changes(first, new)} if first is not None else set()
        changes.sort(key=lambda c: (c.name != lead, c.name not in just_changed))  # stable: each part in diff order
    return changes


def _flag_changes(old: Flags, new: Flags) -> list[FlagChange]:
    """:func:`config_changes`' changes from ``old`` to ``new``, in diff order (a repeated
    flag compared by all its occurrences: :meth:`Flags.diff <optui.core.flags.argv.Flags.diff>`)."""
    return [c for c in old.diff(new) if c.name not in LISTEN_FLAGS]


def _refused_flag(draft: dict) -> str | None:
    """:func:`refused_flag` of an experiment's draft."""
    return refused_flag(draft.get("crash_class"), (*draft.get("crash_lines", ()), draft.get("crash_message") or ""))


def refused_flag(crash_class: object, lines: Sequence[str]) -> str | None:
    """The flag a ``bad_flag`` failure's log ``lines`` name (``unrecognized arguments:
    --no-such-flag=1`` → ``--no-such-flag``), canonical (the newest line naming one), else
    None (another class, or no line names a flag)."""
    from optui.core.server.log import flag_named_in

    if crash_class is None or str(crash_class) != "bad_flag":
        return None
    for line in reversed(lines):
        found = flag_named_in(line) if "error" in line.lower() else None
        if found:
            return canonical_name(found.partition("=")[0])
    return None


def resolved_flags(argv: Sequence[str], names: Mapping | None = None) -> Flags:
    """``argv`` parsed with its flags renamed to their canonical names: ``_`` read as ``-``
    (``--max_model_len``), and ``names["aliases"]`` (spelling → canonical, as
    :meth:`FlagCatalog.canonical_names <optui.core.flags.catalog.FlagCatalog.canonical_names>`
    learned them from the server's ``--help``: ``-tp`` → ``--tensor-parallel-size``) applied;
    ``names["booleans"]`` parse as value-less. ``--x=v`` becomes ``--x v``. Order kept."""
    aliases = dict((names or {}).get("aliases") or {})
    f = Flags.parse(argv, (names or {}).get("booleans") or ())
    args = []
    for arg in f.args:
        if arg.name is not None:
            name = canonical_name(arg.name)
            arg = Arg(aliases.get(name, name), arg.values)
        args.append(arg)
    return replace(f, args=tuple(args))


def config_key(argv: Sequence[str], names: Mapping | None = None) -> tuple[str, ...]:
    """What identifies a configuration (issue 29: a configuration is its set of flags): the
    program, the positionals in their order, then the flags (:func:`resolved_flags`:
    ``--x=v`` = ``--x v``, aliases resolved through ``names``) sorted by name, without
    :data:`LISTEN_FLAGS`. Equal keys: the same configuration, whatever order the flags were
    given in or port it listened on.

    A flag given more than once keeps every occurrence, in their order: ``--lora a --lora b``
    is not ``--lora b --lora a`` (llama.cpp numbers its adapters in that order), and
    ``--x 1 --x 2`` is not ``--x 2`` (optui does not know which flags argparse lets the last
    occurrence win): such configurations stay apart rather than be merged wrongly."""
    f = resolved_flags(argv, names)
    positionals = [v for a in f.args if a.name is None for v in a.values]
    flags = sorted(((a.name, a.values) for a in f.args if a.name is not None and a.name not in LISTEN_FLAGS),
                   key=lambda item: item[0])  # stable: a repeated flag's occurrences keep their order
    return (*f.program, *positionals, *(token for name, values in flags for token in (name, *values)))


def experiment_start(prev_argv: Sequence[str], argv: Sequence[str], reason: str = "", *,
                     names: Mapping | None = None, **extra) -> dict:
    """The ``data`` of an ``experiment.started`` event: reason, both argvs, the flag diff
    lines (:func:`config_changes`), ``flag_names`` (``names``: how the server's catalogue
    names these flags, :meth:`FlagCatalog.canonical_names
    <optui.core.flags.catalog.FlagCatalog.canonical_names>`; left out when empty or unknown)
    and ``extra`` (e.g. ``todo_id``, ``observed=True``)."""
    diff = config_changes(Flags.parse(prev_argv), Flags.parse(argv))
    data = {"reason": reason, "argv": list(argv), "prev_argv": list(prev_argv), "diff": diff, **extra}
    if names and (names.get("aliases") or names.get("booleans")):
        data["flag_names"] = {"aliases": dict(names.get("aliases") or {}), "booleans": list(names.get("booleans") or ())}
    return data


def crash_summary(lines: Sequence[str], message: str | None = None, width: int = 160) -> str:
    """The most telling line of a failure: the last log line naming an error or
    exception (else ``message``, else the last line), cut to ``width`` characters."""
    pick = next((line for line in reversed(lines) if any(k in line for k in ("Error", "error:", "Exception", "unrecognized"))), None)
    text = (pick or message or (lines[-1] if lines else "")).strip()
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A bench result row: id, Unix time, server, bench preset, experiment id, baseline pin,
    result."""

    id: int
    ts: float
    server: str | None
    bench: str | None
    experiment: str | None
    baseline: bool
    result: BenchResult


@dataclass(frozen=True, slots=True)
class Metric:
    """A compared metric: key for :meth:`BenchResult.metric`, short label, unit, and
    direction (+1 higher is better, -1 lower is better)."""

    key: str
    label: str
    unit: str
    direction: int


#: The metrics every comparison shows, the primary one first.
KEY_METRICS = (
    Metric("output_throughput_tok_s", "out tok/s", "tok/s", +1),
    Metric("request_throughput", "req/s", "req/s", +1),
    Metric("ttft_ms.median", "TTFT p50", "ms", -1),
    Metric("ttft_ms.p99", "TTFT p99", "ms", -1),
    Metric("tpot_ms.median", "TPOT p50", "ms", -1),
    Metric("itl_ms.median", "ITL p50", "ms", -1),
    Metric("e2e_ms.median", "E2E p50", "ms", -1),
)
PRIMARY = KEY_METRICS[0]
#: medians a workload's ``values``/``base_values`` keep beside :data:`KEY_METRICS`'s, neither
#: compared nor tabled: the agent's rows (:mod:`optui.core.agent.answers`) show their Δ
SIDE_METRICS = ("itl_ms.p99",)


def delta_pct(value: float | None, base: float | None) -> float | None:
    """Relative change in % (None when either side is missing or base is 0)."""
    if value is None or base in (None, 0) or not math.isfinite(value) or not math.isfinite(base):
        return None
    return 100.0 * (value - base) / base


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """One metric of an experiment against its baseline (``value``/``base`` in the
    metric's unit, ``rel_pct`` in %, ``good`` True when the change is an improvement)."""

    metric: Metric
    value: float | None
    base: float | None

    @property
    def rel_pct(self) -> float | None:
        """(value - base) / base in %, or None."""
        return delta_pct(self.value, self.base)

    @property
    def good(self) -> bool | None:
        """True for an improvement, False for a regression, None when unchanged/unknown."""
        rel = self.rel_pct
        if rel is None or rel == 0:
            return None
        return rel * self.metric.direction > 0


def metric_deltas(values: dict[str, float | None], base: dict[str, float | None] | None) -> tuple[MetricDelta, ...]:
    """:data:`KEY_METRICS` of ``values`` against ``base`` (None: no baseline)."""
    return tuple(MetricDelta(m, values.get(m.key), (base or {}).get(m.key)) for m in KEY_METRICS)


def result_deltas(result: BenchResult, base: BenchResult | None) -> tuple[MetricDelta, ...]:
    """:data:`KEY_METRICS` of one result against a baseline result."""
    return metric_deltas(_values([result]), _values([base]) if base is not None else None)


def _values(results: Sequence[BenchResult]) -> dict[str, float | None]:
    """Median of each key metric (and :data:`SIDE_METRICS`) over ``results`` (None / nan
    values skipped)."""
    keys = (*(m.key for m in KEY_METRICS), *SIDE_METRICS)
    return {key: sample(r.metric(key) for r in results).median for key in keys}


def _cv_pct(results: Sequence[BenchResult], key: str) -> float | None:
    """Coefficient of variation in % of ``key`` over ``results`` (None below 2 runs)."""
    vals = [v for r in results if (v := r.metric(key)) is not None]
    if len(vals) < 2 or not statistics.fmean(vals):
        return None
    return 100.0 * statistics.stdev(vals) / abs(statistics.fmean(vals))


def workload_label(w: Workload) -> str:
    """A short human label: ``random 256/96 x64 c16`` (rate shown when limited)."""
    parts = [w.dataset or w.tool or "workload"]
    if w.input_len is not None or w.output_len is not None:
        parts.append(f"{w.input_len if w.input_len is not None else '?'}/{w.output_len if w.output_len is not None else '?'}")
    if w.num_prompts is not None:
        parts.append(f"x{w.num_prompts}")
    if w.max_concurrency is not None:
        parts.append(f"c{w.max_concurrency}")
    if w.request_rate is not None and math.isfinite(w.request_rate):
        parts.append(f"{w.request_rate:g} req/s")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class WorkloadOutcome:
    """An experiment's runs of one workload and their comparison with the baseline.

    ``values``/``base_values`` are medians over comparable runs (None: no baseline for this
    workload); ``cv_pct`` the primary metric's coefficient of variation over the runs (None
    below 2); ``judgement`` the primary metric's verdict with its evidence (None: no
    baseline, or this is the baseline); ``requests`` ``(ok, total)`` requests over all its
    runs (None when not counted).
    """

    key: str
    label: str
    bench: str | None
    runs: tuple[StoredResult, ...]
    values: dict
    base_values: dict | None
    base_experiment: str | None
    cv_pct: float | None
    deltas: tuple[MetricDelta, ...]
    judgement: Judgement | None = None
    requests: tuple[int, int] | None = None
    #: the runs and the baseline's were served by the prefix cache differently
    #: (:func:`~optui.core.bench.result.cache_share_note`): they compare different prefill work
    cache_note: str | None = None

    @property
    def n_ok(self) -> int:
        """Comparable runs (status ok, failed requests within the threshold)."""
        return sum(1 for r in self.runs if comparable(r.result))

    @property
    def primary(self) -> MetricDelta:
        """The primary metric's delta."""
        return self.deltas[0]


@dataclass(frozen=True, slots=True)
class BenchRunInfo:
    """One ``bench.finished`` event: preset, status (ok | failed | aborted | stalled),
    error, duration in s."""

    seq: int
    ts: float
    bench: str
    status: str
    error: str | None
    duration_s: float | None


@dataclass(frozen=True, slots=True)
class Experiment:
    """One experiment (see module doc). Times are Unix seconds, ``ready_s`` seconds from
    start to ready, ``phases`` ``(phase, seconds since start)``."""

    id: str
    server: str
    started_ts: float
    actor: str
    reason: str
    argv: tuple[str, ...]
    prev_argv: tuple[str, ...]
    diff_prev: tuple[str, ...]
    todo_id: int | None = None
    outcome: str = "incomplete"  # ready | failed | incomplete | observed | interrupted
    crash_class: str | None = None
    crash_message: str | None = None
    crash_lines: tuple[str, ...] = ()
    ready_s: float | None = None
    phases: tuple[tuple[str, float], ...] = ()
    model: str | None = None
    server_version: str | None = None
    bench_runs: tuple[BenchRunInfo, ...] = ()
    notes: tuple[tuple[float, str], ...] = ()
    decision: str | None = None
    decision_reason: str | None = None
    rolled_back: bool = False
    ended_ts: float | None = None
    workloads: tuple[WorkloadOutcome, ...] = ()
    is_baseline: bool = False
    baseline_id: str | None = None
    diff_vs_baseline: tuple[str, ...] = ()
    #: the same changes as the flags run now (``--tp-size 8``, ``-(--name)``): narrow cells
    changed_flags: tuple[str, ...] = ()
    verdict: str = "untested"
    #: the flags the server reported running otherwise than the argv says (one line each,
    #: :mod:`optui.core.server.effective_config`); empty: verified or not checkable
    unverified: tuple[str, ...] = ()
    #: the server's first experiment with this configuration (:func:`config_key`) when this
    #: one came later (a rollback, a restart with unchanged flags); None: the first
    same_config_as: str | None = None

    @property
    def is_repeat(self) -> bool:
        """A later start of an earlier experiment's configuration that measured nothing (it
        failed, or ran without a result): listings fold it into that experiment's row, which
        counts its starts (see :func:`fold_repeats`, :func:`starts_text`)."""
        return self.same_config_as is not None and not self.workloads

    @property
    def is_baseline_flags_again(self) -> bool:
        """The server's baseline flags started again (not the baseline itself): compared
        with the baseline one by one, its verdict ``same`` whatever it measured; a change of
        its runs is the restart-to-restart spread, never better or worse."""
        return not self.is_baseline and self.verdict == "same" and not self.diff_vs_baseline

    @property
    def primary(self) -> WorkloadOutcome | None:
        """The workload compared for the verdict (the server's main one when measured)."""
        return self.workloads[0] if self.workloads else None

    @property
    def primary_delta(self) -> MetricDelta | None:
        """The primary metric of the primary workload, or None."""
        w = self.primary
        return w.primary if w is not None else None

    def metric(self, key: str) -> MetricDelta | None:
        """The delta of ``key`` on the primary workload, or None."""
        w = self.primary
        return next((d for d in w.deltas if d.metric.key == key), None) if w is not None else None


def build_experiments(events: Iterable[Event], results: Iterable[StoredResult]) -> list[Experiment]:
    """Experiments (oldest first) from journal events (any order) and stored results.

    Results without an experiment id (journals from before experiments existed) are
    assigned to the experiment of their server that was current at their time.
    """
    book = ExperimentBook()
    book.add(sorted(events, key=lambda e: e.seq), results)
    return book.experiments


class ExperimentBook:
    """The experiments of a campaign kept up to date from what is new in the journal.

    :meth:`add` takes the events after the last one it saw (and new results) and rebuilds
    only what they touch: an experiment's row is recomputed when its own events or runs
    changed, or what it is compared against did (its server's baseline experiment and flags,
    the reference runs and restart spread of its workloads, the server's main workload);
    every other row is the same object as before. ``build_experiments`` is one ``add`` on an
    empty book, so both give the same experiments. Pure (no I/O); not thread-safe (one owner).
    """

    def __init__(self) -> None:
        self._drafts: dict[str, dict] = {}
        self._version: dict[str, int] = {}  # bumped by every change of a draft
        self._order: list[str] = []
        self._results: dict[int, StoredResult] = {}
        self._workload_key: dict[int, str] = {}
        self._comparable: dict[int, bool] = {}
        self._argv: dict[str, tuple[str, ...]] = {}  # each experiment's config_key (Flags.parse once)
        #: server -> how its catalogue names its flags (the union of its experiments' ``flag_names``)
        self._names: dict[str, dict] = {}
        self._rows: dict[str, tuple[tuple, Experiment]] = {}  # id -> (what it was computed from, row)
        self._spread_medians: dict[str, tuple[tuple[int, ...], dict[str, float | None]]] = {}
        self._runs_sig: dict[str, tuple[tuple[int, bool], ...]] = {}  # each experiment's runs (id, pinned)
        self._dirty: set[str] = set()  # experiments whose events, end or runs changed since the last rebuild
        #: server -> (what its comparisons rest on, its experiment ids, its restart spreads' input)
        self._context: dict[str, tuple] = {}
        self._spreads: dict[str, tuple[tuple, dict[str, float]]] = {}
        #: the highest event seq applied (events at or below it are skipped by :meth:`add`)
        self.last_seq = 0
        #: the experiments, oldest first (as :func:`build_experiments` returns them)
        self.experiments: list[Experiment] = []

    @property
    def last_result_id(self) -> int:
        """The highest result id added (0 when none)."""
        return max(self._results, default=0)

    def add(self, events: Iterable[Event], results: Iterable[StoredResult] = ()) -> set[str]:
        """Apply ``events`` (ascending seq; those at or below :attr:`last_seq` are skipped)
        and ``results`` (new ones, or known ids with a changed baseline pin). Returns the ids
        of the experiments whose row changed (new ones included)."""
        touched = False
        for e in events:
            if e.seq <= self.last_seq:
                continue
            self.last_seq = e.seq
            touched = True
            if e.type == ev.EXPERIMENT_STARTED and e.experiment:
                d = e.data
                argv, prev = d.get("argv"), d.get("prev_argv")
                # journals from before LISTEN_FLAGS stored "~ --port: ..." in the diff: recomputed
                diff_prev = config_changes(Flags.parse(prev), Flags.parse(argv)) if argv and prev else d.get("diff")
                self._drafts[e.experiment] = dict(
                    id=e.experiment, server=e.target or "?", started_ts=e.ts, actor=e.actor,
                    reason=d.get("reason") or "", argv=tuple(d.get("argv") or ()),
                    prev_argv=tuple(d.get("prev_argv") or ()), diff_prev=tuple(diff_prev or ()),
                    todo_id=d.get("todo_id"), outcome="observed" if d.get("observed") else "incomplete",
                    bench_runs=[], notes=[],
                )
                self._version[e.experiment] = self._version.get(e.experiment, 0) + 1
                self._dirty.add(e.experiment)
                if e.experiment not in self._argv:
                    self._order.append(e.experiment)
                server = self._drafts[e.experiment]["server"]
                if self._learn_names(server, d.get("flag_names")):
                    for other in self._order:  # a new alias may make earlier experiments the same configuration
                        if other != e.experiment and self._drafts[other]["server"] == server:
                            self._argv[other] = config_key(self._drafts[other]["argv"], self._names.get(server))
                            self._version[other] += 1
                            self._dirty.add(other)
                self._argv[e.experiment] = config_key(self._drafts[e.experiment]["argv"], self._names.get(server))
                continue
            draft = self._drafts.get(e.experiment) if e.experiment else None
            if draft is not None and e.experiment:  # a draft implies an experiment id
                _apply(draft, e)
                self._version[e.experiment] += 1
                self._dirty.add(e.experiment)
        for r in results:
            self._results[r.id] = r
            self._workload_key[r.id] = r.result.workload.key()  # hashing a workload costs: once
            self._comparable[r.id] = comparable(r.result)
            touched = True
        return self._rebuild() if touched else set()

    def _learn_names(self, server: str, names) -> bool:
        """Add an ``experiment.started``'s ``flag_names`` to ``server``'s; True when they
        named something new (the server's configuration keys are then recomputed)."""
        if not isinstance(names, dict):
            return False
        known = self._names.setdefault(server, {"aliases": {}, "booleans": []})
        new_aliases = {k: v for k, v in (names.get("aliases") or {}).items()
                       if isinstance(k, str) and isinstance(v, str) and known["aliases"].get(k) != v}
        new_booleans = [b for b in names.get("booleans") or () if isinstance(b, str) and b not in known["booleans"]]
        known["aliases"].update(new_aliases)
        known["booleans"].extend(new_booleans)
        return bool(new_aliases or new_booleans)

    def _rebuild(self) -> set[str]:
        drafts = self._drafts
        by_server: dict[str, list[dict]] = {}
        for exp_id in self._order:
            by_server.setdefault(drafts[exp_id]["server"], []).append(drafts[exp_id])
        for items in by_server.values():
            for a, b in zip(items, items[1:], strict=False):
                if a.get("ended_ts") != b["started_ts"]:
                    a["ended_ts"] = b["started_ts"]
                    self._version[a["id"]] += 1
                    self._dirty.add(a["id"])
        runs = _assign_results(self._results.values(), drafts, by_server)
        for exp_id in self._order:
            sig = tuple((r.id, r.baseline) for r in runs.get(exp_id, ()))
            if self._runs_sig.get(exp_id) != sig:
                self._runs_sig[exp_id] = sig
                self._dirty.add(exp_id)
        changed: set[str] = set()
        out = []
        for server, items in by_server.items():
            out.extend(_compare_server(items, runs, self, changed, server))
        out.sort(key=lambda x: (x.started_ts, x.id))
        self.experiments = out
        self._dirty.clear()
        return changed

    def _row(self, key: tuple, compute) -> Experiment:
        """The row for ``key`` (its id first): the kept one when ``key`` is what it was
        computed from, else ``compute()``."""
        kept = self._rows.get(key[0])
        if kept is not None and kept[0] == key:
            return kept[1]
        row = compute()
        self._rows[key[0]] = (key, row)
        return row


@dataclass(frozen=True, slots=True)
class ExperimentsUpdate:
    """What a read of a journal's experiments found (:meth:`JournalThread.experiments
    <optui.adapters.journal_thread.JournalThread.experiments>`, the UI's views): every
    experiment (oldest first), the ids whose row changed since the feed's previous update
    (all of them the first time), and the journal seq read up to."""

    experiments: tuple[Experiment, ...]
    changed: frozenset[str]
    last_seq: int


def _apply(draft: dict, e: Event) -> None:
    d = e.data
    if e.type == ev.RESTART_REQUESTED:
        draft["todo_id"] = draft.get("todo_id") or d.get("todo_id")
    elif e.type == ev.SERVER_STATE:
        # a start nobody waited for (``restart --no-wait``, an interrupted gate) still counts
        if d.get("new") == "ready" and draft["outcome"] in ("incomplete", "observed", "interrupted"):
            draft["outcome"] = "ready"
    elif e.type == ev.RESTART_INTERRUPTED:
        if draft["outcome"] in ("incomplete", "observed"):
            draft["outcome"] = "interrupted"
    elif e.type == ev.SERVER_READY:
        if draft["outcome"] != "failed":
            draft["outcome"] = "ready"
        draft["ready_s"] = d.get("ready_s")
        draft["phases"] = tuple((p.get("phase", "?"), p.get("t", 0.0)) for p in d.get("phases") or ())
        draft["model"] = d.get("model")
        draft["server_version"] = d.get("server_version")
        draft["unverified"] = mismatch_lines(d.get("config_check"))
    elif e.type == ev.SERVER_FAILED:
        draft["outcome"] = "failed"
        draft["crash_class"] = d.get("class")
        draft["crash_message"] = d.get("message")
        draft["crash_lines"] = tuple(d.get("lines") or ())
    elif e.type == ev.ROLLBACK:
        draft["rolled_back"] = True
    elif e.type == ev.BENCH_FINISHED:
        draft["bench_runs"].append(BenchRunInfo(e.seq, e.ts, d.get("bench") or "?", d.get("status") or "?",
                                                d.get("error"), d.get("duration_s")))
    elif e.type == ev.NOTE:
        draft["notes"].append((e.ts, d.get("text", "")))
    elif e.type == ev.VERDICT:
        draft["decision"] = d.get("decision")
        draft["decision_reason"] = d.get("reason")


def _assign_results(results: Iterable[StoredResult], drafts: dict[str, dict],
                    by_server: dict[str, list[dict]]) -> dict[str, list[StoredResult]]:
    runs: dict[str, list[StoredResult]] = {}
    for r in sorted(results, key=lambda r: r.id):
        exp = r.experiment if r.experiment in drafts else None
        if exp is None and IMPORTED_KEY not in r.result.extra:  # an import is in none unless imported into one
            for d in by_server.get(r.server or "", ()):
                if d["started_ts"] <= r.ts and (d.get("ended_ts") is None or r.ts < d["ended_ts"]):
                    exp = d["id"]
        if exp is not None:
            runs.setdefault(exp, []).append(r)
    return runs


def _compare_server(items: list[dict], runs: dict[str, list[StoredResult]], book: ExperimentBook,
                    changed: set[str], server: str) -> list[Experiment]:
    """Baseline, deltas and verdicts of one server's experiments (oldest first). When what
    the comparisons rest on (baseline experiment and flags, main workload, reference runs,
    restart spreads) is what ``book`` last saw, only its dirty experiments are looked at; a
    row whose inputs are those it was computed from is reused either way. The ids of the
    rebuilt rows go into ``changed``."""
    key_of, ok = book._workload_key, book._comparable
    first_of: dict[tuple[str, ...], str] = {}
    for d in items:
        first_of.setdefault(book._argv[d["id"]], d["id"])
    first = {d["id"]: first_of[book._argv[d["id"]]] for d in items}
    same_as = {exp_id: f for exp_id, f in first.items() if f != exp_id}
    exp_of = {r.id: d["id"] for d in items for r in runs.get(d["id"], ())}
    by_workload: dict[str, list[StoredResult]] = {}
    for d in items:
        for r in runs.get(d["id"], ()):
            if ok[r.id]:
                by_workload.setdefault(key_of[r.id], []).append(r)
    # the reference result of each workload: pinned, else the first comparable one
    reference = {k: next((r for r in rs if r.baseline), rs[0]) for k, rs in by_workload.items()}
    main_key = max(by_workload, key=lambda k: (len(by_workload[k]), -by_workload[k][0].id)) if by_workload else None
    baseline_id = exp_of.get(reference[main_key].id) if main_key is not None else None
    if baseline_id is None:
        baseline_id = next((d["id"] for d in items if d["outcome"] == "ready"), items[0]["id"] if items else None)
    base_argv = next((d["argv"] for d in items if d["id"] == baseline_id), ())
    names = book._names.get(server)
    base_flags = resolved_flags(base_argv, names)  # the same flags in another order or spelling: no change
    # what is judged: a configuration's runs, whichever of its experiments measured them
    # (oldest first; n adds up); the baseline's configuration excepted: its instances are
    # compared one by one (each again is the restart-to-restart spread's evidence)
    base_config = first.get(baseline_id) if baseline_id is not None else None
    unit = {exp_id: exp_id if f == base_config else f for exp_id, f in first.items()}
    members: dict[str, list[str]] = {}
    for d in items:
        members.setdefault(unit[d["id"]], []).append(d["id"])
    pooled = {u: sorted((r for m in ms for r in runs.get(m, ())), key=lambda r: r.id) for u, ms in members.items()}
    exp_of = {r.id: unit[d["id"]] for d in items for r in runs.get(d["id"], ())}
    ctx = _Compare(pooled, exp_of, key_of, reference, main_key, _restart_spreads(items, runs, key_of, book, server),
                   baseline_id)
    ids = tuple(d["id"] for d in items)
    context = (baseline_id, base_argv, main_key, tuple((k, ctx.base_ids(k)) for k in sorted(reference)),
               tuple(sorted(ctx.restart_spread.items())))
    same_context = book._context.get(server) == (context, ids)
    book._context[server] = (context, ids)
    out = []
    for d in items:
        exp_id = d["id"]
        if same_context and exp_id not in book._dirty and exp_id in book._rows:
            out.append(book._rows[exp_id][1])
            continue
        mine = pooled[unit[exp_id]] if runs.get(exp_id) else []  # measured: its configuration's runs
        keys = sorted({key_of[r.id] for r in mine})
        depends = tuple((k, ctx.base_ids(k), ctx.restart_spread.get(k)) for k in keys)
        key = (exp_id, book._version[exp_id], tuple(book._runs_sig[m] for m in members[unit[exp_id]]), baseline_id,
               base_argv, main_key, depends, same_as.get(exp_id))

        def compute(d=d, mine=mine, exp_id=exp_id) -> Experiment:
            changed.add(exp_id)
            is_baseline = exp_id == baseline_id
            flags = resolved_flags(d["argv"], names)
            prev = resolved_flags(d["prev_argv"], names) if d["prev_argv"] else None  # its own change first
            lead = _refused_flag(d)  # and before it, the flag a bad_flag start was refused for
            lead = dict((names or {}).get("aliases") or {}).get(lead, lead) if lead else None
            diff = () if is_baseline else tuple(config_changes(base_flags, flags, first=prev, lead=lead))
            short = () if is_baseline else tuple(config_changes(base_flags, flags, short=True, first=prev, lead=lead))
            exp = Experiment(**{**d, "bench_runs": tuple(d["bench_runs"]), "notes": tuple(d["notes"]),
                                "workloads": ctx.workloads(unit[exp_id], mine), "is_baseline": is_baseline,
                                "baseline_id": baseline_id, "diff_vs_baseline": diff, "changed_flags": short,
                                "same_config_as": same_as.get(exp_id)})
            return _with_verdict(exp)

        out.append(book._row(key, compute))
    return out


class _Compare:
    """One server's results indexed for comparisons (reference runs computed once)."""

    def __init__(self, runs, exp_of, key_of, reference, main_key, restart_spread, baseline_id) -> None:
        self.runs, self.exp_of, self.key_of, self.reference, self.main_key = runs, exp_of, key_of, reference, main_key
        self.baseline_id: str | None = baseline_id
        self.restart_spread: dict[str, float] = restart_spread
        self._base: dict[str, tuple[str | None, list[BenchResult]]] = {}
        self._base_ids: dict[str, tuple | None] = {}

    def base_ids(self, key: str) -> tuple | None:
        """What workload ``key`` is compared against: the reference experiment and the ids
        (and pins) of its runs; None without a reference."""
        if key not in self.reference:
            return None
        if key not in self._base_ids:
            ref = self.reference[key]
            exp = self.exp_of.get(ref.id)
            self._base_ids[key] = (exp, ref.id, tuple((r.id, r.baseline) for r in self.runs.get(exp, ())
                                                      if self.key_of[r.id] == key))
        return self._base_ids[key]

    def base(self, key: str) -> tuple[str | None, list[BenchResult]]:
        """The reference experiment of workload ``key`` and its ok runs of it."""
        if key not in self._base:
            ref = self.reference[key]
            exp = self.exp_of.get(ref.id)
            rs = [r.result for r in self.runs.get(exp, ()) if comparable(r.result) and self.key_of[r.id] == key]
            self._base[key] = (exp, rs or [ref.result])
        return self._base[key]

    def workloads(self, exp_id: str, mine: list[StoredResult]) -> tuple[WorkloadOutcome, ...]:
        groups: dict[str, list[StoredResult]] = {}
        for r in mine:
            groups.setdefault(self.key_of[r.id], []).append(r)
        out = []
        for key, rs in groups.items():
            ok = [r.result for r in rs if comparable(r.result)]
            values = _values(ok)
            base_values = base_exp = judgement = cache_note = None
            # a workload only this (non-baseline) experiment ran is its own reference: compared
            # with itself it would read "+0.0 %"; it has no baseline (nothing else ran it)
            if key in self.reference and (self.base(key)[0] != exp_id or exp_id == self.baseline_id):
                base_exp, base_runs = self.base(key)
                if base_exp != exp_id and ok and base_runs:
                    cache_note = cache_share_note(ok[-1], base_runs[-1])
                base_values = _values(base_runs)
                cv = max(filter(None, (_cv_pct(ok, PRIMARY.key), _cv_pct(base_runs, PRIMARY.key))), default=None)
                if base_exp != exp_id:
                    judgement = judge([r.metric(PRIMARY.key) for r in ok], [r.metric(PRIMARY.key) for r in base_runs],
                                      PRIMARY.direction, restart_spread_pct=self.restart_spread.get(key))
            else:
                cv = _cv_pct(ok, PRIMARY.key)
            bench = next((r.bench for r in rs if r.bench), None)
            out.append(WorkloadOutcome(key, workload_label(rs[0].result.workload), bench, tuple(rs), values,
                                       base_values, base_exp, cv, metric_deltas(values, base_values), judgement,
                                       request_totals(r.result for r in rs), cache_note))
        # primary first: the server's main workload, else the first with a baseline, else by first run
        out.sort(key=lambda w: (w.key != self.main_key, w.base_values is None, w.runs[0].id))
        return tuple(out)


def workload_verdict(x: Experiment, w: WorkloadOutcome) -> str | None:
    """The verdict of experiment ``x`` on its workload ``w`` against the baseline: the
    workload's :class:`~optui.core.bench.compare.Judgement` verdict (``better`` | ``worse`` |
    ``same`` | ``untested noise``); ``same`` for a decided change of the baseline's own flags
    again (nothing changed but the instance: the restart-to-restart spread); None when the
    workload was not compared (no baseline for it, it *is* the baseline's runs, or none of its
    runs is comparable)."""
    j = w.judgement
    if j is None or not w.n_ok or j.delta_pct is None:
        return None
    if j.decided and not x.is_baseline and not x.diff_vs_baseline:
        return "same"
    return j.verdict


def experiment_verdict(exp: Experiment, keys: Collection[str] | None = None) -> str:
    """The overall verdict of ``exp``: ``failed`` | ``baseline`` | ``incomplete``, else
    :func:`~optui.core.bench.compare.overall_verdict` of its per-workload verdicts
    (:func:`workload_verdict`): better | worse | mixed | same | untested noise | untested.
    ``keys``: only those workloads (:meth:`Workload.key`; one preset's, one run's); None: all."""
    if exp.outcome == "failed":
        return "failed"
    if exp.is_baseline:
        return "baseline"
    if exp.outcome == "incomplete" and not exp.workloads:
        return "incomplete"
    return overall_verdict(workload_verdict(exp, w) for w in exp.workloads if keys is None or w.key in keys)


def _with_verdict(exp: Experiment) -> Experiment:
    """``exp`` with its overall verdict (:func:`experiment_verdict`)."""
    return replace(exp, verdict=experiment_verdict(exp))


def _restart_spreads(items: list[dict], runs: dict[str, list[StoredResult]], key_of: dict[int, str],
                     book: ExperimentBook, server: str) -> dict[str, float]:
    """Workload key → restart-to-restart spread in % (see module doc): the full range of
    the primary metric's per-experiment medians over experiments with the same flags, in %
    of their median; only where a flag set was benchmarked in 2 or more experiments. Kept in
    ``book`` until the server's experiments or runs change (each experiment's medians until
    its own runs do)."""
    sig = tuple((d["id"], book._runs_sig.get(d["id"])) for d in items)
    kept_all = book._spreads.get(server)
    if kept_all is not None and kept_all[0] == sig:
        return kept_all[1]
    medians: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for d in items:
        mine = runs.get(d["id"], ())
        ids = tuple(r.id for r in mine)
        kept = book._spread_medians.get(d["id"])
        if kept is None or kept[0] != ids:
            per_key: dict[str, list[float | None]] = {}
            for r in mine:
                if comparable(r.result):
                    per_key.setdefault(key_of[r.id], []).append(r.result.metric(PRIMARY.key))
            kept = (ids, {key: sample(vals).median for key, vals in per_key.items()})
            book._spread_medians[d["id"]] = kept
        argv = book._argv[d["id"]]
        for key, m in kept[1].items():
            if m is not None:
                medians.setdefault((key, argv), []).append(m)
    out: dict[str, float] = {}
    for (key, _argv), ms in medians.items():
        s = sample(ms)
        if s.n >= 2 and s.median and s.hi is not None and s.lo is not None:  # n >= 2 implies hi, lo
            out[key] = max(out.get(key, 0.0), 100.0 * (s.hi - s.lo) / abs(s.median))
    book._spreads[server] = (sig, out)
    return out


def restart_spreads(experiments: Iterable[Experiment]) -> dict[str, float]:
    """Workload key → the restart-to-restart spread (%) the experiments' verdicts were judged
    with (the largest where several say it; workloads without one are left out), so that a
    results table judges its rows' changes as the verdicts do
    (:func:`~optui.core.bench.compare.with_restart_spreads`)."""
    out: dict[str, float] = {}
    for x in experiments:
        for w in x.workloads:
            spread = w.judgement.restart_spread_pct if w.judgement is not None else None
            if spread is not None:
                out[w.key] = max(out.get(w.key, 0.0), spread)
    return out


def with_verdicts(rows: Sequence[Row], experiments: Iterable[Experiment]) -> tuple[Row, ...]:
    """``rows`` of a results table (:func:`~optui.core.bench.compare.build_rows`) with each
    change judged as the experiments' verdicts judge it: for a row measured on experiment
    ``x`` (``group.experiment``), every metric's :class:`~optui.core.bench.compare.Delta` is
    ``x``'s configuration's runs of that workload against the baseline experiment's runs of
    it (:func:`~optui.core.bench.compare.judge`, the restart-to-restart spread on out tok/s),
    so that its ✓ ✗ ? mark is the workload's verdict (:func:`workload_verdict`: the baseline's
    flags again are ``inconclusive`` whatever they measured), never a delta against one
    earlier run; each Delta carries its :class:`Judgement` (n, p, threshold) for the
    evidence. A row of the baseline's own runs of the workload is a baseline row. Rows of
    no known experiment (imports) or of a workload nobody else ran stay as they are."""
    by_id = {x.id: x for x in experiments}
    out = []
    for row in rows:
        x = by_id.get(row.group.experiment or "")
        w = next((o for o in x.workloads if o.key == row.group.workload_key), None) if x is not None else None
        if x is None or w is None or w.base_values is None:
            out.append(row)
            continue
        base_x = by_id.get(w.base_experiment or "")
        base_w = next((o for o in base_x.workloads if o.key == w.key), None) if base_x is not None else None
        if w.judgement is None:  # the baseline's own runs of this workload
            out.append(replace(row, is_baseline=True, baseline=None, deltas={}, cache_note=None))
            continue
        same_flags = not x.is_baseline and not x.diff_vs_baseline
        if not row.deltas:
            out.append(row)
            continue
        if base_w is None or not w.runs:  # the runs are not at hand: the row's own, with the verdict's spread
            spread = w.judgement.restart_spread_pct
            out.extend(with_restart_spreads([row], {w.key: spread} if spread is not None else {},
                                            {x.id} if same_flags else ()))
            continue
        deltas = {}
        for metric in row.deltas:
            mine = [r.result.metric(metric) for r in w.runs if comparable(r.result)]
            theirs = [r.result.metric(metric) for r in base_w.runs if comparable(r.result)]
            spread = w.judgement.restart_spread_pct if metric == PRIMARY.key else None
            d = compare_values(mine, theirs, direction(metric), restart_spread_pct=spread)
            if same_flags and d.verdict in ("better", "worse"):
                d = replace(d, verdict="inconclusive")
            deltas[metric] = d
        out.append(replace(row, deltas=deltas))
    return tuple(out)


def baseline_flags_again(experiments: Iterable[Experiment]) -> frozenset[str]:
    """The ids of the experiments that ran their server's baseline flags again (not the
    baseline itself): their verdict is ``same`` whatever they measured, a change of theirs
    is the restart-to-restart spread (:func:`~optui.core.bench.compare.with_restart_spreads`)."""
    return frozenset(x.id for x in experiments if x.is_baseline_flags_again)


def fold_repeats(experiments: Iterable[Experiment]) -> tuple[list[Experiment], dict[str, list[str]]]:
    """The experiments a listing shows (in the order given), and for each of them the ids of
    the repeats folded into it (:attr:`Experiment.is_repeat`: rollbacks, restarts with
    unchanged flags and failed starts of the same flags that measured nothing are the same
    configuration, not new untested or failed experiments; :func:`starts_text` counts them).
    A later start of a configuration that measured again folds into its row too: its runs
    are judged with the configuration's already (the row shows them pooled, ``n=6 vs 3``), so
    a row of its own repeated the same numbers and verdict (issue 20); except the baseline's
    configuration, whose instances are compared one by one with the baseline (``same``, the
    restart spread's evidence) and keep their rows.
    A repeat whose first experiment is not among ``experiments`` stays listed. A first start
    that measured nothing (the demo's autostart before any benchmark) folds into the first
    later start of its configuration that did, with that configuration's other unmeasured
    starts: it was listed as ``untested`` beside ``exp-0002 baseline (same flags as exp-0001)``;
    a row that keeps its own (the baseline's flags measured again) then says it has the same
    flags as that later start, whose row is listed."""
    experiments = list(experiments)
    listed = {x.id for x in experiments}
    measured_again: dict[str, str] = {}  # an unmeasured first start → its configuration's first measured start
    unmeasured_first = {x.id for x in experiments if x.same_config_as is None and not x.workloads}
    # the configurations of the baselines (their first experiment's id): their instances
    # measured again are compared one by one with the baseline, each a row of its own
    baseline_configs = {x.same_config_as or x.id for x in experiments if x.is_baseline}
    for x in experiments:
        if x.same_config_as in unmeasured_first and x.workloads:
            measured_again.setdefault(x.same_config_as, x.id)
    folded: dict[str, list[str]] = {}
    rows = []
    for x in experiments:
        if x.id in measured_again:
            folded.setdefault(measured_again[x.id], []).append(x.id)
            continue
        into = measured_again.get(x.same_config_as or "", x.same_config_as)
        if x.same_config_as in listed and into != x.id and (x.is_repeat or x.same_config_as not in baseline_configs):
            assert into is not None
            folded.setdefault(into, []).append(x.id)
        else:
            rows.append(x)
    return _naming_rows(rows, folded), folded


def _naming_rows(experiments: Iterable[Experiment], folded: dict[str, list[str]]) -> list[Experiment]:
    """``experiments`` with each ``same_config_as`` that names a start ``folded`` into a row
    naming that row instead (none where it is the experiment's own row: 'same flags as
    exp-0002' on exp-0002)."""
    row_of = {exp_id: row for row, ids in folded.items() for exp_id in ids}
    out = []
    for x in experiments:
        row = row_of.get(x.same_config_as or "")
        out.append(x if row is None else replace(x, same_config_as=row if row != x.id else None))
    return out


def named_by_row(experiments: Iterable[Experiment]) -> list[Experiment]:
    """``experiments`` with each ``same_config_as`` naming the row a listing shows for that
    configuration (:func:`fold_repeats`): a results table said ``same flags as exp-0001``,
    an unmeasured first start folded into exp-0002, which the experiments view lists
    instead. A start that would name its own row names none (its change is then its diff)."""
    xs = list(experiments)
    return _naming_rows(xs, fold_repeats(sorted(xs, key=lambda x: x.id))[1])


def starts_text(x: Experiment, repeats: Sequence[Experiment] = ()) -> str:
    """How often a listed configuration was started (its row's experiment ``x`` and the
    ``repeats`` folded into it) and how those starts ended: ``"3 starts: 2 ok, 1 failed"``,
    ``"1 start: 1 ok"``. ok: became ready (or was found running); a start still under way or
    interrupted counts in the total only."""
    starts = [x, *repeats]
    ok = sum(s.outcome in ("ready", "observed") for s in starts)
    failed = sum(s.outcome == "failed" for s in starts)
    body = ", ".join(part for n, part in ((ok, f"{ok} ok"), (failed, f"{failed} failed")) if n)
    head = f"{len(starts)} start{'s' if len(starts) != 1 else ''}"
    return f"{head}: {body}" if body else head


def starts_brief(x: Experiment, repeats: Sequence[Experiment] = ()) -> str:
    """:func:`starts_text` for a row that already shows ``x``'s outcome: how many starts
    and only those that ended otherwise: ``"3 starts"`` (all alike), ``"3 starts, 1 failed"``
    (``x`` ready), ``"3 starts, 2 ok"`` (``x`` failed); ``""`` for a single start."""
    starts = [x, *repeats]
    if len(starts) == 1:
        return ""
    failed_row = x.outcome == "failed"
    other = sum((s.outcome in ("ready", "observed")) if failed_row else (s.outcome == "failed") for s in starts)
    return f"{len(starts)} starts" + (f", {other} {'ok' if failed_row else 'failed'}" if other else "")


def rollback_warning(experiments: Sequence[Experiment], server: str, argv: Sequence[str]) -> str | None:
    """What a person must know before rolling ``server`` back to ``argv`` (its last good
    flags: the last that became ready, not the last that measured well): an experiment of
    that configuration (:func:`config_key`: the same flags in any order, and the starts a
    listing folds into one row, :attr:`Experiment.same_config_as`) was judged ``worse`` or
    was rejected; the newest such one is named. A later start of those flags that measured
    nothing (a rollback to them, an autostart) does not clear it. ``"exp-0004 ran these flags
    and measured worse (-50.0 % out tok/s vs exp-0001)"``, else None (never measured, same,
    better, noisy or failed runs: nothing said)."""
    key = config_key(argv)
    mine = [x for x in experiments if x.server == server]
    configs = {x.same_config_as or x.id for x in mine if config_key(x.argv) == key}
    same = [x for x in mine if (x.same_config_as or x.id) in configs]
    x = next((x for x in reversed(same) if x.decision == "reject" or x.verdict == "worse"), None)
    if x is None:
        return None
    if x.decision == "reject":
        return f"{x.id} ran these flags and was rejected" + (f" ({x.decision_reason})" if x.decision_reason else "")
    d = x.primary_delta
    vs = f" ({d.rel_pct:+.1f} % {d.metric.label} vs {x.primary.base_experiment or x.baseline_id or '?'})" \
        if d is not None and d.rel_pct is not None and x.primary is not None else ""
    return f"{x.id} ran these flags and measured worse{vs}"


def _gain(x: Experiment, w: WorkloadOutcome) -> float | None:
    """The direction-adjusted primary-metric change (%) of ``x`` on ``w`` against the server's
    baseline experiment; None when ``w`` was not compared with it."""
    j = w.judgement
    if j is None or j.delta_pct is None or not w.n_ok or w.base_experiment != x.baseline_id:
        return None
    return j.delta_pct * PRIMARY.direction


def best_experiment(experiments: Sequence[Experiment], server: str) -> Experiment | None:
    """The best configuration of ``server``: among experiments whose overall verdict is
    ``better`` (some workload better outside the noise, none worse:
    :func:`~optui.core.bench.compare.overall_verdict`) and that were not rejected, the highest
    mean primary-metric gain over the baseline on the workloads compared with it; else the
    baseline itself (0 %). A ``mixed`` configuration is never the best overall (it loses
    somewhere: :func:`best_by_workload` names it where it wins). None when nothing of
    ``server`` was compared."""
    candidates = []
    for e in experiments:
        if e.server != server or e.outcome == "failed" or e.decision == "reject":
            continue
        if e.is_baseline and e.primary is not None:
            candidates.append((0.0, e.started_ts, e))
            continue
        gains = [g for w in e.workloads if (g := _gain(e, w)) is not None]
        if e.verdict == "better" and gains:
            candidates.append((sum(gains) / len(gains), e.started_ts, e))
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c[0], -c[1]))[2]


def best_by_workload(experiments: Sequence[Experiment], server: str) -> dict[str, tuple[Experiment, WorkloadOutcome]]:
    """Workload key → the best configuration of ``server`` on that workload and its outcome
    there: the experiment judged ``better`` on it (:func:`workload_verdict`) with the highest
    primary-metric gain over the baseline, not failed nor rejected; else the baseline
    experiment where it measured the workload. Workloads neither has are left out. Where
    the winners differ (``best at c=1: exp-0001; best at c=16: exp-0003``) no configuration
    wins everywhere; the findings report says so."""
    out: dict[str, tuple[float, float, Experiment, WorkloadOutcome]] = {}
    for e in experiments:
        if e.server != server or e.outcome == "failed" or e.decision == "reject":
            continue
        for w in e.workloads:
            if e.is_baseline and w.n_ok:
                score = 0.0
            elif workload_verdict(e, w) == "better" and (g := _gain(e, w)) is not None:
                score = g
            else:
                continue
            kept = out.get(w.key)
            if kept is None or (score, -e.started_ts) > (kept[0], -kept[1]):
                out[w.key] = (score, e.started_ts, e, w)
    return {k: (v[2], v[3]) for k, v in out.items()}


@dataclass(frozen=True, slots=True)
class RunnerUp:
    """The best configuration tested against the runner-up on one workload: ``best`` and
    ``other`` experiments, the workload ``key``, and ``judgement`` (best's per-run primary
    metric against the runner-up's: :func:`~optui.core.bench.compare.judge`)."""

    best: Experiment
    other: Experiment
    key: str
    judgement: Judgement

    def text(self) -> str:
        """``"vs runner-up exp-0002: better +8.1 %, n=3 vs 3, ±0.4 % / ±0.9 %, p=0.10"`` when
        the test separates them, else ``"not separable from exp-0002 (+1.1 %, n=3 vs 3, ...,
        p=0.70)"`` (``same`` or ``untested noise``: too few runs)."""
        j = self.judgement
        delta = f"{j.delta_pct:+.1f} %, " if j.delta_pct is not None else ""
        if j.decided:
            return f"vs runner-up {self.other.id}: {j.verdict} {delta}{j.evidence()}"
        return f"not separable from {self.other.id} ({j.verdict}: {delta}{j.evidence()})"


def runner_up(experiments: Sequence[Experiment], best: Experiment, key: str | None = None) -> RunnerUp | None:
    """``best`` tested against the runner-up on workload ``key`` (None: ``best``'s primary
    workload): among the other configurations of its server that measured it (not failed,
    not rejected, not ``best``'s own configuration again), the one with the best median of
    the primary metric (out tok/s), preferring those with 2 runs or more (one run can never
    be told apart); judged on the per-run values of both, with the
    workload's restart-to-restart spread where measured. None when ``best`` did not measure
    the workload or nothing else did. For hand-made experiments as for a search's trials."""
    key = key if key is not None else (best.primary.key if best.primary is not None else None)
    mine = next((w for w in best.workloads if w.key == key), None)
    if mine is None or not mine.n_ok:
        return None
    own = {best.id, best.same_config_as or best.id}
    rivals = []
    for e in experiments:
        if (e.server != best.server or e.id in own or (e.same_config_as or e.id) in own or e.outcome == "failed"
                or e.decision == "reject"):
            continue
        w = next((o for o in e.workloads if o.key == key and o.n_ok), None)
        v = w.values.get(PRIMARY.key) if w is not None else None
        if w is not None and v is not None:
            rivals.append((w.n_ok >= 2, v * PRIMARY.direction, -e.started_ts, e, w))
    if not rivals:
        return None
    *_, other, theirs = max(rivals, key=lambda r: r[:3])

    def per_run(w: WorkloadOutcome) -> list[float | None]:
        return [r.result.metric(PRIMARY.key) for r in w.runs if comparable(r.result)]

    spread = mine.judgement.restart_spread_pct if mine.judgement is not None else None
    return RunnerUp(best, other, key or "", judge(per_run(mine), per_run(theirs), PRIMARY.direction,
                                                  restart_spread_pct=spread))


def row_verdict_text(experiments: Sequence[Experiment], exp_id: str | None, key: str) -> str:
    """The evidence of a results-table row on demand: experiment ``exp_id``'s verdict on
    workload ``key`` against the baseline and, where another configuration measured it, its
    test against the runner-up: ``"c=16 on exp-0004: better +200.0 % out tok/s (n=3 vs 3,
    ±1.7 % / ±1.0 %, p=0.10, vs exp-0001); vs runner-up exp-0003: better +16.7 %, n=3 vs
    3, ..."``; ``"c=16 on exp-0001: baseline"``; ``""`` for a row of no known experiment."""
    x = next((e for e in experiments if e.id == exp_id), None)
    w = next((o for o in x.workloads if o.key == key), None) if x is not None else None
    if x is None or w is None:
        return ""
    verdict = workload_verdict(x, w)
    head = f"{workload_point(w)} on {x.id}: "
    if verdict is None:
        own = x.is_baseline or (w.base_values is not None and w.base_experiment in (x.id, x.same_config_as))
        text = head + ("baseline" if own else workload_evidence(x, w) or "not compared")
    else:
        j = w.judgement
        delta = f" {j.delta_pct:+.1f} % {PRIMARY.label}" if j is not None and j.delta_pct is not None else ""
        text = f"{head}{verdict}{delta} ({workload_evidence(x, w)})"
    vs = runner_up(experiments, x, key)
    return text + (f"; {vs.text()}" if vs is not None else "")


#: what :func:`verdict_evidence` says of results no other experiment's results compare with
NO_BASELINE = "no baseline for this workload"


def workload_baselines(x: Experiment) -> dict[str, tuple[dict | None, bool]]:
    """Workload key → ``(baseline medians, is the baseline)`` of experiment ``x``'s
    workloads: the medians (metric key → value) its verdict and deltas compare with (None:
    no baseline for it), and whether ``x``'s own runs are that baseline. A todo run's note
    takes its baselines from here so that its numbers are the verdict's. The baseline's
    flags started again are compared with the baseline, not part of it (its todo run read
    '679.6 out tok/s (this is the baseline)' beside the table's '~-0.9%')."""
    own = {x.id} if x.is_baseline_flags_again else {x.id, x.same_config_as}
    return {w.key: (w.base_values, w.base_values is not None and w.base_experiment in own) for w in x.workloads}


def verdict_evidence(x: Experiment, *, name_baseline: bool = True, compact: bool = False) -> str:
    """What the verdict rests on, for every place that shows it: ``"n=3 vs 3, ±0.8 % /
    ±1.1 %, p=0.10, vs exp-0001"`` (:meth:`Judgement.evidence` + the baseline), then a
    warning when the prefix cache served the runs and the baseline's differently
    (``"; ⚠ prefix cache 97% vs 0% in the baseline"``); :data:`NO_BASELINE` when the
    primary workload's results have nothing to compare with (no other experiment ran it);
    ``""`` when nothing was compared otherwise (baseline, failed, untested).
    ``name_baseline=False`` leaves out ``", vs exp-0001"`` where the runs were compared with
    the server's baseline experiment (a table that names it once, in its title); a
    workload measured against another experiment still names it. ``compact`` (a table's cell):
    the restart spread as the threshold it sets (:meth:`Judgement.evidence`). An experiment compared on
    more than one workload (or on another than its primary) says each, with its verdict and
    change: ``"c=1 same -0.3 % (n=3 vs 3, ..., p=0.70); c=16 better +180.2 % (n=3 vs 3, ...,
    p=0.10), vs exp-0001"`` — the evidence of the overall verdict
    (:func:`~optui.core.bench.compare.overall_verdict`)."""
    w = x.primary
    if x.verdict == "untested" and not x.is_baseline and w is not None and w.n_ok and w.base_values is None:
        return NO_BASELINE
    if x.is_baseline or w is None or x.verdict in ("failed", "untested", "incomplete"):
        return ""
    compared = [o for o in x.workloads if workload_verdict(x, o) is not None]
    if compared == [w] or not compared:
        return workload_evidence(x, w, name_baseline=name_baseline, compact=compact)
    bases = {o.base_experiment or x.baseline_id for o in compared}
    one_base = len(bases) == 1
    parts = []
    for o in compared:
        j = o.judgement
        assert j is not None and j.delta_pct is not None  # workload_verdict said it was compared
        part = f"{workload_point(o)} {workload_verdict(x, o)} {j.delta_pct:+.1f} % ({j.evidence(compact=compact)}"
        if not one_base:
            part += f", vs {o.base_experiment or x.baseline_id or '?'}"
        parts.append(part + (f"; ⚠ {o.cache_note}" if o.cache_note else "") + ")")
    text = "; ".join(parts)
    base = next(iter(bases))
    if one_base and (name_baseline or base != x.baseline_id or base is None):
        text += f", vs {base or '?'}"
    return text


def workload_evidence(x: Experiment, w: WorkloadOutcome, *, name_baseline: bool = True, compact: bool = False) -> str:
    """:func:`verdict_evidence` of one workload ``w`` of ``x``: ``"n=3 vs 3, ±0.8 % / ±1.1 %,
    p=0.10, threshold 2.0 %, vs exp-0001"`` (+ the prefix-cache warning); :data:`NO_BASELINE`
    when nothing else ran it; ``""`` when it was not compared (its runs are the baseline's,
    none comparable, the experiment failed)."""
    if x.verdict == "failed":
        return ""
    if w.n_ok and w.base_values is None:
        return "" if x.is_baseline else NO_BASELINE
    if w.judgement is None or not w.n_ok:
        return ""
    base = w.base_experiment or x.baseline_id
    text = w.judgement.evidence(compact=compact)
    if name_baseline or base != x.baseline_id or base is None:
        text += f", vs {base or '?'}"
    return text + (f"; ⚠ {w.cache_note}" if w.cache_note else "")


def workload_limits(w: WorkloadOutcome) -> tuple[int | None, float | None]:
    """``(concurrency, request rate in req/s)`` of a workload's runs (None: unlimited)."""
    if not w.runs:
        return None, None
    r = w.runs[0].result
    wl = r.workload
    conc = r.max_concurrency if r.max_concurrency is not None else wl.max_concurrency
    rate = wl.request_rate if wl.request_rate is not None and math.isfinite(wl.request_rate) else None
    return conc, rate


def workload_point(w: WorkloadOutcome) -> str:
    """The point of a workload as a short name: ``c=8``, ``4 req/s``, ``c=8, 4 req/s``
    (both limited), else its label (``random 32/12 x8``)."""
    conc, rate = workload_limits(w)
    parts = ([f"c={conc}"] if conc is not None else []) + ([f"{rate:g} req/s"] if rate is not None else [])
    return ", ".join(parts) or w.label


def _own_baseline_runs(x: Experiment, w: WorkloadOutcome) -> bool:
    """``w``'s runs are the baseline's own (the workload's baseline is ``x`` or its configuration)."""
    return w.base_values is not None and w.base_experiment in (x.id, x.same_config_as) and w.judgement is None


def shown_workload_verdict(x: Experiment, w: WorkloadOutcome) -> str:
    """The word a reader shows for ``x`` on workload ``w``: :func:`workload_verdict` (better |
    worse | same | untested noise), else ``baseline`` for the baseline's own runs and
    ``untested`` for a workload not compared. Every per-workload row (``bench run``, status,
    the MCP answers) takes it from here."""
    verdict = workload_verdict(x, w)
    if verdict is not None:
        return verdict
    return "baseline" if _own_baseline_runs(x, w) or (x.is_baseline and w.judgement is None and w.n_ok) else "untested"


def workload_summaries(x: Experiment) -> list[dict]:
    """One dict per workload ``x`` measured (primary first), the per-workload verdicts every
    reader shows (``bench run --json``'s ``experiment_summary.workloads``, MCP answers):
    ``workload`` (label, ``random 32/12 x8 c16``), ``point`` (``c=16``), ``key``
    (:meth:`Workload.key`), ``bench`` (preset), ``concurrency`` (None: unlimited),
    ``request_rate`` (req/s, None: unlimited), ``verdict`` (:func:`workload_verdict`;
    ``baseline`` for the baseline's own runs, ``untested`` when not compared), ``delta_pct``
    (out tok/s median vs the baseline's, %; None: not compared), ``output_throughput_tok_s``
    (median of the comparable runs), ``baseline`` (the experiment compared with),
    ``baseline_values`` (its medians, metric key → ms or tok/s: what each run's delta is
    against; None for the baseline's own runs or without a baseline), ``runs``
    (:func:`runs_text`), ``evidence`` (:meth:`Judgement.to_json`, None when not compared)
    and ``evidence_text`` (:func:`workload_evidence`). The overall verdict over them is
    ``x.verdict`` (:func:`~optui.core.bench.compare.overall_verdict`)."""
    out = []
    for w in x.workloads:
        conc, rate = workload_limits(w)
        verdict = shown_workload_verdict(x, w)
        own = _own_baseline_runs(x, w)
        out.append({
            "workload": w.label, "point": workload_point(w), "key": w.key, "bench": w.bench,
            "concurrency": conc, "request_rate": rate, "verdict": verdict,
            "delta_pct": w.judgement.delta_pct if w.judgement is not None and w.n_ok else None,
            "output_throughput_tok_s": w.primary.value, "baseline": w.base_experiment,
            "baseline_values": dict(w.base_values) if w.base_values is not None and not own else None,
            "runs": runs_text(w), "evidence": w.judgement.to_json() if w.judgement is not None and w.n_ok else None,
            "evidence_text": workload_evidence(x, w),
        })
    return out


def workloads_brief(summaries: Sequence[dict]) -> str:
    """Each workload's verdict in a few words, from :func:`workload_summaries`:
    ``"c=1 worse -55.0 %, c=16 better +180.2 %"``; ``""`` for fewer than two workloads
    (the overall verdict says it all)."""
    if len(summaries) < 2:
        return ""
    return ", ".join(f"{s['point']} {s['verdict']}" + (f" {s['delta_pct']:+.1f} %" if s.get("delta_pct") is not None else "")
                     for s in summaries)


def change_text(x: Experiment) -> str:
    """An experiment's configuration as a row names it: ``baseline``, its flag diff vs the
    baseline experiment (``~ --max-running-requests: 16 → 64``) or ``same flags``, and for a
    configuration an earlier experiment had, which one (``... (same flags as exp-0002)``,
    ``same flags as exp-0001``). A narrow cell shows :attr:`Experiment.changed_flags`."""
    if x.is_baseline:
        return "baseline"
    diff = "; ".join(x.diff_vs_baseline)
    if x.same_config_as is None:
        return diff or "same flags"
    return f"{diff} (same flags as {x.same_config_as})" if diff else f"same flags as {x.same_config_as}"


def change_text_within(x: Experiment, width: int) -> str:
    """:func:`change_text` for a cell of ``width`` characters where a shorter wording says
    the same: a configuration again without changed flags (``same flags as exp-0001``) as
    ``same as exp-0001``, else ``= exp-0001``; otherwise the text as it is (a cell that still
    cuts it shows its changed flags instead: :mod:`optui.core.flags.abbrev`)."""
    text = change_text(x)
    if len(text) > width and x.same_config_as and not x.diff_vs_baseline:
        text = next((t for t in (f"same as {x.same_config_as}", f"= {x.same_config_as}") if len(t) <= width), text)
    return text


def runs_text(w: WorkloadOutcome | None, *, unit: bool = True) -> str:
    """``"3/3 runs, 1200/1200 ok"``: comparable runs of all, and ok requests of all sent
    (``"15/400 ok"`` shows a run that lost most of its requests); ``"-"`` without runs.
    ``unit=False``: ``"3/3, 1200/1200 ok"`` (a column whose header says runs)."""
    if w is None:
        return "-"
    text = f"{w.n_ok}/{len(w.runs)}" + (f" run{'s' if len(w.runs) != 1 else ''}" if unit else "")
    return text + (f", {w.requests[0]}/{w.requests[1]} ok" if w.requests is not None else "")


#: a verdict's place when sorted by verdict: ``mixed`` between ``better`` and the baseline (it won
#: somewhere: worth a look, unlike ``same``), ``worse`` and ``failed`` last
_VERDICT_RANK = {"better": 0, MIXED: 1, "baseline": 2, "same": 3, UNTESTED_NOISE: 4, "untested": 5, "incomplete": 6,
                 "worse": 7, "failed": 8}


def _delta_sort(x: Experiment):
    d = x.primary_delta
    return d.rel_pct if d and not x.is_baseline else (0.0 if x.is_baseline and d else None)


def _ttft_delta_sort(x: Experiment):
    ttft = x.metric("ttft_ms.median")
    return ttft.rel_pct if ttft and not x.is_baseline else None


#: sort key -> the value of an experiment it sorts by (None: no value, sorted last)
_SORT_VALUE = {
    "id": lambda x: x.id,
    "server": lambda x: x.server,
    "ready": lambda x: x.ready_s,
    "throughput": lambda x: d.value if (d := x.primary_delta) else None,
    "delta": _delta_sort,
    "ttft": lambda x: t.value if (t := x.metric("ttft_ms.median")) else None,
    "ttft_delta": _ttft_delta_sort,
    "verdict": lambda x: _VERDICT_RANK.get(x.verdict, 9),
    "outcome": lambda x: x.outcome,
    "change": lambda x: "; ".join(x.diff_vs_baseline),
}


#: keys :func:`sort_experiments` accepts
SORT_KEYS = ("id", "server", "ready", "throughput", "delta", "ttft", "ttft_delta", "verdict", "outcome", "change")


def sort_experiments(experiments: Iterable[Experiment], key: str = "id", reverse: bool = False) -> list[Experiment]:
    """Experiments sorted by ``key`` (:data:`SORT_KEYS`); rows without a value (no
    benchmark, never ready) always go last, whatever the direction. ValueError for an
    unknown key."""
    if key not in SORT_KEYS:
        raise ValueError(f"unknown sort key {key!r} (one of {', '.join(SORT_KEYS)})")
    value = _SORT_VALUE[key]
    valued = [(value(x), x) for x in experiments]  # each value once: a view sorts 1000 rows per key press
    known = [(v, x) for v, x in valued if v is not None]
    missing = [x for v, x in valued if v is None]
    known.sort(key=lambda vx: (vx[0], vx[1].id), reverse=reverse)
    return [x for _, x in known] + missing
