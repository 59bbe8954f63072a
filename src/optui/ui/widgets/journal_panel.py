"""The journal panel: every transition of the session, newest first, with filters.

Keys (when focused): Enter opens the event's details (``JournalPanel.Opened``); ``/`` filters
by text, ``t`` cycles the type filter (:data:`~optui.core.journal.events.TYPE_GROUPS`), ``s``
cycles the server filter, ``e`` shows only the experiment of the selected event (again:
off), ``c`` clears every filter. A filter change posts ``JournalPanel.FilterChanged``; the
app then queries the journal (the filter reaches past the events kept in memory) and
calls :meth:`JournalPanel.show` with the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from optui.core.journal import events as ev
from optui.core.journal.events import Event, EventFilter
from optui.core.text.safe_text import headline, safe_line
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
    ev.EXPERIMENT_STARTED: "accent",
    ev.VERDICT: "primary",
    ev.AGENT_REQUEST: "warning",  # an agent waits for the operator
    ev.AGENT_DECISION: "accent",
    ev.AGENT_OUTCOME: "primary",
}
#: shown only when the type filter asks for them (noise in the timeline)
HIDDEN_BY_DEFAULT = frozenset({ev.SERVER_PHASE, ev.SESSION_STARTED, ev.SESSION_ENDED, ev.HOSTS_SEEN})
_TYPE_CYCLE = (None, *ev.TYPE_GROUPS)
#: a row's text is cut here (the row itself ends with … at the panel's width)
ROW_TEXT_MAX = 400


class JournalPanel(CursorList):
    """Renders events (newest first); ``show`` takes them oldest first."""

    @dataclass
    class Opened(Message):
        """The operator opened ``event``."""

        event: Event

    @dataclass
    class FilterChanged(Message):
        """The panel's filter changed to ``filter`` (the app searches the journal)."""

        filter: EventFilter

    BINDINGS = [
        Binding("enter", "open", "Details", id="journal.open"),
        Binding("slash", "filter_text", "Find", id="journal.filter_text"),
        Binding("t", "cycle_type", "Type", id="journal.filter_type"),
        Binding("s", "cycle_server", "Server", id="journal.filter_server"),
        Binding("e", "filter_experiment", "Experiment", id="journal.filter_experiment"),
        Binding("c", "clear_filters", "Clear", id="journal.filter_clear"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(empty_text="journal is empty", follow_top=True, id=id)
        self._events: tuple[Event, ...] = ()
        self._shown: tuple | None = None  # the (events, filter) on screen
        self.filter = EventFilter()
        #: server names the ``s`` key cycles through (set by the app)
        self.servers: tuple[str, ...] = ()

    # ------------------------------------------------------------ data
    def show(self, events: tuple[Event, ...]) -> None:
        """Display ``events`` (oldest first in, newest first on screen). With a type filter
        every given event is shown; without, phases and session events are hidden. The
        same events under the same filter again: nothing to do."""
        if (events, self.filter) == self._shown:
            return
        self._shown = (events, self.filter)
        self._render_events(events)

    def _render_events(self, events: tuple[Event, ...]) -> None:
        self._events = events
        width = max(30, self.size.width or 80)
        hidden = frozenset() if self.filter.types is not None else HIDDEN_BY_DEFAULT
        shown = [e for e in reversed(events) if e.type not in hidden]
        empty = "no event matches " + self.filter.describe() if self.filter.active else "journal is empty"
        self.empty_text = empty
        self.set_rows([e.seq for e in shown], [self._row(e, width) for e in shown])

    def on_resize(self) -> None:
        self._render_events(self._events)

    def _row(self, e: Event, width: int) -> Text:
        row = Text(no_wrap=True, overflow="ellipsis")
        row.append(time.strftime("%H:%M:%S ", time.localtime(e.ts)), style="dim")
        var = _TYPE_VAR.get(e.type)
        if e.type == ev.SERVER_STATE:
            var = {"ready": "state-ready", "crashed": "state-failed", "hung": "state-failed"}.get(str(e.data.get("new")))
        row.append(f"{e.type:<15}", style=style(self.app, var) if var else "")
        if e.target:
            row.append(f" {safe_line(e.target)}", style="bold")
        if width >= 60:
            row.append(f" [{safe_line(e.actor)}]", style="dim")
        if width >= 100 and e.experiment:
            row.append(f" {e.experiment}", style="dim")
        row.append(" " + headline(e.summary(), limit=ROW_TEXT_MAX))  # a traceback, a note: one row, all of it in details
        return row

    @property
    def shown_seqs(self) -> list[int]:
        """The seqs of the rows on screen, newest first."""
        return [k for k in self._keys if isinstance(k, int)]

    def selected_event(self) -> Event | None:
        """The event under the cursor."""
        key = self.current_key
        return next((e for e in self._events if e.seq == key), None)

    # ------------------------------------------------------------ keys
    def action_open(self) -> None:
        event = self.selected_event()
        if event is not None:
            self.post_message(self.Opened(event))

    def set_filter(self, flt: EventFilter) -> None:
        """Replace the filter and tell the app (which re-queries and calls :meth:`show`)."""
        self.filter = flt
        self.cursor = 0
        self.post_message(self.FilterChanged(flt))

    def action_filter_text(self) -> None:
        from optui.ui.screens.text_prompt import TextPrompt

        def chosen(text: str | None) -> None:
            if text is not None:
                self.set_filter(replace(self.filter, text=text.strip() or None))

        self.app.push_screen(TextPrompt("Show events containing (empty: any):", self.filter.text or ""), chosen)

    def action_cycle_type(self) -> None:
        i = _TYPE_CYCLE.index(self.filter.type_label) if self.filter.type_label in _TYPE_CYCLE else 0
        label = _TYPE_CYCLE[(i + 1) % len(_TYPE_CYCLE)]
        self.set_filter(replace(self.filter, types=ev.TYPE_GROUPS[label] if label else None, type_label=label))

    def action_cycle_server(self) -> None:
        cycle = (None, *self.servers)
        i = cycle.index(self.filter.target) if self.filter.target in cycle else 0
        self.set_filter(replace(self.filter, target=cycle[(i + 1) % len(cycle)]))

    def action_filter_experiment(self) -> None:
        if self.filter.experiment is not None:
            self.set_filter(replace(self.filter, experiment=None))
            return
        event = self.selected_event()
        if event is None or event.experiment is None:
            self.notify("the selected event belongs to no experiment", severity="warning")
            return
        self.set_filter(replace(self.filter, experiment=event.experiment))

    def action_clear_filters(self) -> None:
        if self.filter.active:
            self.set_filter(EventFilter())
