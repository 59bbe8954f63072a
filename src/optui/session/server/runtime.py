"""One server as the session sees it: probes, log reading, state machine, restarts.

A :class:`ServerRuntime` owns the server's controller, probe, log follower and load
monitor, runs a monitor loop (controller state → health → state machine → load), reads the
log as it streams (phases, ``server.phase``) and starts/stops the server. It owns, and
gives what they need to:

- its :class:`~optui.session.server.transitions.StatusKeeper` (the status; every state
  change goes through it, so each stamps ``state_since`` and is journaled once) and
  :class:`~optui.session.server.transitions.ServerEvents` (its journal events);
- its :class:`~optui.session.server.restart.RestartFlow` (restart and ready gate; the
  runtime is its :class:`~optui.session.server.restart.Launcher`);
- its :class:`~optui.session.server.history.OtherProcesses` (launches and failures of
  other optui processes).

Which state comes next is decided by :mod:`optui.core.server.fsm`.

Health probes are strictly sequential (never faster than the previous answer) and SGLang's
use a ≥ 25 s timeout (its /health runs a real generation and may take 20 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from optui.adapters.aio import wait_set, within
from optui.adapters.controller import Controller, ControllerError, Launch, ProcessController
from optui.adapters.journal import Journal, JournalError
from optui.adapters.probe import HealthResult, ServerProbe
from optui.adapters.shell import LocalShell, LogSource, Shell
from optui.config import ServerConfig
from optui.core.flags.argv import Flags
from optui.core.flags.catalog import FlagCatalog
from optui.core.journal import events as ev
from optui.core.server.effective_config import mismatch_lines
from optui.core.server.fsm import PAUSE_CHECK_S, Observation, after_load_reading, next_state, unhealthy_reason
from optui.core.server.log import LogClassifier, exit_description, phase_durations, process_relative_time
from optui.core.server.state import CrashClass, LoadView, ServerState, ServerStatus
from optui.session.command_log import hide_value
from optui.session.server.flag_catalogs import CatalogError, CatalogStore
from optui.session.server.history import (
    OtherProcesses,
    end_journaled_since,
    experiment_of_last_launch,
    last_journaled_state,
    last_seen_alive,
)
from optui.session.server.load import LoadMonitor
from optui.session.server.restart import GpuHolders, RestartError, RestartFlow, port_open, url_host_port
from optui.session.server.transitions import ServerEvents, StatusKeeper, launched_by_another_live_process

if TYPE_CHECKING:
    from optui.adapters.journal_thread import JournalThread

T = TypeVar("T")

__all__ = ["RestartError", "ServerRuntime", "health_timeout_s", "port_open", "url_host_port"]

#: SGLang's /health generates a token and may need its 20 s health-check window.
SGLANG_MIN_HEALTH_TIMEOUT_S = 25.0
#: How much of a lost launch's log end is read to classify how it ended (characters).
LOST_LOG_TAIL_CHARS = 256 * 1024
#: How long a hung verdict's confirming 1-token generation may take.
CONFIRM_TIMEOUT_S = 30.0

def health_timeout_s(cfg: ServerConfig) -> float:
    """The health-probe timeout for ``cfg`` (≥ 25 s for SGLang, see module doc)."""
    if cfg.kind == "sglang":
        return max(cfg.health_timeout_s, SGLANG_MIN_HEALTH_TIMEOUT_S)
    return cfg.health_timeout_s


class ServerRuntime:
    """Monitor and control one configured server (see module doc).

    ``on_change()`` is called after every status change, ``journal_failed(exc)`` for every
    journal error, ``on_journal()`` after every journal write; ``restarting_elsewhere()``
    says another optui process holds the server's restart lock; ``gpu_holders`` see
    :data:`~optui.session.server.restart.GpuHolders`; ``catalogs`` caches flag catalogues;
    ``journal_thread``: the session's journal thread (once bound, every journal write of this
    server is queued there and every read awaited there: :class:`ServerEvents`).
    """

    def __init__(
        self,
        name: str,
        cfg: ServerConfig,
        controller: Controller,
        journal: Journal,
        *,
        on_change: Callable[[], None],
        journal_failed: Callable[[JournalError], None] = lambda exc: None,
        on_journal: Callable[[], None] = lambda: None,
        restarting_elsewhere: Callable[[], bool] = lambda: False,
        gpu_holders: GpuHolders | None = None,
        catalogs: CatalogStore | None = None,
        journal_thread: JournalThread | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.controller = controller
        self.journal = journal
        self._on_change = on_change
        #: another optui process holds this server's restart lock (it journals the server's states)
        self._restarting_elsewhere = restarting_elsewhere
        self.catalogs = catalogs
        self._events = ServerEvents(journal, name, failed=journal_failed, written=on_journal, thread=journal_thread)
        self._keeper = StatusKeeper(ServerStatus(name=name, kind=cfg.kind, url=cfg.url, host=cfg.host, argv=tuple(cfg.argv),
                                                 managed=cfg.control != "none", last_good_argv=None,
                                                 configured_argv=tuple(cfg.argv)),
                                    self._events, on_change=on_change, restarting_elsewhere=restarting_elsewhere,
                                    journaled_state=lambda: self._events.safe(lambda: last_journaled_state(journal, name)),
                                    launched_elsewhere=lambda: bool(self._events.safe(
                                        lambda: launched_by_another_live_process(journal, name))))
        self.probe = ServerProbe(cfg.url, api_key_env=cfg.api_key_env, health_timeout_s=health_timeout_s(cfg))
        self.load = LoadMonitor(cfg.kind, self.probe, cfg.hung_after_s, confirm=self._generates)
        self.catalog: FlagCatalog | None = None
        self.log_tail: deque[str] = deque(maxlen=500)
        self.log_lines_total = 0
        # the key never enters optui's state, whatever the server logs (SGLang prints server_args)
        self._api_key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        self._classifier = LogClassifier(cfg.kind)
        self._log: LogSource | None = None
        self._log_task: asyncio.Task | None = None
        self._failures = 0
        self._unhealthy_since: float | None = None  # monotonic s of the first failing health probe
        self._health_reason: str | None = None  # the message that says why it is DEGRADED/HUNG now
        self._starting = False  # a start of this process's is under way (its ready gate is open)
        self._stopping = False
        self._lost_accounted: Launch | None = None  # the dead launch shown (and journaled) last
        self._generated = False  # the 1-token probe of this start passed
        self._ready_journaled: float | None = None  # server.ready's time of a re-attached launch (Unix s)
        # the newest server.ready seen for an argv not (yet) shown here: another process's ready
        # gate can be read from the journal before this session adopts that launch (the pidfile)
        self._ready_unmatched: dict | None = None
        self._wake = asyncio.Event()
        self.attached = asyncio.Event()  # set once run() has tried to re-attach
        self.polled = asyncio.Event()  # set once the first health probe has been classified
        self._log_ready = asyncio.Event()
        self._start_mono = time.monotonic()
        #: what other optui processes did to the server
        self.other_processes = OtherProcesses(controller, self._events, self._keeper,
                                              busy=lambda: self._starting or self._stopping,
                                              follow_log=self._follow_launch_from, stop_following=self._stop_follower,
                                              restarting_elsewhere=restarting_elsewhere)
        #: restarts and their ready gate, with this runtime as its Launcher
        self.restart_flow = RestartFlow(cfg, controller, self._events, self._keeper, launcher=self, probe=self.probe,
                                        shell=self.shell, gpu_holders=gpu_holders, catalog=self.cached_catalog)

    # ------------------------------------------------------------ plumbing
    @property
    def status(self) -> ServerStatus:
        """The server's status now (an immutable snapshot)."""
        return self._keeper.status

    def watch_states(self, on_state: Callable[[ServerState], None]) -> Callable[[], None]:
        """Call ``on_state(state)`` at every change of the server's state (the one door:
        :meth:`StatusKeeper.watch <optui.session.server.transitions.StatusKeeper.watch>`);
        returns the function that stops it."""
        return self._keeper.watch(on_state)

    async def read_journal(self, fn: Callable[[], T]) -> T | None:
        """``fn()`` (journal reads: ``lambda: rt.journal.last_good(rt.name)``) where this
        server's journal calls run: awaited on the session's journal thread once it is bound
        (the TUI), inline otherwise (the CLI); None when it raises JournalError (reported)."""
        return await self._events.read(fn)

    def show_config_check(self, ready: dict) -> None:
        """Show the running-configuration check of a ``server.ready`` event's ``ready`` data
        (this process's or another's) when it is about the argv running now; else keep it
        until a launch of that argv is adopted (:meth:`_follow_launch_from`)."""
        if list(ready.get("argv") or ()) != list(self.status.argv):
            self._ready_unmatched = ready
            return
        self._ready_unmatched = None
        mismatch = mismatch_lines(ready.get("config_check"))
        if mismatch != self.status.config_mismatch:
            self._keeper.set(config_mismatch=mismatch)

    def wake(self) -> None:
        """Probe now instead of at the next interval."""
        self._wake.set()

    def elapsed(self) -> float:
        """Seconds since the current start (of this process or followed)."""
        return time.monotonic() - self._start_mono

    def phase_durations(self, end_t: float | None = None) -> list[dict]:
        """The current start's phases with durations (:func:`~optui.core.server.log.phase_durations`)."""
        return phase_durations(self.status.phases, end_t)

    async def catch_up_log(self, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` for the log's readiness line (llama.cpp logs from a
        thread: its phase lines can trail HTTP), then show the phases read so far."""
        if not self._classifier.log_ready:
            await wait_set(self._log_ready, timeout_s)
            self._keeper.set(phases=tuple(self._classifier.phases))

    def generation_passed(self) -> bool:
        """The 1-token generation probe of the current start worked."""
        return self._generated

    def end_start(self) -> None:
        """The current start is over (ready, failed or given up)."""
        self._starting = False

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Monitor forever (cancel to stop). Re-attaches to a surviving launch first."""
        launch = await self._attach()
        if launch is not None:
            self._keeper.set(argv=launch.argv or self.status.argv, pid=launch.pid, started_at=launch.started_at)
            self._follow(resume=True)
        elif isinstance(self.controller, ProcessController) and self.controller.lost is not None:  # only it has lost
            self._lost_accounted = self.controller.lost
            await self._account_for_lost_launch(self.controller, self.controller.lost)
        if launch is None:  # nothing runs: its newest launch's journaled failure, not DOWN without a cause
            await self.other_processes.show_failure_of_last_launch()
        self.attached.set()
        if launch is not None:  # what its ready gate found (issue 16), shown again by a new session
            ready = await self._events.read(lambda: self.journal.events(target=self.name, types=[ev.SERVER_READY], limit=1,
                                                                  newest_first=True))
            if ready:
                self.show_config_check(ready[0].data)
                if ready[0].ts >= launch.started_at:  # this launch's: its ready_at, not when this session looked
                    self._ready_journaled = ready[0].ts
        last_good = await self._events.read(lambda: self.journal.last_good(self.name))
        if last_good:
            self._keeper.set(last_good_argv=tuple(last_good))
        try:
            while True:
                await self._poll_once()
                self.polled.set()
                busy = self.status.state.is_transitional or self._starting
                interval = min(0.5, self.cfg.poll_interval_s) if busy else self.cfg.poll_interval_s
                self._wake.clear()
                await wait_set(self._wake, interval)  # a cancel (Session.close) always ends the loop
        finally:
            self._stop_follower()
            await self.probe.close()

    async def _attach(self):
        try:
            return await self.controller.attach()
        except (ControllerError, OSError) as exc:
            self._keeper.set(message=f"cannot re-attach: {exc}")
            return None

    async def _account_for_lost_launch(self, controller: ProcessController, lost: Launch) -> None:
        """The pidfile names a launch whose process is gone: it ended while no optui process
        watched it (the CLI that started it exited, the TUI was closed, the host rebooted).
        Show it CRASHED with what its log says, and journal it once, as such: its pid, when
        an optui process last saw it alive, its log's last lines and crash class (the exit
        status is unknown: the server was not this process's child). An observer session
        (``optui status``) only shows it; the next writing session journals it."""
        ended = await self._events.read(lambda: end_journaled_since(self.journal, self.name, lost.started_at))
        if ended is None:  # a restart asked for since it started stopped it (its process may have died mid-way)
            ended = await self._events.read(lambda: next(iter(self.journal.events(
                       target=self.name, types=[ev.RESTART_REQUESTED], since_ts=lost.started_at, limit=1)), None))
        if ended is not None:  # another process journaled its end (a stop, a failure, a restart)
            if not self.journal.read_only:
                controller.forget_lost()
            return
        crash, lines, cause = await self._classify_log_of(lost)
        seen = await self._events.read(lambda: last_seen_alive(self.journal, self.name, lost.started_at)) or lost.started_at
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seen))
        message = f"pid {lost.pid} ended while no optui process watched it (last seen alive {when}; exit status unknown)"
        await self._keeper.set_state(ServerState.CRASHED, journal=not self.journal.read_only, crash_class=crash,
                                     crash_lines=lines, pid=None, argv=lost.argv or self.status.argv,
                                     started_at=lost.started_at, message=message,
                                     crash_cause=f"{message}: {cause}" if cause else message)
        if self.journal.read_only:
            return
        self._events.record(ev.SERVER_FAILED, {"class": str(crash), "returncode": None, "pid": lost.pid, "unwatched": True,
                                               "last_seen_alive": round(seen, 3), "message": message, "lines": list(lines),
                                               "argv": list(lost.argv), "log": lost.log_path})
        controller.forget_lost()

    async def _maker_watches(self) -> bool:
        """Another optui process holds the restart lock or made the newest restart and still
        runs: it watches its launch and journals its end (a failed `optui restart`'s
        server.failed, written a moment after its process exited), so a lost launch is
        not this session's to journal yet."""
        if self._restarting_elsewhere():
            return True
        return bool(await self._events.read(lambda: launched_by_another_live_process(self.journal, self.name)))

    async def _classify_log_of(self, launch) -> tuple[CrashClass, tuple[str, ...], str | None]:
        """Crash class, explaining lines and cause line of ``launch`` from the end of its log file (for
        a launch that was not this process's child: no exit status, and this session may
        have read none of its log)."""
        classifier = LogClassifier(self.cfg.kind)
        with contextlib.suppress(Exception):
            text = await self.shell.read_file(launch.log_path) if launch.log_path else None
            for line in (text or "")[launch.log_offset:][-LOST_LOG_TAIL_CHARS:].splitlines():
                classifier.feed(hide_value(line, self._api_key), 0.0)
        return classifier.crash_class(None), tuple(classifier.relevant_lines()), classifier.cause(None)

    async def _poll_once(self) -> None:
        await self.other_processes.follow_launch_made_elsewhere()
        controller = self.controller
        if (isinstance(controller, ProcessController) and controller.lost is not None
                and controller.lost != self._lost_accounted and not await self._maker_watches()):
            # another process's launch that died before this window followed it (`kill -9` a
            # second after `optui restart` exited: issue 30): shown and journaled, once
            lost = self._lost_accounted = controller.lost
            await self._account_for_lost_launch(controller, lost)
            # its end journaled by the process that made it (the CLI's failed restart): that
            # failure shown here, not journaled again by _on_exit once the pidfile is gone
            await self.other_processes.show_failure_of_lost_launch(lost.started_at)
        await self.controller.refresh()
        if self.controller.process_state() == "exited" and not self._stopping:
            await self._on_exit()
            return
        asked = time.monotonic()  # a probe that times out was unhealthy since it was sent
        health = await self._health_unless_paused()
        process = self.controller.process_state()
        if process == "exited" and not self._stopping:
            await self._on_exit()
            return
        if health is None:  # its process group is stopped (SIGSTOP): HUNG now, not after the health timeout
            await self._paused_state()
            return
        status = health.status
        if health.ok and self._starting and self.cfg.generate_probe and not self._generated:
            status = await self._generation_gate()
        self._failures = 0 if status == 200 else self._failures + 1
        if status == 200:
            self._unhealthy_since = None
        elif self._unhealthy_since is None:
            self._unhealthy_since = asked
        unhealthy_s = 0.0 if self._unhealthy_since is None else time.monotonic() - self._unhealthy_since
        obs = Observation(process=process, health=status, log_ready=self._classifier.ready, stopping=self._stopping,
                          starting=self._starting, unhealthy_s=unhealthy_s, hung_by_load=self.load.hung,
                          timed_out=health.error == "timeout")
        before = self.status.state
        state = next_state(before, obs, self._failures, escalate_after_s=self.cfg.hung_after_s)
        if state is ServerState.READY and self.status.model is None:
            self._keeper.set(model=await self.probe.model_name() or self.cfg.model)
        if state.is_up or state is ServerState.HUNG:
            state = await self._read_load(state)
        if self._stopping != obs.stopping or self._starting != obs.starting or self.status.state is not before:
            # a stop or a start began while this poll awaited the server: what it saw is stale
            # (a READY read before a stop wrote 'stopping → ready' between 'ready → stopping'
            # and 'stopped' in the journal); the next poll sees the server as it is now
            return
        if state is ServerState.READY and self.status.ready_at is None:
            if self._starting and not self._classifier.ready:
                self._classifier.mark("ready", self.elapsed())  # HTTP said ready before the log did
            ready_at, self._ready_journaled = self._ready_journaled or time.time(), None
            await self._keeper.set_state(state, ready_at=ready_at, crash_class=None, phases=tuple(self._classifier.phases),
                                         phase=self._classifier.phase)
        else:
            reason = None
            if status != 200 and state in (ServerState.DEGRADED, ServerState.HUNG) and not self.load.hung:
                reason = unhealthy_reason(status, health.error, self._failures, unhealthy_s)
            await self._keeper.set_state(state, **self._health_message(before, state, reason))

    async def _health_unless_paused(self) -> HealthResult | None:
        """The health probe's answer, or None when the server's process group is (or, while
        the probe waits, becomes) stopped: SIGSTOP is checked every :data:`PAUSE_CHECK_S`
        seconds meanwhile and the probe given up at once (a frozen server stayed READY for
        the whole 25 s health timeout, 31-35 s in all: issue 29)."""
        if self.controller.paused():
            return None
        probe = asyncio.ensure_future(self.probe.health())
        try:
            while True:
                done, _ = await asyncio.wait({probe}, timeout=PAUSE_CHECK_S)
                if done:
                    return probe.result()
                await self.controller.refresh()
                if self.controller.paused():
                    return None
        finally:
            if not probe.done():
                probe.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await probe

    async def _paused_state(self) -> None:
        """The process group is stopped (SIGSTOP): HUNG, saying so (a stop under way, or a
        start not up yet, keeps its state)."""
        if self._stopping or (self._starting and not self.status.state.is_up):
            return
        before = self.status.state
        pid = self.controller.launch.pid if self.controller.launch is not None else self.status.pid
        reason = f"process stopped (SIGSTOP): pid {pid} answers nothing until continued (SIGCONT)"
        if before is not ServerState.HUNG:
            self._events.record_transition_alert({"kind": "hung", "source": "process", "message": reason})
        self._failures += 1
        if self._unhealthy_since is None:
            self._unhealthy_since = time.monotonic()
        self._health_reason = reason
        if not self.status.load.stale:
            self._keeper.set(load=replace(self.status.load, stale=True))  # the last numbers, marked
        state = next_state(before, Observation(process="running", paused=True), self._failures)
        await self._keeper.set_state(state, message=reason)

    def _health_message(self, before: ServerState, state: ServerState, reason: str | None) -> dict:
        """The status ``message`` change for a health ``reason`` (None: healthy again), and
        the alerts of a HUNG that the health rule entered or left (see core.server.fsm)."""
        was, self._health_reason = self._health_reason, reason
        if state is ServerState.HUNG and before is not ServerState.HUNG and reason:
            self._events.record_transition_alert({"kind": "hung", "source": "health", "message": f"unhealthy for more "
                                                  f"than {self.cfg.hung_after_s:g} s: {reason}"})
        elif before is ServerState.HUNG and state is ServerState.READY and was:
            self._events.record_transition_alert({"kind": "recovered", "message": "health answers 200 again"})
        if reason:
            return {"message": reason}
        return {"message": None} if was is not None and self.status.message == was else {}

    async def _generation_gate(self) -> int:
        """/health said 200 during a start: a 1-token completion must work too (else the
        server counts as still warming: 503)."""
        if self.status.model is None:
            self._keeper.set(model=await self.probe.model_name() or self.cfg.model)
        self._generated = await self.probe.generate_one(self.status.model)
        if self._generated:
            self._classifier.mark("probe", self.elapsed())
            self._keeper.set(phase="probe", phases=tuple(self._classifier.phases))
            return 200
        return 503

    async def _generates(self) -> bool:
        return await self.probe.generate_one(self.status.model, timeout_s=min(CONFIRM_TIMEOUT_S, self.cfg.hung_after_s))

    async def _read_load(self, state: ServerState) -> ServerState:
        """Read the load (metrics or log lines), journal the hung verdict's alerts and return
        the state after it (:func:`~optui.core.server.fsm.after_load_reading`)."""
        event = await self.load.update(time.monotonic())
        self._keeper.set(load=self.load.view)
        if event == "hung":
            self._events.record_transition_alert({"kind": "hung", "message": self.load.message,
                                                  "source": self.load.view.source, "running": self.load.view.running,
                                                  "waiting": self.load.view.waiting})
        elif event == "recovered":
            self._events.record_transition_alert({"kind": "recovered", "message": "tokens are being generated again"})
        return after_load_reading(state, event, hung=self.load.hung)

    async def _on_exit(self) -> None:
        others = self.other_processes
        if await others.adopt_relaunch() or await others.show_failure_journaled_elsewhere():
            return
        launch = self.controller.launch
        if self.status.state not in (ServerState.DOWN, ServerState.CRASHED) and await others.show_stop_journaled_elsewhere(
                launch.started_at if launch is not None else self.status.started_at):
            return
        rc = self.controller.returncode()
        if self._log is not None:
            drain = getattr(self._log, "drain", None)  # a journal or remote log lags the exit: fetch the rest
            if drain is not None:
                with contextlib.suppress(Exception):
                    await within(drain(), 10.0)
            self._log.flush()
        if self.status.state in (ServerState.DOWN, ServerState.CRASHED):
            return
        note = self.controller.exit_note()
        if note:
            self._classifier.feed(note, self.elapsed())
        crash = self._classifier.crash_class(rc)
        lines = tuple(self._classifier.relevant_lines())
        cause = self._classifier.cause(rc)
        launch = self.controller.launch
        if rc is None and crash is CrashClass.UNKNOWN and launch is not None and launch.log_path:
            crash, lines, cause = await self._classify_log_of(launch)  # re-attached: its log from the start
        self._stop_follower()
        message = exit_description(rc) if rc is not None else "process gone (not optui's child here: exit status unknown)"
        if cause:  # the line that says why, not the last of the lines that say "failed"
            message += f": {cause}"
        why = message if cause or message.startswith("killed by") else None
        await self._keeper.set_state(ServerState.CRASHED, crash_class=crash, crash_lines=lines, pid=None, message=message,
                                     crash_cause=why)
        self._events.record(ev.SERVER_FAILED, {"class": str(crash), "returncode": rc, "phase": self.status.phase,
                                               "message": message, "cause": cause, "lines": list(lines),
                                               "argv": list(self.status.argv), "phases": self.phase_durations(self.elapsed())})

    # ------------------------------------------------------------ logs
    def _follow(self, *, resume: bool = False) -> None:
        self._stop_follower()
        self._classifier = LogClassifier(self.cfg.kind)
        self._log_ready = asyncio.Event()
        source = self.controller.open_log(self._on_log_line, resume=resume)
        if source is None:
            return
        self._log = source
        self._log_task = asyncio.create_task(source.run(), name=f"log-{self.name}")

    def _follow_launch_from(self, started_at: float) -> None:
        """Read the log of a launch another process made at Unix time ``started_at`` from
        its first line, its phase times counted from that start."""
        self._start_mono = time.monotonic() - max(0.0, time.time() - started_at)
        self._follow()
        if self._ready_unmatched is not None:  # its ready gate was journaled before the pidfile was read here
            self.show_config_check(self._ready_unmatched)

    def _stop_follower(self) -> None:
        if self._log is not None:
            self._log.stop()
        if self._log_task is not None:
            self._log_task.cancel()
        self._log = self._log_task = None

    def _on_log_line(self, line: str) -> None:
        line = hide_value(line, self._api_key)
        self.log_tail.append(line)
        self.log_lines_total += 1
        self.load.feed_log(line)
        t = self.elapsed()
        if self._starting and self.cfg.kind == "llamacpp":
            t = process_relative_time(line) or t  # µs-exact, and immune to our polling delay
        phase = self._classifier.feed(line, t)
        if self._classifier.log_ready:
            self._log_ready.set()
        if phase is not None:
            self._keeper.set(phase=self._classifier.phase, phases=tuple(self._classifier.phases))
            if not self.other_processes.adopted and not self._restarting_elsewhere():  # the launching process journals them
                self._events.record(ev.SERVER_PHASE, {"phase": phase, "t": round(t, 3)})
            if phase == "ready":
                self._wake.set()
        else:
            self._on_change()

    # ------------------------------------------------------------ actions
    async def start(self, argv: list[str] | None = None, *, actor: str = "optui", extra: dict | None = None) -> None:
        """Start with ``argv`` (default: the current one) without the ready gate."""
        argv = list(argv or self.status.argv)
        self.other_processes.launched_here()
        self._start_mono = time.monotonic()
        self.load.reset()
        self._failures = 0
        self._unhealthy_since = self._health_reason = None
        self._generated = False
        # the ready time of a re-attached launch is that launch's, never this one's: kept, the new
        # start was READY 1.6 s before it began (``optui restart --json`` ready_s -25.1, issue 29)
        self._ready_journaled = None
        self._starting = True
        # the log being replaced was written by the previous launch: kept under its experiment
        keep_log_as = await self._events.read(lambda: experiment_of_last_launch(self.journal, self.name))
        try:
            launch = await self.controller.start(argv, keep_log_as=keep_log_as)
        except ControllerError as exc:
            self._starting = False
            await self._keeper.set_state(ServerState.CRASHED, crash_class=CrashClass.UNKNOWN, crash_lines=(str(exc),),
                                         message=str(exc))
            self._events.record(ev.SERVER_FAILED, {"class": "unknown", "message": str(exc), "argv": argv}, actor=actor)
            raise RestartError(str(exc)) from exc
        self._follow()
        data = {"pid": launch.pid, "argv": argv, "log": launch.log_path or f"journal of {getattr(self.controller, 'unit', '?')}",
                **(extra or {})}
        self._events.record(ev.SERVER_STARTING, data, actor=actor)
        await self._keeper.set_state(ServerState.STARTING, actor=actor, argv=tuple(argv), prev_argv=self.status.argv or None,
                                     pid=launch.pid,
                                     started_at=launch.started_at, ready_at=None, phase=None, phases=(), crash_class=None,
                                     crash_lines=(), message=None, crash_cause=None, config_mismatch=(), model=None,
                                     load=LoadView())
        self._wake.set()

    async def stop(self, *, actor: str = "optui") -> None:
        """Stop the server (SIGTERM the group / the unit, wait ``stop_timeout_s``, SIGKILL)."""
        if self.controller.launch is None and self.controller.process_state() != "running":
            await self._keeper.set_state(ServerState.DOWN, actor=actor, pid=None)
            return
        self._stopping = True
        before = self.status.state
        try:
            await self._keeper.set_state(ServerState.STOPPING, actor=actor)
            try:
                async with self.probe.paused():  # llama-server hangs on SIGTERM with a probe in flight
                    outcome = await self.controller.stop(self.cfg.stop_timeout_s)
            except ControllerError as exc:  # e.g. the SSH link to its host is down
                await self._keeper.set_state(before, actor=actor, message=str(exc))
                raise RestartError(str(exc)) from exc
            if self._log is not None:
                self._log.flush()
            self._stop_follower()
            self._events.record(ev.SERVER_STOPPED, {"how": outcome.how, "waited_s": round(outcome.waited_s, 3),
                                                    "returncode": outcome.returncode}, actor=actor)
            await self._keeper.set_state(ServerState.DOWN, actor=actor, pid=None, ready_at=None, load=LoadView())
        finally:
            self._stopping = False

    async def restart(self, argv: list[str], *, actor: str = "optui", reason: str = "", ready_timeout_s: float | None = None,
                      todo_id: int | None = None, base: Sequence[str] | None = None) -> ServerStatus:
        """Restart with ``argv`` through the ready gate (:meth:`RestartFlow.restart
        <optui.session.server.restart.RestartFlow.restart>`; ``base``: the argv the change
        applied to): the final status; RestartError when it cannot begin."""
        return await self.restart_flow.restart(argv, actor=actor, reason=reason, ready_timeout_s=ready_timeout_s,
                                               todo_id=todo_id, base=base)

    # ------------------------------------------------------------ flag catalogue
    @property
    def shell(self) -> Shell:
        """The shell of the server's host (the controller's)."""
        return getattr(self.controller, "shell", None) or LocalShell(self.cfg.host)

    def cached_catalog(self) -> FlagCatalog | None:
        """The flag catalogue of the current program if known (memory, then cache file)."""
        program = Flags.parse(self.status.argv).program
        if self.catalog is not None and self.catalog.program == program:
            return self.catalog
        if self.catalogs is not None:
            self.catalog = self.catalogs.cached(self.shell.host, list(self.status.argv), self.cfg.kind)
        return self.catalog

    async def learn_catalog(self, *, refresh: bool = False) -> FlagCatalog:
        """Learn (or read from the cache) the catalogue from the server's ``--help``.
        Raises CatalogError."""
        if self.catalogs is None:
            raise CatalogError("no catalogue store")
        self.catalog = await self.catalogs.learn(self.shell, list(self.status.argv), self.cfg.kind, env=self.cfg.env,
                                                 cwd=self.cfg.cwd, refresh=refresh)
        return self.catalog

    async def shutdown(self, stop_server: bool) -> str | None:
        """Called when the session closes: stop the server only when asked (demo) and this
        window may (no other running optui process launched it: issue 30); else leave it
        running, untracked (:meth:`ProcessController.release`). Returns what the operator is
        told when a server is left running because another window owns it (else None)."""
        note = None
        if stop_server and isinstance(self.controller, ProcessController):
            recorded, tracked = self.controller.recorded(), self.controller.launch
            if recorded is not None and (tracked is None or recorded.pid != tracked.pid):
                # another optui process relaunched it since this window last polled (a CLI search
                # ending on its winner, then exiting): the server running now is the recorded one,
                # and stopping only the tracked launch (gone already) left it orphaned
                with contextlib.suppress(ControllerError, OSError):
                    await self.controller.attach()
            owner = self.controller.owner_elsewhere()
            if owner is not None and self.controller.launch is not None:
                stop_server = False
                note = (f"{self.name}: left running (pid {self.controller.launch.pid}): the optui process {owner} "
                        "started it and stops it when it quits")
        if not stop_server and isinstance(self.controller, ProcessController):
            self.controller.release()
        if stop_server and isinstance(self.controller, ProcessController) and self.controller.launch is not None:
            self._stopping = True
            async with self.probe.paused():
                outcome = await self.controller.stop(min(self.cfg.stop_timeout_s, 5.0))
            self._events.record(ev.SERVER_STOPPED, {"how": outcome.how, "waited_s": round(outcome.waited_s, 3),
                                                    "returncode": outcome.returncode, "reason": "optui exited"})
            # the journal's last state is "down" now: the next session starts from it (it read
            # "ready → starting" at every demo start, as if the server had been up meanwhile)
            await self._keeper.set_state(ServerState.DOWN, pid=None)
        return note
