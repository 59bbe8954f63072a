"""The UI's one door to the session: :class:`SessionClient`.

The app and its panels read the session only through :meth:`SessionClient.snapshot` (a frozen
:class:`~optui.session.state.SessionState`) and act through the client's verbs. Its slow
calls (journal queries: a text filter scans the whole journal) are coroutines that run the
work off the event loop — on the journal's own thread where the session has one
(``Session.query_events_async``), else in a worker thread — so a caller awaits them in a
Textual worker and posts the result back as a message; the screen never waits on SQLite.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the session (pydantic, httpx, sqlite...) is imported after the first frame
    from collections.abc import Awaitable, Callable

    from optui.adapters.journal_thread import ExperimentsUpdate
    from optui.core.bench.compare import Row
    from optui.core.events import Event, EventFilter
    from optui.session import Session
    from optui.session.state import SessionState


class SessionClient:
    """What the UI may ask of one :class:`~optui.session.Session` (see module doc)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    # ------------------------------------------------------------ state
    @property
    def version(self) -> int:
        """The session's change counter (bumped by every change)."""
        return self._session.version

    def snapshot(self) -> SessionState:
        """Everything on screen now, as one frozen value (cached until the next change)."""
        return self._session.snapshot()

    async def wait_changed(self, seen_version: int, timeout: float | None = None) -> int:
        """Wait until the version exceeds ``seen_version`` or ``timeout`` s pass; the version."""
        return await self._session.wait_changed(seen_version, timeout=timeout)

    @property
    def read_only(self) -> bool:
        """True when changing servers or putting load on them is refused (``--read-only``,
        or the journal cannot be written)."""
        return self._session.read_only

    def result_rows(self) -> list[Row]:
        """Every stored result group's comparison row (medians, deltas vs baseline, scaling),
        oldest first; the same list object until the results change."""
        return self._session.benches.rows()

    # ------------------------------------------------------------ verbs
    def set_paused(self, paused: bool) -> None:
        """Pause (True) or resume GPU polling."""
        self._session.set_paused(paused)

    def refresh_now(self) -> None:
        """Read every GPU source now (ctrl+l)."""
        self._session.refresh_now()

    # ------------------------------------------------------------ slow calls (off the loop)
    async def query_events(self, flt: EventFilter, *, since_seq: int = 0, limit: int | None = 500) -> list[Event]:
        """The journal's events matching ``flt`` newer than ``since_seq``, newest first, at
        most ``limit``; run off the event loop. Raises what the journal raises (a locked or
        broken file: ``JournalError``, ``sqlite3.Error``)."""
        on_journal_thread = getattr(self._session, "query_events_async", None)
        if on_journal_thread is not None:
            return await on_journal_thread(flt, since_seq=since_seq, limit=limit)
        return await asyncio.to_thread(self._session.query_events, flt, since_seq=since_seq, limit=limit)

    def experiments_reader(self) -> Callable[[], Awaitable[ExperimentsUpdate]]:
        """A reader of the journal's experiments for one view: each await reads only what is
        new, on the journal thread (``Session.experiments_reader``)."""
        return self._session.experiments_reader()

    async def set_verdict(self, experiment: str, decision: str, reason: str = "") -> None:
        """Record the operator's verdict on ``experiment``, the journal read and write off
        the event loop. Raises SessionError for a bad decision or an unknown experiment."""
        await self._session.set_verdict_async(experiment, decision, reason)

    async def last_failure(self, server: str) -> Event | None:
        """The newest ``server.failed`` event of ``server`` (None when it never failed); off
        the event loop."""
        from optui.core import events as ev
        from optui.core.events import EventFilter

        failed = await self.query_events(EventFilter(types=frozenset({ev.SERVER_FAILED}), target=server), limit=1)
        return failed[0] if failed else None
