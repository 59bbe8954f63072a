"""The journal's own thread: calls the event loop awaits instead of running them.

What it guarantees: every call given to one :class:`JournalThread` runs on its one thread,
in the order given, one at a time; :meth:`JournalThread.submit` is fire-and-forget (its
outcome is reported by the call itself), :meth:`JournalThread.call` hands back an awaitable
of the result; a write meeting another process's lock waits it out on this thread
(:meth:`JournalThread.wait_out_lock`, bounded by :data:`WRITE_WAIT_S` / :data:`EDIT_WAIT_S`),
outside the connection's lock (``Journal.never_wait_here``), so a loop-side read never
queues behind it. A session started for the TUI (``Session.start(journal_off_loop=True)``)
sends its journal traffic here; the CLI's one-shots keep the inline path
(``journal_off_loop=False``). To see who calls it, search for ``JournalThread`` and
``JournalWriter`` rather than trust a list here.

A query over a long campaign (every experiment: ~0.7 s on 100k events; a text filter: a scan
of every event) or a write that waits for another process's lock (up to ``busy_timeout_s``)
would freeze the screen if it ran on the event loop. :class:`JournalThread` runs every call
it is given on one daemon thread (:class:`~optui.adapters.worker_thread.SingleThreadExecutor`:
in order, one at a time, never blocking interpreter exit) and hands back an awaitable.

Queries a view repeats are incremental: :class:`ExperimentFeed` reads only the events after
the last one it saw (and new results) into an :class:`~optui.core.journal.experiments.ExperimentBook`,
which rebuilds only the rows they touch; :meth:`JournalThread.query` scans a text filter in
bounded windows of :data:`TEXT_SCAN_WINDOW` events, each its own call on the thread, so a
write waits behind at most one window.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from optui.adapters.journal import Journal, JournalBusy
from optui.adapters.worker_thread import SingleThreadExecutor
from optui.core.journal import events as ev
from optui.core.journal.events import Event, EventFilter
from optui.core.journal.experiments import EXPERIMENT_EVENT_TYPES, ExperimentBook, ExperimentsUpdate

T = TypeVar("T")

#: events one call of a text-filtered query scans (about 30 ms on a 2-core VM)
TEXT_SCAN_WINDOW = 10_000
#: how long a write nobody waits for (a benchmark's result) waits out another process's lock (s)
WRITE_WAIT_S = 60.0
#: how long an edit the operator waits for (a todo edit, a note) waits out the lock (s): the
#: app takes the next key after it (keys stay in order), so past this it fails visibly instead
EDIT_WAIT_S = 10.0
#: what an experiment's row is built from after its first load (state changes decide
#: whether an experiment without ready/failed became ready)
_FEED_TYPES = (*EXPERIMENT_EVENT_TYPES, ev.SERVER_STATE)


class ExperimentFeed:
    """The experiments of one journal, kept by one reader (a view) across updates.

    :meth:`refresh` runs on the journal thread (through :meth:`JournalThread.experiments`):
    the first time it loads every experiment; afterwards only events after the last seq it
    read, results after the last id, and all results again only when a baseline pin moved.
    Not thread-safe on its own: one feed is refreshed by one thread.
    """

    def __init__(self) -> None:
        self.book: ExperimentBook | None = None
        self._pinned: frozenset[int] = frozenset()

    def refresh(self, journal: Journal) -> ExperimentsUpdate:
        """Bring the feed up to ``journal``'s newest committed event (blocking: SQLite)."""
        top = journal.last_seq()  # first: events committed while reading come next time
        pinned = journal.pinned_result_ids()
        if self.book is None or pinned != self._pinned:
            fresh = ExperimentBook()
            fresh.add(journal.experiment_events(before_seq=top + 1), journal.results(limit=None))
            changed = {x.id for x in fresh.experiments}
            if self.book is not None:  # a pin moved: only the rows that differ changed
                old = {x.id: x for x in self.book.experiments}
                changed = {x.id for x in fresh.experiments if old.get(x.id) != x}
            self.book = fresh
        else:
            events = journal.events(since_seq=self.book.last_seq, before_seq=top + 1, types=_FEED_TYPES) \
                if top > self.book.last_seq else []
            changed = self.book.add(events, journal.results(since_id=self.book.last_result_id, limit=None))
        self.book.last_seq = max(self.book.last_seq, top)
        self._pinned = pinned
        return ExperimentsUpdate(tuple(self.book.experiments), frozenset(changed), self.book.last_seq)


class JournalThread:
    """Every journal call of an event loop, run on one thread (see module doc).

    ``journal`` is the process's :class:`Journal` (or ``DeferringJournal``); its own lock
    still guards the connection, so code that has not moved here yet stays correct. Every
    coroutine raises what the journal call raised (``JournalError``, ``JournalBusy``...).
    """

    def __init__(self, journal: Journal, name: str = "optui-journal") -> None:
        self.journal = journal
        self._executor = SingleThreadExecutor(name)
        self._loop: asyncio.AbstractEventLoop | None = None
        # a write here never waits for another process's lock holding the connection's lock
        # (every loop-side read needs it): it fails fast and is retried or deferred instead
        self._executor.submit(journal.never_wait_here)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop :meth:`to_loop` hands callbacks to (the session's)."""
        self._loop = loop

    @property
    def bound(self) -> bool:
        """True once :meth:`bind` gave it an event loop (its session runs off the loop)."""
        return self._loop is not None

    def on_thread(self) -> bool:
        """True when called on the journal thread itself."""
        return self._executor.is_worker(threading.current_thread())

    def to_loop(self, fn: Callable[..., object], *args) -> None:
        """``fn(*args)`` soon on the bound event loop (thread-safe); dropped once it is closed."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # closed meanwhile
                pass

    async def run(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """``fn(journal, *args, **kwargs)`` on the journal thread; its result."""
        return await asyncio.wrap_future(self._executor.submit(fn, self.journal, *args, **kwargs))

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the journal thread (a service call whose journal writes go through
        ``JournalWriter.write``, which waits out a lock there); its result or exception."""
        return await asyncio.wrap_future(self._executor.submit(fn))

    def submit(self, fn: Callable[[Journal], object]) -> None:
        """``fn(journal)`` on the journal thread, after every call submitted before it; the
        caller does not wait (``fn`` reports its own outcome, e.g. through :meth:`to_loop`).
        Run at once when already on the thread (order is kept either way)."""
        if self.on_thread():
            fn(self.journal)
        else:
            self._executor.submit(fn, self.journal)

    def wait_out_lock(self, fn: Callable[[], T], wait_s: float = WRITE_WAIT_S) -> T:
        """On the journal thread: ``fn()``, retried while another process holds the write
        lock (``JournalBusy``) for up to ``wait_s`` s, sleeping between tries outside the
        connection's lock (:meth:`Journal.never_wait_here`); events a ``DeferringJournal`` queued
        meanwhile are written first, so the journal keeps their order. Raises the last
        JournalBusy after ``wait_s``, any other JournalError at once."""
        deadline = time.monotonic() + wait_s
        flush = getattr(self.journal, "flush", None)  # a DeferringJournal's queued events go first
        while True:
            try:
                if flush is not None and not flush():
                    raise JournalBusy(getattr(self.journal, "busy_error", None) or "the journal is locked")
                return fn()
            except JournalBusy:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    async def append(self, type: str, target: str | None = None, data: dict | None = None, *,
                     actor: str = "optui", experiment: str | None = None) -> Event:
        """:meth:`Journal.append` on the journal thread (a lock held by another process is
        waited for there, not on the event loop)."""
        return await self.run(lambda j: j.append(type, target, data, actor=actor, experiment=experiment))

    async def experiments(self, feed: ExperimentFeed) -> ExperimentsUpdate:
        """``feed`` brought up to date (:meth:`ExperimentFeed.refresh`) on the journal thread."""
        return await self.run(feed.refresh)

    async def query(self, flt: EventFilter, *, since_seq: int = 0, limit: int | None = 500) -> list[Event]:
        """:meth:`Journal.query` (events matching ``flt`` after ``since_seq``, newest first, at
        most ``limit``): the same events, but a text filter scans the newest
        :data:`TEXT_SCAN_WINDOW` events per call on the thread, going back until ``limit``
        matched or ``since_seq`` is reached."""
        if not flt.text:
            return await self.run(lambda j: j.query(flt, since_seq=since_seq, limit=limit))
        top = await self.run(lambda j: j.last_seq())
        found: list[Event] = []
        hi = top + 1
        while hi - 1 > since_seq and (limit is None or len(found) < limit):
            lo = max(since_seq, hi - 1 - TEXT_SCAN_WINDOW)
            want = None if limit is None else limit - len(found)
            found += await self.run(lambda j, lo=lo, hi=hi, want=want: j.events(
                since_seq=lo, before_seq=hi, limit=want, types=flt.types, target=flt.target,
                experiment=flt.experiment, text=flt.text, since_ts=flt.since_ts, newest_first=True))
            hi = lo + 1
        return found

    def close(self) -> None:
        """Refuse new calls; calls already queued still run (the thread is a daemon: a call
        stuck on a lock never holds up exit)."""
        self._executor.shutdown(wait=False)
