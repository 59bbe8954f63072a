"""A flag search in the TUI (issue 22): its live line in the todo panel (trial, flags, step,
best so far, ETA) and ``S`` stopping it, on the real demo server through the real app."""

from __future__ import annotations

import pytest

from optui.config import load_config
from optui.core.search.spec import parse_search_text
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.pilot import wait_for
from tests.process.test_search_runs import campaign

pytestmark = pytest.mark.timeout(120)


def todo_subtitle(app) -> str:
    """The todo panel's line (where a running search shows)."""
    return str(app.query_one("#todo-box").border_subtitle or "")


async def demo_ready(pilot, session) -> None:
    rt = session.servers["demo"]
    await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None, timeout=30)


async def test_the_todo_panel_shows_the_search_live_and_S_stops_it(tmp_path):
    cfg = campaign(tmp_path)
    app = OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")
    s = app.session

    def subtitle() -> str:
        return todo_subtitle(app)

    async with app.run_test(size=(220, 50)) as pilot:
        await demo_ready(pilot, s)
        await s.search.start(parse_search_text(cfg.read_text(), str(cfg), "batch"), "batch")
        # the third trial's benchmark: the first one is the best so far, the second (OOM) infeasible
        await wait_for(pilot, lambda: "trial 3/6" in subtitle() and "(bench tiny)" in subtitle(), timeout=60)
        import re

        def fits() -> bool:  # never cut by the border (its corners, a space each side)
            line = subtitle()
            return len(line) <= app.query_one("#todo-box").size.width - 4 and "…" not in line

        # 220x50: the panel is ~80 wide; the old line was cut there ('best 1090 (--max-runn…'):
        # now the trial, its step and flags (abbreviated), the best with its n, the ETA
        line = subtitle()
        assert fits() and re.fullmatch(r"batch\.1 trial 3/6 \(bench tiny\) --mrr 16 --mfs 0\.88 · best \S+ n=1 · ETA \d+ s"
                                       r"( · 1 inf\.)?", line), line
        # zoomed to the full width: all of it (it showed no step, no flags, no ETA there)
        app.query_one("#todo").focus()
        app.action_zoom()
        full = re.compile(r"search batch\.1 trial [3-6]/6 \((bench tiny|restart|ready|compare|queued)\) --max-running-requests "
                          r"\d+ --mem-fraction-static 0\.\d+( \(re-run\))? · best \S+ n=\d \(--max-running-requests \d+ "
                          r"--mem-fraction-static 0\.88\) · ETA \d+ s · [12] infeasible · S stops")
        await wait_for(pilot, lambda: full.fullmatch(subtitle()), timeout=20, what=subtitle)
        app.action_zoom()
        # a side pane of 60 columns: the shortest form, what matters first
        await pilot.resize_terminal(60, 40)
        short = re.compile(r"batch\.1 trial [3-6]/6 \(\S+( tiny)?\) · best \S+ n=\d · ETA \d+ s")
        await wait_for(pilot, lambda: short.match(subtitle()) and fits(), timeout=20, what=subtitle)
        await pilot.resize_terminal(220, 50)
        await pilot.press("S")
        await wait_for(pilot, lambda: not s.search.running, timeout=30)
        assert s.search.progress.status == "stopped" and not s.benches.running and not s.todo_runs.running
        await wait_for(pilot, lambda: "search batch.1" not in subtitle(), timeout=5)
        # the results screen's Pareto view (p): the search's measured configuration on the front
        app.bench_actions.show_results()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ResultsScreen", what="the results screen")
        await pilot.press("p")

        def pareto() -> str:
            return str(app.screen.query_one("#results-chart").render())

        await wait_for(pilot, lambda: "search batch.1 (stopped)" in pareto(), what="the Pareto view")
        text = pareto()
        assert "out tok/s ↑" in text and "TTFT p99 (ms) →" in text and re.search(r"[12] failed, not drawn", text)
        assert re.search(r"  ● --max-running-requests (2|16) --mem-fraction-static 0\.88: ", text), text
        await pilot.press("p")
        await wait_for(pilot, lambda: "search batch.1" not in pareto(), what="the chart again")
        await pilot.press("escape")
        await pilot.press("q")


async def test_a_search_run_from_the_cli_shows_in_the_tui_and_S_there_stops_it(tmp_path):
    """`optui search run` in a shell beside the TUI (the README's way): the todo panel showed
    nothing of it (the line came only from a search of the TUI's own session, which the TUI
    cannot start). Now it shows the other process's search, and `S` asks it to stop."""
    import subprocess
    import sys

    from optui.adapters.journal import Journal
    from tests.helpers.demo import subprocess_env

    cfg = campaign(tmp_path)
    app = OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")
    s = app.session

    def subtitle() -> str:
        return todo_subtitle(app)

    async with app.run_test(size=(220, 50)) as pilot:
        await demo_ready(pilot, s)
        cli = subprocess.Popen([sys.executable, "-m", "optui", "-c", str(cfg), "search", "run", "batch"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=subprocess_env(), start_new_session=True)
        try:
            # its trial, that trial's flags and step, as the TUI's own search shows them (it showed
            # neither, nor the ETA: 'trial 4/7 (in optui process 10411) · best …')
            import re

            shape = re.compile(r"search batch\.1 trial [2-6]/6 \((queued|restart|ready|bench tiny|compare)\) "
                               r"--max-running-requests \d+ --mem-fraction-static 0\.\d+ · best \S+ n=\d+ .* · ETA \d+ s · ")
            app.query_one("#todo").focus()
            app.action_zoom()  # the panel at the full width: all of the line
            await wait_for(pilot, lambda: shape.match(subtitle()) and f"process {cli.pid}" in subtitle(), timeout=60,
                           what=subtitle)
            assert subtitle().endswith(f" · S stops · in optui process {cli.pid}"), subtitle()
            app.action_zoom()  # back beside the others (~80 wide): the short form, the process left out
            short = re.compile(r"batch\.1 trial [2-6]/6 \(\S+( tiny)?\) --mrr \d+ --mfs 0\.\d+( \(re-run\))? · best \S+ n=\d · ETA \d+ s")
            await wait_for(pilot, lambda: short.match(subtitle()), timeout=20, what=subtitle)
            await pilot.press("S")
            await wait_for(pilot, lambda: cli.poll() is not None, timeout=60, what="the CLI's search stopped")
            assert cli.returncode == 130, cli.stdout.read() if cli.stdout else ""
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait(10)
        journal = Journal(cfg.parent / ".optui" / "optui.db", read_only=True)
        try:
            stops = journal.events(types=["search.stop"])
        finally:
            journal.close()
        assert [e.actor for e in stops] == [s.actor], stops
        await wait_for(pilot, lambda: "search batch.1" not in subtitle(), timeout=10, what=subtitle)
        await pilot.press("q")
