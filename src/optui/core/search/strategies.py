"""Search strategies (pure): what the next trial of a search is, given the trials so far.

- ``grid``: every configuration in order (the first flag varies slowest); a grid larger than
  its ``budget`` runs a spread of ``budget`` points (:func:`grid_spread`), never its first ones;
- ``random``: configurations drawn without replacement by a generator seeded with ``seed``;
- ``optuna``: Optuna's TPE sampler proposes them; its study is stored (I/O), so its
  proposals come from ``adapters/optuna_study.py`` and :func:`next_step` only adds the re-runs;
- ``sla``: one configuration, the largest load (concurrency or request rate) meeting the
  constraints, by bisection as ``vllm bench sweep serve_sla`` does: ``low`` first, then
  ``high``, then halving the bracket between the largest load that met the SLA and the
  smallest that did not, until it is ``tolerance`` wide.

A trial that failed (``oom``, ``bad_flag``, ``timeout`` ...) is kept as an infeasible
point with its crash class; grid and random never run a configuration twice while
exploring. Before a winner is named the ``confirm_top`` best configurations are run again
(``confirm_runs`` times each); a configuration's standing is the median of all its runs,
so one lucky run does not win. :func:`next_step` drives it all; the runner
(``session/search.py``) only measures what it is told to.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from optui.core.bench.compare import Judgement
from optui.core.bench.compare import judge as judge_runs
from optui.core.search.spec import Constraint, Point, SearchSpec, point_from_json, point_text

TrialStatus = Literal["ok", "violates", "failed"]
Phase = Literal["explore", "confirm"]


@dataclass(frozen=True, slots=True)
class Trial:
    """One run of one configuration: ``number`` (1-based, in the order run), its ``point``,
    ``phase`` (explore | confirm), ``status`` ("ok": measured and every constraint holds;
    "violates": measured, ``violated`` names the broken constraints; "failed": no
    measurement, ``crash_class`` says why: oom, bad_flag, timeout ...), ``score`` (the
    objective's metric, None when not measured), ``values`` (every measured metric, by
    :data:`~optui.core.search.spec.METRICS` name), ``load`` (the sla strategy's
    concurrency or req/s), ``experiment`` (the exp-NNNN it ran as), a ``message``, and
    ``run_scores``: the objective's metric of each benchmark run behind ``score`` (their
    median; the preset's repeats; empty for trials journaled before they were kept)."""

    number: int
    point: Point
    phase: Phase
    status: TrialStatus
    score: float | None = None
    values: Mapping[str, float] = field(default_factory=dict)
    crash_class: str | None = None
    violated: tuple[str, ...] = ()
    load: float | None = None
    experiment: str | None = None
    message: str = ""
    run_scores: tuple[float, ...] = ()

    @property
    def feasible(self) -> bool:
        """Measured, and every constraint held."""
        return self.status == "ok"

    def to_json(self) -> dict:
        """The trial as the ``search.trial`` event's data carries it."""
        return {"number": self.number, "point": [list(p) for p in self.point], "phase": self.phase,
                "status": self.status, "score": self.score, "values": dict(self.values),
                "crash_class": self.crash_class, "violated": list(self.violated), "load": self.load,
                "experiment": self.experiment, "message": self.message, "run_scores": list(self.run_scores)}

    @classmethod
    def from_json(cls, data: Mapping) -> Trial:
        """Back from :meth:`to_json` (a resumed search reads its journaled trials; a
        ``search.trial`` event's own ``message`` is its whole line, the trial's is ``trial_message``)."""
        return cls(int(data["number"]), point_from_json(data.get("point") or []), data.get("phase", "explore"),
                   data.get("status", "failed"), data.get("score"), dict(data.get("values") or {}),
                   data.get("crash_class"), tuple(data.get("violated") or ()), data.get("load"),
                   data.get("experiment"), data.get("trial_message", data.get("message")) or "",
                   tuple(float(v) for v in data.get("run_scores") or () if isinstance(v, int | float)))


def breaks_text(violated: Sequence[str], values: Mapping[str, float]) -> str:
    """``"gpu_mem_mib <= 80000 (measured 127,438), ttft_p99_ms <= 2000 (not measured)"``:
    the broken constraints (their ``str``, as :attr:`Trial.violated` keeps them) with the
    value each measured (``values`` by metric name; 4 significant digits, thousands comma)."""
    out = []
    for text in violated:
        try:
            key = Constraint.parse(text).key
        except ValueError:  # journaled by another version
            key = text.split(" ", 1)[0]
        value = values.get(key)
        out.append(f"{text} ({'not measured' if value is None else 'measured ' + measured_text(value)})")
    return ", ".join(out)


def measured_text(value: float) -> str:
    """``127438.5`` → ``"127,438"``, ``43.21`` → ``"43.21"``: 4 significant digits at least,
    integer digits never cut."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def judge(spec: SearchSpec, point: Point, values: Mapping[str, float], *, number: int, phase: Phase = "explore",
          load: float | None = None, experiment: str | None = None) -> Trial:
    """A measured trial: its score (the objective's metric) and the constraints it broke
    (status "violates" when any; a missing objective metric is a failed trial)."""
    score = values.get(spec.goal.metric)
    violated = tuple(str(c) for c in spec.rules if not c.holds(values))
    if score is None:
        return Trial(number, point, phase, "failed", None, dict(values), "no_metric", violated, load, experiment,
                     f"the benchmark reported no {spec.goal.metric}")
    return Trial(number, point, phase, "violates" if violated else "ok", float(score), dict(values), None, violated,
                 load, experiment, ("breaks " + breaks_text(violated, values)) if violated else "")


def failed(point: Point, crash_class: str | None, message: str, *, number: int, phase: Phase = "explore",
           load: float | None = None, experiment: str | None = None) -> Trial:
    """A trial that measured nothing (the server did not start, the benchmark failed)."""
    return Trial(number, point, phase, "failed", None, {}, crash_class or "failed", (), load, experiment, message)


# ------------------------------------------------------------------ exploring
def _untried(order: Iterator[int], spec: SearchSpec, trials: Sequence[Trial]) -> Point | None:
    tried = {t.point for t in trials}
    for index in order:
        point = spec.point_at(index)
        if point not in tried:
            return point
    return None


#: a grid cut by its budget is spread by a greedy cover up to this many points; above, a seeded draw
SPREAD_MAX_SIZE = 4096


def grid_order(spec: SearchSpec) -> Iterator[int]:
    """Configuration indices of the grid strategy: every point in order (the first flag
    varies slowest) when the budget holds the grid; a grid larger than its budget runs a
    spread of ``budget`` points instead of its first ones (:func:`grid_spread`), in grid order."""
    budget = explore_budget(spec)
    if budget >= spec.size():
        return iter(range(spec.size()))
    return iter(grid_spread(spec, budget))


def grid_spread(spec: SearchSpec, count: int) -> list[int]:
    """``count`` configuration indices spread over the grid (sorted): each next one the
    point taking fewest flag values past their fair share (``count`` / the flag's values,
    rounded up), then bringing the most values not tried yet, then whose values were
    chosen least, then differing in the most flags from its nearest chosen point, then by a draw seeded with ``seed`` (the same
    spec spreads the same way). Every value of every flag is tried when ``count`` is at
    least the longest flag's number of values. A grid above :data:`SPREAD_MAX_SIZE` points
    is spread by the seeded draw alone."""
    size = spec.size()
    order = random.Random(spec.seed).sample(range(size), size)
    if size > SPREAD_MAX_SIZE:
        return sorted(order[:count])
    points = {i: spec.point_at(i) for i in order}
    chosen: list[int] = []
    seen: set[tuple[str, object]] = set()
    uses: dict[tuple[str, object], int] = {}  # how often each flag value was chosen: kept balanced
    cap = {name: -(-count // len(d.values)) for name, d in spec.flags.items() if d.values}  # a value's fair share
    nearest = {i: len(points[i]) + 1 for i in order}  # flags differing from the nearest chosen point
    left = list(order)
    for _ in range(min(count, size)):
        best = max(left, key=lambda i: (-sum(uses.get(fv, 0) >= cap.get(fv[0], count) for fv in points[i]),
                                        sum(1 for fv in points[i] if fv not in seen),
                                        -sum(uses.get(fv, 0) for fv in points[i]), nearest[i]))
        left.remove(best)
        chosen.append(best)
        seen.update(points[best])
        for fv in points[best]:
            uses[fv] = uses.get(fv, 0) + 1
        for i in left:
            nearest[i] = min(nearest[i], len(set(points[i]) ^ set(points[best])) // 2)
    return sorted(chosen)


def budget_note(spec: SearchSpec) -> str:
    """``"grid of 24, budget 12: 12 points not tried (a spread of 12 runs, not the first
    12)"``: what a budget smaller than the space leaves out; ``""`` when all of it runs
    (and for optuna and sla, whose budget is their own)."""
    if spec.strategy not in ("grid", "random"):
        return ""
    size, budget = spec.size(), explore_budget(spec)
    if budget >= size:
        return ""
    how = f"a spread of {budget} runs, not the first {budget}" if spec.strategy == "grid" else f"a seeded draw of {budget}"
    return f"{'grid' if spec.strategy == 'grid' else 'space'} of {size}, budget {budget}: {size - budget} points not tried ({how})"


def random_order(spec: SearchSpec) -> Iterator[int]:
    """Configuration indices of the random strategy: a seeded draw without replacement,
    the same for the same ``seed`` (a resumed search continues the same sequence)."""
    size = spec.size()
    return iter(random.Random(spec.seed).sample(range(size), size))


#: exploring trials of the optuna strategy when the spec gives no budget
OPTUNA_BUDGET = 20


def explore_budget(spec: SearchSpec) -> int:
    """How many exploring trials the search runs at most."""
    default = OPTUNA_BUDGET if spec.strategy == "optuna" else spec.size()
    return min(spec.budget or default, spec.size())


def explored(trials: Sequence[Trial]) -> int:
    """How many of ``trials`` explored (were not re-runs)."""
    return sum(1 for t in trials if t.phase == "explore")


# ------------------------------------------------------------------ standings
@dataclass(frozen=True, slots=True)
class Standing:
    """One configuration over all its trials: the median ``score`` (of the trials' scores)
    and the median of each metric, ``runs`` (how many trials: not benchmark runs),
    ``spread`` (lowest, highest score), ``feasible`` (no trial failed and the constraints
    hold on the medians), the ``violated`` constraints, the crash class of a failed trial,
    its trials' numbers, and ``run_scores``: the objective's value of every benchmark run
    of its measured trials (:attr:`Trial.run_scores`; how many: :attr:`bench_runs`)."""

    point: Point
    score: float | None
    runs: int
    spread: tuple[float, float] | None
    feasible: bool
    values: Mapping[str, float]
    violated: tuple[str, ...]
    crash_class: str | None
    trials: tuple[int, ...]
    run_scores: tuple[float, ...] = ()

    @property
    def bench_runs(self) -> int:
        """How many benchmark runs its measured trials made (0: not journaled)."""
        return len(self.run_scores)

    @property
    def count_text(self) -> str:
        """``"median of 2 trials, 6 runs"``: what :attr:`score` is the median of (trials),
        and the benchmark runs behind them."""
        text = f"median of {self.runs} trial{'s' if self.runs != 1 else ''}"
        return text + (f", {self.bench_runs} run{'s' if self.bench_runs != 1 else ''}" if self.bench_runs else "")


def standings(spec: SearchSpec, trials: Sequence[Trial]) -> list[Standing]:
    """Every configuration tried: the feasible ones best first, then those breaking a
    constraint (best score first), then the failed ones (in the order tried)."""
    groups: dict[Point, list[Trial]] = {}
    for t in trials:
        groups.setdefault(t.point, []).append(t)
    goal = spec.goal
    out: list[Standing] = []
    for point, runs in groups.items():
        crashed = next((t for t in runs if t.status == "failed"), None)
        scores = [t.score for t in runs if t.score is not None]
        keys = {k for t in runs for k in t.values}
        values = {k: statistics.median([t.values[k] for t in runs if k in t.values]) for k in sorted(keys)}
        violated = tuple(str(c) for c in spec.rules if not c.holds(values))
        score = statistics.median(scores) if scores and crashed is None else None
        out.append(Standing(point, score, len(runs), (min(scores), max(scores)) if scores else None,
                            crashed is None and score is not None and not violated, values, violated,
                            crashed.crash_class if crashed else None, tuple(t.number for t in runs),
                            tuple(v for t in runs if t.score is not None for v in t.run_scores)))
    rank = {"ok": 0, "violates": 1, "failed": 2}

    def key(s: Standing) -> tuple:
        kind = "ok" if s.feasible else "failed" if s.score is None else "violates"
        return (rank[kind], goal.sort_key(s.score) if s.score is not None else 0.0, s.trials[0])

    return sorted(out, key=key)


def winner(spec: SearchSpec, trials: Sequence[Trial]) -> Standing | None:
    """The best feasible configuration (None when none is feasible)."""
    best = next(iter(standings(spec, trials)), None)
    return best if best is not None and best.feasible else None


@dataclass(frozen=True, slots=True)
class Comparison:
    """The winner against another configuration tried (``role``: "runner-up", the next
    feasible one, or "first trial", the configuration the search began with): the verdict
    of the winner's benchmark runs against the other's (:attr:`Standing.run_scores`,
    :func:`~optui.core.bench.compare.judge`: the test the experiments' verdicts use)."""

    role: str
    other: Standing
    judgement: Judgement

    def to_json(self) -> dict:
        """``role``, ``flags``, ``score`` (the other's median) and ``evidence`` (Judgement.to_json)."""
        return {"role": self.role, "flags": point_text(self.other.point), "score": self.other.score,
                "evidence": self.judgement.to_json()}


def restart_spread(spec: SearchSpec, trials: Sequence[Trial]) -> float | None:
    """The search's own restart-to-restart spread (%): each trial restarts the server, so
    the trials of one configuration are restarts of the same flags; the full range of their
    scores in % of their median, the largest over the configurations measured at least
    twice (None: none was). The winner test's threshold is at least this
    (:func:`~optui.core.bench.compare.judge`'s ``restart_spread_pct``)."""
    groups: dict[Point, list[float]] = {}
    for t in trials:
        if t.score is not None and t.status != "failed":
            groups.setdefault(t.point, []).append(t.score)
    out: float | None = None
    for scores in groups.values():
        if len(scores) >= 2:
            mid = statistics.median(scores)
            if mid:
                pct = 100.0 * (max(scores) - min(scores)) / abs(mid)
                out = pct if out is None else max(out, pct)
    return out


def winner_comparisons(spec: SearchSpec, trials: Sequence[Trial], *,
                       restart_spread_pct: float | None = None) -> tuple[Comparison, ...]:
    """The winner (:func:`winner`) against the runner-up and against the first trial's
    configuration (when that is neither and was measured); () without a winner. Judged with
    the restart-to-restart spread: the larger of the search's own (:func:`restart_spread`)
    and ``restart_spread_pct`` (%, the journal's for the workload; None: not measured)."""
    table = standings(spec, trials)
    best = table[0] if table and table[0].feasible else None
    if best is None:
        return ()
    own = restart_spread(spec, trials)
    spread = max((v for v in (own, restart_spread_pct) if v is not None), default=None)
    sign = 1 if spec.goal.goal == "max" else -1
    others = [("runner-up", s) for s in table[1:2] if s.feasible]
    first = min((t.number for t in trials), default=None)
    start = next((s for s in table if first in s.trials), None)
    if start is not None and start is not best and all(start is not o for _, o in others) and start.score is not None:
        others.append(("first trial", start))
    return tuple(Comparison(role, other, judge_runs(best.run_scores, other.run_scores, sign, restart_spread_pct=spread))
                 for role, other in others)


def won(comparisons: Sequence[Comparison]) -> bool:
    """The best configuration won: it beat every configuration it was compared with
    (runner-up, first trial) outside the noise, or it was the only one measured. False: its
    own evidence says nothing beat the runner-up, so no "winner" is named or launched."""
    return all(c.judgement.verdict == "better" for c in comparisons)


def winner_text(spec: SearchSpec, best: Standing, comparisons: Sequence[Comparison]) -> str:
    """``"best -np 4 -ub 256: output_tok_s 42.2 (median of 2 trials, 6 runs); vs -np 4 -ub
    128 (runner-up): same (n=6 vs 6, ±20.1 % / ±18.0 %, p=0.26) — no configuration is
    better outside the noise"``: the winner with its evidence, as a verdict carries it; a
    single configuration (nothing to compare) says so."""
    head = f"best {point_text(best.point) or '(fixed flags)'}: {spec.goal.metric} {best.score:.4g} ({best.count_text})"
    if not comparisons:
        return head + " — the only configuration measured: nothing to compare it with"
    parts = [f"vs {point_text(c.other.point) or '(fixed flags)'} ({c.role}): {c.judgement.verdict} "
             f"({c.judgement.evidence()})" for c in comparisons]
    return "; ".join([head, *parts]) + " — " + _winner_tail(comparisons)


def _winner_tail(comparisons: Sequence[Comparison]) -> str:
    """What the comparisons say together: beaten outside the noise, inside it, or not
    testable (too few runs: a number, never 'no better')."""
    def roles(verdicts: tuple[str, ...]) -> str:
        return " and the ".join(c.role for c in comparisons if c.judgement.verdict in verdicts)

    tails = []
    if beaten := roles(("better",)):
        tails.append(f"it beat the {beaten} outside the noise")
    if inside := roles(("same", "worse")):
        tails.append(f"it is inside the noise of the {inside}" if tails else "no configuration is better outside the noise")
    if untested := roles(("untested noise",)):
        tails.append(f"too few runs to test it against the {untested}")
    return "; ".join(tails)


def none_feasible_text(spec: SearchSpec, trials: Sequence[Trial]) -> str:
    """Why no configuration won: ``"no trial finished"``, or ``"no configuration met the
    constraints: ttft_p99_ms <= 2000 broken by 5 trials (closest: 2,140), 2 failed
    (oom)"``: each broken constraint with how many measured trials broke it and the value
    nearest its limit, then the failed trials by crash class."""
    if not trials:
        return "no trial finished"
    parts = []
    for rule in spec.rules:
        broke = [t.values[rule.key] for t in trials if t.status != "failed" and str(rule) in t.violated
                 and rule.key in t.values]
        missing = sum(1 for t in trials if t.status != "failed" and str(rule) in t.violated and rule.key not in t.values)
        if broke:
            closest = min(broke, key=lambda v: abs(v - rule.limit))
            parts.append(f"{rule} broken by {len(broke)} trial{'s' if len(broke) != 1 else ''} "
                         f"(closest: {measured_text(closest)})")
        if missing:
            parts.append(f"{rule}: not measured in {missing} trial{'s' if missing != 1 else ''}")
    crashes: dict[str, int] = {}
    for t in trials:
        if t.status == "failed":
            crashes[t.crash_class or "failed"] = crashes.get(t.crash_class or "failed", 0) + 1
    if crashes:
        parts.append(f"{sum(crashes.values())} failed (" + ", ".join(f"{k}" + (f" x{n}" if n > 1 else "")
                                                                      for k, n in crashes.items()) + ")")
    return "no configuration met the constraints" + (": " + ", ".join(parts) if parts else "")


# ------------------------------------------------------------------ the largest load under the SLA
def next_load(spec: SearchSpec, trials: Sequence[Trial]) -> float | None:
    """The sla strategy's next load to measure (None: the bracket is closed)."""
    sla = spec.sla
    assert sla is not None
    measured = {t.load: t.feasible for t in trials if t.load is not None}
    if sla.low not in measured:
        return sla.low
    if not measured[sla.low]:
        return None  # even the lowest load breaks the SLA
    if sla.high not in measured:
        return sla.high
    good = max(load for load, ok in measured.items() if ok)
    bad = [load for load, ok in measured.items() if not ok and load > good]
    if not bad:
        return None  # high met the SLA
    hi = min(bad)
    tolerance = sla.tolerance or (1.0 if sla.kind == "concurrency" else (sla.high - sla.low) / 64)
    if hi - good <= tolerance:
        return None
    mid = (good + hi) / 2
    if sla.kind == "concurrency":
        mid = float(int(mid))
        if mid <= good:
            return None
    return mid


def best_load(spec: SearchSpec, trials: Sequence[Trial]) -> float | None:
    """The largest load measured that met the SLA (None: not even ``low``)."""
    loads = [t.load for t in trials if t.load is not None and t.feasible]
    return max(loads) if loads else None


# ------------------------------------------------------------------ the driver
@dataclass(frozen=True, slots=True)
class Step:
    """What to run next: ``point`` in ``phase``; ``load`` for the sla strategy."""

    phase: Phase
    point: Point
    load: float | None = None


def next_step(spec: SearchSpec, trials: Sequence[Trial]) -> Step | None:
    """The next trial of the search (None: it is done). Exploring first (up to
    :func:`explore_budget`), then the re-runs of the ``confirm_top`` best feasible
    configurations; the sla strategy bisects its load instead. The optuna strategy's
    exploring steps come from its study: here only its re-runs (:func:`confirm_step`)."""
    if spec.strategy == "sla":
        load = next_load(spec, trials)
        return None if load is None else Step("explore", spec.point_at(0), load)
    if spec.strategy != "optuna" and explored(trials) < explore_budget(spec):
        order = random_order(spec) if spec.strategy == "random" else grid_order(spec)
        point = _untried(order, spec, trials)
        if point is not None:
            return Step("explore", point)
    return confirm_step(spec, trials)


def confirm_step(spec: SearchSpec, trials: Sequence[Trial]) -> Step | None:
    """The next re-run of one of the ``confirm_top`` best feasible configurations, then of
    the first trial's configuration when it was measured and is not among them (None: each has
    had its ``confirm_runs``). The winner is judged against the runner-up and the first
    trial (:func:`winner_comparisons`): on the H200 a +47 % lead over the first trial was
    'untested noise' at 4 runs vs 2, as a rank test needs more runs on each side than a
    trial gives; the re-run gives the first trial as many runs as the winner's."""
    for point, left in _reruns_left(spec, trials):
        if left:
            return Step("confirm", point)
    return None


def _reruns_left(spec: SearchSpec, trials: Sequence[Trial]) -> list[tuple[Point, int]]:
    """The configurations to re-run (:func:`confirm_step`), in order, with the re-runs each
    still has to have; [] with ``confirm_top`` 0."""
    if spec.confirm_top < 1:
        return []
    confirmed: dict[Point, int] = {}
    for t in trials:
        if t.phase == "confirm":
            confirmed[t.point] = confirmed.get(t.point, 0) + 1
    table = standings(spec, trials)
    rerun = [s.point for s in table if s.feasible][: spec.confirm_top]
    first = next((t.point for t in trials if t.phase == "explore"), None)
    # measured (within the constraints or not: on the H200 it broke the TTFT SLA by 55 ms in one
    # run, 30 ms inside it in the next), not failed
    if first is not None and first not in rerun and any(s.point == first and s.score is not None and s.crash_class is None
                                                        for s in table):
        rerun.append(first)
    return [(point, max(0, spec.confirm_runs - confirmed.get(point, 0))) for point in rerun]


def planned_trials(spec: SearchSpec) -> int:
    """How many trials the search runs when nothing fails (for an ETA): the exploring
    budget plus the re-runs (sla: the bisection's steps)."""
    if spec.strategy == "sla":
        sla = spec.sla
        assert sla is not None
        tolerance = sla.tolerance or (1.0 if sla.kind == "concurrency" else (sla.high - sla.low) / 64)
        steps, width = 2, sla.high - sla.low
        while width > tolerance:
            width /= 2
            steps += 1
        return steps
    budget = explore_budget(spec)
    if spec.confirm_top < 1:
        return budget
    reruns = min(spec.confirm_top, budget) + (1 if budget > spec.confirm_top else 0)  # + the first trial's
    return budget + reruns * spec.confirm_runs


def planned_now(spec: SearchSpec, trials: Sequence[Trial]) -> int:
    """How many trials the search runs in all, given ``trials`` so far: while exploring,
    those done plus the exploring left plus the most re-runs (:func:`planned_trials`'s
    count, less the exploring a resumed or failed-out search cannot do); once exploring
    is over, exactly what :func:`confirm_step` will still run (the first trial's
    configuration among the best, or infeasible, is not re-run twice). sla: the
    bisection's steps at most."""
    done = len(trials)
    if spec.strategy == "sla":
        return max(planned_trials(spec), done)
    budget = explore_budget(spec)
    if explored(trials) < budget:
        return max(planned_trials(spec), done + 1)
    left = sum(n for _, n in _reruns_left(spec, trials))
    return done + left  # a re-run that reorders the best can add one: counted when it does
