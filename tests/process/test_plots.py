"""Plots that read as plots (issue 35; issue 34: "the Pareto view has no axis ticks or
labels"): the results screen's Pareto view drawn by plotext with named axes and their units,
ticks, a legend and the pinned baseline marked, at 200x50 and in a 60x40 side pane
(snapshots, and the text checked); the sweep's out tok/s and TTFT against concurrency."""

from __future__ import annotations

import re

import pytest

from optui.core.search.spec import parse_search_text
from optui.core.search.strategies import failed, judge
from tests.helpers.snapshot_campaign import make_app, settle

pytestmark = pytest.mark.usefixtures("snapshot_clock")

SPEC = '''
server = "qwen"
bench = "c64"
objective = "max output_tok_s"
constraints = ["ttft_p99_ms <= 3000"]
[flags]
"--max-running-requests" = [16, 32, 64, 128, 256]
'''
#: (TTFT p99 ms, out tok/s) per configuration; 256 failed (oom)
MEASURED = {16: (800.0, 1500.0), 32: (1200.0, 2600.0), 64: (1900.0, 2400.0), 128: (3600.0, 3900.0)}


def search_data() -> dict:
    spec = parse_search_text(SPEC, "s.toml", None)
    trials = []
    for n in range(5):
        point = spec.point_at(n)
        mrr = int(dict(point)["--max-running-requests"])
        if mrr in MEASURED:
            x, y = MEASURED[mrr]
            trials.append(judge(spec, point, {"ttft_p99_ms": x, "output_tok_s": y}, number=n + 1))
        else:
            trials.append(failed(point, "oom", "did not start", number=n + 1))
    return {"search_id": "mrr.1", "status": "done", "spec": spec.model_dump(mode="json"),
            "trials": [t.to_json() for t in trials]}


def pareto_opened():
    async def run_before(pilot) -> None:
        from optui.ui.screens.results import ResultsScreen

        app = pilot.app
        await settle(pilot)

        async def search() -> dict:
            return search_data()

        app.push_screen(ResultsScreen(app.client.result_rows, None, search=search))
        await pilot.pause(0.3)
        await pilot.press("p")
        await pilot.pause(0.5)
        app.clear_notifications()
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", [(200, 50), (60, 40)])
def test_pareto_view_snapshot(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=pareto_opened())


@pytest.mark.parametrize("size", [(200, 50), (60, 40)])
async def test_pareto_view_has_named_axes_with_units_ticks_and_the_baseline(tmp_path, size):
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await pareto_opened()(pilot)
        text = str(app.screen.query_one("#results-chart").render())
        lines = text.split("\n")
        assert "search mrr.1 (done): Pareto view, out tok/s against TTFT p99; 1 failed, not drawn" in lines[0]
        assert lines[1].strip() == "out tok/s ↑"  # the y axis: name and unit
        assert any(line.strip().startswith("TTFT p99 (ms) →") for line in lines)  # the x axis
        ticks = next(line for line in lines if re.fullmatch(r"\s*0\s+1k\s+2k\s+3k\s+4k\s+5k\s*", line))
        assert ticks  # x ticks at round values (0 … 5,000 ms)
        assert re.search(r"^\s*5k┤", text, re.M) and re.search(r"^\s*0┤", text, re.M)  # y ticks 0 … 5,000 tok/s
        legend = "● Pareto front  ○ feasible  ✗ infeasible  ◆ baseline"
        assert legend in text
        plot = text[text.index("out tok/s ↑"):text.index(legend)]
        assert plot.count("●") == 2 and plot.count("○") == 1 and plot.count("✗") == 1 and plot.count("◆") == 1
        assert max(len(line) for line in plot.split("\n")) <= size[0] - 2  # the plot fits the pane (padding 1 a side)
        assert len(legend) <= 58
        await pilot.press("escape")


def sweep_rows():
    """exp-0001 (the baseline) and exp-0002 swept at concurrency 1, 2, 4."""
    from optui.core.bench.compare import Entry, build_rows, group_entries
    from tests.process.test_which_config import _sweep_point

    entries = [Entry(n + 1, _sweep_point(tput, conc, run), "sweep", experiment=exp) for n, (tput, conc, run, exp) in enumerate([
        (100.0, 1, "a", "exp-0001"), (180.0, 2, "a", "exp-0001"), (300.0, 4, "a", "exp-0001"),
        (120.0, 1, "b", "exp-0002"), (230.0, 2, "b", "exp-0002"), (390.0, 4, "b", "exp-0002")])]
    return build_rows(group_entries(entries))


def sweep_app():
    from textual.widgets import Static

    from tests.unit.test_panel_values import PanelApp

    return PanelApp(Static("dashboard"))


async def open_sweep(pilot) -> None:
    from optui.ui.screens.results import ResultsScreen

    rows = sweep_rows()
    pilot.app.push_screen(ResultsScreen(lambda: rows))
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", [(120, 40), (60, 40)])
async def test_a_sweep_is_plotted_against_concurrency_beside_its_baseline(size):
    app = sweep_app()
    async with app.run_test(size=size) as pilot:
        await open_sweep(pilot)
        text = str(app.screen.query_one("#results-chart").render())
        assert "on exp-0002 — newest result per concurrency of this configuration, ◆ the baseline's (exp-0001)" in text
        lines = text.split("\n")
        heads = next(line for line in lines if "out tok/s ↑" in line)
        assert "TTFT p50 (ms) ↑" in heads  # two plots side by side, even in a 60-column pane
        assert any(re.fullmatch(r"\s*1\s+2\s+4\s+1\s+2\s+4\s*", line) for line in lines)  # a tick per concurrency
        assert any(re.search(r"^\s*500┤.*│\s+100┤", line) for line in lines)  # y ticks: 0 … 500 tok/s, 0 … 100 ms
        assert text.count("concurrency (requests) →") == 2 and text.count("◆ baseline  ● this config") == 2
        assert "c=4 390.0" in text  # the values measured
        plot = text[text.index(heads):text.index("◆ baseline  ● this config")]
        assert plot.count("●") == 3 + 3 and plot.count("◆") == 2  # out tok/s: 3 + 2 (c=1 shares a cell); TTFT: 3 on top
        assert max(len(line) for line in lines[1:]) <= size[0] - 2


def test_sweep_snapshot_in_a_side_pane(snap_compare):
    assert snap_compare(sweep_app(), terminal_size=(60, 40), run_before=open_sweep)


async def test_one_concurrency_shows_the_configurations_runs_over_time_beside_the_baselines():
    from dataclasses import replace

    from optui.core.bench.compare import Entry, build_rows, group_entries
    from optui.ui.screens.results import ResultsScreen
    from tests.process.test_which_config import _sweep_point

    t0 = 1_790_000_000.0  # 2026-09-21 20:53:20 UTC
    runs = [(100.0, "a", "exp-0001", 0), (104.0, "b", "exp-0001", 300), (150.0, "c", "exp-0002", 900),
            (160.0, "d", "exp-0002", 1200), (155.0, "e", "exp-0002", 1500)]
    entries = [replace(Entry(n + 1, _sweep_point(tput, 4, run), "c4", experiment=exp), ts=t0 + dt)
               for n, (tput, run, exp, dt) in enumerate(runs)]
    rows = build_rows(group_entries(entries))
    app = sweep_app()
    async with app.run_test(size=(100, 40)) as pilot:
        pilot.app.push_screen(ResultsScreen(lambda: rows))
        await pilot.pause(0.3)
        text = str(app.screen.query_one("#results-chart").render())
        assert "on exp-0002: one concurrency measured" in text and "its runs over time:" in text, text
        assert "out tok/s ↑" in text and "time stored (local) →" in text
        ticks = re.search(r"^\s*(\d\d:\d\d)(\s+\d\d:\d\d){5}\s*$", text, re.M)  # clock ticks, 10 min apart
        assert ticks, text
        plot = text[text.index("out tok/s ↑"):text.index("◆ baseline  ● this config")]
        assert plot.count("●") == 3 and plot.count("◆") == 1  # exp-0002's 3 runs; the baseline group's run
