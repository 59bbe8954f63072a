"""A journal that never loses an event to a lock held by another process.

Another process can hold the campaign DB's write lock for long (a ``sqlite3`` shell left in
``BEGIN EXCLUSIVE``, a backup tool). A plain :class:`~optui.adapters.journal.Journal` write
would then wait ``busy_timeout_s`` and fail, and its event would be gone. Here an event that
meets the lock is queued in memory instead (with its original time), later events queue
behind it without touching the DB (so the event loop never waits on the lock again), and
:meth:`DeferringJournal.flush` — called by the session every half second (on the journal
thread in the TUI, where an event meets the lock after :data:`~optui.adapters.journal.QUICK_BUSY_MS`,
not ``busy_timeout_s``) — writes the queue in one transaction once the lock is free, in order.

Only plain events are deferred (``append``/``append_many`` outside a transaction); other
writes (todo edits, results, experiments) raise :class:`JournalBusy` so the operator's action
fails visibly instead of being silently postponed — at once while events are queued (the
lock is known to be held), so a burst of writes never adds up to a frozen UI.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from optui.adapters.journal import Journal, JournalBusy
from optui.core.journal.events import Event

#: How long a flush attempt waits for the lock (ms): short, it holds the connection's lock meanwhile.
FLUSH_BUSY_MS = 50
#: Events kept while the lock is held; beyond this the oldest queued ones are dropped (and counted).
MAX_DEFERRED = 100_000


class DeferringJournal(Journal):
    """A :class:`Journal` whose events wait out another process's lock (see module doc).

    ``deferred``: events waiting; ``dropped``: events lost past :data:`MAX_DEFERRED`;
    ``busy_error``: why they wait (None when nothing waits).
    """

    def __init__(self, path, *, busy_timeout_s: float = 0.5) -> None:
        super().__init__(path, busy_timeout_s=busy_timeout_s)
        self.busy_timeout_s = busy_timeout_s
        self._queue: list[tuple] = []
        self.dropped = 0
        self.busy_error: str | None = None

    @property
    def deferred(self) -> int:
        """Events queued while the lock is held by another process."""
        return len(self._queue)

    def append(self, type: str, target: str | None = None, data: dict | None = None, *, actor: str = "optui",
               experiment: str | None = None, ts: float | None = None) -> Event:
        """Append one event; while another process holds the lock it is queued instead and
        the returned Event has ``seq`` 0. Raises JournalError for other failures."""
        ts = time.time() if ts is None else ts
        with self._lock:
            if self._queue and not self._db.in_transaction:
                return self._defer((type, target, data or {}, actor, experiment, ts))
            try:
                return super().append(type, target, data, actor=actor, experiment=experiment, ts=ts)
            except JournalBusy as exc:
                if self._db.in_transaction:
                    raise  # part of a larger transaction: the caller's whole write fails
                self.busy_error = str(exc)
                return self._defer((type, target, data or {}, actor, experiment, ts))

    def append_many(self, items: Iterable[tuple], *, actor: str = "optui") -> int:
        """Like :meth:`Journal.append_many`; queued as a whole while the lock is held."""
        items = list(items)
        with self._lock:
            if not self._queue:
                try:
                    return super().append_many(items, actor=actor)
                except JournalBusy as exc:
                    self.busy_error = str(exc)
            now = time.time()
            for type, target, data, *exp in items:
                self._defer((type, target, data, actor, exp[0] if exp else None, now))
        return len(items)

    @contextmanager
    def _write(self) -> Iterator:
        """Every write waits only :data:`FLUSH_BUSY_MS` for the lock while events are
        queued (the lock is known to be held: no 0.5 s freeze per todo edit or result)."""
        with self._lock:
            short = bool(self._queue) and not self._db.in_transaction
            if short:
                self._db.execute(f"PRAGMA busy_timeout={FLUSH_BUSY_MS}")
            try:
                with super()._write() as db:
                    yield db
            finally:
                if short:
                    self._db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")

    def _defer(self, item: tuple) -> Event:
        self._queue.append(item)
        if len(self._queue) > MAX_DEFERRED:
            del self._queue[0]
            self.dropped += 1
        type, target, data, actor, experiment, ts = item
        return Event(0, ts, type, target, actor, experiment, data)

    def flush(self) -> bool:
        """Write the queued events in one transaction (waiting at most
        :data:`FLUSH_BUSY_MS` for the lock); True when nothing is left waiting."""
        with self._lock:
            if not self._queue:
                return True
            try:
                with self._write() as db:  # short wait: events are queued
                    for type, target, data, actor, experiment, ts in self._queue:
                        self._append(db, type, target, data, actor, experiment, ts)
            except JournalBusy:
                return False
            self._queue.clear()
            self.busy_error = None
            return True
