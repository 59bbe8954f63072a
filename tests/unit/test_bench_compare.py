"""Comparisons (optui.core.bench.compare) and the text chart (optui.core.bench.chart)."""

from __future__ import annotations

import pytest

from optui.core.bench.chart import nice_max
from optui.core.bench.compare import (
    Entry,
    Sample,
    build_rows,
    compare_values,
    family_key,
    group_entries,
    judge,
    mann_whitney_p,
    min_p,
    sample,
    sweep_series,
)
from optui.core.bench.result import BenchResult, Workload, apply_failure_threshold, comparable, requests_text


def result(out: float, ttft: float = 10.0, conc: int = 1, run: str | None = None, status: str = "ok",
           prompts: int = 32) -> BenchResult:
    r = BenchResult(tool="sglang", status=status, output_throughput_tok_s=out, max_concurrency=conc,
                    workload=Workload("sglang", "random", 128, 64, prompts, conc, float("inf")))
    r.ttft_ms["median"] = ttft
    if run:
        r.extra["run_id"] = run
    return r


def test_sample_median_and_spread():
    s = sample([100.0, 104.0, None, 96.0, float("nan")])
    assert (s.median, s.lo, s.hi, s.n) == (100.0, 96.0, 104.0, 3)
    assert s.spread_pct == pytest.approx(4.0)
    assert sample([5.0]).spread_pct is None and sample([]) == Sample()


def test_mann_whitney_exact_p():
    """Exact two-sided p of the U test: complete separation of 3 vs 3 is 2/C(6,3) = 0.10,
    of 4 vs 4 2/70; interleaved samples are far from significant; ties count half."""
    assert mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert mann_whitney_p([5, 6, 7, 8], [1, 2, 3, 4]) == pytest.approx(2 / 70)
    assert mann_whitney_p([1, 3, 5], [2, 4, 6]) == pytest.approx(0.7)
    assert mann_whitney_p([1, 1, 1], [1, 1, 1]) == 1.0
    assert mann_whitney_p([], [1.0]) == 1.0
    assert (min_p(3, 3), min_p(2, 2), min_p(1, 9)) == (pytest.approx(0.1), pytest.approx(1 / 3), pytest.approx(0.2))
    big = mann_whitney_p(list(range(60)), [x + 100 for x in range(60)])  # normal approximation
    assert big < 1e-10


@pytest.mark.parametrize("values, base, sign, verdict, pct", [
    # one run a side: the noise is unknown — never better/worse, however large the change
    ([166.0], [100.0], +1, "untested noise", 66.0),
    # one new run against three baseline runs: still untested
    ([130.0], [100.0, 101.0, 99.0], +1, "untested noise", 30.0),
    # 2 vs 2: the exact test can never reach p <= 0.10
    ([130.0, 131.0], [100.0, 101.0], +1, "untested noise", 30.0 / 100.5 * 100),
    # a same-flags repeat: overlapping runs are the same
    ([100.5, 99.0, 101.5], [100.0, 101.0, 99.5], +1, "same", 0.5),
    # a noisy change: +6 % medians but the runs overlap
    ([106.0, 92.0, 118.0], [100.0, 88.0, 111.0], +1, "same", 6.0),
    # separated but below the 2 % floor
    ([101.6, 101.5, 101.7], [100.0, 99.9, 100.1], +1, "same", 1.6),
    # a real improvement, clear of the noise; latency up is worse, down is better
    ([120.0, 118.0, 122.0], [100.0, 99.0, 101.0], +1, "better", 20.0),
    ([120.0, 118.0, 122.0], [100.0, 99.0, 101.0], -1, "worse", 20.0),
    ([80.0, 79.0, 81.0], [100.0, 99.0, 101.0], -1, "better", -20.0),
])
def test_judge(values, base, sign, verdict, pct):
    j = judge(values, base, sign)
    assert j.verdict == verdict and j.delta_pct == pytest.approx(pct)
    assert (j.n, j.base_n) == (len(values), len(base))


def test_judge_carries_its_evidence():
    j = judge([120.0, 118.0, 122.0], [100.0, 99.0, 101.0], +1)
    assert (j.n, j.base_n, j.p) == (3, 3, pytest.approx(0.1))
    assert j.spread_pct == pytest.approx(100 * 2 / 120) and j.base_spread_pct == pytest.approx(1.0)
    assert j.evidence() == "n=3 vs 3, ±1.7 % / ±1.0 %, p=0.10"
    assert j.to_json()["statistic"].startswith("median of the repeats; exact two-sided Mann-Whitney U")
    single = judge([166.0], [100.0], +1)
    assert single.p is None and single.evidence() == "n=1 vs 1"


def test_restart_spread_widens_the_noise():
    """A +5 % change separated within one instance is still the same when restarts of the
    same flags moved the level by 8 % (vllm#39903: levels shift between restarts)."""
    values, base = [105.0, 105.2, 104.8], [100.0, 100.1, 99.9]
    assert judge(values, base, +1).verdict == "better"
    j = judge(values, base, +1, restart_spread_pct=8.0)
    assert j.verdict == "same" and j.threshold_pct == 8.0 and "restarts ±4.0 %" in j.evidence()


def test_compare_values_for_the_results_table():
    assert compare_values([103, 98, 108], [100, 95, 105], +1).verdict == "inconclusive"
    assert compare_values([110], [100], +1).verdict == "untested noise"
    assert compare_values([], [1.0], 1).pct is None
    assert compare_values([1.0], [0.0], 1).pct is None


def test_a_row_is_judged_with_the_restart_spread_its_experiments_verdict_used():
    """A new user saw exp-0009 (the baseline's flags again) as `-6.4% ✗` (outside the noise)
    in the bench panel and the results view, while its verdict was `same`: restarts ±7.2 %."""
    from optui.core.bench.compare import THROUGHPUT, with_restart_spreads
    from optui.core.bench.compare import judge as judge_runs
    from optui.core.journal.experiments import Experiment, WorkloadOutcome, restart_spreads

    base = [Entry(i, result(v, run="r1"), "sweep", False, "exp-0002") for i, v in enumerate((100.0, 101.0, 99.5), 1)]
    again = [Entry(i, result(v, run="r2"), "sweep", False, "exp-0009") for i, v in enumerate((93.6, 94.0, 93.2), 4)]
    row = build_rows(group_entries(base + again))[-1]
    assert row.deltas[THROUGHPUT].verdict == "worse"  # against the repeats' noise alone
    key = row.group.workload_key
    verdict = judge_runs([93.6, 94.0, 93.2], [100.0, 101.0, 99.5], +1, restart_spread_pct=14.4)
    assert verdict.verdict == "same"
    outcome = WorkloadOutcome(key, "random", "sweep", (), {}, {}, "exp-0002", None, (), verdict)
    exp = Experiment("exp-0009", "demo", 0.0, "tui", "", (), (), (), workloads=(outcome,))
    spreads = restart_spreads([exp])
    assert spreads == {key: 14.4}
    judged = with_restart_spreads([row], spreads)[0]
    assert judged.deltas[THROUGHPUT].verdict == "inconclusive"  # ~-6.4%, as the verdict: same
    assert judged.deltas[THROUGHPUT].judgement.restart_spread_pct == 14.4
    assert judged.deltas[THROUGHPUT].pct == pytest.approx(row.deltas[THROUGHPUT].pct)
    # a workload without a measured spread, and the baseline's own row, are left as they are
    assert with_restart_spreads([row], {})[0] is row
    first = build_rows(group_entries(base + again))[0]
    assert with_restart_spreads([first], spreads)[0] is first


def test_the_baseline_flags_again_never_read_better_or_worse_in_a_table():
    """Issue 20's verifier: the baseline's flags started again and benchmarked read
    ``+2.1% ✓`` in the bench table while the experiment's verdict was ``same``: the spread it
    measured (2.1 % of the two medians' mean) was just under its change vs the baseline
    (2.1 % of the baseline's). Such a row's changes are inconclusive (``~``) whatever the
    spread; another experiment's row keeps its verdict."""
    from optui.core.bench.compare import THROUGHPUT, with_restart_spreads
    from optui.core.journal.experiments import Experiment, baseline_flags_again

    base = [Entry(i, result(v, run="r1"), "sweep", False, "exp-0002") for i, v in enumerate((100.0, 100.2, 99.8), 1)]
    again = [Entry(i, result(v, run="r2"), "sweep", False, "exp-0009") for i, v in enumerate((102.1, 102.2, 102.0), 4)]
    other = [Entry(i, result(v, run="r3"), "sweep", False, "exp-0010") for i, v in enumerate((102.1, 102.2, 102.0), 7)]
    rows = build_rows(group_entries(base + again + other))
    spreads = {rows[-1].group.workload_key: 2.08}
    assert [r.deltas[THROUGHPUT].verdict for r in with_restart_spreads(rows[1:], spreads)] == ["better", "better"]
    same = baseline_flags_again([Experiment("exp-0009", "demo", 0.0, "tui", "", (), (), (), verdict="same"),
                                 Experiment("exp-0002", "demo", 0.0, "tui", "", (), (), (), verdict="baseline", is_baseline=True),
                                 Experiment("exp-0010", "demo", 0.0, "tui", "", (), (), (), verdict="better",
                                            diff_vs_baseline=("+ --x 1",))])
    assert same == {"exp-0009"}
    judged = with_restart_spreads(rows[1:], spreads, same)
    assert [r.deltas[THROUGHPUT].verdict for r in judged] == ["inconclusive", "better"]
    assert judged[0].deltas[THROUGHPUT].pct == pytest.approx(rows[1].deltas[THROUGHPUT].pct)


def test_failed_requests_above_the_threshold_are_never_compared():
    """kill -9 of the server mid-run: 15 ok of 400 is 'degraded' with the count, not ok."""
    r = BenchResult(tool="sglang", completed=15, failed=385, output_throughput_tok_s=1130.0)
    assert not comparable(r)  # stored before the threshold existed: judged with the default 1 %
    apply_failure_threshold(r, 1.0)
    assert r.status == "degraded" and r.error == "385 of 400 requests failed (96.2 % > 1 %)"
    assert requests_text((15, 400)) == "15/400 ok"
    few = apply_failure_threshold(BenchResult(tool="sglang", completed=396, failed=4), 1.0)
    assert few.status == "ok" and comparable(few)  # exactly 1 %: within
    loose = apply_failure_threshold(BenchResult(tool="sglang", completed=90, failed=10), 15.0)
    assert loose.status == "ok" and comparable(loose)  # the preset's own threshold travels with it


def test_groups_baselines_and_deltas():
    entries = [
        Entry(1, result(100, run="a"), "b"), Entry(2, result(104, run="a"), "b"), Entry(3, result(96, run="a"), "b"),
        Entry(4, result(150, ttft=12, run="b"), "b"), Entry(5, result(151, ttft=12, run="b"), "b"),
        Entry(8, result(149, ttft=12.1, run="b"), "b"),
        Entry(6, result(0, run="c", status="failed"), "b"),
        Entry(7, result(50, prompts=64), "other"),  # another workload, no run id: a group of its own
    ]
    groups = group_entries(entries)
    assert [g.ids for g in groups] == [(1, 2, 3), (4, 5, 8), (6,), (7,)]
    rows = build_rows(groups)
    first, second, failed, other = rows
    assert first.is_baseline and first.baseline is None and first.deltas == {}
    assert first.samples["output_throughput_tok_s"].median == 100.0
    out = second.deltas["output_throughput_tok_s"]
    assert (round(out.pct, 1), out.verdict, out.good) == (50.0, "better", True)
    assert (out.judgement.n, out.judgement.base_n) == (3, 3)
    ttft = second.deltas["ttft_ms.median"]
    assert (round(ttft.pct), ttft.verdict, ttft.good) == (20, "worse", False)
    assert failed.deltas["output_throughput_tok_s"].pct is None  # a failed group has no numbers
    assert other.is_baseline  # first ok result of its own workload
    # pinning the second run makes it the baseline of the workload
    pinned = [Entry(e.id, e.result, e.bench, pinned=e.id == 5) for e in entries]
    rows = build_rows(group_entries(pinned))
    assert rows[1].is_baseline and not rows[0].is_baseline
    assert rows[0].deltas["output_throughput_tok_s"].verdict == "worse"


def test_scaling_efficiency_within_a_sweep_and_from_history():
    sweep = [Entry(i + 1, result(100 * c**0.8, conc=c, run="s"), "b") for i, c in enumerate((1, 2, 4))]
    later = Entry(9, result(300, conc=4, run="t"), "b")  # a later c=4 run: T(1) from the newest c=1 group
    rows = build_rows(group_entries([*sweep, later]))
    assert [None if r.scaling is None else round(r.scaling, 3) for r in rows] == [1.0, 0.871, 0.758, 0.75]
    assert build_rows(group_entries([Entry(1, result(100, conc=4))]))[0].scaling is None  # no T(1) known
    assert [r.group.concurrency for r in sweep_series(rows, family_key(rows[0].group.result.workload), None)] == [1, 2, 4]
    assert sweep_series(rows, family_key(rows[-1].group.result.workload), None)[-1].group.run_id == "t"  # newest per c


def test_nice_max():
    assert [nice_max(v) for v in (0, 0.3, 1, 1.01, 2.2, 7, 30, 4100)] == [1.0, 0.5, 1.0, 2.0, 2.5, 10.0, 50.0, 5000.0]
