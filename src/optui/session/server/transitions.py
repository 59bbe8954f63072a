"""One server's status as the session publishes and journals it: the one door for its changes.

- :class:`ServerEvents`: this server's events in the shared journal (every write and read
  that may fail goes through it: a :class:`~optui.adapters.journal.JournalError` is reported,
  never raised into the monitor loop).
- :class:`StatusKeeper`: the :class:`~optui.core.server.state.ServerStatus` of one server.
  :meth:`StatusKeeper.set` changes anything but the state; :meth:`StatusKeeper.set_state` is
  the only way to change the state: it stamps ``state_since``, journals ``server.state``
  (once for all optui processes: not when the journal already says so, nor while another
  process restarts the server) and wakes :meth:`StatusKeeper.wait_for`. Which state comes
  next is decided by :mod:`optui.core.server.fsm`; this module only applies it.

:class:`~optui.session.server.runtime.ServerRuntime`, its
:class:`~optui.session.server.restart.RestartFlow` and its
:class:`~optui.session.server.history.OtherProcesses` share one of each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from optui.adapters.journal import Journal, JournalBusy, JournalError
from optui.adapters.journal_defer import DeferringJournal
from optui.adapters.journal_thread import EDIT_WAIT_S, WRITE_WAIT_S
from optui.adapters.proc import pid_alive
from optui.core.journal import events as ev
from optui.core.server.fsm import phase_in_state
from optui.core.server.state import ServerState, ServerStatus

if TYPE_CHECKING:
    from optui.adapters.journal_thread import JournalThread

T = TypeVar("T")


def newest_transition_alert(journal: Journal, server: str, kinds: tuple[str, ...]) -> str | None:
    """The kind of ``server``'s newest ``alert`` among ``kinds`` (``("hung", "recovered")``)
    since its last ``server.starting``, None when it has none: the transition the journal
    already holds, whichever optui process wrote it."""
    for event in journal.events(target=server, types=[ev.ALERT, ev.SERVER_STARTING], limit=200, newest_first=True):
        if event.type == ev.SERVER_STARTING:
            return None
        if event.data.get("kind") in kinds:
            return event.data["kind"]
    return None



class ServerEvents:
    """The journal as one server writes and reads it.

    ``failed(exc)`` is told of every :class:`JournalError` (the status line shows it);
    ``written()`` is called after every write attempt (the session's journal view refreshes).
    ``thread``: the session's journal thread; once it is bound (``Session.start(journal_off_loop=True)``,
    the TUI) every write is queued there in order (:meth:`record`, :meth:`record_with`) and
    every read is awaited there (:meth:`read`), so the event loop never runs SQLite; otherwise
    (the CLI) both run inline as before.
    """

    def __init__(self, journal: Journal, server: str, *, failed: Callable[[JournalError], None] = lambda exc: None,
                 written: Callable[[], None] = lambda: None, thread: JournalThread | None = None) -> None:
        self.journal = journal
        self.server = server
        self._failed = failed
        self._written = written
        self._thread = thread

    @property
    def off_loop(self) -> bool:
        """True when the journal calls run on the session's journal thread."""
        return self._thread is not None and self._thread.bound

    def record(self, type: str, data: dict, *, actor: str = "optui") -> None:
        """Append event ``type`` about this server (tagged with its current experiment)."""
        self.record_with(lambda: (type, data), actor=actor)

    def record_transition_alert(self, data: dict, kinds: tuple[str, ...] = ("hung", "recovered")) -> None:
        """Journal ``alert`` ``data`` (its ``kind`` one of ``kinds``) once per transition
        whatever the number of optui processes watching the server (a TUI and a CLI journaled
        every hung and recovered twice: issue 30): not when the newest such alert since the
        server's last launch, written by any process, has this kind already."""
        def make() -> tuple[str, dict] | None:
            if newest_transition_alert(self.journal, self.server, kinds) == data["kind"]:
                return None
            return ev.ALERT, data

        self.record_with(make)

    def record_with(self, make: Callable[[], tuple[str, dict] | None], *, actor: str = "optui") -> None:
        """Append the event ``make()`` returns (``(type, data)``; None: nothing) about this
        server, tagged with its current experiment. ``make`` runs where the journal is (it
        may read it: whether the event is new). Off the loop: queued on the journal thread
        after every earlier write and read (fire-and-forget, stamped now; a write meeting
        another process's lock waits in the ``DeferringJournal``'s memory); inline otherwise."""
        thread, ts = self._thread, time.time()
        if thread is None or not thread.bound:
            try:
                self._make_and_append(self.journal, make, actor, None)
            except JournalError as exc:
                self._failed(exc)
            self._written()
            return

        def append(journal: Journal) -> None:
            try:
                self._make_and_append(journal, make, actor, ts)
            except JournalError as exc:
                thread.to_loop(self._failed, exc)
            thread.to_loop(self._written)

        thread.submit(append)

    def _make_and_append(self, journal: Journal, make: Callable[[], tuple[str, dict] | None], actor: str,
                         ts: float | None) -> None:
        """``make()`` and the append of what it made under one write lock (``BEGIN IMMEDIATE``):
        two processes watching the server that see the same change at the same moment cannot
        both read "not journaled yet" and both write it (issue 30: alerts once per event). A
        ``DeferringJournal`` with events queued, or meeting another process's lock, reads and
        appends apart instead, so its event waits in order in memory. Raises JournalError."""
        def make_and_append() -> None:
            made = make()
            if made is not None:
                journal.append(made[0], self.server, made[1], actor=actor,
                               experiment=journal.current_experiment(self.server), ts=ts)

        deferring = isinstance(journal, DeferringJournal)
        queued = journal.deferred if isinstance(journal, DeferringJournal) else 0
        if not queued:
            try:
                with journal.transaction():
                    make_and_append()
                return
            except JournalBusy:
                if not deferring:
                    raise
        make_and_append()

    def write(self, fn: Callable[[], object]) -> None:
        """The journal write ``fn`` that is not an event (the last good flags), nobody waiting
        for it: off the loop queued on the journal thread in order, waiting out another
        process's lock there (up to ``WRITE_WAIT_S``); inline otherwise. A JournalError is reported."""
        thread = self._thread
        if thread is None or not thread.bound:
            self.safe(fn)
            return

        def write(_journal: Journal) -> None:
            try:
                thread.wait_out_lock(fn, WRITE_WAIT_S)
            except JournalError as exc:
                thread.to_loop(self._failed, exc)

        thread.submit(write)

    async def read(self, fn: Callable[[], T]) -> T | None:
        """``fn()`` (journal reads, or a write whose result the caller needs: a new experiment's
        id), or None when it raises :class:`JournalError` (reported). Off the loop it runs on
        the journal thread after every write queued before it (waiting out another process's
        lock there, up to ``EDIT_WAIT_S``); inline otherwise."""
        thread = self._thread
        if thread is None or not thread.bound:
            return self.safe(fn)
        try:
            return await thread.call(lambda: thread.wait_out_lock(fn, EDIT_WAIT_S))
        except JournalError as exc:
            self._failed(exc)  # on the loop here
            return None

    def safe(self, fn: Callable[[], T]) -> T | None:
        """``fn()``, or None when it raises :class:`JournalError` (reported). Inline: where
        the caller is (the journal thread inside :meth:`record_with`, or the CLI's loop)."""
        try:
            return fn()
        except JournalError as exc:
            self._failed(exc)
            return None


class StatusKeeper:
    """The status of one server and the one door for its changes (module doc).

    ``on_change()`` is called after every change; ``restarting_elsewhere()`` says another
    optui process holds the server's restart lock (that process journals the states);
    ``journaled_state()`` is the state the journal last recorded for the server ("ready"...,
    None when none or unreadable: see
    :func:`~optui.session.server.history.last_journaled_state`), asked at every state change:
    two windows (or a window and the CLI) see the same transitions, and only the first to
    see one journals it; ``launched_elsewhere()`` says the server's launch was made by
    another optui process that still runs (:func:`launched_by_another_live_process`): that
    process journals the transitions, the others none.
    """

    def __init__(self, status: ServerStatus, journal: ServerEvents, *, on_change: Callable[[], None],
                 restarting_elsewhere: Callable[[], bool] = lambda: False,
                 journaled_state: Callable[[], str | None] = lambda: None,
                 launched_elsewhere: Callable[[], bool] = lambda: False) -> None:
        self.status = status
        self._journal = journal
        self._on_change = on_change
        self._restarting_elsewhere = restarting_elsewhere
        self._launched_elsewhere = launched_elsewhere
        self._journaled_state = journaled_state
        self._state_changed = asyncio.Condition()
        self._watchers: list[Callable[[ServerState], None]] = []

    def watch(self, on_state: Callable[[ServerState], None]) -> Callable[[], None]:
        """Call ``on_state(new_state)`` at every change of state from now on (a benchmark
        run's validity: the states it ran through); returns the function that stops it."""
        self._watchers.append(on_state)

        def unwatch() -> None:
            with contextlib.suppress(ValueError):
                self._watchers.remove(on_state)

        return unwatch

    def set(self, **changes) -> None:
        """Change status fields other than ``state`` (ValueError for ``state``: use :meth:`set_state`)."""
        if "state" in changes:
            raise ValueError("the state changes through set_state (state_since, server.state)")
        self.status = self._consistent(replace(self.status, **changes))
        self._on_change()

    @staticmethod
    def _consistent(status: ServerStatus) -> ServerStatus:
        """``status`` with the phase its state allows (core.server_fsm.phase_in_state): never
        WARMING in phase ``ready``, nor READY in phase ``warmup``."""
        phase = phase_in_state(status.state, status.phase)
        return status if phase == status.phase else replace(status, phase=phase)

    async def set_state(self, state: ServerState, *, actor: str = "optui", journal: bool = True, **changes) -> None:
        """Enter ``state`` with the other ``changes``: a new state stamps ``state_since`` (Unix
        s) and is journaled as ``server.state`` unless ``journal`` is False, the journal says
        so already, or another process is restarting the server; a DEGRADED/HUNG ``message``
        is journaled as the ``reason``. Nothing happens for the same state without changes."""
        old = self.status.state
        if state is old and not changes:
            return
        if state is not old:
            changes["state_since"] = time.time()
            phase = phase_in_state(state, changes["phase"] if "phase" in changes else self.status.phase)
            # the process that launched the server (restarting it now, or still running after
            # its restart) journals its transitions: a second window or the CLI watching the
            # same server journaled `warming → ready` too, after the launcher's lock was gone
            if journal and not self._restarting_elsewhere():
                reason = changes.get("message") if state in (ServerState.DEGRADED, ServerState.HUNG) else None

                def state_event(old=old, phase=phase, reason=reason) -> tuple[str, dict] | None:
                    # read where the journal is (its thread in the TUI): is the change news?
                    if self._launched_elsewhere():
                        return None
                    journaled = self._journaled_state()
                    if journaled == str(state):
                        return None
                    data = {"old": journaled or str(old), "new": str(state), "phase": phase}
                    if reason:
                        data["reason"] = reason  # why: health timeouts, 503s, refused, no tokens
                    return ev.SERVER_STATE, data

                self._journal.record_with(state_event, actor=actor)
        self.status = self._consistent(replace(self.status, state=state, **changes))
        if state is not old:
            for on_state in tuple(self._watchers):
                on_state(state)
        self._on_change()
        async with self._state_changed:
            self._state_changed.notify_all()

    async def wait_for(self, done: Callable[[ServerState], bool], deadline: float) -> bool:
        """Wait until ``done(state)`` or the monotonic ``deadline``; True when reached."""
        async with self._state_changed:
            while not done(self.status.state):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel that arrives
                # with a notify (the state set at shutdown), as adapters/aio.py explains
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self._state_changed.wait()
        return True


def launched_by_another_live_process(journal: Journal, server: str) -> bool:
    """True when ``server``'s newest restart (``server.restart``, which records the pid of
    the optui process that made it: optui's processes share the journal's machine) was
    made by another optui process that is still running."""
    found = journal.events(target=server, types=[ev.RESTART_REQUESTED], limit=1, newest_first=True)
    pid = found[0].data.get("pid") if found else None
    return isinstance(pid, int) and pid != os.getpid() and pid_alive(pid)
