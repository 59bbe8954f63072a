"""An agent's requests to change a server, and the operator's decisions, as journal events
(pure: :mod:`optui.session.agent_requests` writes and waits for them).

An agent (``optui mcp``) that wants to restart a server journals an ``agent.request`` event
(who asks, the action, the server, the flag diff, why, until when it waits); every optui
window on the campaign reads it with the rest of the journal and shows it (a queue screen
with approve/deny keys); the operator's answer is an ``agent.decision`` event (approved or
denied, by whom); a request nobody answered before its deadline gets an ``agent.decision``
``timeout`` from the agent's side. The journal is the only channel: the agent and the TUI are
separate processes, and every request and decision stays on the record with its actors.
An approved (or allowed) action ends with an ``agent.outcome`` event (ran, refused, failed;
the server's state, the experiment, its verdict, unverified flags).

One guarded action per server at a time: a request on a server that has another request
still waiting for its decision, or an approved action still running (no outcome yet, its
``optui mcp`` process alive), is refused at once (:func:`busy_request`), naming the other
agent and its request; it is never queued (an agent that waits blindly on another's
experiment would measure a server it did not configure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optui.core.flags.argv import canonical_name
from optui.core.journal.events import AGENT_DECISION, AGENT_OUTCOME, AGENT_REQUEST

if TYPE_CHECKING:
    from optui.core.journal.events import Event
APPROVED, DENIED, TIMEOUT = "approved", "denied", "timeout"
#: the asking ``optui mcp`` closed or died before a decision (journaled by it on its way out,
#: or by the next optui process that finds its pid gone)
WITHDRAWN = "withdrawn"
#: decisions the config's ``[agent]`` policy made (allowed_flags; forbidden flags, the hourly
#: limit), journaled like the operator's with the policy's reason
ALLOWED, REFUSED = "allowed", "refused"


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One waiting request: journal ``seq`` of its ``agent.request`` event, the ``agent``
    (``agent:NAME``), the ``action`` ("restart"), the ``server``, the flag ``diff`` lines
    (``~ --max-running-requests: 4 → 8``), ``argv`` it would run, ``why``,
    ``deadline_ts`` (Unix s) after which it times out, and the ``pid`` of the ``optui mcp``
    process that asks (None in older journals)."""

    seq: int
    agent: str
    action: str
    server: str | None
    diff: tuple[str, ...]
    argv: tuple[str, ...]
    why: str
    deadline_ts: float
    pid: int | None = None

    @classmethod
    def from_event(cls, e: Event) -> AgentRequest:
        d = e.data
        return cls(seq=e.seq, agent=e.actor, action=str(d.get("action", "?")), server=e.target,
                   diff=tuple(d.get("diff") or ()), argv=tuple(d.get("argv") or ()), why=str(d.get("why") or ""),
                   deadline_ts=float(d.get("deadline_ts") or e.ts), pid=d["pid"] if isinstance(d.get("pid"), int) else None)

    def describe(self) -> str:
        """``agent:codex's request #41 (restart demo: ~ --max-running-requests: 4 → 8)``."""
        change = "; ".join(self.diff)
        return f"{self.agent}'s request #{self.seq} ({self.action} {self.server or '-'}{': ' + change if change else ''})"


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


def decision_data(request_seq: int, decision: str, policy: str | None = None, *, agent: str | None = None,
                  action: str | None = None, diff: Sequence[str] = ()) -> dict:
    """The ``data`` of an ``agent.decision`` event (``policy``: the reason of a policy's
    decision); ``agent``, ``action`` and ``diff`` repeat the request's, so the decision's
    journal line says what was decided on."""
    if decision not in (APPROVED, DENIED, TIMEOUT, ALLOWED, REFUSED, WITHDRAWN):
        raise ValueError(f"unknown decision {decision!r}")
    asked = {"agent": agent, "action": action, "diff": list(diff)} if agent and action else {}
    return {"request": request_seq, "decision": decision, **({"policy": policy} if policy else {}), **asked}


def outcome_data(request_seq: int, action: str, outcome: str, *, state: str | None = None,
                 crash_class: str | None = None, verdict: str | None = None, unverified: Sequence[str] = (),
                 error: str | None = None) -> dict:
    """The ``data`` of an ``agent.outcome`` event: how approved request ``request_seq``'s
    ``action`` ended (``outcome`` ran, refused, failed), the server's ``state`` and
    ``crash_class`` after it, the experiment's ``verdict`` (``better +5.1% ...``), the flags
    the server does not run (``unverified``), or the ``error`` that stopped it."""
    out: dict = {"request": request_seq, "action": action, "outcome": outcome}
    for key, value in (("state", state), ("crash_class", crash_class), ("verdict", verdict), ("error", error)):
        if value:
            out[key] = value
    if unverified:
        out["unverified"] = list(unverified)
    return out


def busy_request(events: Iterable[Event], server: str | None, *, before_seq: int, now: float,
                 alive: Callable[[int], bool]) -> AgentRequest | None:
    """The request on ``server`` journaled before ``before_seq`` that still holds it: waiting
    for a decision (deadline after ``now``, Unix s), or approved/allowed and not ended (no
    ``agent.outcome``) while the process that asked is alive (``alive(pid)``). The oldest
    such, else None. ``events``: the journal's ``agent.*`` events, any order."""
    requests: dict[int, AgentRequest] = {}
    decided: dict[int, str] = {}
    ended: set[int] = set()
    for e in events:
        if e.target != server or e.seq >= before_seq:
            continue
        if e.type == AGENT_REQUEST:
            requests[e.seq] = AgentRequest.from_event(e)
        elif e.type == AGENT_DECISION and isinstance(e.data.get("request"), int):
            decided.setdefault(e.data["request"], str(e.data.get("decision")))
        elif e.type == AGENT_OUTCOME and isinstance(e.data.get("request"), int):
            ended.add(e.data["request"])
    for seq, r in sorted(requests.items()):
        decision = decided.get(seq)
        asker_alive = r.pid is not None and alive(r.pid)
        waiting = decision is None and r.deadline_ts > now and (r.pid is None or asker_alive)
        running = decision in (APPROVED, ALLOWED) and seq not in ended and asker_alive
        if waiting or running:
            return r
    return None


def find_decision(events: Sequence[Event], request_seq: int) -> Decision | None:
    """The first decision on request ``request_seq`` among ``events``."""
    for e in events:
        if e.type == AGENT_DECISION and e.data.get("request") == request_seq:
            policy = e.data.get("policy")
            return Decision(request_seq, str(e.data.get("decision")), e.actor, policy if isinstance(policy, str) else None)
    return None


def request_closed(request: AgentRequest, events: Iterable[Event], *, now: float,
                   alive: Callable[[int], bool]) -> str | None:
    """Why ``request`` no longer waits for the operator, in words (``approved by tui``,
    ``timeout by agent:codex``, ``timed out``, ``withdrawn: its optui mcp process ended``),
    or None while it still waits. ``events``: the journal's ``agent.decision`` events after
    the request (any others are skipped); ``now`` Unix s; ``alive(pid)``: the asking
    process runs. The first decision journaled counts."""
    found = find_decision([e for e in events if e.seq > request.seq], request.seq)
    if found is not None:
        return f"{found.decision} by {found.by}"
    if request.deadline_ts <= now:
        return "timed out"
    if request.pid is not None and not alive(request.pid):
        return "withdrawn: its optui mcp process ended"
    return None


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """What the ``[agent]`` policy says of a restart: ``verdict`` "ask" (the operator
    decides), "allow" (runs without asking) or "refuse"; ``reason`` in words."""

    verdict: str
    reason: str


def policy_flag(name: str) -> str:
    """A flag name as the ``[agent]`` lists and the policy compare it: a name without dashes
    is the long flag (``tp-size`` → ``--tp-size``), ``--x_y`` is ``--x-y``
    (:func:`~optui.core.flags.argv.canonical_name`)."""
    return canonical_name(name if name.startswith("-") else f"--{name}")


def restart_policy(changed: Sequence[str], *, allowed: Sequence[str], forbidden: Sequence[str],
                   max_per_hour: int, restarts_last_hour: int,
                   resolve: Callable[[str], str] | None = None) -> PolicyVerdict:
    """The policy's verdict on an agent's restart changing the flags named ``changed``
    (``--max-running-requests``; a name without dashes in the lists means the same flag),
    after ``restarts_last_hour`` restarts by agents. ``resolve`` maps a name to its
    canonical one (the flag catalogue's first long spelling: an alias or an abbreviation
    and the name it stands for are one flag), applied to ``changed`` and both lists alike;
    None compares names as :func:`policy_flag` writes them."""
    def canon(name: str) -> str:
        return resolve(policy_flag(name)) if resolve is not None else policy_flag(name)

    given = {canon(c): c for c in changed}
    listed = {canon(f): (f if f.startswith("-") else f"--{f}") for f in forbidden}
    banned = sorted(set(given) & set(listed))
    if banned:
        named = [given[n] if given[n] == listed[n] else f"{given[n]} (the same flag as {listed[n]})" for n in banned]
        return PolicyVerdict("refuse", f"[agent] forbidden_flags: {', '.join(named)}")
    if restarts_last_hour >= max_per_hour:
        return PolicyVerdict("refuse", f"[agent] max_restarts_per_hour = {max_per_hour}: "
                                       f"{restarts_last_hour} restarts by agents in the last hour")
    if given and set(given) <= {canon(f) for f in allowed}:
        return PolicyVerdict("allow", f"[agent] allowed_flags: {', '.join(sorted(set(changed)))}")
    return PolicyVerdict("ask", "the operator decides")

