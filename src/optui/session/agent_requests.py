"""Asking the operator: an agent's request journaled, its decision waited for, its outcome
journaled (the events and their fold: :mod:`optui.core.agent_requests`).

A request on a server that another request still holds (waiting for its decision, or
approved and still running) is refused in the transaction that journals it, with a reason
that names the other agent and its request: two ``optui mcp`` processes asking at the same
instant never both go ahead, and no window shows a request already refused."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from optui.adapters.proc import pid_alive
from optui.core.agent_requests import (
    AGENT_DECISION,
    AGENT_OUTCOME,
    AGENT_REQUEST,
    REFUSED,
    TIMEOUT,
    Decision,
    busy_request,
    decision_data,
    find_decision,
)

if TYPE_CHECKING:
    from optui.adapters.journal import Journal

#: how often the waiting side reads the journal for the decision (s)
POLL_S = 0.2


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
    while True:
        found = find_decision(journal.events(types=[AGENT_DECISION], since_seq=seq), seq)
        if found is not None:
            return found
        if time.time() >= deadline:
            journal.append(AGENT_DECISION, server, decision_data(seq, TIMEOUT, agent=actor, action=action, diff=diff),
                           actor=actor)
            # an operator's answer written in the same instant wins: the first decision counts
            return find_decision(journal.events(types=[AGENT_DECISION], since_seq=seq), seq) \
                or Decision(seq, TIMEOUT, actor)
        await asyncio.sleep(POLL_S)


def journal_outcome(journal: Journal, *, actor: str, server: str | None, experiment: str | None, data: dict) -> None:
    """Journal how an approved action of ``actor`` (the agent) ended: ``agent.outcome``
    linked to ``experiment``, ``data`` from :func:`~optui.core.agent_requests.outcome_data`.
    JournalError when it cannot be written."""
    journal.append(AGENT_OUTCOME, server, data, actor=actor, experiment=experiment)
