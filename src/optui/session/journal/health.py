"""How the session's journal is doing: the status line's ``journal:`` text, events waiting on
another process's lock, and the switch to read-only when the journal cannot be written.

- Another process holds the write lock (``JournalBusy``): events wait in memory
  (:class:`~optui.adapters.journal_defer.DeferringJournal`) and :meth:`JournalHealth.tick`
  writes them once it is free; the status line says so meanwhile; nothing is lost.
- The journal cannot be written at all (disk full, file made read-only, I/O error): the
  error stays on the status line and the session turns read-only (see
  :meth:`~optui.session.session.Session.journal_failed`); what was written before is kept.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from optui.adapters.journal import Journal, JournalBusy, JournalError
from optui.adapters.journal_defer import DeferringJournal

#: How long a failed write on a busy lock stays on the status line (s).
BUSY_SHOWN_S = 5.0


class JournalHealth:
    """Tracks write failures of ``journal``; ``on_change()`` is called when the status changes."""

    def __init__(self, journal: Journal, on_change: Callable[[], None]) -> None:
        self.journal = journal
        self.on_change = on_change
        self.error: str | None = None  # a hard error (sticky)
        self._busy_text = ""
        self._busy_until = 0.0

    def failed(self, exc: JournalError) -> bool:
        """Note a failed write; True when the journal cannot be written any more."""
        if isinstance(exc, JournalBusy):
            self._busy_text, self._busy_until = str(exc), time.monotonic() + BUSY_SHOWN_S
            self.on_change()
            return False
        if self.error != str(exc):
            self.error = str(exc)
            self.on_change()
        return self.journal.read_only

    def status(self) -> str | None:
        """The status line's ``journal:`` text, or None when all is well."""
        if self.error:
            return self.error
        waiting = self._waiting()
        if waiting is not None:
            return f"{waiting.busy_error}; {waiting.deferred} event(s) waiting, written when the lock is free"
        if time.monotonic() < self._busy_until:
            return self._busy_text
        return None

    def tick(self) -> bool:
        """Write events that waited for the lock; True when some were written now. Raises
        JournalError when the journal fails otherwise. (:meth:`flush` then :meth:`flushed`.)"""
        if not self.flush():
            return False
        self.flushed()
        return True

    def flush(self) -> bool:
        """The SQLite half of :meth:`tick` (safe on the journal thread: touches no session
        state): True when waiting events were written now. Raises JournalError."""
        waiting = self._waiting()
        return waiting is not None and waiting.flush()

    @property
    def waiting(self) -> bool:
        """Events wait for another process's lock (:meth:`flush` has work)."""
        return self._waiting() is not None

    def flushed(self) -> None:
        """The event loop's half of :meth:`tick`: the busy text goes, the session is told."""
        self._busy_until = 0.0
        self.on_change()

    def flush_before_close(self, wait_s: float = 5.0) -> None:
        """Last chance for waiting events when the session closes: retry for ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while (waiting := self._waiting()) is not None and time.monotonic() < deadline:
            with contextlib.suppress(JournalError):
                if waiting.flush():
                    return
            time.sleep(0.1)

    def _waiting(self) -> DeferringJournal | None:
        """The journal when events wait in it for the lock (only a DeferringJournal
        defers; a plain Journal never does), else None."""
        j = self.journal
        return j if isinstance(j, DeferringJournal) and j.deferred else None
