"""Todo runs (``session.todo_runs``, :mod:`optui.session.todo.runs`) against the real demo
server (a subprocess on loopback): restart with the item's flags → ready gate → benchmark →
compare with the baseline, a crashing flag (OOM), the queue and stopping it, and
``optui todo run``."""

from __future__ import annotations

import json
import sys

import pytest

from optui.config import load_config
from optui.core.todo.items import TodoStatus
from optui.demo.campaign import write_demo_config
from optui.session import Session
from optui.session.journal.export import load_experiments
from optui.ui.app import OptuiApp
from optui.ui.widgets.todo_panel import VERDICT_BADGE
from tests.helpers.demo import free_port
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(120)


def demo_campaign(tmp_path):
    port = free_port()
    cfg = write_demo_config(tmp_path, port=port, speed=20.0)
    with open(cfg, "a") as fh:  # a small benchmark keeps the runs short
        fh.write(f'''
[benchmarks.tiny]
server = "demo"
description = "8 short requests"
argv = [{sys.executable!r}, "-m", "optui.demo.bench_client", "--base-url", "http://127.0.0.1:{port}", "--num-prompts", "8",
        "--random-input-len", "64", "--random-output-len", "16", "--max-concurrency", "4"]
''')
    return cfg


def make_app(cfg) -> OptuiApp:
    return OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")



def shown(app) -> list[str]:
    return [line.rstrip() for line in app.query_one("#todo-list").render().plain.splitlines()]


async def confirm(pilot) -> None:
    """Confirm the question ``x`` / ``X`` ask before a run restarts a server."""
    await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "ConfirmScreen", what="the run's confirm")
    await pilot.press("y")


def ready(session) -> bool:
    st = session.servers["demo"].status
    return st.state.value == "ready" and st.busy is None


async def test_run_success_and_oom_from_the_list(tmp_path):
    app = make_app(demo_campaign(tmp_path))
    s = app.session
    runner = s.todo_runs
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: ready(s))
        base = s.todos.add("Baseline with the default flags", "high", {"server": "demo", "bench": ["tiny"]})
        # an experiment attached from the keyboard: E opens the editor
        await pilot.press("3", "a", *"More concurrent requests", "enter", "E")
        assert type(app.screen).__name__ == "ExperimentScreen"
        app.screen.query_one("#exp-flags").value = "--max-running-requests 8"
        app.screen.query_one("#exp-bench").value = "tiny"
        await pilot.pause()
        preview = app.screen.query_one("#exp-preview").render().plain
        assert "~ --max-running-requests: 4 → 8" in preview and "then: tiny" in preview
        await pilot.press("ctrl+s")
        more = s.journal.todos()[1]
        assert more.experiment == {"server": "demo", "set": {"--max-running-requests": "8"}, "unset": [], "bench": ["tiny"]}
        oom = s.todos.add("Find the OOM edge", "medium", {"server": "demo", "set": {"--mem-fraction-static": "0.99"}, "bench": ["tiny"]})
        await pilot.pause(0.3)
        assert shown(app)[1].startswith("○ M ⚗ More concurrent requests")
        # x on the first item runs its experiment (the list's x) once confirmed
        await pilot.press("home", "x")
        await confirm(pilot)
        await wait_for(pilot, lambda: runner.current is not None)
        await wait_for(pilot, lambda: any("⚗…" in line for line in shown(app)), timeout=5)
        await wait_for(pilot, lambda: not runner.running, timeout=60)
        done = s.journal.todo(base.id)
        assert done.status is TodoStatus.COMPLETED and done.run["status"] == "ok"
        assert done.note.startswith("tiny: ") and "(this is the baseline)" in done.note and "TTFT p50" in done.note
        # X queues every pending item with an experiment: the flag change, then the OOM
        await pilot.press("X")
        await confirm(pilot)
        await wait_for(pilot, lambda: not runner.running and len(runner.outcomes) == 3, timeout=90)
        assert [o.status for o in runner.outcomes] == ["ok", "ok", "failed"]
        more = s.journal.todo(more.id)
        assert more.status is TodoStatus.COMPLETED
        assert "% vs " in more.note and "out tok/s" in more.note, more.note
        failed = s.journal.todo(oom.id)
        assert failed.status is TodoStatus.PENDING  # stays open
        assert failed.run["status"] == "failed" and failed.run["crash_class"] == "oom"
        assert failed.note.startswith("failed at restart: oom") and "out of memory" in failed.note.lower()
        await pilot.pause(0.3)
        lines = shown(app)
        assert lines[0].startswith("○ M ⚗✗ oom Find the OOM edge")  # open items first, done ones after
        # a done item's mark is its experiment's verdict (issue 34: ✓ showed for a worse result)
        base_row = next(i for i, line in enumerate(lines) if line.startswith("✔ H ⚗ baseline Baseline"))
        assert "↳ tiny: " in lines[base_row + 1]
        # every step journaled and linked to the item and the run: the run's restart opened an
        # experiment (exp-NNNN, naming the item), and the run's steps, the server's events and
        # the bench results all carry it
        run_id = f"todo-{more.id}.1"
        steps = [e for e in s.journal.events(target=f"todo:{more.id}") if e.type.startswith("todo.run.")]
        assert steps[0].type == "todo.run.started" and steps[-1].type == "todo.run.finished"
        assert all(e.data["run_id"] == run_id and e.data["todo_id"] == more.id for e in steps)
        (opened,) = [e for e in s.journal.events(types=["experiment.started"]) if e.data.get("todo_id") == more.id]
        exp = opened.experiment
        assert exp.startswith("exp-") and steps[-1].experiment == exp
        mine = [e for e in s.journal.events() if e.experiment == exp]
        kinds = [(e.type, e.data.get("step")) for e in mine]
        for expected in [("server.restart", None), ("flags.changed", None), ("server.ready", None),
                         ("todo.run.step", "ready"), ("todo.run.step", "bench"), ("bench.started", None),
                         ("bench.finished", None), ("todo.run.step", "compare"), ("todo.run.finished", "compare")]:
            assert expected in kinds, expected
        stored = [r for r in s.journal.results(server="demo") if r.experiment == exp]
        # a benchmark in an experiment is repeated (the top-level repeat, 3): a verdict needs the noise
        assert len(stored) == 3 and {r.bench for r in stored} == {"tiny"}
        assert sorted(r.result.extra["point"] for r in stored) == ["run 1/3", "run 2/3", "run 3/3"]
        assert more.note.count("(median of 3 runs)") == 1 and f"{exp}: " in more.note, more.note
        # the note compares with the verdict's baseline (the median of the baseline's runs, as
        # the tables and the report do), never with the baseline's first run
        x = next(x for x in load_experiments(s.journal) if x.id == exp)
        d, bv = x.primary_delta, x.primary.base_values
        assert f"({d.rel_pct:+.1f}% vs {bv['output_throughput_tok_s']:.1f})" in more.note, more.note
        assert f"(base {bv['ttft_ms.median']:.1f})" in more.note and f"{exp}: {x.verdict} {d.rel_pct:+.1f}%" in more.note
        assert more.run["experiment"] == exp and more.run["verdict"] == x.verdict, more.run
        assert done.run["verdict"] == "baseline", done.run
        mark = VERDICT_BADGE[x.verdict][0]
        assert any(line.startswith(f"✔ M {mark} More concurrent") for line in lines), (mark, lines)
        fin = [e for e in s.journal.events(types=["todo.run.finished"]) if e.data["todo_id"] == oom.id][-1]
        assert fin.data["crash_class"] == "oom" and fin.data["lines"]
        await pilot.press("q")


async def test_queue_stops_at_once(tmp_path):
    app = make_app(demo_campaign(tmp_path))
    s = app.session
    runner = s.todo_runs
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: ready(s))
        first = s.todos.add("Long sweep", "high", {"server": "demo", "set": {"--max-running-requests": "8"}, "bench": ["sweep"]})
        second = s.todos.add("Never reached", "medium", {"server": "demo", "bench": ["tiny"]})
        await pilot.press("3", "X")
        await confirm(pilot)
        await wait_for(pilot, lambda: runner.current is not None and runner.current.step == "bench sweep"
                       and s.benches.running and s.benches.current.total_lines > 3)
        await pilot.press("S")  # stop: the benchmark is aborted, the queue emptied
        await wait_for(pilot, lambda: not runner.running, timeout=15)
        assert [o.status for o in runner.outcomes] == ["aborted"]
        assert s.benches.current.view.status == "aborted"
        assert s.journal.events(types=["bench.finished"])[-1].data["status"] == "aborted"
        item = s.journal.todo(first.id)
        assert item.status is TodoStatus.PENDING and item.run["status"] == "aborted" and item.run["step"] == "bench sweep"
        assert not [e for e in s.journal.events(types=["todo.run.started"]) if e.data["todo_id"] == second.id]
        assert ready(s) and "8" in s.servers["demo"].status.argv  # the server is left as it was
        # stopped during a restart: the restart finishes on its own, the run is aborted
        await pilot.press("home", "x")
        await confirm(pilot)
        await wait_for(pilot, lambda: s.servers["demo"].status.busy is not None, timeout=10)
        await pilot.press("S")
        await wait_for(pilot, lambda: not runner.running, timeout=15)
        assert runner.outcomes[-1].status == "aborted" and runner.outcomes[-1].step == "restart"
        await wait_for(pilot, lambda: ready(s), timeout=30)
        await pilot.press("q")


def test_cli_runs_an_item_headless(tmp_path):
    """``optui todo run`` drives the same runner (here: a check that fails fast and one
    that runs, both without the TUI)."""
    from click.testing import CliRunner

    from optui.cli import cli

    cfg = demo_campaign(tmp_path)
    runner = CliRunner()
    r = runner.invoke(cli, ["-c", str(cfg), "todo", "add", "no experiment"])
    assert r.exit_code == 0
    r = runner.invoke(cli, ["-c", str(cfg), "todo", "run", "1"])
    assert r.exit_code == 1 and "#1 has no experiment" in r.stderr
    r = runner.invoke(cli, ["-c", str(cfg), "todo", "add", "bad flag", "--server", "demo", "--set", "--no-such-flag=1", "--bench", "tiny"])
    assert r.exit_code == 0
    # the server is not running: the run starts it with the flag, which the demo rejects
    session = Session(load_config(cfg), stop_servers_on_exit=True)  # only to stop what the CLI leaves
    try:
        r = runner.invoke(cli, ["-c", str(cfg), "todo", "run", "2", "--json"])
        assert r.exit_code == 1, r.output
        (outcome,) = json.loads(r.stdout)
        assert outcome["status"] == "failed" and outcome["crash_class"] == "bad_flag" and outcome["step"] == "restart"
        r = runner.invoke(cli, ["-c", str(cfg), "todo", "run", "2"])  # as text: the log's lines one a line, indented
        assert r.exit_code == 1, r.output
        first, *rest = r.stdout.splitlines()
        assert first.startswith("#2 todo-2.2 failed: failed at restart: bad_flag — ") and "⏎" not in r.stdout, r.stdout
        assert rest[0] == "    launch_server.py: error: unrecognized arguments: --no-such-flag=1", r.stdout
        assert rest[-1] == "  demo is down; back to its last good flags: optui restart demo --rollback", r.stdout
    finally:
        from optui.adapters import proc

        launch = session.servers["demo"].controller.recorded()  # whatever the CLI left running
        if launch is not None:
            proc.kill_group_now(launch.pid)
        session.journal.close()


async def test_a_run_cut_short_by_a_killed_optui_is_marked_interrupted(tmp_path):
    from optui.adapters.journal import Journal

    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "none"\n')
    j = Journal(tmp_path / ".optui" / "optui.db")
    dead = j.add_todo("was running", experiment={"server": "demo"})
    j.update_todo(dead.id, status="in_progress", meta={"experiment_run": {"id": "todo-1.1", "status": "running", "pid": 2**22 + 7}})
    alive = j.add_todo("running elsewhere", experiment={"server": "demo"})
    j.update_todo(alive.id, status="in_progress", meta={"experiment_run": {"id": "todo-2.1", "status": "running", "pid": 1}})
    j.close()
    session = Session(load_config(cfg))
    await session.start()
    try:
        dead, alive = session.journal.todos()
        assert dead.status is TodoStatus.PENDING and dead.run["status"] == "interrupted"
        assert alive.status is TodoStatus.IN_PROGRESS and alive.run["status"] == "running"  # its process lives
        (fin,) = session.journal.events(types=["todo.run.finished"])
        assert fin.data["run_id"] == "todo-1.1" and fin.data["status"] == "interrupted"
    finally:
        await session.close()


async def test_an_experiment_with_a_bad_value_fails_before_the_server_stops(tmp_path):
    """A todo experiment (an agent's) goes through the same checks as the TUI and the CLI."""
    import asyncio

    session = Session(load_config(demo_campaign(tmp_path)), stop_servers_on_exit=True)
    await session.start()
    try:
        for _ in range(400):  # the demo autostarts
            if ready(session):
                break
            await asyncio.sleep(0.1)
        rt = session.servers["demo"]
        assert ready(session)
        pid, seq = rt.status.pid, session.journal.last_seq()
        item = session.todos.add("fp4 KV cache", "high", {"server": "demo", "set": {"--kv-cache-dtype": "fp4"}, "bench": ["tiny"]})
        outcome = await session.todo_runs.run_one(item.id)
        assert (outcome.status, outcome.step) == ("failed", "restart")
        assert "invalid choice: 'fp4'" in outcome.summary and "the server was not stopped" in outcome.summary
        assert rt.status.state.value == "ready" and rt.status.pid == pid
        assert not session.journal.events(since_seq=seq, types=["server.restart", "server.stopped"])
    finally:
        await session.close()
        session.kill_leftovers()
