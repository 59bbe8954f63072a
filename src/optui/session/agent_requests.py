"""Asking the operator: an agent's request journaled, its decision waited for
(the events and their fold: :mod:`optui.core.agent_requests`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from optui.core.agent_requests import AGENT_DECISION, AGENT_REQUEST, TIMEOUT, Decision, decision_data, find_decision

if TYPE_CHECKING:
    from optui.adapters.journal import Journal

#: how often the waiting side reads the journal for the decision (s)
POLL_S = 0.2


def _journal_request(journal: Journal, *, actor: str, action: str, server: str | None, diff: Sequence[str],
                     argv: Sequence[str], why: str, timeout_s: float) -> tuple[int, float]:
    """Append the ``agent.request`` event; its seq and deadline (Unix s)."""
    deadline = time.time() + timeout_s
    request = journal.append(AGENT_REQUEST, server, {"action": action, "diff": list(diff), "argv": list(argv),
                                                     "why": why, "timeout_s": timeout_s, "deadline_ts": deadline},
                             actor=actor)
    return request.seq, deadline


def decided_by_policy(journal: Journal, *, actor: str, action: str, server: str | None, diff: Sequence[str],
                      argv: Sequence[str], why: str, decision: str, reason: str) -> Decision:
    """Journal ``actor``'s request and the ``[agent]`` policy's ``decision`` on it at once
    (allowed, refused), with the policy's ``reason``. JournalError when it cannot be written."""
    seq, _ = _journal_request(journal, actor=actor, action=action, server=server, diff=diff, argv=argv, why=why,
                              timeout_s=0)
    journal.append(AGENT_DECISION, server, decision_data(seq, decision, reason), actor=actor)
    return Decision(seq, decision, actor, reason)


async def ask_operator(journal: Journal, *, actor: str, action: str, server: str | None, diff: Sequence[str],
                       argv: Sequence[str], why: str, timeout_s: float) -> Decision:
    """Journal ``actor``'s request and wait up to ``timeout_s`` s for the operator's
    decision (read from the journal every :data:`POLL_S` s); past it, journal a
    ``timeout`` decision and return it. JournalError when the request cannot be written."""
    seq, deadline = _journal_request(journal, actor=actor, action=action, server=server, diff=diff, argv=argv,
                                     why=why, timeout_s=timeout_s)
    while True:
        found = find_decision(journal.events(types=[AGENT_DECISION], since_seq=seq), seq)
        if found is not None:
            return found
        if time.time() >= deadline:
            journal.append(AGENT_DECISION, server, decision_data(seq, TIMEOUT), actor=actor)
            # an operator's answer written in the same instant wins: the first decision counts
            return find_decision(journal.events(types=[AGENT_DECISION], since_seq=seq), seq) \
                or Decision(seq, TIMEOUT, actor)
        await asyncio.sleep(POLL_S)
