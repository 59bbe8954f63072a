"""An agent's requests to change a server, and the operator's decisions, as journal events
(pure: :mod:`optui.session.agent_requests` writes and waits for them).

An agent (``optui mcp``) that wants to restart a server journals an ``agent.request`` event
(who asks, the action, the server, the flag diff, why, until when it waits); every optui
window on the campaign reads it with the rest of the journal and shows it (a queue screen
with approve/deny keys); the operator's answer is an ``agent.decision`` event (approved or
denied, by whom); a request nobody answered before its deadline gets an ``agent.decision``
``timeout`` from the agent's side. The journal is the only channel: the agent and the TUI are
separate processes, and every request and decision stays on the record with its actors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optui.core.events import Event

AGENT_REQUEST = "agent.request"
AGENT_DECISION = "agent.decision"
APPROVED, DENIED, TIMEOUT = "approved", "denied", "timeout"
#: decisions the config's ``[agent]`` policy made (allowed_flags; forbidden flags, the hourly
#: limit), journaled like the operator's with the policy's reason
ALLOWED, REFUSED = "allowed", "refused"


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One waiting request: journal ``seq`` of its ``agent.request`` event, the ``agent``
    (``agent:NAME``), the ``action`` ("restart"), the ``server``, the flag ``diff`` lines
    (``~ --max-running-requests: 4 → 8``), ``argv`` it would run, ``why``, and
    ``deadline_ts`` (Unix s) after which it times out."""

    seq: int
    agent: str
    action: str
    server: str | None
    diff: tuple[str, ...]
    argv: tuple[str, ...]
    why: str
    deadline_ts: float

    @classmethod
    def from_event(cls, e: Event) -> AgentRequest:
        d = e.data
        return cls(seq=e.seq, agent=e.actor, action=str(d.get("action", "?")), server=e.target,
                   diff=tuple(d.get("diff") or ()), argv=tuple(d.get("argv") or ()), why=str(d.get("why") or ""),
                   deadline_ts=float(d.get("deadline_ts") or e.ts))


@dataclass(frozen=True, slots=True)
class Decision:
    """How a request ended: ``decision`` (approved, denied, timeout), ``by`` (the actor who
    decided: ``tui``, or the agent for a timeout), the request's journal ``request_seq``."""

    request_seq: int
    decision: str
    by: str
    policy: str | None = None

    @property
    def go(self) -> bool:
        """The action may run: approved by the operator or allowed by the policy."""
        return self.decision in (APPROVED, ALLOWED)

    def to_json(self) -> dict:
        return {"request": self.request_seq, "decision": self.decision, "by": self.by,
                **({"policy": self.policy} if self.policy else {})}


def pending_requests(events: Iterable[Event], now: float) -> list[AgentRequest]:
    """The requests among ``events`` that have no decision among them and whose deadline
    is after ``now`` (Unix s), oldest first."""
    requests: dict[int, AgentRequest] = {}
    decided: set[int] = set()
    for e in events:
        if e.type == AGENT_REQUEST:
            requests[e.seq] = AgentRequest.from_event(e)
        elif e.type == AGENT_DECISION and isinstance(e.data.get("request"), int):
            decided.add(e.data["request"])
    return [r for seq, r in sorted(requests.items()) if seq not in decided and r.deadline_ts > now]


def decision_data(request_seq: int, decision: str, policy: str | None = None) -> dict:
    """The ``data`` of an ``agent.decision`` event (``policy``: the reason of a policy's decision)."""
    if decision not in (APPROVED, DENIED, TIMEOUT, ALLOWED, REFUSED):
        raise ValueError(f"unknown decision {decision!r}")
    return {"request": request_seq, "decision": decision, **({"policy": policy} if policy else {})}


def find_decision(events: Sequence[Event], request_seq: int) -> Decision | None:
    """The first decision on request ``request_seq`` among ``events``."""
    for e in events:
        if e.type == AGENT_DECISION and e.data.get("request") == request_seq:
            return Decision(request_seq, str(e.data.get("decision")), e.actor)
    return None


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """What the ``[agent]`` policy says of a restart: ``verdict`` "ask" (the operator
    decides), "allow" (runs without asking) or "refuse"; ``reason`` in words."""

    verdict: str
    reason: str


def restart_policy(changed: Sequence[str], *, allowed: Sequence[str], forbidden: Sequence[str],
                   max_per_hour: int, restarts_last_hour: int) -> PolicyVerdict:
    """The policy's verdict on an agent's restart changing the flags named ``changed``
    (``--max-running-requests``; a name without dashes in the lists means the same flag),
    after ``restarts_last_hour`` restarts by agents."""
    def canon(name: str) -> str:
        return name if name.startswith("-") else f"--{name}"

    banned = sorted(set(changed) & {canon(f) for f in forbidden})
    if banned:
        return PolicyVerdict("refuse", f"[agent] forbidden_flags: {', '.join(banned)}")
    if restarts_last_hour >= max_per_hour:
        return PolicyVerdict("refuse", f"[agent] max_restarts_per_hour = {max_per_hour}: "
                                       f"{restarts_last_hour} restarts by agents in the last hour")
    if changed and set(changed) <= {canon(f) for f in allowed}:
        return PolicyVerdict("allow", f"[agent] allowed_flags: {', '.join(sorted(set(changed)))}")
    return PolicyVerdict("ask", "the operator decides")
