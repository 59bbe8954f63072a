"""The immutable snapshot of a session that the UI (and ``optui status``) renders, and the
session's event stream (:class:`EventStream`: what happened, each event said once).

Every value a panel shows is here, frozen (frozen dataclasses, tuples), so a panel renders
one value it is given, compares its input with ``==`` to skip an unchanged frame, and can
be tested from a value alone (no session).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # values only: this module imports no service
    from optui.adapters.journal import StoredResult
    from optui.core.bench.compare import Row
    from optui.core.fleet.readings import FleetSnapshot
    from optui.core.gpu.samples import HostSnapshot
    from optui.core.journal.events import Event
    from optui.core.server.state import ServerStatus
    from optui.core.todo.items import TodoItem
    from optui.session.snapshot_types import Alert, BenchView, FollowStatus, RestartResult, SearchProgress, TodoRunOutcome

#: results rows the bench panel shows (newest last); the results view shows all
BENCH_ROWS_SHOWN = 8


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """One GPU's history: ``util``/``mem`` in % (0-100), one point per tick, oldest first,
    None for a missed reading."""

    host: str
    index: int
    util: tuple[float | None, ...]
    mem: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class GpuHistoryWindow:
    """The GPU history the sparklines draw: ``points`` ticks wide (the window, 5 minutes),
    one :class:`GpuSeries` per GPU seen."""

    points: int = 0
    series: tuple[GpuSeries, ...] = ()

    def by_gpu(self) -> dict[tuple[str, int], GpuSeries]:
        """(host, GPU index) → its series."""
        return {(s.host, s.index): s for s in self.series}


@dataclass(frozen=True, slots=True)
class BenchOutput:
    """The output of benchmark run ``run_id``: ``total`` lines so far, of which the newest
    ``len(tail)`` are still buffered (oldest first)."""

    run_id: str
    total: int
    tail: tuple[str, ...]

    def since(self, seen: int) -> tuple[str, ...]:
        """Lines after the first ``seen`` of the run (the buffered part of them: a reader
        that fell behind the buffer gets the tail)."""
        new = self.total - seen
        if new <= 0:
            return ()
        return self.tail[-new:] if new < len(self.tail) else self.tail


@dataclass(frozen=True, slots=True)
class TodoRunsView:
    """The todo runs (each item's experiment) as the todo panel shows them: ``steps`` maps todo ids
    to what is happening ("queued", "restart", "bench NAME"...), in queue order with the
    running one first; ``outcomes`` every finished run of this session, oldest first."""

    steps: tuple[tuple[int, str], ...] = ()
    running: bool = False
    outcomes: tuple[TodoRunOutcome, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionState:
    """Everything on screen at one moment.

    ``events`` are the newest journal events, oldest first; ``results`` the newest stored
    bench results, newest first; ``bench_rows`` the newest :data:`BENCH_ROWS_SHOWN`
    comparison rows (oldest first; empty without results); ``bench_output`` the current
    run's output; ``alerts`` the newest alerts (oldest first; each is said once as an
    :class:`AlertRaised` in the session's event stream); ``journal_error`` is set when the journal cannot be written (disk full: the
    session turned read-only; locked by another process: events wait) — the session keeps
    running; ``config_error`` when the config file was edited into something that does
    not load (the session keeps the config it started with).
    """

    version: int
    hosts: tuple[HostSnapshot, ...]
    servers: tuple[ServerStatus, ...]
    todos: tuple[TodoItem, ...]
    events: tuple[Event, ...]
    bench: BenchView | None
    results: tuple[StoredResult, ...]
    journal_path: str
    journal_error: str | None
    read_only: bool
    paused: bool
    config_error: str | None = None
    gpu_history: GpuHistoryWindow = GpuHistoryWindow()
    alerts: tuple[Alert, ...] = ()
    bench_rows: tuple[Row, ...] = ()
    bench_output: BenchOutput | None = None
    todo_runs: TodoRunsView = TodoRunsView()
    follows: tuple[tuple[str, FollowStatus], ...] = ()
    fleet: FleetSnapshot | None = None  # [fleet]: the GPUs Prometheus knows (None: no [fleet])
    search: SearchProgress | None = None  # the flag search running or last run (None: none this session)

    def server(self, name: str) -> ServerStatus | None:
        """The status of server ``name`` or None."""
        return next((s for s in self.servers if s.name == name), None)


# ------------------------------------------------------------ the session's event stream
# What happened, said once by its producer, beside the snapshot of what is: the UI turns each
# into a Textual message (ui/session_messages.py). Not the journal's events
# (optui.core.journal.events: every transition, persisted, shared by every process): this
# process's news, each read once per reader by its cursor, so no reader re-derives what
# happened from counts in the snapshot.


@dataclass(frozen=True, slots=True)
class AlertRaised:
    """An alert the operator must not miss (a crash outside a restart, a hung server, a
    hot GPU...: :mod:`optui.session.alerts`)."""

    alert: Alert


@dataclass(frozen=True, slots=True)
class TodoRunFinished:
    """A todo run (an item's experiment) ended: ok, failed, aborted or skipped."""

    outcome: TodoRunOutcome


@dataclass(frozen=True, slots=True)
class FollowFailed:
    """Reading the followed agent list ``key`` failed with ``error`` (said once per
    distinct error; again after the list read fine in between)."""

    key: str
    error: str


@dataclass(frozen=True, slots=True)
class RestartFinished:
    """A restart of this session ended (:class:`~optui.session.snapshot_types.RestartResult`:
    ready, unverified, failed with its crash class, rolled back, skipped). ``told_by_caller``:
    its caller tells an operator how it ended (the TUI's restart sequence; its crash raised no
    alert); otherwise a crash of it was an alert, as at any other time."""

    result: RestartResult
    told_by_caller: bool = False


#: one event of the session's stream
SessionEvent = AlertRaised | TodoRunFinished | FollowFailed | RestartFinished


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
