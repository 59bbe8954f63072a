"""What a session's services (benchmarks, todo edits, todo runs, followed lists) need of
the campaign journal, and nothing more of the :class:`~optui.session.session.Session`.

The session builds one :class:`JournalWriter` and hands it to each service (with the
change callback and the config values that service uses), so no service imports the
session: the session wires them together (``tests/unit/test_import_cycles.py``).

:meth:`JournalWriter.write` is the one door of the services' journal writes, and the one place
that knows about the journal's thread: a service call the session runs on that thread
(``Session.on_journal_thread``) waits out another process's lock there and tells the event
loop of the outcome; the same call made on the event loop (the CLI) writes inline as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from optui.adapters.journal import Journal, JournalError
from optui.adapters.journal_thread import EDIT_WAIT_S
from optui.session.errors import SessionError

if TYPE_CHECKING:
    from optui.adapters.journal_thread import JournalThread

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class JournalWriter:
    """The journal as a service writes it, on behalf of its session.

    ``journal``: the campaign store (reads and writes; may be a ``DeferringJournal``).
    ``actor``: who the session's writes are journaled as (``tui``, ``cli``, ``agent:x``).
    ``record(type, target, data, *, experiment=None)``: append an event as ``actor``, show a
    write error, then ``refresh``. ``failed(exc)``: a write failed: the status line says why
    and the session may turn read-only. ``refresh()``: pull new events, todos and results
    into the session's view. ``check_writable(what)``: raises SessionError naming ``what``
    when the session is read-only. ``thread``: the session's journal thread (None: writes
    always run inline).
    """

    journal: Journal
    actor: str
    record: Callable[..., None]
    failed: Callable[[JournalError], None]
    refresh: Callable[[], None]
    check_writable: Callable[[str], None]
    thread: JournalThread | None = None

    @property
    def off_loop(self) -> bool:
        """True once the session runs off the loop (its journal thread is bound): a service
        never calls the journal on the event loop then."""
        return self.thread is not None and self.thread.bound

    def write(self, fn: Callable[[], T]) -> T:
        """Run the journal write ``fn`` and refresh the session's view; returns what ``fn``
        returned. A JournalError is shown (``failed``) and raised as SessionError. On the
        journal thread ``fn`` waits out another process's lock, up to
        :data:`~optui.adapters.journal_thread.EDIT_WAIT_S`
        (:meth:`~optui.adapters.journal_thread.JournalThread.wait_out_lock`), and ``failed`` /
        ``refresh`` run on the event loop."""
        thread = self.thread
        on_thread = thread is not None and thread.on_thread()
        try:
            result = thread.wait_out_lock(fn, EDIT_WAIT_S) if thread is not None and on_thread else fn()
        except JournalError as exc:
            if thread is not None and on_thread:
                thread.to_loop(self.failed, exc)
            else:
                self.failed(exc)
            raise SessionError(str(exc)) from exc
        if thread is not None and on_thread:
            thread.to_loop(self.refresh)
        else:
            self.refresh()
        return result

    async def call(self, fn: Callable[[], T], *, slow: bool = False) -> T:
        """``fn()`` (journal reads and writes) on the journal thread once the session runs
        off the loop, retried while another process holds the lock
        (:meth:`~optui.adapters.journal_thread.JournalThread.wait_out_lock`); otherwise
        inline, or in a worker thread when ``slow`` (seconds of inserts). Its result or
        exception."""
        thread = self.thread
        if thread is None or not thread.bound:
            return await asyncio.to_thread(fn) if slow else fn()
        return await thread.call(lambda: thread.wait_out_lock(fn, EDIT_WAIT_S))

    def submit(self, fn: Callable[[], object]) -> None:
        """Run the journal write ``fn`` whose result nobody waits for (a benchmark's result),
        then refresh: on the journal thread, in order after what was submitted before it,
        waiting out another process's lock there, once the session runs off the loop (the
        thread is bound to it); inline otherwise. A JournalError is shown (``failed``), never
        raised."""
        thread = self.thread
        if thread is None or not thread.bound:
            try:
                fn()
            except JournalError as exc:
                self.failed(exc)
            self.refresh()
            return

        def write(_journal) -> None:
            try:
                thread.wait_out_lock(fn)  # a result is not deferred like an event: it waits here
            except JournalError as exc:
                thread.to_loop(self.failed, exc)
            thread.to_loop(self.refresh)

        thread.submit(write)

    def writable(self) -> bool:
        """False when the session is read-only (``check_writable`` would raise)."""
        try:
            self.check_writable("writing")
        except SessionError:
            return False
        return True
