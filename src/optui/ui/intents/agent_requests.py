"""Agents' requests (``optui mcp``) shown to the operator: each new request of the journal
(this or another process's: every window on the campaign sees it) opens
:class:`~optui.ui.screens.agent_requests.AgentRequestScreen`, one at a time, oldest first;
the answer is journaled as ``agent.decision`` with this window's actor. A request decided
anywhere else (another window, the agent's timeout), past its deadline or withdrawn (its
``optui mcp`` ended) closes its screen with a toast saying who decided; an answer that
meets a request closed meanwhile is refused by the door that journals decisions
(:func:`~optui.session.agent_requests.decide_request`) and shown as a warning."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from optui.ui.client import SessionError, pid_alive
from optui.ui.intents.base import Actions

if TYPE_CHECKING:
    from optui.core.agent.requests import AgentRequest
    from optui.session.state import SessionState
    from optui.ui.screens.agent_requests import AgentRequestScreen


class AgentRequestActions(Actions):
    """Shows waiting requests from the snapshot's events and journals the answers."""

    def __init__(self, app) -> None:
        super().__init__(app)
        self._shown: set[int] = set()  # asked once: Esc leaves it to time out, never reopens it
        self._open: AgentRequestScreen | None = None

    def show(self, state: SessionState) -> None:
        """Close the open request's screen once it no longer waits, else redraw its
        countdown; open the oldest request not shown yet (none while one is open, or
        read-only)."""
        from optui.core.agent.requests import pending_requests, request_closed  # after the first frame

        now = time.time()
        if self._open is not None:
            screen = self._open
            closed = request_closed(screen.request, state.events, now=now, alive=pid_alive)
            if closed is None:
                screen.tick(now)
                return
            if screen is not self.app.screen:
                return  # dismiss() pops the top screen: close it once it is back on top
            self._open = None
            screen.dismiss(None)  # its callback sees it is no longer the open one
            self.notify(f"{screen.request.describe()}: {closed}", title="agent request closed", timeout=8)
        if state.read_only:
            return
        waiting = [r for r in pending_requests(state.events, now)
                   if r.seq not in self._shown and request_closed(r, (), now=now, alive=pid_alive) is None]
        if waiting:
            self._ask(waiting[0])

    def _ask(self, request: AgentRequest) -> None:
        from optui.ui.screens.agent_requests import AgentRequestScreen

        self._shown.add(request.seq)
        screen = self._open = AgentRequestScreen(request)

        def answered(decision: str | None) -> None:
            if self._open is not screen:
                return  # closed by show(): decided elsewhere
            self._open = None
            if decision is not None:
                self.run_worker(self._decide(request, decision), group="agent-request")

        self.push_screen(screen, answered)

    async def _decide(self, request: AgentRequest, decision: str) -> None:
        try:
            await self.client.decide_agent_request(request, decision)
        except SessionError as exc:  # read-only; RequestClosed: decided elsewhere meanwhile
            self.notify(str(exc), title="agent request", severity="warning", timeout=8)
            return
        self.notify(f"{decision}: {request.agent} {request.action} {request.server or ''}".rstrip(),
                    title="agent request", timeout=5)
        self.host.paint_now()
