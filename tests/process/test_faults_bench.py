"""Fault injection, benchmarks (issue 8): a client printing garbage (random bytes, a 1 MB
line, invalid UTF-8, escapes, a carriage-return flood) and a client that goes silent while
the server stays healthy. The real app over the demo campaign, a fake SGLang client as a real
subprocess (tests/helpers/fake_bench.py); the UI never freezes over 1 s, the output stays
bounded, results still come from the good lines, every outcome is journaled.

The runner alone (huge lines, 200k redraws, silent with the server down, abort):
tests/process/test_bench_runner.py; the server killed mid-benchmark: tests/process/test_faults_server.py.
"""

from __future__ import annotations

import json
import sys

import pytest

from optui.config import BenchmarkConfig
from tests.helpers.faults import FAKE_TOOLS, Heartbeat, demo_app, gone, ready, stored_events, wait_for

pytestmark = [pytest.mark.timeout(120), pytest.mark.serial]  # the UI gaps bench/ui_gaps.py prints come from here
MAX_LINE = 64 * 1024  # LineSplitter's default cap (characters)
TOOL = [sys.executable, str(FAKE_TOOLS / "sglang" / "bench_serving.py"), "--num-prompts", "8"]


def preset(name: str, *args: str, extra: str = "") -> str:
    return f'[benchmarks.{name}]\nserver = "demo"\nargv = {json.dumps([*TOOL, *args])}\n{extra}\n'


async def test_garbage_megabyte_line_and_invalid_utf8_keep_the_results_and_the_ui(tmp_path):
    app = demo_app(tmp_path, benchmarks=preset("noisy", "--garbage"))
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        beat = Heartbeat(app)
        run = session.benches.run("noisy")
        await wait_for(pilot, lambda: not session.benches.running, timeout=60, what="bench end")
        await session.synced()  # the run's events are written on the journal thread
        finished = stored_events(session.journal.path, types=["bench.finished"])[-1].data
        assert finished["status"] == "ok", finished
        assert finished["result"]["output_throughput_tok_s"] == 100.12  # parsed from the printed block
        lines = run.lines
        assert "invalid utf-8: \ufffd\ufffd\ufffd( \ufffd end" in lines
        assert max(map(len, lines)) <= MAX_LINE + 100  # the 1 MB line is cut, not kept
        assert sum(map(len, lines)) < 2_000_000  # bounded memory for the whole run's output
        assert not any("\r" in line or "\x1b" in line for line in lines)
        log = app.query_one("#bench-log")
        await wait_for(pilot, lambda: any("end" in str(x) for x in log.lines), what="output in the panel")
        assert max(len(str(x)) for x in log.lines) <= MAX_LINE + 100
        assert "[bold]not markup[/bold]" in "\n".join(map(str, log.lines))  # shown as text, never parsed as markup
        beat.stop()
        assert gone(run.pid)
        await pilot.press("q")


async def test_silent_client_with_a_healthy_server_is_stalled_after_silent_s(tmp_path):
    app = demo_app(tmp_path, benchmarks=preset("quiet", "--silent", "300", extra="silent_s = 1.5"))
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        beat = Heartbeat(app)
        run = session.benches.run("quiet")
        await wait_for(pilot, lambda: not session.benches.running, timeout=30, what="stall")
        await session.synced()  # the run's events are written on the journal thread
        assert rt.status.state.value == "ready"  # the server was healthy all along
        finished = stored_events(session.journal.path, types=["bench.finished"])[-1].data
        assert finished["status"] == "stalled"
        assert "although the server is healthy: the client seems stuck" in finished["error"]
        alerts = [e.data for e in stored_events(session.journal.path, types=["alert"])]
        assert [a["kind"] for a in alerts] == ["bench_stalled"]
        await wait_for(pilot, lambda: any("stalled" in n.message for n in app._notifications), what="notification")
        assert "STALLED" in str(app.query_one("#bench-status").render())
        assert gone(run.pid)
        beat.stop()
        await pilot.press("q")


def test_a_silent_client_is_stopped_after_10_minutes_by_default():
    cfg = BenchmarkConfig(server="s", argv=["x"])
    assert cfg.silent_s == 600.0 and cfg.stall_s == 120.0
