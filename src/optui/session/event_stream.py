"""What happened in this session, in order, for the readers that must hear of each thing once
(the TUI's render loop): an ordered, bounded stream of the session's events with a cursor per
reader.

Not the journal's events (:mod:`optui.core.events`: every transition, persisted, shared by
every process): these are this process's news, said once by their producer when they happen
(an alert raised, a todo run finished, a followed list failing, a restart finished), so no
reader re-derives them from counts in the snapshot. The values are frozen
(:class:`~optui.session.state.AlertRaised`, :class:`~optui.session.state.TodoRunFinished`,
:class:`~optui.session.state.FollowFailed`, :class:`~optui.session.state.RestartFinished`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optui.session.state import SessionEvent

#: the events the stream keeps (a reader further behind gets the newest ones and a count of
#: those it missed)
EVENTS_KEPT = 1000


class EventReader:
    """One reader's cursor on an :class:`EventStream`: :meth:`take` returns each event once,
    in order."""

    def __init__(self, stream: EventStream, cursor: int = 0) -> None:
        self._stream = stream
        self.cursor = cursor  # the number of the last event taken (events are numbered from 1)
        #: events this reader never got because it fell more than the stream's bound behind
        self.missed = 0

    def take(self) -> tuple[SessionEvent, ...]:
        """The events raised since the last call (oldest first; empty: none)."""
        events, self.cursor, missed = self._stream.since(self.cursor)
        self.missed += missed
        return events


class EventStream:
    """The session's events, numbered from 1, the newest ``kept`` of them held.
    ``on_emit()`` is called after each one (the session's ``touch``: readers wake up)."""

    def __init__(self, on_emit: Callable[[], None] | None = None, kept: int = EVENTS_KEPT) -> None:
        self._events: deque[SessionEvent] = deque(maxlen=kept)
        self._on_emit = on_emit
        self.count = 0  # events emitted so far (the newest one's number)

    def emit(self, event: SessionEvent) -> None:
        """Append ``event`` (a frozen value of :mod:`optui.session.state`) and wake the readers."""
        self._events.append(event)
        self.count += 1
        if self._on_emit is not None:
            self._on_emit()

    def since(self, cursor: int) -> tuple[tuple[SessionEvent, ...], int, int]:
        """``(events after number cursor, the new cursor, how many of them are no longer
        kept)``. A cursor past the end (another stream's) reads from the end."""
        new = self.count - min(cursor, self.count)
        kept = min(new, len(self._events))
        events = tuple(self._events)[len(self._events) - kept:] if kept else ()
        return events, self.count, new - kept

    def reader(self, *, from_start: bool = True) -> EventReader:
        """A new reader: from the first event kept (``from_start``), else only of what comes next."""
        return EventReader(self, 0 if from_start else self.count)
