"""One verdict per workload, one rule over them (issue 29): an experiment measured at
several concurrencies is judged at each against the baseline's runs of that workload, and
its overall verdict is :func:`~optui.core.bench.compare.overall_verdict` of those (better:
some better, none worse; worse; mixed: both; same: all same; untested noise). The verdict,
the evidence, ``best_experiment``/``best_by_workload`` and ``journal experiments --json``
all read it. Real SQLite journal; the noisy, the failed and the mixed case included."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optui.adapters.journal import Journal
from optui.core.bench.compare import MIXED, UNTESTED_NOISE, overall_verdict
from optui.core.journal.experiments import (
    best_by_workload,
    best_experiment,
    experiment_verdict,
    sort_experiments,
    verdict_evidence,
    workload_summaries,
)
from optui.session.journal.export import load_experiments
from tests.helpers.campaign import WL, CampaignWriter, flags, result

C1 = replace(WL, max_concurrency=1)
C16 = WL  # concurrency 16


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "optui.db")
    yield j
    j.close()


def by_id(experiments):
    return {x.id: x for x in experiments}


def point(w: CampaignWriter, exp: str, c1: tuple[float, ...], c16: tuple[float, ...], **kw) -> None:
    """One benchmark of two points (c=1 then c=16) with the given per-run out tok/s."""
    w.bench(exp, *(result(v, wl=C1, **kw) for v in c1), *(result(v, wl=C16, **kw) for v in c16), name="sweep")


def test_the_rule():
    assert overall_verdict(["better", "same"]) == "better"
    assert overall_verdict(["better", UNTESTED_NOISE]) == "better"  # none worse
    assert overall_verdict(["worse", "same"]) == "worse"
    assert overall_verdict(["same", "better", "worse"]) == MIXED
    assert overall_verdict(["same", "same"]) == "same"
    assert overall_verdict(["same", UNTESTED_NOISE]) == UNTESTED_NOISE
    assert overall_verdict([None, "same"]) == "same"  # a workload without a baseline says nothing
    assert overall_verdict([]) == overall_verdict([None]) == "untested"
    with pytest.raises(ValueError, match="not a workload verdict: 'inconclusive'"):
        overall_verdict(["inconclusive"])


def _sweep_campaign(journal) -> dict[str, str]:
    w = CampaignWriter(journal)
    base = w.restart(flags(max_running_requests=2), reason="autostart")
    point(w, base, (100.0, 101.0, 99.0), (200.0, 202.0, 198.0))
    helps_high = w.restart(flags(max_running_requests=16))  # c=1 unchanged, c=16 much faster
    point(w, helps_high, (100.5, 99.5, 100.2), (600.0, 610.0, 590.0))
    mixed = w.restart(flags(max_running_requests=16, disable_cuda_graph=True))  # c=1 slower, c=16 faster
    point(w, mixed, (50.0, 51.0, 49.0), (700.0, 705.0, 695.0))
    noisy = w.restart(flags(max_running_requests=8))  # runs overlapping the baseline's at both points
    point(w, noisy, (80.0, 120.0, 100.0), (150.0, 250.0, 203.0))
    failed = w.restart(flags(max_running_requests=64))
    point(w, failed, (100.0, 100.0, 100.0), (900.0, 900.0, 900.0), status="failed")  # never compared
    one = w.restart(flags(max_running_requests=32))  # one run a point: too few to judge
    point(w, one, (100.0,), (800.0,))
    return {"base": base, "high": helps_high, "mixed": mixed, "noisy": noisy, "failed": failed, "one": one}


def test_each_workload_is_judged_and_the_rule_decides(journal):
    ids = _sweep_campaign(journal)
    xs = by_id(load_experiments(journal))
    high, mixed, noisy, failed, one = (xs[ids[k]] for k in ("high", "mixed", "noisy", "failed", "one"))
    # c=1 (the primary workload: measured first) is the same, c=16 better: better overall
    # (today's code read the primary only: "same")
    assert high.primary.key == C1.key()
    assert high.verdict == "better", [s["verdict"] for s in workload_summaries(high)]
    sums = {s["concurrency"]: s for s in workload_summaries(high)}
    assert (sums[1]["verdict"], sums[16]["verdict"]) == ("same", "better")
    assert sums[16]["delta_pct"] == pytest.approx(200.0) and sums[16]["evidence"]["p"] == pytest.approx(0.1)
    assert sums[16]["point"] == "c=16" and sums[16]["request_rate"] is None and sums[16]["baseline"] == ids["base"]
    assert sums[16]["evidence_text"].startswith("n=3 vs 3, ") and sums[16]["runs"] == "3/3 runs, 192/192 ok"
    # helps one point and hurts another: mixed, and the evidence names both
    assert mixed.verdict == MIXED
    assert [s["verdict"] for s in workload_summaries(mixed)] == ["worse", "better"]
    text = verdict_evidence(mixed)
    assert text.startswith("c=1 worse -50.0 % (n=3 vs 3,") and "; c=16 better +250.0 % (n=3 vs 3," in text, text
    assert text.endswith(f", vs {ids['base']}") and text.count("vs exp-") == 1, text
    # noisy: overlapping runs at both points are the same, whatever the medians say
    assert noisy.verdict == "same" and {s["verdict"] for s in workload_summaries(noisy)} == {"same"}
    # failed runs are never compared: nothing to judge
    assert failed.verdict == "untested" and {s["verdict"] for s in workload_summaries(failed)} == {"untested"}
    assert all(s["delta_pct"] is None and s["evidence"] is None for s in workload_summaries(failed))
    # one run a point: a number, never a verdict (+300 % at c=16 included)
    assert one.verdict == UNTESTED_NOISE
    assert {s["verdict"] for s in workload_summaries(one)} == {UNTESTED_NOISE}
    # the baseline's own workloads
    assert {s["verdict"] for s in workload_summaries(xs[ids["base"]])} == {"baseline"}
    # a verdict over some workloads only (one preset's, one run's)
    assert experiment_verdict(mixed, {C16.key()}) == "better" and experiment_verdict(mixed, {C1.key()}) == "worse"


def test_best_overall_and_per_workload(journal):
    ids = _sweep_campaign(journal)
    xs = load_experiments(journal)
    # mixed loses at c=1: never the best overall, though its c=16 gain is the largest
    assert best_experiment(xs, "qwen").id == ids["high"]
    best = best_by_workload(xs, "qwen")
    assert best[C1.key()][0].id == ids["base"]  # nothing beat the baseline at c=1
    assert best[C16.key()][0].id == ids["mixed"] and best[C16.key()][1].key == C16.key()
    # mixed sorts after better and before the baseline
    order = [x.verdict for x in sort_experiments(xs, "verdict")]
    assert order.index(MIXED) == order.index("better") + 1 and order.index("baseline") == order.index(MIXED) + 1


def test_journal_experiments_json_has_each_workloads_verdict(journal, tmp_path):
    from optui.cli.journal import experiment_json

    ids = _sweep_campaign(journal)
    xs = by_id(load_experiments(journal))
    data = experiment_json(xs[ids["mixed"]])
    assert data["verdict"] == MIXED
    assert [(w["point"], w["verdict"]) for w in data["workloads"]] == [("c=1", "worse"), ("c=16", "better")]
    assert data["workloads"][1]["delta_pct"] == pytest.approx(250.0)


REPORT_CONFIG = '''
[hosts.local]
gpu_source = "none"

[servers.qwen]
url = "http://127.0.0.1:30000"
kind = "sglang"
argv = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
'''


def test_report_names_each_workloads_winner_and_the_runner_up(tmp_path):
    from optui.config import load_config
    from optui.core.journal.report import render_markdown
    from optui.session.journal.export import report_input

    cfg = tmp_path / "optui.toml"
    cfg.write_text(REPORT_CONFIG)
    loaded = load_config(cfg)
    j = Journal(loaded.journal_path)
    try:
        ids = _sweep_campaign(j)
        md = render_markdown(report_input(j, loaded, "md"))
    finally:
        j.close()
    summary = md.split("## Summary")[1].split("\n## ")[0]
    assert "1 better, 1 mixed, 1 same" in summary, summary
    best = md.split("## Best configuration")[1].split("\n## ")[0]
    # the best overall, with each workload's verdict (never c=1's -0.1 % alone as the headline)
    assert f"**qwen: {ids['high']}** (better vs baseline {ids['base']}: c=1 same " in best, best
    # hand-made experiments tested against the runner-up on the same workload
    assert f"Tested against the runner-up on random 256/96 x64 c16: vs runner-up {ids['mixed']}: worse -14.3 %" in best, best
    # the per-workload winners differ: each named, with its launch command
    assert (f"The per-workload winners differ: best at c=1: {ids['base']} (the baseline; not separable from "
            in best), best
    assert f"best at c=16: {ids['mixed']} (+250.0% out tok/s; vs runner-up {ids['high']}: better +16.7 %" in best, best
    assert best.count("```bash") == 3 and "--disable-cuda-graph" in best, best


def test_one_spread_notation_and_the_threshold_that_decided():
    """The evidence said ``restarts ±3.1 %`` while the threshold applied was 6.12 % (half the
    range in the text, the whole in the JSON): every output writes ± half the range and names
    the threshold."""
    from optui.core.bench.compare import SPREAD_NOTATION, judge

    j = judge([104.0, 104.5, 105.0], [100.0, 100.5, 99.5], +1, restart_spread_pct=6.12)
    assert j.verdict == "same" and j.threshold_pct == pytest.approx(6.12)  # +4.0 % inside the restarts' range
    assert j.evidence().endswith("p=0.10, restarts ±3.1 %, threshold 6.1 %"), j.evidence()
    assert j.evidence(compact=True).endswith("p=0.10, restarts |Δ|>6.1 %")  # a table's cell
    data = j.to_json()
    assert data["restart_spread_pct"] == pytest.approx(3.06) and data["threshold_pct"] == pytest.approx(6.12)
    assert data["spread"] == SPREAD_NOTATION and data["spread_pct"] == pytest.approx(100 * 0.5 / 104.5)


def test_table_marks_are_the_workloads_verdicts(journal):
    """The bench table and the results view marked each run against the workload's first run
    (every run of one here: ``?+200.0%``, untested noise, where the experiment was better at
    c=16): each row's change is now its experiment's verdict on that workload against the
    baseline's runs, with its evidence (n, p, threshold); the noisy stays inconclusive, the
    failed is never compared, the baseline's own runs are baseline rows."""
    from optui.core.bench.compare import THROUGHPUT, Entry, build_rows, group_entries
    from optui.core.journal.experiments import with_verdicts

    ids = _sweep_campaign(journal)
    xs = load_experiments(journal)
    entries = [Entry(r.id, r.result, r.bench, r.baseline, r.experiment) for r in journal.results(limit=None)]
    rows = with_verdicts(build_rows(group_entries(entries)), xs)
    marks: dict[tuple[str | None, int | None], set] = {}
    for row in rows:
        d = row.deltas.get(THROUGHPUT)
        verdict = "baseline" if row.is_baseline else (d.verdict if d is not None else None)
        marks.setdefault((row.group.experiment, row.group.concurrency), set()).add(verdict)
    assert marks[(ids["base"], 1)] == marks[(ids["base"], 16)] == {"baseline"}
    assert marks[(ids["high"], 1)] == {"inconclusive"} and marks[(ids["high"], 16)] == {"better"}
    assert marks[(ids["mixed"], 1)] == {"worse"} and marks[(ids["mixed"], 16)] == {"better"}
    assert marks[(ids["noisy"], 1)] == marks[(ids["noisy"], 16)] == {"inconclusive"}
    assert marks[(ids["one"], 16)] == {"untested noise"}
    assert marks[(ids["failed"], 16)] == {None}  # failed runs: no delta at all
    high16 = next(r for r in rows if r.group.experiment == ids["high"] and r.group.concurrency == 16)
    j = high16.deltas[THROUGHPUT].judgement
    assert (j.n, j.base_n, j.p, j.delta_pct) == (3, 3, pytest.approx(0.1), pytest.approx(200.0))


async def test_results_view_shows_the_rows_verdict_and_the_runner_up_on_demand(tmp_path):
    """The results view's ✓ ✗ ? are the workload's verdicts: the highlighted row says which,
    with its evidence (n, p, threshold, baseline) and its test against the runner-up, in a 60-column pane too."""
    from optui.config import load_config
    from tests.process.test_journal_view import CONFIG

    cfg = tmp_path / "optui.toml"
    cfg.write_text(CONFIG)
    loaded = load_config(cfg)
    j = Journal(loaded.journal_path)
    ids = _sweep_campaign(j)
    j.close()
    for size in ((200, 50), (60, 40)):
        await _results_view_verdict(loaded, ids, size)


async def _results_view_verdict(loaded, ids: dict[str, str], size: tuple[int, int]) -> None:
    from optui.session import Session
    from optui.ui.app import OptuiApp
    from tests.process.test_app_flows import wait_for

    app = OptuiApp(Session(loaded))
    async with app.run_test(size=size) as pilot:
        await pilot.press("v")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ResultsScreen")
        screen = app.screen
        table = screen.query_one("#results-table")

        def chart() -> str:
            return str(screen.query_one("#results-chart").render())

        await wait_for(pilot, lambda: table.row_count > 0 and "verdict c=" in chart(), what=chart)
        wanted = next(i for i, r in enumerate(screen._rows)
                      if r.group.experiment == ids["mixed"] and r.group.concurrency == 1)
        table.move_cursor(row=wanted)
        await wait_for(pilot, lambda: f"verdict c=1 on {ids['mixed']}: worse -50.0 % out tok/s (n=3 vs 3, " in chart(),
                       what=chart)
        text = " ".join(chart().split())
        assert f"p=0.10, vs {ids['base']}); vs runner-up " in text, text
        await pilot.press("escape")
