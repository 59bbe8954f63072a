"""A flag search measured on one workload (issue 29), pure: the objective's and the
constraints' workload (``@ c=N`` / ``@ rate=R``), a trial's score from that workload's runs
only (never a pool of concurrencies), the winner test with the search's own restart-to-restart
spread, and :func:`won` (no winner where the evidence says nothing beat the runner-up), with
the noisy and the failed case."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from optui.config_file import ConfigError
from optui.core.bench.result import BenchResult, Workload
from optui.core.search.spec import Objective, parse_search_text, trial_values
from optui.core.search.strategies import failed, judge, restart_spread, winner, winner_comparisons, won

pytestmark = pytest.mark.timeout(150)

SPEC = '''
[search.s]
server = "demo"
bench = "lg"
objective = {objective!r}
constraints = {constraints}
{extra}
[search.s.flags]
"--max-running-requests" = [2, 16]
'''


def spec_of(objective: str = "output_tok_s @ c=8", constraints: str = "[]", extra: str = ""):
    return parse_search_text(SPEC.format(objective=objective, constraints=constraints, extra=extra), "optui.toml", "s")


def run(tput: float, c: int, ttft_p99: float = 100.0) -> BenchResult:
    """One benchmark run at concurrency ``c`` (the built-in generator's: rate inf)."""
    r = BenchResult(tool="optui", output_throughput_tok_s=tput, max_concurrency=c, request_rate=math.inf,
                    workload=Workload(tool="optui", max_concurrency=c, request_rate=math.inf))
    r.ttft_ms = {"mean": ttft_p99 / 2, "median": ttft_p99 / 2, "p90": ttft_p99, "p95": ttft_p99, "p99": ttft_p99}
    return r


def test_the_objective_and_each_constraint_name_their_workload():
    spec = spec_of("output_tok_s @ c=4", '["ttft_p99_ms <= 2000 @ c=1", "itl_p99_ms <= 50"]')
    goal = spec.goal
    assert (goal.goal, goal.metric, str(goal.workload), str(goal)) == ("max", "output_tok_s", "c=4", "max output_tok_s @ c=4")
    assert Objective.parse("min ttft_p99_ms @ rate=4").goal == "min" and str(Objective.parse("ttft_p99_ms @ rate=4").workload) == "rate=4"
    assert Objective.parse("ttft_p99_ms @ c=2").goal == "min"  # the metric's own direction
    assert [r.key for r in spec.rules] == ["ttft_p99_ms@c=1", "itl_p99_ms"]  # no '@': at the objective's workload
    assert [str(r) for r in spec.rules] == ["ttft_p99_ms <= 2000 @ c=1", "itl_p99_ms <= 50"]
    assert spec_of("max output_tok_s").goal.workload is None  # a one-point preset needs none


@pytest.mark.parametrize(("objective", "expected"), [
    ("output_tok_s @ q=4", "optui.toml:5: search.s.objective: expected a workload 'c=N' (concurrency) or 'rate=R'"),
    ("output_tok_s @ c=2.5", "optui.toml:5: search.s.objective: 'c=2.5': a concurrency is a whole number"),
    ("output_tok_s @ c=0", "optui.toml:5: search.s.objective: 'c=0': a workload's concurrency or rate is above 0"),
    ("output_tok_s", "optui.toml:5: search.s.objective: expected 'max METRIC' or 'min METRIC' (optionally '@ c=N'"),
])
def test_a_bad_workload_names_file_line_and_field(objective, expected):
    with pytest.raises(ConfigError) as exc:
        spec_of(objective)
    assert str(exc.value).startswith(expected), str(exc.value)


def test_the_sla_strategy_takes_no_workload():
    with pytest.raises(ConfigError, match="strategy 'sla' varies the load itself"):
        parse_search_text('[search.s]\nserver = "d"\nbench = "b"\nstrategy = "sla"\nobjective = "output_tok_s @ c=4"\n'
                          'constraints = ["ttft_p99_ms <= 60"]\nsla = { kind = "concurrency", low = 1, high = 16 }\n',
                          "optui.toml", "s")


def test_a_trials_score_is_its_workloads_runs_never_a_pool_of_concurrencies():
    """The issue's campaign: each trial's score was the median of all 12 runs across c=1…8
    (1239 … 199 tok/s); at c=8 only it is the c=8 runs' median."""
    results = [run(199.0, 1), run(205.0, 1), run(201.0, 1), run(1239.0, 8, 900.0), run(1190.0, 8, 950.0),
               run(1210.0, 8, 920.0), run(420.0, 2), run(410.0, 2), run(400.0, 2)]
    got = trial_values(spec_of().goal, results)
    assert got.error == "" and got.run_scores == (1239.0, 1190.0, 1210.0)
    assert got.values["output_tok_s"] == 1210.0 and got.values["ttft_p99_ms"] == 920.0
    assert got.values["output_tok_s@c=1"] == 201.0 and got.values["ttft_p99_ms@c=2"] == 100.0
    # its constraints per workload
    spec = spec_of(constraints='["ttft_p99_ms <= 500 @ c=1", "ttft_p99_ms <= 800"]')
    trial = judge(spec, spec.point_at(0), got.values, number=1)
    assert trial.status == "violates" and trial.violated == ("ttft_p99_ms <= 800",), trial
    assert trial.message == "breaks ttft_p99_ms <= 800 (measured 920)"
    # the failed cases: the workload was not measured; no workload named over several: no score, said why
    missing = trial_values(Objective.parse("output_tok_s @ c=4"), results)
    assert missing.run_scores == () and missing.error == "no run at the objective's workload c=4 (measured: c=1, c=8, c=2)"
    pooled = trial_values(Objective.parse("max output_tok_s"), results)
    assert pooled.run_scores == () and pooled.error.startswith("the benchmark measured 3 workloads (c=1, c=8, c=2): ")
    rate = trial_values(Objective.parse("output_tok_s @ rate=inf"), results)  # every point's rate: still a pool
    assert rate.run_scores == () and rate.error == "the runs at rate=inf span c=1, c=2, c=8: name one of them in the objective"
    single = trial_values(Objective.parse("max output_tok_s"), results[3:6])
    assert single.error == "" and single.values["output_tok_s"] == 1210.0


def trial(spec, n, point, runs, phase="explore"):
    return replace(judge(spec, point, {"output_tok_s": sorted(runs)[len(runs) // 2]}, number=n, phase=phase),
                   run_scores=tuple(runs))


def test_the_winner_test_uses_the_searchs_own_restart_spread():
    """A +7 % lead with tight runs (p < 0.1) is 'better' against the 2 % floor; but the
    winner's own restarts moved its median by 12 %: inside that, it is 'same'."""
    spec = spec_of()
    a, b = spec.point_at(0), spec.point_at(1)
    tight = [trial(spec, 1, a, (100.0, 100.5, 99.5)), trial(spec, 2, b, (107.0, 107.5, 106.5))]
    assert restart_spread(spec, tight) is None  # each measured once: no restart spread
    (comp,) = winner_comparisons(spec, tight)
    assert comp.judgement.verdict == "better" and won((comp,))
    # the same configurations, each restarted again: b's second start measured 12 % lower
    noisy = [*tight, trial(spec, 3, b, (95.0, 95.5, 94.5), "confirm"), trial(spec, 4, a, (100.0, 100.2, 99.8), "confirm")]
    spread = restart_spread(spec, noisy)
    assert spread is not None and 11.0 < spread < 13.0, spread
    comps = winner_comparisons(spec, noisy)
    assert [c.judgement.verdict for c in comps] == ["same"] and comps[0].judgement.restart_spread_pct == spread
    assert comps[0].judgement.threshold_pct == spread and "restarts ±" in comps[0].judgement.evidence()
    assert not won(comps)  # its own evidence says nothing beat the runner-up: no winner
    # the journal's spread for the workload is used when larger
    (journal,) = winner_comparisons(spec, tight, restart_spread_pct=20.0)
    assert journal.judgement.verdict == "same" and journal.judgement.restart_spread_pct == 20.0


def test_won_in_the_clear_noisy_and_failed_cases():
    spec = spec_of()
    a, b = spec.point_at(0), spec.point_at(1)
    clear = [trial(spec, 1, a, (20.0, 21.0, 20.5)), trial(spec, 2, b, (140.0, 141.0, 140.5))]
    assert won(winner_comparisons(spec, clear)) and winner(spec, clear).point == b
    noisy = [trial(spec, 1, a, (30.0, 25.0, 33.0)), trial(spec, 2, b, (28.0, 44.0, 36.0))]
    assert [c.judgement.verdict for c in winner_comparisons(spec, noisy)] == ["same"]
    assert not won(winner_comparisons(spec, noisy))
    untested = [trial(spec, 1, a, (30.0,)), trial(spec, 2, b, (60.0,))]  # one run a side: nothing tested
    assert not won(winner_comparisons(spec, untested))
    # the other configuration failed (oom): the only one measured wins; none measured: no winner at all
    crashed = [failed(a, "oom", "did not start", number=1), trial(spec, 2, b, (60.0, 61.0, 59.0))]
    assert winner_comparisons(spec, crashed) == () and won(()) and winner(spec, crashed).point == b
    assert winner(spec, [failed(a, "oom", "x", number=1), failed(b, "oom", "x", number=2)]) is None
