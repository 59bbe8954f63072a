"""The journal panel: every transition of the session, newest first.

Enter on an event posts :class:`EventChosen` (the app opens its details).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from optui.core import events as ev
from optui.core.events import Event
from optui.ui.colors import style
from optui.ui.widgets.cursor_list import CursorList

_TYPE_VAR = {
    ev.SERVER_READY: "state-ready",
    ev.SERVER_FAILED: "state-failed",
    ev.ALERT: "state-failed",
    ev.ROLLBACK: "warning",
    ev.FLAGS_CHANGED: "accent",
    ev.BENCH_FINISHED: "primary",
    ev.RESTART_REQUESTED: "warning",
}


class EventChosen(Message):
    """The operator opened ``event``."""

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event


class JournalPanel(CursorList):
    """Renders events (newest first); ``show`` takes them oldest first."""

    BINDINGS = [Binding("enter", "open", "Details", id="journal.open")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(empty_text="journal is empty", follow_top=True, id=id)
        self._events: tuple[Event, ...] = ()
        self.hidden_types = {ev.SERVER_PHASE, ev.SESSION_STARTED, ev.SESSION_ENDED}

    def show(self, events: tuple[Event, ...]) -> None:
        """Display ``events`` (oldest first in, newest first on screen)."""
        self._events = events
        width = max(30, self.size.width or 80)
        shown = [e for e in reversed(events) if e.type not in self.hidden_types]
        self.set_rows([e.seq for e in shown], [self._row(e, width) for e in shown])

    def on_resize(self) -> None:
        self.show(self._events)

    def _row(self, e: Event, width: int) -> Text:
        row = Text(no_wrap=True, overflow="ellipsis")
        row.append(time.strftime("%H:%M:%S ", time.localtime(e.ts)), style="dim")
        var = _TYPE_VAR.get(e.type)
        if e.type == ev.SERVER_STATE:
            var = {"ready": "state-ready", "crashed": "state-failed", "hung": "state-failed"}.get(e.data.get("new"))
        row.append(f"{e.type:<15}", style=style(self.app, var) if var else "")
        if e.target:
            row.append(f" {e.target}", style="bold")
        if width >= 60:
            row.append(f" [{e.actor}]", style="dim")
        row.append(" " + e.summary())
        return row

    def action_open(self) -> None:
        key = self.current_key
        event = next((e for e in self._events if e.seq == key), None)
        if event is not None:
            self.post_message(EventChosen(event))
