"""What the journal already says about a server, for a session that did not see it happen.

Several optui processes share one journal (a TUI, CLI commands, an agent's CLI calls). A
server's transitions are journaled by the process that caused or first saw them; another
process reads them here instead of journaling them twice or inventing its own:

- :func:`last_journaled_state`: the state the journal last recorded (a session's first
  observation is journaled only when it differs, and from that state);
- :func:`failure_journaled_since`: the failure another process journaled for the launch it
  made (a TUI following a CLI restart shows that crash class instead of DOWN);
- :func:`failure_of_last_launch`: how the newest launch ended, when it failed (a session
  that finds nothing running shows that failure, not DOWN).

Both raise :class:`~optui.adapters.journal.JournalError` when the journal cannot be read.
:class:`OtherProcesses` is the object of a :class:`~optui.session.server.runtime.ServerRuntime`
that uses them, with the adoption of a launch another optui process made.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from optui.adapters.controller import Controller
from optui.adapters.journal import Event, Journal
from optui.core.journal import events as ev
from optui.core.server.state import CrashClass, ServerState
from optui.session.server.transitions import ServerEvents, StatusKeeper, launched_by_another_live_process


def last_journaled_state(journal: Journal, server: str) -> str | None:
    """The ``new`` state of ``server``'s newest ``server.state`` event ("ready", "down"...),
    None when it has none."""
    found = journal.events(target=server, types=[ev.SERVER_STATE], limit=1, newest_first=True)
    return found[0].data.get("new") if found else None


def experiment_of_last_launch(journal: Journal, server: str) -> str | None:
    """The experiment of ``server``'s newest ``server.starting`` event (the launch whose log
    the server's log file holds), None when it has none or it was outside any experiment."""
    found = journal.events(target=server, types=[ev.SERVER_STARTING], limit=1, newest_first=True)
    return found[0].experiment if found else None


def failure_journaled_since(journal: Journal, server: str, since_ts: float) -> Event | None:
    """The ``server.failed`` event of ``server`` written at or after ``since_ts`` (Unix
    seconds) when it is the newest of its starts, readies and failures (no later launch has
    started or become ready since), else None."""
    found = journal.events(target=server, types=[ev.SERVER_STARTING, ev.SERVER_READY, ev.SERVER_FAILED],
                           since_ts=since_ts, limit=1, newest_first=True)
    return found[0] if found and found[0].type == ev.SERVER_FAILED else None


def failure_of_last_launch(journal: Journal, server: str) -> Event | None:
    """The ``server.failed`` event of ``server``'s newest launch: the newest of its starts,
    readies, failures and stops when it is a failure (a start that failed, or a launch that
    crashed later), else None (it became ready or was stopped since, or nothing failed)."""
    found = journal.events(target=server, types=[ev.SERVER_STARTING, ev.SERVER_READY, ev.SERVER_FAILED, ev.SERVER_STOPPED],
                           limit=1, newest_first=True)
    return found[0] if found and found[0].type == ev.SERVER_FAILED else None


def end_journaled_since(journal: Journal, server: str, since_ts: float) -> Event | None:
    """The ``server.failed`` or ``server.stopped`` event of ``server`` written at or after
    ``since_ts`` (Unix seconds): a launch made then has had its end journaled. None when
    there is none."""
    found = journal.events(target=server, types=[ev.SERVER_FAILED, ev.SERVER_STOPPED], since_ts=since_ts, limit=1,
                           newest_first=True)
    return found[0] if found else None


def stop_journaled_since(journal: Journal, server: str, since_ts: float) -> Event | None:
    """The ``server.stopped`` event of ``server`` written at or after ``since_ts`` (Unix
    seconds) when it is the newest of its starts, readies, failures and stops (the launch
    running since then was stopped by an optui process, no later one started), else None."""
    found = journal.events(target=server, types=[ev.SERVER_STARTING, ev.SERVER_READY, ev.SERVER_FAILED, ev.SERVER_STOPPED],
                           since_ts=since_ts, limit=1, newest_first=True)
    return found[0] if found and found[0].type == ev.SERVER_STOPPED else None


def last_seen_alive(journal: Journal, server: str, since_ts: float) -> float | None:
    """Unix time of the newest event about ``server`` since ``since_ts`` (its launch): the
    last moment an optui process recorded it as running. None when there is none."""
    found = journal.events(target=server, since_ts=since_ts, limit=1, newest_first=True)
    return found[0].ts if found else None


def crash_class_of(value: object) -> CrashClass:
    """The :class:`CrashClass` named by a journaled ``class`` field (``UNKNOWN`` for a name
    this version does not know)."""
    try:
        return CrashClass(str(value))
    except ValueError:
        return CrashClass.UNKNOWN


class OtherProcesses:
    """What other optui processes did to one server: a relaunch by another process followed
    instead of called a crash, and that process's journaled failure shown as is.

    It is given the server's ``controller``, its ``events`` and status ``keeper``
    (:mod:`optui.session.server.transitions`), and three callables of its runtime:
    ``busy()`` (a start or stop of this process is under way), ``follow_log(started_at)``
    (read the log of the launch started at Unix time ``started_at`` from its first line) and
    ``stop_following()``; ``restarting_elsewhere()`` says another optui process holds the
    server's restart lock.
    """

    def __init__(self, controller: Controller, events: ServerEvents, keeper: StatusKeeper, *,
                 busy: Callable[[], bool], follow_log: Callable[[float], None], stop_following: Callable[[], None],
                 restarting_elsewhere: Callable[[], bool] = lambda: False) -> None:
        self.controller = controller
        self._events = events
        self._keeper = keeper
        self._busy = busy
        self._follow_log = follow_log
        self._stop_following = stop_following
        self._restarting_elsewhere = restarting_elsewhere
        #: following a launch another optui process made (its phases are journaled by that process)
        self.adopted = False
        #: since when (Unix s) the launch being followed is another optui process's: its
        #: failure is journaled by that process (see show_failure_journaled_elsewhere)
        self.elsewhere_since: float | None = None

    def launched_here(self) -> None:
        """This process starts the server now: the launch is its own again."""
        self.adopted = False
        self.elsewhere_since = None

    async def follow_launch_made_elsewhere(self) -> bool:
        """The pidfile names a launch this session has not attached to while it has none
        running (it showed the server DOWN or CRASHED when another optui process started it):
        follow that launch from its first log line, so its phases, readiness and a later
        crash are seen here too. True when it was adopted now."""
        recorded_fn = getattr(self.controller, "recorded", None)
        if recorded_fn is None or self._busy():
            return False
        recorded = recorded_fn()
        current = self.controller.launch
        if recorded is None or (current is not None and (recorded.pid == current.pid
                                                         or self.controller.process_state() == "running")):
            return False  # nothing new, or the old launch still runs (its exit adopts the new one)
        if await self.controller.attach() is None:
            return False
        await self._adopt(recorded)
        return True

    def _launched_elsewhere_at(self, started_at: float) -> None:
        self.elsewhere_since = min(self.elsewhere_since or started_at, started_at)

    async def _adopt(self, recorded) -> None:
        """Follow ``recorded``, a launch another optui process made (see adopt_relaunch)."""
        self._launched_elsewhere_at(recorded.started_at)
        # STARTING here, journaled by the process that launched it (as are its phases)
        await self._keeper.set_state(ServerState.STARTING, journal=False, argv=recorded.argv, pid=recorded.pid,
                                     started_at=recorded.started_at, ready_at=None, phase=None, phases=(),
                                     crash_class=None, crash_lines=(), message=None, model=None)
        self.adopted = True
        self._follow_log(recorded.started_at)

    async def adopt_relaunch(self) -> bool:
        """Another optui process (the CLI, a second window) restarted this server: follow
        its new launch instead of calling the old process's exit a crash. True when the
        exit is accounted for that way."""
        recorded = getattr(self.controller, "recorded", lambda: None)()
        current = self.controller.launch
        if recorded is not None and current is not None and recorded.pid != current.pid:
            self._launched_elsewhere_at(recorded.started_at)
            if await self.controller.attach() is not None:
                await self._adopt(recorded)
                return True
        if self._restarting_elsewhere():
            self.elsewhere_since = self.elsewhere_since or time.time()
            if self._keeper.status.state is not ServerState.DOWN:  # the restarting process journals the states
                await self._keeper.set_state(ServerState.DOWN, journal=False, pid=None,
                                             message="being restarted by another optui process")
            return True
        return False

    async def show_stop_journaled_elsewhere(self, started_at: float | None, *, grace_s: float = 3.0) -> bool:
        """The launch that started at Unix time ``started_at`` has ended and another optui
        process journaled its stop (the window that launched it quit and stopped it, `optui
        stop`): show the server DOWN with who stopped it, and journal nothing. A window that
        watched the server called that stop a crash (``down → crashed``, ``server.failed``
        unknown, an alert). The stopping process journals the stop once the process is gone:
        while the launch's maker still runs, its stop is waited for up to ``grace_s``. True
        when shown."""
        if started_at is None:
            return False
        journal, server = self._events.journal, self._events.server
        deadline = time.monotonic() + grace_s
        while True:
            stop = await self._events.read(lambda: stop_journaled_since(journal, server, started_at))
            if stop is not None:
                break
            maker_alive = await self._events.read(lambda: launched_by_another_live_process(journal, server))
            if not maker_alive or time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)
        self._stop_following()
        how = stop.data.get("how")
        by = stop.actor if stop.actor and stop.actor != "optui" else "another optui process"
        await self._keeper.set_state(ServerState.DOWN, journal=False, pid=None, crash_class=None, crash_lines=(),
                                     message=f"stopped by {by}" + (f" ({how})" if how else ""))
        return True

    async def show_failure_of_lost_launch(self, started_at: float) -> bool:
        """The launch another optui process made at Unix time ``started_at`` ended before this
        session followed it (a failed ``optui restart`` that a window polls only after the CLI
        exited): the failure that process journaled for it is shown as is, never journaled a
        second time (see :meth:`show_failure_journaled_elsewhere`). True when shown."""
        self._launched_elsewhere_at(started_at)
        return await self.show_failure_journaled_elsewhere()

    async def show_failure_journaled_elsewhere(self) -> bool:
        """A launch another optui process made (adopted, or made while this session showed
        DOWN) has ended and that process journaled its failure: show that failure (class,
        lines, message) and journal nothing. True when shown (or shown already)."""
        if self.elsewhere_since is None or self._keeper.status.state is ServerState.CRASHED:
            return self.elsewhere_since is not None
        since = self.elsewhere_since
        failure = await self._events.read(lambda: failure_journaled_since(self._events.journal, self._events.server, since))
        if failure is None:
            return False
        self._stop_following()
        await self._show_failure(failure)
        return True

    async def show_failure_of_last_launch(self) -> bool:
        """Nothing of the server runs as this session begins (``optui status`` after a
        window's failed restart, a new window after a crash): the failure an optui process
        journaled for its newest launch, if that is how it ended, shown as is (CRASHED with
        its class, lines, cause and argv), never journaled again. It read ``down`` with no
        crash class while the journal said ``server.failed … bad_flag``. True when shown."""
        if self._keeper.status.state is ServerState.CRASHED:
            return False
        journal, server = self._events.journal, self._events.server
        failure = await self._events.read(lambda: failure_of_last_launch(journal, server))
        if failure is None:
            return False
        await self._show_failure(failure)
        return True

    async def _show_failure(self, failure: Event) -> None:
        """Show ``failure`` (a journaled ``server.failed``) as the server's state: CRASHED with
        its class, log lines, message, cause line and the argv that failed; journal nothing."""
        d = failure.data
        argv = d.get("argv")
        cause = d.get("cause")
        await self._keeper.set_state(ServerState.CRASHED, journal=False, crash_class=crash_class_of(d.get("class")),
                                     crash_lines=tuple(map(str, d.get("lines") or ())), pid=None,
                                     message=d.get("message"), crash_cause=str(cause) if cause else None,
                                     argv=tuple(map(str, argv)) if isinstance(argv, list) and argv else self._keeper.status.argv)
