"""The ``[agent]`` policy on an agent's restart (pure: core/agent_requests.restart_policy) and
the request queue's fold (pending_requests): which requests still wait for the operator."""

from __future__ import annotations

import pytest

from optui.config import ConfigError, parse_config_text
from optui.core.agent_requests import AGENT_DECISION, AGENT_REQUEST, pending_requests, restart_policy
from optui.core.events import Event


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
