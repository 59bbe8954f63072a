"""The ``[agent]`` policy on an agent's restart (pure: core/agent_requests.restart_policy) and
the request queue's fold (pending_requests): which requests still wait for the operator."""

from __future__ import annotations

import pytest

from optui.config import ConfigError, parse_config_text
from optui.core.agent.requests import (
    AGENT_DECISION,
    AGENT_OUTCOME,
    AGENT_REQUEST,
    AgentRequest,
    busy_request,
    pending_requests,
    restart_policy,
)
from optui.core.journal import events as ev
from optui.core.journal.events import Event


def policy(changed, *, allowed=(), forbidden=(), max_per_hour=10, done=0):
    return restart_policy(changed, allowed=allowed, forbidden=forbidden, max_per_hour=max_per_hour,
                          restarts_last_hour=done)


def test_restart_policy_asks_allows_or_refuses():
    assert policy(["--max-running-requests"]).verdict == "ask"
    allowed = policy(["--max-running-requests"], allowed=["max-running-requests", "--chunked-prefill-size"])
    assert (allowed.verdict, allowed.reason) == ("allow", "[agent] allowed_flags: --max-running-requests")
    assert policy(["--max-running-requests", "--tp-size"], allowed=["--max-running-requests"]).verdict == "ask"
    assert policy([], allowed=["--max-running-requests"]).verdict == "ask", "the same flags: the operator decides"
    banned = policy(["--tp-size", "--max-running-requests"], allowed=["--max-running-requests"], forbidden=["tp-size"])
    assert (banned.verdict, banned.reason) == ("refuse", "[agent] forbidden_flags: --tp-size")
    limited = policy(["--max-running-requests"], allowed=["--max-running-requests"], max_per_hour=3, done=3)
    assert limited.verdict == "refuse" and "max_restarts_per_hour = 3: 3 restarts" in limited.reason
    assert policy(["--x"], max_per_hour=0).verdict == "refuse"


def event(seq: int, type: str, data: dict, actor: str = "agent:claude") -> Event:
    return Event(seq=seq, ts=1000.0 + seq, type=type, target="demo", actor=actor, experiment=None, data=data)


def test_pending_requests_are_the_undecided_ones_before_their_deadline():
    events = [event(1, AGENT_REQUEST, {"action": "restart", "diff": ["~ --a: 1 → 2"], "why": "w", "deadline_ts": 2000.0}),
              event(2, AGENT_REQUEST, {"action": "restart", "deadline_ts": 2000.0}),
              event(3, AGENT_REQUEST, {"action": "restart", "deadline_ts": 1500.0}),
              event(4, AGENT_DECISION, {"request": 2, "decision": "denied"}, actor="tui")]
    waiting = pending_requests(events, now=1600.0)
    assert [r.seq for r in waiting] == [1]
    assert (waiting[0].agent, waiting[0].diff, waiting[0].why) == ("agent:claude", ("~ --a: 1 → 2",), "w")
    assert [r.seq for r in pending_requests(events, now=1400.0)] == [1, 3]


def test_agent_section_is_validated():
    cfg = parse_config_text('[agent]\nallowed_flags = ["--max-running-requests"]\nmax_restarts_per_hour = 2\n', "optui.toml")
    assert cfg.agent.allowed_flags == ["--max-running-requests"] and cfg.agent.max_restarts_per_hour == 2
    with pytest.raises(ConfigError, match="max_restarts_per_hour"):
        parse_config_text("[agent]\nmax_restarts_per_hour = -1\n", "optui.toml")


def test_agent_events_read_as_one_line_each_with_the_agent_and_the_change():
    diff = ["~ --max-running-requests: 4 → 8"]
    asked = {"agent": "agent:codex", "action": "experiment", "diff": [*diff, "benchmark sweep x3"]}
    lines = [e.summary() for e in (
        event(1, AGENT_REQUEST, {"action": "benchmark", "diff": ["benchmark sweep x3"], "why": "measure"}),
        event(2, AGENT_REQUEST, {"action": "restart", "diff": [], "why": ""}),
        event(3, AGENT_DECISION, {"request": 7, "decision": "timeout", **asked}, actor="agent:codex"),
        event(4, AGENT_DECISION, {"request": 7, "decision": "allowed", "policy": "[agent] allowed_flags: --x", **asked}),
        event(5, AGENT_DECISION, {"request": 7, "decision": "denied"}, actor="tui"),  # an older journal's decision
        event(6, AGENT_OUTCOME, {"request": 7, "action": "experiment", "outcome": "ran", "state": "ready",
                                 "verdict": "better +5.0% (n=3 vs 3)", "unverified": ["--x 8: server runs x=4"]}),
        event(7, AGENT_OUTCOME, {"request": 8, "action": "restart", "outcome": "ran", "state": "crashed",
                                 "crash_class": "oom"}),
        event(8, AGENT_OUTCOME, {"request": 9, "action": "restart", "outcome": "refused", "error": "demo is locked"}))]
    assert lines == [
        "agent:claude asks to benchmark sweep x3 — why: measure",
        "agent:claude asks to restart: the same flags",
        "agent:codex's request #7 to run an experiment: ~ --max-running-requests: 4 → 8; benchmark sweep x3 timed out: "
        "nobody answered",
        "allowed by the policy: agent:codex's request #7 to run an experiment: ~ --max-running-requests: 4 → 8; "
        "benchmark sweep x3 ([agent] allowed_flags: --x)",
        "tui denied an agent's request #7",
        "agent:claude's request #7 (experiment) ran: ready, verdict better +5.0% (n=3 vs 3), unverified: --x 8: server runs x=4",
        "agent:claude's request #8 (restart) ran: crashed (oom)",
        "agent:claude's request #9 (restart) refused: demo is locked"]
    assert ev.TYPE_GROUPS["agent"] == {AGENT_REQUEST, AGENT_DECISION, AGENT_OUTCOME}


def test_a_request_holds_its_server_while_it_waits_or_runs():
    def busy(events, before=100, now=1600.0, alive=lambda pid: pid == 42):
        found = busy_request(events, "demo", before_seq=before, now=now, alive=alive)
        return found and found.seq

    waiting = event(1, AGENT_REQUEST, {"action": "restart", "diff": ["~ --a: 1 → 2"], "deadline_ts": 2000.0, "pid": 42})
    assert busy([waiting]) == 1
    assert busy([waiting], now=2100.0) is None, "past its deadline"
    assert busy([waiting], alive=lambda pid: False) is None, "the optui mcp that asked is gone"
    assert busy([waiting], before=1) is None, "only earlier requests hold the server"
    approved = event(2, AGENT_DECISION, {"request": 1, "decision": "approved"}, actor="tui")
    assert busy([waiting, approved], now=2100.0) == 1, "approved and running: no deadline"
    assert busy([waiting, approved, event(3, AGENT_OUTCOME, {"request": 1, "outcome": "ran"})]) is None
    assert busy([waiting, event(2, AGENT_DECISION, {"request": 1, "decision": "denied"})]) is None
    other = Event(seq=5, ts=1.0, type=AGENT_REQUEST, target="llama", actor="agent:x", data={"deadline_ts": 2000.0})
    assert busy([other]) is None, "another server"
    assert AgentRequest.from_event(waiting).describe() == "agent:claude's request #1 (restart demo: ~ --a: 1 → 2)"


def test_the_decision_door_journals_one_decision_per_request_and_refuses_a_closed_one(tmp_path):
    """session/agent_requests.decide_request, on a real SQLite journal: a second window's
    answer, one after the deadline, one after the asking optui mcp ended, and the agent's
    timeout before the deadline are refused, and nothing of them is journaled."""
    import os
    import subprocess
    import sys
    import time

    from optui.adapters.journal import Journal
    from optui.session.agent_requests import RequestClosed, decide_request
    from optui.session.errors import SessionError

    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # an optui mcp that ended
    dead.wait()
    j = Journal(tmp_path / "optui.db")
    try:
        def ask(deadline_in: float, pid: int) -> int:
            return j.append(AGENT_REQUEST, "demo", {"action": "restart", "diff": ["~ --x: 1 → 2"], "argv": [], "why": "w",
                                                     "deadline_ts": time.time() + deadline_in, "pid": pid},
                            actor="agent:mcp").seq

        first, late, gone = ask(300, os.getpid()), ask(-1, os.getpid()), ask(300, dead.pid)
        assert decide_request(j, first, "approved", actor="tui").decision == "approved"
        with pytest.raises(RequestClosed, match=rf"request #{first} .*no longer waits \(approved by tui\): denied was not journaled"):
            decide_request(j, first, "denied", actor="tui")
        with pytest.raises(RequestClosed, match=r"no longer waits \(timed out\)"):
            decide_request(j, late, "approved", actor="tui")
        with pytest.raises(RequestClosed, match=r"withdrawn: its optui mcp process ended"):
            decide_request(j, gone, "denied", actor="tui")
        waiting = ask(300, os.getpid())
        with pytest.raises(RequestClosed, match=r"still waits \((300|299) s to its deadline\): the timeout was not journaled"):
            decide_request(j, waiting, "timeout", actor="agent:mcp")
        assert decide_request(j, late, "timeout", actor="agent:mcp").decision == "timeout"
        with pytest.raises(SessionError, match=f"no agent request #{waiting + 1}"):
            decide_request(j, waiting + 1, "approved", actor="tui")
        decisions = [(e.data["request"], e.data["decision"], e.actor) for e in j.events(types=[AGENT_DECISION])]
        # the request whose optui mcp ended gets its withdrawal journaled by the window that found it gone
        assert decisions == [(first, "approved", "tui"), (gone, "withdrawn", "tui"), (late, "timeout", "agent:mcp")]
        assert j.events(types=[AGENT_DECISION])[0].data["diff"] == ["~ --x: 1 → 2"]  # says what was decided on
    finally:
        j.close()
