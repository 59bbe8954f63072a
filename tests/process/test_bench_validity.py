"""Only valid runs count (issue 29): a benchmark during which the server was HUNG or DEGRADED,
or whose largest token gap exceeded the stall watchdog, is ``invalid`` with its reason: stored
and shown, never compared, never a baseline. A run spanning a 65 s SIGSTOP, during which optui
itself journaled HUNG, was stored ``ok`` and became the workload's baseline.

The real session over the demo campaign; the server is a real process, stopped and continued
with real signals (bounded waits, no duration asserted)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.core.bench.result import BenchResult, comparable
from optui.core.bench.validity import StateTimeline, invalid_reason, mark_invalid
from optui.core.journal.experiments import build_experiments
from optui.session import Session
from optui.session.errors import SessionError
from tests.helpers.faults import demo_config, observed_demo

pytestmark = pytest.mark.timeout(120)

# kind "openai": the demo's protocol without SGLang's 25 s health minimum (probes time out in 0.5 s)
FAST_STATES = "hung_after_s = 1.0\nhealth_timeout_s = 0.5"
BENCH = ('[benchmarks.steady]\nserver = "demo"\nstall_s = 60.0\n'
         'builtin = { concurrency = [1], input_len = 16, output_len = 400, prompts = 2, warmup = 0 }\n')


async def _until(predicate, what: str, timeout_s: float = 60.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_states_of_a_run_and_the_reason_it_is_invalid():
    line = StateTimeline("ready", 0.0)
    line.enter("degraded", 10.0)
    line.enter("hung", 14.0)
    line.enter("ready", 79.0)
    assert line.bad_seconds(0.0, 100.0) == {"degraded": 4.0, "hung": 65.0}
    assert line.bad_seconds(0.0, 9.0) == {}  # before the freeze: a valid run
    assert line.bad_seconds(80.0, 100.0) == {}  # after it
    assert line.bad_seconds(20.0, 30.0) == {"hung": 10.0}  # entered before, still on
    assert invalid_reason(line.bad_seconds(15.0, 100.0)) == "server hung 64 s during the run"
    assert invalid_reason({"degraded": 0.3}) == "server degraded <1 s during the run"
    assert invalid_reason({}) is None
    # the noisy case: slow tokens under the watchdog are not a reason; over it they are
    assert invalid_reason({}, max_gap_ms=119_000, stall_s=120) is None
    assert invalid_reason({}, max_gap_ms=130_000, stall_s=120) == "largest token gap 130 s > stall watchdog 120 s"
    result = BenchResult(status="ok", completed=10, failed=0)
    mark_invalid(result, "server hung 65 s during the run")
    assert result.status == "invalid" and result.error == "invalid: server hung 65 s during the run"
    assert not comparable(result)
    # a failed run stays failed: invalidity is for runs that measured something
    failed = BenchResult(status="failed", error="no result")
    assert not comparable(failed)


async def _session(tmp_path, *, fast_states: bool, bench: str = BENCH) -> Session:
    cfg = demo_config(tmp_path, server_extra=FAST_STATES if fast_states else "", benchmarks=bench)
    text = cfg.read_text()
    if fast_states:
        text = text.replace('kind = "sglang"', 'kind = "openai"')
    cfg.write_text(text.replace("poll_interval_s = 1.0", "poll_interval_s = 0.2"))
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    await session.start()
    return session


async def test_a_run_over_a_hung_server_is_invalid_and_never_the_baseline(tmp_path):
    session = await _session(tmp_path, fast_states=True)
    rt = session.servers["demo"]
    pid = None
    try:
        await _until(lambda: rt.status.state.value == "ready" and rt.status.busy is None, "server ready")
        pid = rt.status.pid
        run = session.benches.run("steady")
        await _until(lambda: (rt.status.load.generated_total or 0) > 0 and (rt.status.load.running or 0) >= 1,
                     "tokens streaming")
        os.killpg(pid, signal.SIGSTOP)
        await _until(lambda: rt.status.state.value == "hung", "optui to call the stopped server HUNG")
        os.killpg(pid, signal.SIGCONT)
        await session.benches.wait()
        view = run.view
        assert [r.status for r in view.results] == ["invalid"], [(r.status, r.error) for r in view.results]
        error = view.results[0].error or ""
        assert error.startswith("invalid: server ") and "hung" in error and "during the run" in error, error
        assert any("invalid: server" in line and "never compared" in line for line in run.lines)
        await _until(lambda: rt.status.state.value == "ready", "ready again after SIGCONT")
        # the next run, on a healthy server, is the workload's baseline; the invalid one is not
        session.benches.run("steady")
        await session.benches.wait()
        assert session.benches.current is not None
        assert [r.status for r in session.benches.current.view.results] == ["ok"]
        journal = Journal(session.journal.path, read_only=True)
        try:
            stored = sorted(journal.results(server="demo"), key=lambda r: r.id)
            events = journal.events()
        finally:
            journal.close()
        assert [r.result.status for r in stored] == ["invalid", "ok"]
        assert stored[0].result.error == error  # stored with its reason
        with pytest.raises(SessionError, match="invalid: server .*cannot be the baseline"):
            session.benches.pin_baseline(stored[0].id)
        experiments = build_experiments(events, stored)
        (exp,) = [x for x in experiments if x.workloads]
        (w,) = exp.workloads
        assert w.n_ok == 1 and len(w.runs) == 2  # the invalid run is listed, not counted
        assert w.base_values is not None and w.base_values["output_throughput_tok_s"] == pytest.approx(
            stored[1].result.output_throughput_tok_s)
    finally:
        if pid is not None:
            os.killpg(pid, signal.SIGCONT)  # never leave a stopped process behind
        await session.close()


async def test_a_token_gap_over_the_stall_watchdog_makes_a_run_invalid_though_the_state_never_changed(tmp_path):
    # an observed server (optui cannot see its process stopped) with SGLang's 25 s health
    # timeout: a 2.5 s freeze never leaves READY, the watchdog (server healthy, silent_s 600)
    # never stops the run, but its largest token gap exceeds stall_s
    cfg = demo_config(tmp_path, benchmarks=BENCH.replace("stall_s = 60.0", "stall_s = 1.0"))
    cfg.write_text(cfg.read_text().replace("poll_interval_s = 1.0", "poll_interval_s = 0.2"))
    with observed_demo(cfg) as server:
        await _gap_run(cfg, server.pid)


async def _gap_run(cfg, pid: int) -> None:
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    await session.start()
    rt = session.servers["demo"]
    try:
        await _until(lambda: rt.status.state.value == "ready" and rt.status.busy is None, "server ready")
        run = session.benches.run("steady")
        await _until(lambda: (rt.status.load.generated_total or 0) > 0 and (rt.status.load.running or 0) >= 1,
                     "tokens streaming")
        os.killpg(pid, signal.SIGSTOP)
        await asyncio.sleep(2.5)
        os.killpg(pid, signal.SIGCONT)
        await session.benches.wait()
        (result,) = run.view.results
        assert result.status == "invalid", (result.status, result.error)
        assert result.error is not None and "largest token gap" in result.error and "> stall watchdog 1 s" in result.error
        assert "server " not in result.error  # the states never left READY: the gap alone decided
    finally:
        os.killpg(pid, signal.SIGCONT)
        await session.close()


SEARCH = '''
[benchmarks.twice]
server = "demo"
repeat = 2
stall_s = 60.0
builtin = { concurrency = [1], input_len = 16, output_len = 400, prompts = 2, warmup = 0 }

[search.frozen]
server = "demo"
bench = "twice"
confirm_top = 0
[search.frozen.flags]
"--max-running-requests" = [4]
'''


async def test_a_search_never_scores_an_invalid_run(tmp_path):
    """A trial of two repeats, the first measured over a HUNG server: its score rests on the
    valid repeat alone (it pooled both)."""
    from optui.core.search.spec import parse_search_text

    session = await _session(tmp_path, fast_states=True, bench=SEARCH)
    rt = session.servers["demo"]
    pid = None
    try:
        await _until(lambda: rt.status.state.value == "ready" and rt.status.busy is None, "server ready")
        cfg_text = session.loaded.path.read_text()
        await session.search.start(parse_search_text(cfg_text, str(session.loaded.path), "frozen"), "frozen")
        await _until(lambda: session.benches.running and (rt.status.load.running or 0) >= 1
                     and (rt.status.load.generated_total or 0) > 0, "the trial's first repeat streaming", 90)
        pid = rt.status.pid
        os.killpg(pid, signal.SIGSTOP)
        await _until(lambda: rt.status.state.value == "hung", "optui to call the stopped server HUNG")
        os.killpg(pid, signal.SIGCONT)
        end = await asyncio.wait_for(session.search.wait(), 90)
        (trial,) = session.search.trials
        statuses = sorted(r.result.status for r in session.journal.results(server="demo", limit=10))
        assert statuses == ["invalid", "ok"], statuses
        assert trial.status == "ok" and len(trial.run_scores) == 1, (end.message, trial)
    finally:
        if pid is not None:
            os.killpg(pid, signal.SIGCONT)
        await session.close()
        session.kill_leftovers()
