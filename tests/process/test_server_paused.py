"""A paused server is HUNG, never DOWN, and a frozen one leaves READY within a stated bound
(issue 29; the bound is in core/server/fsm.py's docstring and docs/faults.md). A SIGSTOPped
demo server read ``down`` in ``optui status`` and stayed READY for 31-35 s in a session
(its health probe waited out the 25 s timeout, then the load probe its own).

Real demo server processes, stopped and continued with real signals; bounded waits only
(each shorter than the 25 s health timeout the old code waited out)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from optui.adapters import proc
from optui.config import load_config
from optui.session import Session
from tests.helpers.faults import demo_config, stored_events
from tests.process.test_cli_headless import kill_demo_server, optui, small_demo_config

pytestmark = pytest.mark.timeout(150)


async def _until(predicate, what: str, timeout_s: float) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_stopped_server_is_hung_at_once_and_ready_again_when_continued(tmp_path):
    cfg = demo_config(tmp_path)  # kind sglang: the 25 s health timeout
    cfg.write_text(cfg.read_text().replace("poll_interval_s = 1.0", "poll_interval_s = 0.2"))
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    await session.start()
    rt = session.servers["demo"]
    pid = None
    try:
        await _until(lambda: rt.status.state.value == "ready" and rt.status.busy is None, "server ready", 60)
        pid = rt.status.pid
        assert not proc.group_stopped(pid)
        os.killpg(pid, signal.SIGSTOP)
        await _until(lambda: proc.group_stopped(pid), "the kernel to stop the group", 5)
        await _until(lambda: rt.status.state.value != "ready", "the stopped server to leave READY", 15)
        assert rt.status.state.value == "hung", rt.status.state
        assert "SIGSTOP" in (rt.status.message or ""), rt.status.message
        os.killpg(pid, signal.SIGCONT)
        await _until(lambda: rt.status.state.value == "ready", "ready again after SIGCONT", 30)
        assert rt.status.message is None
        states = [(e.data["old"], e.data["new"]) for e in stored_events(session.journal.path, types=["server.state"])]
        assert ("ready", "hung") in states and ("hung", "ready") in states, states
        alerts = [e.data for e in stored_events(session.journal.path, types=["alert"])]
        assert any(a["kind"] == "hung" and a.get("source") == "process" for a in alerts), alerts
    finally:
        if pid is not None:
            os.killpg(pid, signal.SIGCONT)  # never leave a stopped process behind
        await session.close()


def test_optui_status_reads_a_paused_server_as_hung_never_down(tmp_path):
    cfg = small_demo_config(tmp_path)
    pid = None
    try:
        started = optui(cfg, "restart", "demo", "--json")
        assert started.returncode == 0, started.stderr
        pid = json.loads((cfg.parent / ".optui" / "servers" / "demo.json").read_text())["pid"]
        os.killpg(pid, signal.SIGSTOP)
        res = optui(cfg, "status", "--json", "--wait", "2")
        assert res.returncode == 0, res.stderr
        (server,) = json.loads(res.stdout)["servers"]
        assert server["state"] == "hung", server
        assert "SIGSTOP" in (server["message"] or ""), server
        text = optui(cfg, "status", "--wait", "2")
        assert "server demo: hung" in text.stdout, text.stdout
        os.killpg(pid, signal.SIGCONT)
        again = json.loads(optui(cfg, "status", "--json", "--wait", "3").stdout)["servers"][0]
        assert again["state"] == "ready", again
    finally:
        if pid is not None:
            os.killpg(pid, signal.SIGCONT)
        kill_demo_server(cfg)


def test_the_state_machine_reads_a_stopped_or_frozen_server_as_hung_never_down():
    from optui.core.server.fsm import Observation, next_state
    from optui.core.server.state import ServerState as S

    paused = Observation("running", None, paused=True)
    for prev in (S.READY, S.DEGRADED, S.DOWN, S.HUNG):
        assert next_state(prev, paused, 1) is S.HUNG
    assert next_state(S.READY, Observation("exited", paused=True), 1) is S.CRASHED  # gone wins
    assert next_state(S.READY, Observation("running", paused=True, stopping=True), 1) is S.STOPPING
    # an observed server whose probes connect and time out is frozen: DEGRADED, then HUNG
    frozen = Observation("unknown", None, timed_out=True, unhealthy_s=5.0, hung_by_load=False)
    assert next_state(S.READY, frozen, 3, escalate_after_s=30) is S.DEGRADED
    late = Observation("unknown", None, timed_out=True, unhealthy_s=31.0, hung_by_load=False)
    assert next_state(S.DEGRADED, late, 9, escalate_after_s=30) is S.HUNG
    # refused connections: gone
    assert next_state(S.DEGRADED, Observation("unknown", None, unhealthy_s=31.0), 3, escalate_after_s=30) is S.DOWN
