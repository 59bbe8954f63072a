"""Comparisons (optui.core.bench_compare) and the text chart (optui.core.bench_chart)."""

from __future__ import annotations

import pytest

from optui.core.bench_chart import bar, bar_chart, nice_max
from optui.core.bench_compare import (
    Entry,
    Sample,
    build_rows,
    compare,
    family_key,
    group_entries,
    sample,
    sweep_series,
)
from optui.core.bench_result import BenchResult, Workload


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


@pytest.mark.parametrize("cur, base, sign, pct, verdict, good", [
    # single runs: the noise is unknown, so no verdict — but a coloured delta
    (Sample(110, 110, 110, 1), Sample(100, 100, 100, 1), +1, 10.0, None, True),
    # repeats whose ranges overlap: inside the noise
    (Sample(103, 98, 108, 3), Sample(100, 95, 105, 3), +1, 3.0, "inconclusive", True),
    # a single new run inside the baseline's spread is inconclusive too
    (Sample(102, 102, 102, 1), Sample(100, 97, 103, 3), +1, 2.0, "inconclusive", True),
    # clear of the noise: better / worse by direction (latency up is bad)
    (Sample(120, 118, 122, 3), Sample(100, 99, 101, 3), +1, 20.0, "better", True),
    (Sample(120, 118, 122, 3), Sample(100, 99, 101, 3), -1, 20.0, "worse", False),
    (Sample(80, 79, 81, 3), Sample(100, 99, 101, 3), -1, -20.0, "better", True),
])
def test_compare(cur, base, sign, pct, verdict, good):
    d = compare(cur, base, sign)
    assert (round(d.pct, 6), d.verdict, d.good) == (pct, verdict, good)


def test_compare_without_numbers():
    assert compare(Sample(), Sample(1, 1, 1, 1), 1).pct is None
    assert compare(Sample(1, 1, 1, 1), Sample(0, 0, 0, 1), 1).pct is None


def test_groups_baselines_and_deltas():
    entries = [
        Entry(1, result(100, run="a"), "b"), Entry(2, result(104, run="a"), "b"), Entry(3, result(96, run="a"), "b"),
        Entry(4, result(150, ttft=12, run="b"), "b"), Entry(5, result(151, ttft=12, run="b"), "b"),
        Entry(6, result(0, run="c", status="failed"), "b"),
        Entry(7, result(50, prompts=64), "other"),  # another workload, no run id: a group of its own
    ]
    groups = group_entries(entries)
    assert [g.ids for g in groups] == [(1, 2, 3), (4, 5), (6,), (7,)]
    rows = build_rows(groups)
    first, second, failed, other = rows
    assert first.is_baseline and first.baseline is None and first.deltas == {}
    assert first.samples["output_throughput_tok_s"].median == 100.0
    out = second.deltas["output_throughput_tok_s"]
    assert (round(out.pct, 1), out.verdict, out.good) == (50.5, "better", True)
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
    assert [r.group.concurrency for r in sweep_series(rows, family_key(rows[0].group.result.workload))] == [1, 2, 4]
    assert sweep_series(rows, family_key(rows[-1].group.result.workload))[-1].group.run_id == "t"  # newest per c


def test_nice_max_and_bars():
    assert [nice_max(v) for v in (0, 0.3, 1, 1.01, 2.2, 7, 30, 4100)] == [1.0, 0.5, 1.0, 2.0, 2.5, 10.0, 50.0, 5000.0]
    assert bar(50, 100, 10) == "█████     "
    assert bar(1, 100, 10) == "▏         "
    assert bar(None, 100, 4) == "    " and bar(200, 100, 4) == "████"
    chart = bar_chart("out tok/s", [("c=1", 95.0), ("c=2", 180.0), ("c=4", None)], width=20)
    assert chart.scale == 200.0
    assert [len(r.bar) for r in chart.rows] == [20, 20, 20]
    assert chart.rows[1].bar == "█" * 18 + "  " and chart.rows[2].value is None
