"""The real Textual app over a real demo campaign (subprocess server on loopback, SQLite
journal): restart with a new flag via keys, run a benchmark, todo edits that persist."""

from __future__ import annotations

import os

import pytest

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.demo.campaign import write_demo_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.demo import TEST_SPEED, free_port
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(90)


def make_app(directory, port=None, speed=TEST_SPEED, prompts=None) -> OptuiApp:
    """The real app on the demo campaign; ``prompts`` replaces the sweep's 64 prompts."""
    cfg = write_demo_config(directory, port=port or free_port(), speed=speed)
    if prompts is not None:
        cfg.write_text(cfg.read_text().replace('"--num-prompts", "64"', f'"--num-prompts", "{prompts}"'))
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    return OptuiApp(session, title="test")



async def edit(pilot, app, text: str) -> None:
    """Put ``text`` into the flag editor's input and press Enter: the state typing it reaches
    (test_restart_with_new_flag_via_keys types it; each key costs a frame)."""
    await wait_for(pilot, lambda: app.screen.query_one("#flags-input"), what="the flag editor")
    app.screen.query_one("#flags-input").value = text
    await pilot.press("enter")


def event_types(session, target="demo"):
    return [e.type for e in session.journal.events(target=target)]


async def test_restart_with_new_flag_via_keys(tmp_path):
    app = make_app(tmp_path)
    session = app.session
    rt = session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        # and the start's server.ready journaled (ci17: it came after the count, and first in `new`)
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None
                       and "server.ready" in event_types(session))
        before = len(session.journal.events(target="demo"))
        await pilot.press("2", "r")
        await pilot.press(*"--max-running-requests 16", "enter")
        await pilot.press("ctrl+s")
        assert type(app.screen).__name__ == "ConfirmScreen"
        assert app.focused.id == "cancel"  # Cancel is focused: Enter would not restart
        await pilot.press("y")
        await wait_for(pilot, lambda: rt.status.busy is None and rt.status.state.value == "ready"
                       and "16" in rt.status.argv and "server.ready" in event_types(session)[before:], timeout=40)
        new = event_types(session)[before:]
        for expected in ("server.restart", "flags.changed", "server.stopped", "server.starting", "server.ready"):
            assert expected in new, (expected, new)
        assert new.index("server.restart") < new.index("server.stopped") < new.index("server.starting") < new.index("server.ready")
        diff = session.journal.events(types=["flags.changed"])[-1].data["diff"]
        assert diff == ["~ --max-running-requests: 4 → 16"]
        assert session.journal.last_good("demo")[-4:-2] == ["16", "--enable-metrics"] or "16" in session.journal.last_good("demo")
        await pilot.press("q")


async def test_a_cancelled_review_returns_to_the_flag_editor_with_the_edit_kept(tmp_path):
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None)
        argv_before = tuple(rt.status.argv)
        await pilot.press("2", "r")
        await edit(pilot, app, "--max-running-requests 16")
        for cancel in ("escape", "n"):
            await pilot.press("ctrl+s")
            assert type(app.screen).__name__ == "ConfirmScreen"
            await pilot.press(cancel)
            await pilot.pause(0.1)
            assert type(app.screen).__name__ == "FlagEditorScreen", cancel
            assert "--max-running-requests: 4 → 16" in str(app.screen.query_one("#flags-diff").render()), cancel
        assert tuple(rt.status.argv) == argv_before and rt.status.busy is None  # nothing restarted
        await pilot.press("escape")  # the editor itself: cancelled, nothing changes
        await pilot.pause(0.1)
        assert type(app.screen).__name__ == "MainScreen" and tuple(rt.status.argv) == argv_before
        await pilot.press("q")


async def test_bad_flag_shows_crash_class_and_rollback(tmp_path):
    app = make_app(tmp_path)
    session = app.session
    rt = session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None)
        await pilot.press("2", "r")
        await edit(pilot, app, "--no-such-flag=1")  # (with a space the editor refuses it: issue 34)
        await pilot.press("ctrl+s", "y")
        await wait_for(pilot, lambda: rt.status.busy is None and rt.status.state.value == "crashed", timeout=30)
        assert str(rt.status.crash_class) == "bad_flag"
        assert any("unrecognized arguments" in line for line in rt.status.crash_lines)
        # the state is shown before the journal thread has written the restart's events
        await wait_for(pilot, lambda: session.journal.events(types=["server.failed"]), timeout=30, what="server.failed")
        failed = session.journal.events(types=["server.failed"])[-1]
        assert failed.data["class"] == "bad_flag"
        await pilot.press("ctrl+r", "y")
        await wait_for(pilot, lambda: rt.status.busy is None and rt.status.state.value == "ready", timeout=30)
        assert "--no-such-flag" not in rt.status.argv
        assert session.journal.events(types=["rollback"])
        await pilot.press("q")


async def test_benchmark_fills_results_table(tmp_path):
    app = make_app(tmp_path, prompts=16)  # 3 runs of 16 requests (64 would only wait longer)
    session = app.session
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: session.servers["demo"].status.state.value == "ready" and session.servers["demo"].status.busy is None)
        await pilot.press("b")
        assert type(app.screen).__name__ == "ChoiceScreen"  # the configured benchmarks, the default first
        await pilot.press("enter")  # the default choice: sweep (bundled SGLang-style command)
        await wait_for(pilot, lambda: session.benches.current is not None and not session.benches.running, timeout=60)
        assert session.benches.current.view.status == "ok", session.benches.current.view.error
        table, log = app.query_one("#bench-results"), app.query_one("#bench-log")
        await wait_for(pilot, lambda: table.row_count and any("Serving Benchmark Result" in line for line in log.lines),
                       what="the results row and the client's report on screen")
        assert table.row_count == 1  # b repeats the run (repeat = 3): one row, the median of its 3 runs
        row = dict(zip(table.columns, table.get_row_at(0), strict=True))  # by column key
        assert row["bench"] == "sweep" and row["exp"] == session.journal.current_experiment("demo") \
            and str(row["ok"]) == "48/48 ok", \
            [str(c) for c in row.values()]
        assert float(row["out"].replace(",", "")) > 0
        assert any("Serving Benchmark Result" in line for line in log.lines)
        finished = session.journal.events(types=["bench.finished"])[-1]
        assert [r["completed"] for r in finished.data["results"]] == [16, 16, 16]
        # the journal's line gives the table's figures, named (it gave another run's TTFT p50)
        out, ttft = str(row["out"]).replace(",", ""), str(row["ttft"])
        assert f"median of 3 runs, {out} out tok/s, TTFT p50 {ttft} ms" in finished.summary(), finished.summary()
        await pilot.press("q")


async def test_todo_edits_persist_across_restart(tmp_path):
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "none"\n')
    app = OptuiApp(Session(load_config(cfg)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3", "a", *"try tp 8", "enter")
        await pilot.press("a", *"bench c16", "enter")
        await pilot.press("space")          # the new item is selected → in_progress
        await pilot.press("plus")           # → high priority
        await pilot.press("K")              # move it above the first one
        await pilot.press("e", "ctrl+u", *"try tp 4", "enter")
        await pilot.pause(0.2)
        await pilot.press("q")
    app2 = OptuiApp(Session(load_config(cfg)))
    async with app2.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        todos = app2.session.snapshot().todos
        assert [(t.content, t.status.value, t.priority.value) for t in todos] == [
            ("try tp 4", "in_progress", "high"),
            ("try tp 8", "pending", "medium"),
        ]
        history = [e.data["op"] for e in app2.session.journal.events(types=["todo.changed"])]
        assert history == ["add", "add", "status", "priority", "move", "edit"]
        lines = app2.query_one("#todo-list").render().plain
        assert "try tp" in lines
        await pilot.press("q")


async def test_quitting_the_demo_stops_its_server_and_says_so(tmp_path):
    """optui started the server and stops it on exit (demo): the journal records the stop."""
    app = make_app(tmp_path)
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None)
        pid = rt.status.pid
        await pilot.press("q")
    journal = Journal(session.journal.path, read_only=True)
    try:
        stops = list(journal.events(target="demo", types=["server.stopped"]))
    finally:
        journal.close()
    assert stops and stops[-1].data["reason"] == "optui exited", [e.data for e in stops]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_new_session_autostarting_the_same_flags_continues_the_experiment(tmp_path):
    """The demo stops its server on quit and autostarts it at the next start: the same flags
    are the same experiment (the experiments list used to gain an entry per session)."""
    port = free_port()
    experiments = []
    for _ in range(2):
        app = make_app(tmp_path, port=port)
        rt = app.session.servers["demo"]
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda rt=rt: rt.status.state.value == "ready" and rt.status.busy is None)
            experiments.append(app.session.journal.current_experiment("demo"))
            restarts = [e.data["reason"] for e in app.session.journal.events(types=["server.restart"])]
            await pilot.press("q")
    assert experiments == ["exp-0001", "exp-0001"] and restarts == ["autostart", "autostart"]
    # a restart with other flags opens the next one, as before
    app = make_app(tmp_path, port=port)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None)
        argv = [*rt.status.argv, "--disable-radix-cache"]
        status = await app.session.restart_server("demo", argv, reason="flag editor")
        assert status.state.value == "ready" and app.session.journal.current_experiment("demo") == "exp-0002"
        await pilot.press("q")


def test_the_demo_keeps_its_port_from_one_start_to_the_next(tmp_path):
    """The port is in the server's argv: a new port each start made each demo session a new
    experiment ("~ --port: 50787 → 38211")."""
    import socket

    from optui.demo.campaign import free_port as pick_port
    from optui.demo.campaign import previous_demo_port

    assert previous_demo_port(tmp_path) is None
    (tmp_path / "optui.toml").write_text("not toml [")
    assert previous_demo_port(tmp_path) is None
    port = pick_port()
    write_demo_config(tmp_path, port=port)
    assert previous_demo_port(tmp_path) == port and pick_port(port) == port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert pick_port(port) not in (port, 0)  # in use now: another free one
