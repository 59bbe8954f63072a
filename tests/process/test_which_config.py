"""Which configuration produced this number (issue 20, CONFIG): results compared only with
what they can be compared with, listen-only flags never an experiment's change, the CLI's
experiments table aligned. Real SQLite journals (tests/helpers/campaign.py), the real CLI
as a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from optui.adapters.journal import Journal
from optui.core.bench.result import BenchResult
from optui.core.journal.experiments import verdict_evidence
from optui.demo.campaign import write_demo_config
from optui.session.journal.export import load_experiments
from tests.helpers.campaign import WL, CampaignWriter, flags, result
from tests.helpers.demo import TEST_SPEED, free_port, subprocess_env

pytestmark = pytest.mark.timeout(120)

NO_BASELINE = "no baseline for this workload"
WL_OTHER = replace(WL, max_concurrency=1)


def optui(cfg: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m optui -c CFG ARGS`` (stdin closed)."""
    return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=90, env=subprocess_env())


@pytest.fixture
def campaign(tmp_path):
    """A demo campaign's config (no server started) and its journal, written directly."""
    cfg = write_demo_config(tmp_path, port=free_port())
    (tmp_path / ".optui").mkdir()
    j = Journal(tmp_path / ".optui" / "optui.db")
    yield cfg, j
    j.close()


def by_id(experiments):
    return {x.id: x for x in experiments}


def test_a_workload_only_one_experiment_ran_has_no_baseline(campaign):
    """Its results were compared with themselves: ``+0.0 %`` (issue 20: ``+0.0% same``)."""
    cfg, j = campaign
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    big = w.restart(flags(max_running_requests=64))
    w.bench(big, *(result(v, wl=WL_OTHER) for v in (300.0, 301.0, 299.0)), name="c1")
    x = by_id(load_experiments(j))[big]
    assert x.primary.base_values is None and x.primary.base_experiment is None
    assert x.primary_delta.rel_pct is None and x.verdict == "untested"
    assert verdict_evidence(x) == NO_BASELINE
    row = next(line for line in optui(cfg, "journal", "experiments").stdout.splitlines() if line.startswith(big))
    assert NO_BASELINE in row and "+0.0%" not in row
    assert verdict_evidence(by_id(load_experiments(j))[base]) == ""  # the baseline itself: nothing to say


def test_a_new_port_is_never_an_experiments_change(campaign):
    """``~ --port: 39405 → 51035`` was credited to every experiment after a demo moved port."""
    cfg, j = campaign
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    moved = w.restart(flags(port=51035, host="0.0.0.0"), reason="autostart")
    w.bench(moved, result(1003.0), result(1008.0), result(1001.0))
    big = w.restart(flags(port=51035, max_running_requests=64))
    xs = by_id(load_experiments(j))
    assert xs[moved].diff_prev == () and xs[moved].diff_vs_baseline == () and xs[moved].verdict == "same"
    assert xs[big].diff_vs_baseline == ("~ --max-running-requests: 16 → 64",)
    assert xs[big].diff_prev == ("~ --max-running-requests: 16 → 64",)
    started = j.events(types=["experiment.started"], experiment=moved)[0]
    assert started.data["diff"] == []
    table = optui(cfg, "journal", "experiments").stdout
    assert "--port" not in table and "--host" not in table


def test_an_autostart_on_another_port_continues_the_experiment(tmp_path):
    """A demo start that had to take a new port starts the same configuration: the session
    continues its experiment (a new port used to open a new one, listed as a change)."""
    from tests.process.test_cli_headless import kill_demo_server

    cfg = write_demo_config(tmp_path, port=free_port(), speed=TEST_SPEED)
    try:
        first = optui(cfg, "restart", "demo", "--reason", "autostart", "--json")
        assert first.returncode == 0, first.stderr
        kill_demo_server(cfg)
        port = free_port()
        write_demo_config(tmp_path, port=port, speed=TEST_SPEED)
        again = optui(cfg, "restart", "demo", "--reason", "autostart", "--set", f"--port={port}", "--json")
        assert again.returncode == 0, again.stderr
        assert json.loads(first.stdout)["experiment"] == json.loads(again.stdout)["experiment"] == "exp-0001"
    finally:
        kill_demo_server(cfg)


def test_the_cli_experiments_table_keeps_its_columns_apart(campaign):
    """Every cell starts under its header, two spaces after the widest cell before it (a
    47-character evidence ran into the change column)."""
    cfg, j = campaign
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1100.0), result(900.0))
    big = w.restart(flags(max_running_requests=64))
    w.bench(big, result(1300.0), result(1310.0), result(1290.0))
    one = w.restart(flags(max_running_requests=128))
    w.bench(one, result(2600.0))
    j.append("verdict", "qwen", {"decision": "inconclusive", "reason": "one run"}, experiment=one)
    lines = optui(cfg, "journal", "experiments").stdout.splitlines()
    header, rows = lines[0], [line for line in lines if line.startswith("exp-")]
    assert len(rows) == 3
    columns = ("outcome", "verdict", "evidence", "change vs baseline")
    starts = [header.index(name) for name in columns]
    for row in rows:
        for start in starts:
            assert row[start - 2:start] == "  " and row[start] != " ", (row, start)
    assert rows[2][starts[1]:].startswith("untested noise/inconclusive  ")
    assert rows[1][starts[3]:] == "~ --max-running-requests: 16 → 64"


def test_the_launch_line_carries_the_environment_that_decides_results():
    from optui.core.journal.report import decisive_env, launch_line

    env = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_DISABLE": "1", "VLLM_API_KEY": "s3cret", "HOME": "/root",
           "SGLANG_TOKEN": "x"}
    assert decisive_env(env) == (("CUDA_VISIBLE_DEVICES", "0,1"), ("NCCL_P2P_DISABLE", "1"))
    line = launch_line(["python", "-m", "sglang.launch_server", "--model-path", "a b"], decisive_env(env))
    assert line == "CUDA_VISIBLE_DEVICES=0,1 NCCL_P2P_DISABLE=1 python -m sglang.launch_server --model-path 'a b'"


async def test_the_pinned_baseline_stays_at_the_top_of_the_bench_table():
    """Eight newer points scrolled it out of a 4-row table (and out of the newest 8 rows)."""
    from textual.widgets import DataTable

    from optui.core.bench.compare import Entry, build_rows, group_entries
    from optui.session.snapshot_types import BenchView
    from optui.ui.widgets.bench_panel import BenchPanel
    from tests.unit.test_panel_values import PanelApp

    base = Entry(1, result(1000.0), "c16", pinned=True)
    later = [Entry(i, result(1000.0 + i), "c16") for i in range(2, 12)]
    groups = group_entries([base, *later])
    rows = tuple(build_rows(groups, groups))
    class SidePaneApp(PanelApp):
        CSS = "#bench-results { height: auto; max-height: 4; }"  # optui.tcss's narrow layout

    panel = BenchPanel(id="bench")
    async with SidePaneApp(panel).run_test(size=(80, 12)) as pilot:
        panel.show(BenchView("c16", "qwen", "ok", 0.0), rows)
        await pilot.pause()
        table = panel.query_one(DataTable)
        assert table.fixed_rows == 1 and table.row_count == 9
        await pilot.pause(0.2)
        assert table.cursor_row == 8 and table.scroll_y > 0, (table.size, table.virtual_size)  # scrolled to the newest
        first = table.render_line(1).text  # (line 0: the header)
        assert "baseline" in first and "1,000.0" in first, first
        assert panel.selected_row().group.ids == (11,)


def _sweep_point(tput: float, conc: int, run: str) -> BenchResult:
    r = result(tput, wl=replace(WL, max_concurrency=conc))
    r.max_concurrency = conc
    r.extra["run_id"] = run
    return r


def test_scale_and_the_chart_belong_to_one_experiment():
    """``scale`` divided a point by the c=1 result of another configuration, and the chart
    took the newest result per concurrency whichever configuration measured it."""
    from optui.core.bench.compare import Entry, build_rows, family_key, group_entries, sweep_series

    entries = [Entry(1, _sweep_point(100.0, 1, "a"), "sweep", experiment="exp-0001"),
               Entry(2, _sweep_point(180.0, 2, "a"), "sweep", experiment="exp-0001"),
               Entry(3, _sweep_point(300.0, 4, "a"), "sweep", experiment="exp-0001"),
               Entry(4, _sweep_point(500.0, 4, "b"), "sweep", experiment="exp-0002"),  # another config, c=4 only
               Entry(5, _sweep_point(400.0, 4, "c"), "sweep", experiment="exp-0001")]  # exp-0001 again, c=4
    rows = build_rows(group_entries(entries))
    scale = {r.group.ids: r.scaling for r in rows}
    assert scale[(4,)] is None  # exp-0002 never measured c=1 (was 500 / (4 * 100) = 1.25)
    assert scale[(5,)] == pytest.approx(400.0 / (4 * 100.0))  # its own experiment's c=1
    family = family_key(WL)
    assert [r.group.ids for r in sweep_series(rows, family, "exp-0001")] == [(1,), (2,), (5,)]
    assert [r.group.ids for r in sweep_series(rows, family, "exp-0002")] == [(4,)]
    assert {r.group.experiment for r in rows} == {"exp-0001", "exp-0002"}


async def test_the_results_view_names_each_rows_experiment_and_charts_only_it():
    from textual.widgets import DataTable, Static

    from optui.core.bench.compare import Entry, build_rows, group_entries
    from optui.ui.screens.results import ResultsScreen
    from tests.unit.test_panel_values import PanelApp

    entries = [Entry(1, _sweep_point(100.0, 1, "a"), "sweep", experiment="exp-0001"),
               Entry(2, _sweep_point(180.0, 2, "a"), "sweep", experiment="exp-0001"),
               Entry(3, _sweep_point(900.0, 2, "b"), "sweep", experiment="exp-0002"),
               Entry(4, _sweep_point(300.0, 4, "c"), "sweep", experiment="exp-0001")]
    rows = build_rows(group_entries(entries))
    app = PanelApp(Static("dashboard"))
    async with app.run_test(size=(200, 40)) as pilot:
        app.push_screen(ResultsScreen(lambda: rows))
        await pilot.pause(0.3)
        table = app.screen.query_one(DataTable)
        assert [str(table.get_row_at(i)[1]) for i in range(4)] == ["exp-0001", "exp-0001", "exp-0002", "exp-0001"]
        chart = str(app.screen.query_one("#results-chart").render())  # the newest row (exp-0001) selected
        assert "on exp-0001" in chart and "900.0" not in chart and "180.0" in chart, chart
        table.move_cursor(row=2)
        await pilot.pause(0.2)
        chart = str(app.screen.query_one("#results-chart").render())
        assert "on exp-0002: one concurrency measured" in chart, chart


def test_rollbacks_and_unchanged_restarts_fold_into_their_configuration(campaign):
    """Two rollbacks to the same flags were listed as two more "untested" experiments, and
    a rollback measured again as one more "better" row with the configuration's pooled
    numbers (issue 20's verifier): every later start of a configuration folds into its row.
    The baseline's flags measured again keep their row: that instance is compared with the
    baseline one by one (``same``, the restart spread's evidence)."""
    from optui.core.journal.experiments import fold_repeats

    cfg, j = campaign
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    big = w.restart(flags(max_running_requests=64))
    w.bench(big, result(1300.0), result(1290.0), result(1295.0))
    oom = w.restart(flags(max_running_requests=64, mem_fraction_static=0.99), crash="oom")
    back = w.restart(flags(max_running_requests=64), reason="rollback")
    again = w.restart(flags(max_running_requests=64, port=40000), reason="autostart")  # a new port: same config
    measured = w.restart(flags(max_running_requests=64), reason="measure again")
    w.bench(measured, result(1301.0), result(1291.0), result(1296.0))
    base_again = w.restart(flags(), reason="baseline again")
    w.bench(base_again, result(1002.0), result(1008.0), result(1004.0))
    xs = load_experiments(j)
    same = {x.id: x.same_config_as for x in xs}
    assert same == {base: None, big: None, oom: None, back: big, again: big, measured: big, base_again: base}
    rows, folded = fold_repeats(xs)
    assert [x.id for x in rows] == [base, big, oom, base_again] and folded == {big: [back, again, measured]}
    table = optui(cfg, "journal", "experiments").stdout.splitlines()
    listed = [line.split()[0] for line in table if line.startswith("exp-")]
    assert listed == [base, big, oom, base_again]
    row = next(line for line in table if line.startswith(big))
    assert f"(also started with these flags: {back}, {again}, {measured})" in row and " n=6 vs 3," in row, row
    row = next(line for line in table if line.startswith(base_again))
    assert f"same flags as {base}" in row and " same " in row, row


def test_a_first_start_that_measured_nothing_folds_into_the_start_that_did(campaign):
    """The demo's autostart (exp-0001, no benchmark) was listed `untested  same flags` beside
    `exp-0002 … baseline (same flags as exp-0001)` (a verifier of issue 20)."""
    from optui.core.journal.experiments import fold_repeats

    cfg, j = campaign
    w = CampaignWriter(j)
    auto = w.restart(flags(), reason="autostart")
    again = w.restart(flags(), reason="restart")
    w.bench(again, result(1000.0), result(1010.0), result(1005.0))
    other = w.restart(flags(max_running_requests=64))
    w.bench(other, result(1300.0), result(1290.0), result(1295.0))
    back = w.restart(flags(), reason="rollback")
    rows, folded = fold_repeats(load_experiments(j))
    assert [x.id for x in rows] == [again, other] and folded == {again: [auto, back]}
    # the row names no configuration of its own (the H200's report read 'baseline (same flags as exp-0002)' on exp-0002)
    assert rows[0].same_config_as is None
    from optui.core.journal.report import ReportInput, render_markdown

    md = render_markdown(ReportInput("t", j.events(), j.results(limit=None)))
    assert f"same flags as {again}" not in md, md
    table = optui(cfg, "journal", "experiments").stdout.splitlines()
    assert [line.split()[0] for line in table if line.startswith("exp-")] == [again, other]


def test_same_flags_as_names_the_row_a_listing_shows(campaign):
    """Issue 20's verifier: the bench table and the results view said `same flags as
    exp-0001` for the baseline's flags started again, while the experiments view lists that
    configuration as exp-0002 (exp-0001, the autostart, measured nothing and is folded into
    it). Every `same flags as` names the listed row; the row itself names none."""
    from optui.core.journal.experiments import change_text, fold_repeats, named_by_row

    _cfg, j = campaign
    w = CampaignWriter(j)
    auto = w.restart(flags(), reason="autostart")
    base = w.restart(flags(), reason="restart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    other = w.restart(flags(max_running_requests=64))
    w.bench(other, result(1300.0), result(1290.0), result(1295.0))
    again = w.restart(flags(), reason="baseline again")
    w.bench(again, result(1003.0), result(1008.0), result(1001.0))
    xs = by_id(load_experiments(j))
    assert xs[again].same_config_as == auto and xs[base].same_config_as == auto  # the first start of those flags
    named = by_id(named_by_row(xs.values()))
    assert named[again].same_config_as == base and change_text(named[again]) == f"same flags as {base}"
    assert named[base].same_config_as is None and named[other].same_config_as is None
    rows, _ = fold_repeats(load_experiments(j))  # the experiments view's rows say the same
    assert by_id(rows)[again].same_config_as == base


def test_a_configuration_measured_again_counts_with_its_first_experiment(campaign):
    """An experiment whose flags equal an earlier one's is that configuration again: its
    results are counted with the earlier ones' for the verdict (n adding up), not judged as
    a new change; the restart spread still comes from the two instances' medians. The same
    rows from one build and from a book kept up to date."""
    from optui.core.journal.experiments import ExperimentBook
    from optui.session.journal.export import experiment_events

    cfg, j = campaign
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    big = w.restart(flags(max_running_requests=64))
    w.bench(big, result(1300.0), result(1290.0), result(1295.0))
    book = ExperimentBook()
    book.add(experiment_events(j), j.results(limit=None))
    assert book.experiments[1].primary.n_ok == 3
    w.restart(flags(max_running_requests=64, chunked_prefill_size=512))
    measured = w.restart(flags(max_running_requests=64, port=40000), reason="measure again")
    w.bench(measured, result(1301.0), result(1291.0), result(1296.0))
    book.add(experiment_events(j), j.results(limit=None))
    for xs in (by_id(load_experiments(j)), by_id(book.experiments)):
        assert xs[measured].same_config_as == big
        for x in (xs[big], xs[measured]):
            assert x.verdict == "better" and x.primary.n_ok == 6, (x.id, x.verdict, x.primary.n_ok)
            assert verdict_evidence(x).startswith("n=6 vs 3,"), verdict_evidence(x)
            assert x.primary.judgement.restart_spread_pct == pytest.approx(100 * 1 / 1295.5, abs=0.01)
    listing = optui(cfg, "journal", "experiments").stdout.splitlines()
    assert not any(line.startswith(measured) for line in listing)  # counted in its configuration's row
    row = next(line for line in listing if line.startswith(big))
    assert f"(also started with these flags: {measured})" in row and "n=6 vs 3" in row, row


@pytest.mark.parametrize("size", [(200, 50), (60, 40), (50, 30)])
async def test_the_servers_panel_shows_the_tuned_flag_first_and_i_the_full_command(tmp_path, size):
    """The row cut the argv where the tuned flag is (``--max-…`` at 200x50, nothing of it at
    60x40); ``i`` on the Servers panel shows the whole running command."""
    from tests.helpers.pilot import wait_for
    from tests.process.test_app_flows import make_app

    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None)
        from optui.core.flags.argv import Flags

        argv = Flags.parse(rt.status.argv).set("--max-running-requests", "32").to_argv()
        status = await app.session.restart_server("demo", argv, reason="test")
        assert status.state.value == "ready"
        panel = app.query_one("#servers")
        await wait_for(pilot, lambda: re.search(r"--m[a-z-]* 32", panel.render().plain), what=lambda: panel.render().plain)
        shown = panel.render().plain
        if size[0] >= 120:
            assert shown.index("--max-running-requests 32") < shown.index("--model-path"), shown
        else:  # a side pane's one line: the name abbreviated if need be, the value whole on screen
            # (it read '--max-running-requests 3…' at 60x40, '--max-running-…' at 50x30)
            await pilot.pause(0.1)
            line = next(s.text for s in app.screen._compositor.render_strips() if "● demo" in s.text)
            assert re.search(r" --m[a-z-]* 32 ", line), line
        await pilot.press("2", "i")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DetailsScreen")
        body = app.screen.query_one("#details-body").render().plain
        assert "--demo-speed" in body and "~ --max-running-requests: 4 → 32" in body, body
        await pilot.press("escape", "q")


def test_journal_lines_say_what_a_run_ran_with_its_numbers():
    """``todo.run.started … → no benchmark`` for a run that then ran ``sweep``; a sweep's
    line named one run's figure as if for all its points; the start no plan."""
    from optui.core.journal import events as ev
    from optui.core.journal.events import Event

    started = Event(1, 0.0, ev.BENCH_STARTED, "demo", data={"bench": "loadgen", "plan": "sweep concurrency 1,2,4"})
    assert started.summary() == "bench loadgen started (sweep concurrency 1,2,4)"
    points = [dict(_sweep_point(t, c, "s").to_json()) for c, t in ((1, 95.0), (2, 180.0), (2, 182.0), (4, 300.0))]
    finished = Event(2, 0.0, ev.BENCH_FINISHED, "demo", data={"bench": "loadgen", "status": "ok", "results": points})
    assert finished.summary() == "bench loadgen ok, sweep c=1 95.0 · c=2 181.0 · c=4 300.0 out tok/s"  # the table's median
    repeats = [dict(result(v).to_json()) for v in (1000.0, 1010.0, 990.0)]
    again = Event(3, 0.0, ev.BENCH_FINISHED, "demo", data={"bench": "c16", "status": "ok", "results": repeats})
    assert again.summary().startswith("bench c16 ok, median of 3 runs, 1000.0 out tok/s")


def test_a_todo_run_names_the_benchmark_it_runs_and_its_history_reads(tmp_path):
    from click.testing import CliRunner

    from optui.cli import cli
    from optui.config import load_config
    from optui.core.todo.experiment import experiment_text
    from optui.session import Session
    from tests.process.test_todo_runs import demo_campaign

    cfg = demo_campaign(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["-c", str(cfg), "todo", "add", "bad flag", "--server", "demo",
                               "--set", "--no-such-flag=1"]).exit_code == 0  # no --bench: the server's first
    session = Session(load_config(cfg), stop_servers_on_exit=True)  # only to stop what the CLI leaves
    try:
        assert runner.invoke(cli, ["-c", str(cfg), "todo", "run", "1"]).exit_code == 1
        (started,) = session.journal.events(types=["todo.run.started"])
        assert started.data["message"].endswith("--no-such-flag 1 → sweep"), started.data["message"]
        item = session.journal.todo(1)
        assert experiment_text(item.experiment) == ("demo: --no-such-flag 1 → its server's first configured benchmark, "
                                                    "if any")
    finally:
        from optui.adapters import proc

        launch = session.servers["demo"].controller.recorded()
        if launch is not None:
            proc.kill_group_now(launch.pid)
        session.journal.close()


async def test_a_todo_items_history_renders_its_experiment(tmp_path):
    """``i`` on a todo item showed its experiment as raw JSON."""
    from tests.helpers.pilot import wait_for
    from tests.process.test_app_flows import make_app

    app = make_app(tmp_path)
    async with app.run_test(size=(60, 40)) as pilot:
        await wait_for(pilot, lambda: app.query_one("#todo-list"))
        app.session.todos.add("try 32", "high", {"server": "demo", "set": {"--max-running-requests": "32"},
                                                 "bench": ["sweep"]})
        await wait_for(pilot, lambda: "try 32" in app.query_one("#todo-list").render().plain)
        await pilot.press("3", "home", "i")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DetailsScreen")
        body = app.screen.query_one("#details-body").render().plain
        assert "experiment: demo: --max-running-requests 32 → sweep" in body and '{"server"' not in body, body
        await pilot.press("escape", "q")


def test_the_baseline_flags_again_are_compared_with_the_baseline_not_part_of_it(campaign):
    """The demo's first todo item (the default flags again, after a benchmark of the
    autostart) said '679.6 out tok/s (this is the baseline)' while the bench table showed
    that run ~-0.9% against the baseline's 685.6: its todo run's line takes the baseline's
    medians, as its verdict 'same' does."""
    from optui.core.journal.experiments import workload_baselines

    _cfg, j = campaign
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    again = w.restart(flags(), reason="todo #1")
    w.bench(again, result(995.0), result(990.0), result(998.0))
    bigger = w.restart(flags(max_running_requests=64))
    w.bench(bigger, result(1300.0), result(1290.0), result(1295.0))
    back = w.restart(flags(max_running_requests=64), reason="measure again")
    w.bench(back, result(1301.0), result(1291.0), result(1296.0))
    xs = by_id(load_experiments(j))
    assert xs[again].verdict == "same"
    ((base_values, is_base),) = workload_baselines(xs[again]).values()
    assert not is_base and base_values["output_throughput_tok_s"] == 1005.0
    ((_, is_base),) = workload_baselines(xs[base]).values()
    assert is_base  # the baseline itself
    ((base_values, is_base),) = workload_baselines(xs[back]).values()  # a configuration measured again: pooled
    assert not is_base and base_values["output_throughput_tok_s"] == 1005.0
