"""Agents' requests (``optui mcp``) shown to the operator: each new request of the journal
(this or another process's: every window on the campaign sees it) opens
:class:`~optui.ui.screens.agent_requests.AgentRequestScreen`, one at a time, oldest first;
the answer is journaled as ``agent.decision`` with this window's actor."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from optui.core.agent_requests import pending_requests
from optui.ui.intents.base import Actions

if TYPE_CHECKING:
    from optui.core.agent_requests import AgentRequest
    from optui.session.state import SessionState


class AgentRequestActions(Actions):
    """Shows waiting requests from the snapshot's events and journals the answers."""

    def __init__(self, app) -> None:
        super().__init__(app)
        self._shown: set[int] = set()  # asked once: Esc leaves it to time out, never reopens it
        self._open = False

    def show(self, state: SessionState) -> None:
        """Open the oldest request not shown yet (none while one is open, or read-only)."""
        if self._open or state.read_only:
            return
        waiting = [r for r in pending_requests(state.events, time.time()) if r.seq not in self._shown]
        if waiting:
            self._ask(waiting[0])

    def _ask(self, request: AgentRequest) -> None:
        from optui.ui.screens.agent_requests import AgentRequestScreen

        self._shown.add(request.seq)
        self._open = True

        def answered(decision: str | None) -> None:
            self._open = False
            if decision is not None:
                self._decide(request, decision)

        self.push_screen(AgentRequestScreen(request), answered)

    def _decide(self, request: AgentRequest, decision: str) -> None:
        self.client.decide_agent_request(request, decision)
        self.notify(f"{decision}: {request.agent} {request.action} {request.server or ''}".rstrip(),
                    title="agent request", timeout=5)
        self.host.paint_now()
