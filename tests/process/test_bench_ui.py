"""The bench panel and the results view in the real app (Pilot): abort keys that kill the
process group without quitting, a sweep typed at the prompt, pinning a baseline, repeats,
and the results view's table and chart. Benchmarks are fake SGLang clients (real
subprocesses); the server is down (a closed port)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from optui.adapters import proc
from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from optui.ui.widgets.key_bar import KeyBar
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(90)
TOOL = [sys.executable, str(Path(__file__).parents[1] / "helpers" / "fake_tools" / "sglang" / "bench_serving.py")]


def make_app(tmp_path: Path, *extra: str) -> OptuiApp:
    (tmp_path / "optui.toml").write_text(
        '[hosts.local]\ngpu_source = "none"\n[servers.s]\nurl = "http://127.0.0.1:1"\ncontrol = "none"\n'
        f'[benchmarks.fake]\nserver = "s"\nargv = {json.dumps([*TOOL, "--num-prompts", "8", *extra])}\n')
    return OptuiApp(Session(load_config(tmp_path / "optui.toml")), title="test")


async def run_anyway(pilot) -> None:
    """Confirm the dialog a benchmark on a server that is not READY asks first (the server
    here is down)."""
    await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "ConfirmScreen", what="not-ready confirm")
    await pilot.press("y")



@pytest.mark.parametrize("key", ["ctrl+c", "A"])
async def test_abort_keys_in_the_bench_panel_kill_the_group_and_keep_the_app(tmp_path, key):
    app = make_app(tmp_path, "--silent", "300", "--child")
    benches = app.session.benches
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("b")
        await run_anyway(pilot)
        await wait_for(pilot, lambda: benches.current is not None and any("Namespace(" in x for x in benches.current.lines))
        run = benches.current
        grandchild = _grandchild_of(run.pid)
        assert app.focused.id == "bench-log" and proc.pid_alive(grandchild)
        await wait_for(pilot, lambda: "A Abort" in app.query_one(KeyBar)._text.plain)  # offered while it runs
        await pilot.press(key)
        await wait_for(pilot, lambda: run.view.status == "aborted")
        await wait_for(pilot, lambda: "Abort" not in app.query_one(KeyBar)._text.plain)  # and only then
        assert app.is_running and app.return_value is None  # ctrl+c did not quit
        assert not proc.group_alive(run.pid) and not proc.pid_alive(grandchild)
        assert "ABORTED" in str(app.query_one("#bench-status").render())
        finished = app.session.journal.events(types=["bench.finished"])[-1].data
        assert finished["status"] == "aborted"
        await pilot.press("q")


def _grandchild_of(pgid: int) -> int:
    """The fake tool's child (same process group, not the leader)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != pgid:
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                return int(entry.name)
    raise AssertionError(f"no child in process group {pgid}")


@pytest.mark.timeout(240)  # two benchmark runs (a 3-point sweep, a repeat x3) and 20 keys: > 90 s beside a CPU hog
async def test_sweep_pin_repeat_and_results_view_via_keys(tmp_path):
    app = make_app(tmp_path)
    session = app.session
    async with app.run_test(size=(200, 45)) as pilot:  # the bench panel fits the columns up to scale
        await pilot.press("4", "s")
        # a key the key sequencer held (its barrier late on a busy machine) is re-posted after press() returns
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TextPrompt", what=lambda: type(app.screen).__name__)
        assert app.screen.query_one("Input").value == "concurrency 1,2,4,8,16"
        await pilot.press("ctrl+u", *"1,2,4", "enter")
        await run_anyway(pilot)
        await wait_for(pilot, lambda: session.benches.current is not None and not session.benches.running)
        view = session.benches.current.view
        assert view.status == "ok" and view.plan == "sweep concurrency 1,2,4", view.error
        table = app.query_one("#bench-results")
        await wait_for(pilot, lambda: table.row_count == 3)
        assert list(table.get_column("conc")) == ["1", "2", "4"]
        assert list(table.get_column("eff")) == ["1.00", "0.87", "0.76"]  # scaling efficiency T(N)/(N·T(1))
        await pilot.press("B")  # pin the selected (newest) row: c=4
        await wait_for(pilot, lambda: any(r.baseline for r in session.journal.results()))
        assert [r.result.max_concurrency for r in session.journal.results() if r.baseline] == [4]
        pinned = session.journal.events(types=["bench.baseline"])[-1]
        assert pinned.experiment is not None and pinned.data["concurrency"] == 4
        await wait_for(pilot, lambda: str(table.get_cell_at((0, table.get_column_index("delta")))) == "baseline")  # pinned: first, fixed at the top
        await pilot.press("R")  # the preset x3 (repeat = 3 by default)
        await run_anyway(pilot)
        await wait_for(pilot, lambda: session.benches.current.view.plan == "repeat x3"
                       and not session.benches.running)
        await wait_for(pilot, lambda: table.row_count == 4)
        assert table.get_cell_at((3, table.get_column_index("n"))) == "3 ±0.0%"  # n and spread of out tok/s
        await pilot.press("v")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ResultsScreen", what=lambda: type(app.screen).__name__)
        await pilot.pause(0.3)
        results = app.screen.query_one("#results-table")
        assert results.row_count == 4
        results.move_cursor(row=1)
        await pilot.pause(0.2)
        chart = str(app.screen.query_one("#results-chart").render())
        assert "out tok/s ↑" in chart and "TTFT p50 (ms) ↑" in chart and "concurrency (requests) →" in chart
        assert all(f"c={c}" in chart for c in (1, 2, 4))
        await pilot.press("escape")
        assert type(app.screen).__name__ != "ResultsScreen"
        # a resize to a side pane keeps the newest row in view (2 rows fit of 4)
        await pilot.resize_terminal(60, 40)
        await wait_for(pilot, lambda: table.size.height <= 4, what=lambda: table.size)
        await pilot.pause(0.2)
        assert 0 < table.max_scroll_y and table.scroll_y == table.max_scroll_y, (table.scroll_y, table.max_scroll_y)
        # `4` focuses the results table once there are rows: arrows choose the row B pins
        await pilot.press("4")
        assert app.focused is table
        await pilot.press("up", "B")  # c=2 (rows: c=4 pinned first, c=1, c=2, the repeat)
        await wait_for(pilot, lambda: 2 in [r.result.max_concurrency for r in session.journal.results() if r.baseline])
        await pilot.press("tab")
        assert app.focused is app.query_one("#bench-log")
        await pilot.press("q")


async def test_quitting_during_a_run_leaves_nothing_running(tmp_path):
    app = make_app(tmp_path, "--silent", "300", "--child")
    benches = app.session.benches
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("b")
        await run_anyway(pilot)
        await wait_for(pilot, lambda: benches.current is not None and any("Namespace(" in x for x in benches.current.lines))
        run = benches.current
        grandchild = _grandchild_of(run.pid)
        await pilot.press("q")
    assert not proc.group_alive(run.pid) and not proc.pid_alive(grandchild)
    assert run.view.status == "aborted"


@pytest.mark.parametrize("key", ["r", "ctrl+r"])
async def test_a_restart_during_a_benchmark_is_refused_before_the_editor_opens(tmp_path, key):
    """``r`` while a benchmark ran opened the editor; the refusal came after typing, ctrl+s and y,
    beside a "restarting…" toast, and the typed flags were lost (issue 34)."""
    (tmp_path / "optui.toml").write_text(
        '[hosts.local]\ngpu_source = "none"\n[servers.s]\nurl = "http://127.0.0.1:1"\n'
        f'argv = {json.dumps([sys.executable, "-c", "pass", "--max-running-requests", "8"])}\n'
        f'[benchmarks.fake]\nserver = "s"\nargv = {json.dumps([*TOOL, "--num-prompts", "8", "--silent", "300"])}\n')
    app = OptuiApp(Session(load_config(tmp_path / "optui.toml")), title="test")
    benches = app.session.benches
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("b")
        await run_anyway(pilot)
        await wait_for(pilot, lambda: benches.running and benches.current is not None)
        await pilot.press("2", key)
        await wait_for(pilot, lambda: any("is running against it" in n.message for n in app._notifications),
                       what=lambda: [n.message for n in app._notifications])
        await pilot.pause(0.3)
        assert type(app.screen).__name__ not in ("FlagEditorScreen", "ConfirmScreen")
        assert not any("restarting" in n.message for n in app._notifications)
        await pilot.press("4", "A")
        await wait_for(pilot, lambda: not benches.running)
        await pilot.press("q")
