"""An agent's request waiting for the operator (``optui mcp``'s ``restart_server``): who
asks, what it would do (the flag diff), why, how long it waits; ``a`` approves, ``d``
denies, Esc leaves it waiting (it times out on the agent's side), ``q`` quits optui (a
modal screen hides the app's keys). The countdown is redrawn with each frame the app paints
(:meth:`AgentRequestScreen.tick`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from optui.core.agent.requests import APPROVED, DENIED, AgentRequest
from optui.core.text.safe_text import safe_line
from optui.ui.colors import focus_now
from optui.ui.widgets.key_bar import screen_key_bar


def request_body(request: AgentRequest, now: float) -> Text:
    """The request as the operator reads it: action and server, diff lines, why, time left."""
    text = Text()
    text.append(f"{request.action} {request.server or '-'}\n", style="bold")
    for line in request.diff or ("(the same flags)",):
        text.append(f"  {safe_line(line)}\n")
    text.append(f"why: {safe_line(request.why) or '-'}\n")
    text.append(f"waits {max(0, round(request.deadline_ts - now))} s more for your answer (journal #{request.seq})",
                style="dim")
    return text


class AgentRequestScreen(ModalScreen[str | None]):
    """One waiting request; returns "approved", "denied", or None (left waiting)."""

    BINDINGS = [
        Binding("a", "decide('approved')", "Approve", id="agent_request.approve"),
        Binding("d", "decide('denied')", "Deny", id="agent_request.deny"),
        Binding("escape", "later", "Later", id="agent_request.later"),
        # Textual stops a modal screen's key chain at the screen: the app's q is not seen here
        Binding("q", "app.quit", "Quit", id="agent_request.quit"),
    ]
    DEFAULT_CSS = """
    AgentRequestScreen { align: center middle; }
    AgentRequestScreen > Vertical { width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1; }
    AgentRequestScreen #agent-request-title { text-style: bold; color: $warning; }
    AgentRequestScreen VerticalScroll { height: auto; max-height: 30; }
    AgentRequestScreen Horizontal { height: auto; align-horizontal: right; }
    AgentRequestScreen Button { margin-left: 2; }
    """

    def __init__(self, request: AgentRequest, *, clock: Callable[[], float] = time.time) -> None:
        """``clock``: Unix seconds now (the countdown to the request's deadline)."""
        super().__init__()
        self.request = request
        self._clock = clock

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"{safe_line(self.request.agent)} asks", id="agent-request-title", markup=False)
            with VerticalScroll():
                yield Static(request_body(self.request, self._clock()), id="agent-request-body", markup=False)
            with Horizontal():
                yield Button("Later (esc)", id="later", variant="default")
                yield Button("Deny (d)", id="deny", variant="error")
                yield Button("Approve (a)", id="approve", variant="warning")
        yield screen_key_bar()

    def tick(self, now: float) -> None:
        """Redraw the countdown for ``now`` (Unix s)."""
        for body in self.query("#agent-request-body").results(Static):
            body.update(request_body(self.request, now))

    def on_mount(self) -> None:
        focus_now(self.query_one("#later", Button))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss({"approve": APPROVED, "deny": DENIED}.get(event.button.id or ""))

    def action_decide(self, decision: str) -> None:
        self.dismiss(decision)

    def action_later(self) -> None:
        self.dismiss(None)
