"""Asking the operator: an agent's request journaled, its decision waited for, its outcome
journaled (the events and their fold: :mod:`optui.core.agent.requests`).

A request on a server that another request still holds (waiting for its decision, or
approved and still running) is refused in the transaction that journals it, with a reason
that names the other agent and its request: two ``optui mcp`` processes asking at the same
instant never both go ahead, and no window shows a request already refused.

Every decision goes through one door that checks, in the transaction that journals it, that
the request still waits (:func:`decide_request`; the agent's own ``timeout`` too): two
optui windows answering the same request, or an answer after its deadline, never journal a
second decision."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from optui.adapters.proc import pid_alive
from optui.core.agent.requests import (
    AGENT_DECISION,
    AGENT_OUTCOME,
    AGENT_REQUEST,
    REFUSED,
    TIMEOUT,
    WITHDRAWN,
    AgentRequest,
    Decision,
    busy_request,
    decision_data,
    find_decision,
    request_closed,
)
from optui.session.errors import SessionError

if TYPE_CHECKING:
    from optui.adapters.journal import Journal

#: how often the waiting side reads the journal for the decision (s)
POLL_S = 0.2
#: :func:`~optui.core.agent.requests.request_closed`'s words for a request whose optui mcp is gone
WITHDRAWN_DEAD = "withdrawn: its optui mcp process ended"


class RequestClosed(SessionError):
    """A decision on a request that no longer waits (decided, timed out, withdrawn); the
    message names the request and who decided it. Nothing was journaled."""


def decide_request(journal: Journal, request_seq: int, decision: str, *, actor: str,
                   now: float | None = None) -> Decision:
    """Journal ``actor``'s ``decision`` (approved, denied, timeout) on request ``request_seq``
    if it still waits for one, and return it. In one write transaction with the check: of
    two windows answering at once, or a window and the agent's timeout, only the first is
    journaled. RequestClosed when the request was decided already, its deadline passed
    (``now``, Unix s, default the clock; a timeout needs it passed) or its optui mcp ended;
    SessionError when there is no such request; JournalError when it cannot be written."""
    with journal.transaction():
        now = time.time() if now is None else now
        asked = journal.events(types=[AGENT_REQUEST], since_seq=request_seq - 1, before_seq=request_seq + 1)
        if not asked:
            raise SessionError(f"no agent request #{request_seq} in the journal")
        request = AgentRequest.from_event(asked[0])
        closed = request_closed(request, journal.events(types=[AGENT_DECISION], since_seq=request_seq),
                                now=now, alive=pid_alive)
        gone = closed == WITHDRAWN_DEAD and decision != WITHDRAWN
        if gone:  # said once, by whoever finds it first (the asking process could not)
            journal.append(AGENT_DECISION, request.server, decision_data(
                request_seq, WITHDRAWN, closed, agent=request.agent, action=request.action, diff=request.diff),
                actor=actor)
        elif decision == TIMEOUT and closed is None:
            raise RequestClosed(f"{request.describe()} still waits ({request.deadline_ts - now:.0f} s to its "
                                "deadline): the timeout was not journaled")
        elif closed is not None and not (decision == TIMEOUT and closed == "timed out") \
                and not (decision == WITHDRAWN and closed == WITHDRAWN_DEAD):
            raise RequestClosed(f"{request.describe()} no longer waits ({closed}): {decision} was not journaled")
        else:
            journal.append(AGENT_DECISION, request.server, decision_data(
                request_seq, decision, agent=request.agent, action=request.action, diff=request.diff), actor=actor)
    if gone:
        raise RequestClosed(f"{request.describe()} no longer waits ({closed}): {decision} was not journaled")
    return Decision(request_seq, decision, actor)


def _journal_request(journal: Journal, *, actor: str, action: str, server: str | None, diff: Sequence[str],
                     argv: Sequence[str], why: str, timeout_s: float) -> tuple[int, float, Decision | None]:
    """Append the ``agent.request`` event; its seq, its deadline (Unix s), and the refusal
    journaled on it when another request holds ``server`` (else None)."""
    deadline = time.time() + timeout_s
    # one write transaction: no other process reads the request without its refusal, nor
    # journals its own request between this one and the check
    with journal.transaction():
        request = journal.append(AGENT_REQUEST, server, {"action": action, "diff": list(diff), "argv": list(argv),
                                                         "why": why, "timeout_s": timeout_s, "deadline_ts": deadline,
                                                         "pid": os.getpid()},
                                 actor=actor)
        other = busy_request(journal.events(types=[AGENT_REQUEST, AGENT_DECISION, AGENT_OUTCOME], target=server),
                             server, before_seq=request.seq, now=time.time(), alive=pid_alive)
        if other is None:
            return request.seq, deadline, None
        state = "waits for the operator's decision" if find_decision(
            journal.events(types=[AGENT_DECISION], since_seq=other.seq), other.seq) is None else "is running"
        reason = f"{other.describe()} {state}: one guarded action per server at a time, ask again once it has ended"
        journal.append(AGENT_DECISION, server, decision_data(request.seq, REFUSED, reason, agent=actor, action=action,
                                                             diff=diff), actor=actor)
    return request.seq, deadline, Decision(request.seq, REFUSED, actor, reason)


def decided_by_policy(journal: Journal, *, actor: str, action: str, server: str | None, diff: Sequence[str],
                      argv: Sequence[str], why: str, decision: str, reason: str) -> Decision:
    """Journal ``actor``'s request and the ``[agent]`` policy's ``decision`` on it at once
    (allowed, refused), with the policy's ``reason`` (refused instead when another request
    holds the server). JournalError when it cannot be written."""
    with journal.transaction():  # no window reads the request without its decision
        seq, _, busy = _journal_request(journal, actor=actor, action=action, server=server, diff=diff, argv=argv,
                                        why=why, timeout_s=0)
        if busy is not None:
            return busy
        journal.append(AGENT_DECISION, server, decision_data(seq, decision, reason, agent=actor, action=action,
                                                             diff=diff), actor=actor)
    return Decision(seq, decision, actor, reason)


async def ask_operator(journal: Journal, *, actor: str, action: str, server: str | None, diff: Sequence[str],
                       argv: Sequence[str], why: str, timeout_s: float) -> Decision:
    """Journal ``actor``'s request and wait up to ``timeout_s`` s for the operator's
    decision (read from the journal every :data:`POLL_S` s); past it, journal a
    ``timeout`` decision and return it. Refused at once when another request holds the
    server. JournalError when the request cannot be written."""
    seq, deadline, busy = _journal_request(journal, actor=actor, action=action, server=server, diff=diff, argv=argv,
                                           why=why, timeout_s=timeout_s)
    if busy is not None:
        return busy
    try:
        while True:
            found = find_decision(journal.events(types=[AGENT_DECISION], since_seq=seq), seq)
            if found is not None:
                return found
            if time.time() >= deadline:
                try:
                    return decide_request(journal, seq, TIMEOUT, actor=actor)
                except RequestClosed:  # an operator's answer written in the same instant: it counts
                    return find_decision(journal.events(types=[AGENT_DECISION], since_seq=seq), seq) \
                        or Decision(seq, TIMEOUT, actor)
            await asyncio.sleep(POLL_S)
    except asyncio.CancelledError:  # the agent cancelled the call or closed its session: say so
        with contextlib.suppress(Exception):
            withdraw(journal, seq, actor=actor, reason="the agent cancelled the call or closed its session")
        raise


def withdraw(journal: Journal, request_seq: int, *, actor: str, reason: str) -> Decision | None:
    """Journal a ``withdrawn`` decision (``reason`` in its ``policy``) on request
    ``request_seq`` while it still waits; None when it was decided meanwhile."""
    with journal.transaction():
        if find_decision(journal.events(types=[AGENT_DECISION], since_seq=request_seq), request_seq) is not None:
            return None
        asked = journal.events(types=[AGENT_REQUEST], since_seq=request_seq - 1, before_seq=request_seq + 1)
        if not asked:
            return None
        request = AgentRequest.from_event(asked[0])
        journal.append(AGENT_DECISION, request.server, decision_data(
            request_seq, WITHDRAWN, reason, agent=request.agent, action=request.action, diff=request.diff),
            actor=actor)
    return Decision(request_seq, WITHDRAWN, actor, reason)


def withdraw_orphans(journal: Journal, *, actor: str, now: float | None = None) -> list[int]:
    """Journal ``withdrawn`` on every waiting request whose ``optui mcp`` process is gone
    (killed: it could not say so itself); the requests' seqs. Run by a starting optui mcp."""
    from optui.core.agent.requests import pending_requests

    now = time.time() if now is None else now
    events = journal.events(types=[AGENT_REQUEST, AGENT_DECISION], since_seq=max(0, journal.last_seq() - 5000))
    gone = [r for r in pending_requests(events, now) if r.pid is not None and not pid_alive(r.pid)]
    return [r.seq for r in gone if withdraw(journal, r.seq, actor=actor, reason=WITHDRAWN_DEAD) is not None]


def journal_outcome(journal: Journal, *, actor: str, server: str | None, experiment: str | None, data: dict) -> None:
    """Journal how an approved action of ``actor`` (the agent) ended: ``agent.outcome``
    linked to ``experiment``, ``data`` from :func:`~optui.core.agent.requests.outcome_data`.
    JournalError when it cannot be written."""
    journal.append(AGENT_OUTCOME, server, data, actor=actor, experiment=experiment)
