"""Hangs end (issue 16): a SIGSTOPped demo server turns DEGRADED with its reason, then HUNG by
the stated rule (unhealthy for more than ``hung_after_s``), and the built-in generator's
benchmark on it is stopped by the stall watchdog (``stall_s``), marked ``stalled`` with an
alert, its requests cancelled. SIGCONT brings it back to READY.

The server is an observed one (``control = "none"``): optui cannot see that its process is
stopped (a managed server's SIGSTOP is HUNG at once: test_server_paused.py), so its health
probes time out; they connected, so it is DEGRADED then HUNG, never DOWN (issue 29).

The real session over the demo campaign, headless; the server is a real process, stopped
and continued with real signals.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from optui.config import load_config
from optui.session import Session
from tests.helpers.faults import demo_config, observed_demo, stored_events

pytestmark = pytest.mark.timeout(120)

# kind "openai": the demo server's protocol without SGLang's 25 s health-probe minimum, so a
# stopped server's probes time out in 0.5 s
SERVER = "hung_after_s = 1.0\nhealth_timeout_s = 0.5"
BENCH = ('[benchmarks.long]\nserver = "demo"\nstall_s = 1.0\n'
         'builtin = { concurrency = [1], input_len = 16, output_len = 5000, prompts = 2, warmup = 0 }\n')


async def _until(predicate, what: str, timeout_s: float = 60.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_stopped_server_is_degraded_with_its_reason_then_hung_and_its_builtin_bench_stalls(tmp_path):
    cfg = demo_config(tmp_path, server_extra=SERVER, benchmarks=BENCH)
    text = cfg.read_text().replace('kind = "sglang"', 'kind = "openai"')
    cfg.write_text(text.replace("poll_interval_s = 1.0", "poll_interval_s = 0.2"))
    with observed_demo(cfg) as server:
        await _stalls_then_recovers(cfg, server.pid)


async def _stalls_then_recovers(cfg, pid: int) -> None:
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    await session.start()
    rt = session.servers["demo"]
    try:
        await _until(lambda: rt.status.state.value == "ready" and rt.status.busy is None, "server ready")
        run = session.benches.run("long")
        await _until(lambda: (rt.status.load.generated_total or 0) > 0 and (rt.status.load.running or 0) >= 1,
                     "tokens streaming")
        os.killpg(pid, signal.SIGSTOP)
        await _until(lambda: not session.benches.running, "the watchdog to stop the benchmark")
        view = run.view
        assert view.status == "stalled", (view.status, view.error)
        assert "no token streamed" in view.error and "not healthy" in view.error, view.error
        assert any("its requests were cancelled" in line for line in run.lines)
        db = session.journal.path
        alerts = [e.data for e in stored_events(db, types=["alert"])]
        assert any(a["kind"] == "bench_stalled" for a in alerts), alerts
        finished = stored_events(db, types=["bench.finished"])[-1].data
        assert finished["status"] == "stalled"
        # DEGRADED said why, in the status and the journal, then escalated by the rule
        states = [e.data for e in stored_events(db, types=["server.state"])]
        degraded = next(d for d in states if d["new"] == "degraded")
        assert degraded["reason"].startswith("health: timeout"), degraded
        hung = next(d for d in states if d["new"] == "hung")
        assert "health: timeout" in hung["reason"], hung
        assert rt.status.state.value == "hung" and rt.status.message.startswith("health: timeout")
        assert any(a["kind"] == "hung" and a.get("source") == "health" for a in alerts), alerts
        assert rt.status.load.stale  # the last numbers, marked: the server did not answer
        os.killpg(pid, signal.SIGCONT)
        await _until(lambda: rt.status.state.value == "ready", "ready again after SIGCONT")
        assert rt.status.message is None and not rt.status.load.stale
        assert any(e.data["kind"] == "recovered" for e in stored_events(db, types=["alert"]))
        assert "down" not in [e.data["new"] for e in stored_events(db, types=["server.state"])]  # frozen, not gone
    finally:
        os.killpg(pid, signal.SIGCONT)  # never leave a stopped process behind
        await session.close()
