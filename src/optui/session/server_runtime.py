"""One server as the session sees it: probes, log reading, state machine, restarts.

A :class:`ServerRuntime` owns the server's controller, probe and log follower, runs a
monitor loop (health → state machine → load from ``/metrics``) and performs restarts
(stop → port free → start → ready gate), journaling every step. It publishes an immutable
:class:`~optui.core.server_state.ServerStatus` through ``on_change``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from urllib.parse import urlsplit

from optui.adapters.controller import Controller, ControllerError, ProcessController
from optui.adapters.journal import Journal, JournalError
from optui.adapters.log_follow import LogFollower
from optui.adapters.probe import ServerProbe
from optui.config import ServerConfig
from optui.core import events as ev
from optui.core.experiments import experiment_start
from optui.core.flags import Flags
from optui.core.metrics_map import MetricsParseError, Scrape, load_view, missing_metrics_hint, parse_scrape
from optui.core.server_fsm import HungDetector, Observation, next_state
from optui.core.server_log import LogClassifier
from optui.core.server_state import CrashClass, LoadView, PhaseMark, ServerState, ServerStatus


class RestartError(Exception):
    """A restart that cannot begin (read-only, already restarting, not controllable)."""


def url_host_port(url: str) -> tuple[str, int]:
    """``(host, port)`` of an http(s) URL (default ports 80/443)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "127.0.0.1", port


def port_open(host: str, port: int, timeout: float = 0.3) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with contextlib.suppress(OSError):
        with socket.create_connection((host, port), timeout=timeout):
            return True
    return False


class ServerRuntime:
    """Monitor and control one configured server (see module doc)."""

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
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.controller = controller
        self.journal = journal
        self.on_change = on_change
        self.journal_failed = journal_failed
        self.on_journal = on_journal
        #: another optui process holds this server's restart lock (see _adopt_relaunch)
        self.restarting_elsewhere = restarting_elsewhere
        self._adopted = False  # following a launch another optui process made
        self.probe = ServerProbe(cfg.url, api_key_env=cfg.api_key_env, health_timeout_s=cfg.health_timeout_s)
        self.log_tail: deque[str] = deque(maxlen=500)
        self.log_lines_total = 0
        self.status = ServerStatus(name=name, kind=cfg.kind, url=cfg.url, host=cfg.host, argv=tuple(cfg.argv),
                                   managed=cfg.control != "none", last_good_argv=None)
        self._classifier = LogClassifier(cfg.kind)
        self._follower: LogFollower | None = None
        self._follower_task: asyncio.Task | None = None
        self._failures = 0
        self._starting = False
        self._stopping = False
        self._wake = asyncio.Event()
        self._state_changed = asyncio.Condition()
        self._hung = HungDetector(cfg.hung_after_s)
        self._last_scrape: Scrape | None = None
        self._metrics_missing: int | None = None
        self._start_mono = time.monotonic()

    # ------------------------------------------------------------ plumbing
    def _journal(self, type: str, data: dict, *, actor: str = "optui") -> None:
        try:
            self.journal.append(type, self.name, data, actor=actor, experiment=self.journal.current_experiment(self.name))
        except JournalError as exc:
            self.journal_failed(exc)
        self.on_journal()

    def _set(self, **changes) -> None:
        self.status = replace(self.status, **changes)
        self.on_change()

    async def _set_state(self, state: ServerState, *, actor: str = "optui", **changes) -> None:
        old = self.status.state
        if state is old and not changes:
            return
        if state is not old:
            changes["state_since"] = time.time()
            phase = changes["phase"] if "phase" in changes else self.status.phase
            if not self.restarting_elsewhere():  # the restarting process journals its own transitions
                self._journal(ev.SERVER_STATE, {"old": str(old), "new": str(state), "phase": phase}, actor=actor)
        self._set(state=state, **changes)
        async with self._state_changed:
            self._state_changed.notify_all()

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Monitor forever (cancel to stop). Re-attaches to a surviving launch first."""
        launch = self.controller.attach()
        if launch is not None:
            self._set(argv=launch.argv, pid=launch.pid, started_at=launch.started_at)
            self._follow(offset=_file_size(launch.log_path))
        last_good = self._safe(lambda: self.journal.last_good(self.name))
        if last_good:
            self._set(last_good_argv=tuple(last_good))
        try:
            while True:
                await self._poll_once()
                interval = 0.5 if self.status.state.is_transitional or self._starting else self.cfg.poll_interval_s
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), interval)
        finally:
            self._stop_follower()
            await self.probe.close()

    def _safe(self, fn):
        try:
            return fn()
        except JournalError as exc:
            self.journal_failed(exc)
            return None

    async def _poll_once(self) -> None:
        process = self.controller.process_state()
        if process == "exited" and not self._stopping:
            await self._on_exit()
            return
        health = await self.probe.health()
        process = self.controller.process_state()
        if process == "exited" and not self._stopping:
            await self._on_exit()
            return
        self._failures = 0 if health.ok else self._failures + 1
        obs = Observation(process=process, health=health.status, log_ready=self._classifier.ready,
                          stopping=self._stopping, starting=self._starting)
        state = next_state(self.status.state, obs, self._failures)
        if state is ServerState.READY and self.status.model is None:
            self._set(model=await self.probe.model_name() or self.cfg.model)
        if state.is_up or state is ServerState.HUNG:
            state = await self._update_load(state)
        if state is ServerState.READY and self.status.ready_at is None:
            await self._set_state(state, ready_at=time.time(), crash_class=None)
        else:
            await self._set_state(state)

    async def _update_load(self, state: ServerState) -> ServerState:
        """Scrape /metrics (or fall back to the log), run the hung detector."""
        if self._metrics_missing is not None:
            return state
        code, text = await self.probe.metrics()
        if code != 200:
            if code is not None:
                self._metrics_missing = code
                self._set(load=LoadView(source="", hint=missing_metrics_hint(self.cfg.kind, code)))
            return state
        try:
            scrape = parse_scrape(text, time.monotonic())
        except MetricsParseError as exc:
            self._set(load=LoadView(hint=str(exc)))
            return state
        view = load_view(scrape, self._last_scrape)
        self._last_scrape = scrape
        self._set(load=view)
        busy = None if view.running is None else (view.running or 0) + (view.waiting or 0)
        was_hung = self._hung.hung
        hung = self._hung.update(time.monotonic(), view.generated_total, busy)
        if hung and not was_hung:
            self._journal(ev.ALERT, {"kind": "hung", "message": f"{busy:.0f} requests but no tokens for {self._hung.stalled_s:.0f}s"})
            return ServerState.HUNG
        if was_hung and not hung:
            return ServerState.READY
        return ServerState.HUNG if hung else state

    async def _on_exit(self) -> None:
        if self._adopt_relaunch():
            return
        rc = self.controller.returncode()
        if self._follower is not None:
            self._follower.flush()
        if self.status.state in (ServerState.DOWN, ServerState.CRASHED):
            return
        crash = self._classifier.crash_class(rc)
        lines = tuple(self._classifier.relevant_lines())
        self._stop_follower()
        await self._set_state(ServerState.CRASHED, crash_class=crash, crash_lines=lines, pid=None,
                              message=f"exited rc={rc}" if rc is not None else "process gone")
        self._journal(ev.SERVER_FAILED, {"class": str(crash), "returncode": rc, "phase": self.status.phase,
                                         "lines": list(lines), "argv": list(self.status.argv)})

    def _adopt_relaunch(self) -> bool:
        """Another optui process (the CLI, a second window) restarted this server: follow
        its new launch instead of calling the old process's exit a crash. True when the
        exit is accounted for that way."""
        recorded = getattr(self.controller, "recorded", lambda: None)()
        current = self.controller.launch
        if recorded is not None and current is not None and recorded.pid != current.pid \
                and self.controller.attach() is not None:
            self._set(state=ServerState.STARTING, argv=recorded.argv, pid=recorded.pid, started_at=recorded.started_at,
                      ready_at=None, phase=None, phases=(), crash_class=None, crash_lines=(), message=None, model=None)
            self._start_mono = time.monotonic() - max(0.0, time.time() - recorded.started_at)  # phase times
            self._adopted = True  # its phases are journaled by the process that launched it
            self._follow(offset=0)
            return True
        if self.restarting_elsewhere():
            if self.status.state is not ServerState.DOWN:
                self._set(state=ServerState.DOWN, pid=None, message="being restarted by another optui process")
            return True
        return False

    # ------------------------------------------------------------ logs
    def _follow(self, offset: int = 0) -> None:
        self._stop_follower()
        launch = self.controller.launch
        if launch is None:
            return
        self._classifier = LogClassifier(self.cfg.kind)
        self._follower = LogFollower(launch.log_path, self._on_log_line, offset=offset)
        self._follower_task = asyncio.create_task(self._follower.run(), name=f"log-{self.name}")

    def _stop_follower(self) -> None:
        if self._follower is not None:
            self._follower.stop()
        if self._follower_task is not None:
            self._follower_task.cancel()
        self._follower = self._follower_task = None

    def _on_log_line(self, line: str) -> None:
        self.log_tail.append(line)
        self.log_lines_total += 1
        t = time.monotonic() - self._start_mono
        phase = self._classifier.feed(line, t)
        if phase is not None:
            self._set(phase=phase, phases=tuple(self._classifier.phases))
            if not self._adopted and not self.restarting_elsewhere():  # the launching process journals them
                self._journal(ev.SERVER_PHASE, {"phase": phase, "t": round(t, 3)})
            if phase == "ready":
                self._wake.set()
        else:
            self.on_change()

    # ------------------------------------------------------------ actions
    async def start(self, argv: list[str] | None = None, *, actor: str = "optui") -> None:
        """Start with ``argv`` (default: the current one) without the ready gate."""
        argv = list(argv or self.status.argv)
        self._adopted = False
        self._start_mono = time.monotonic()
        self._hung.reset()
        self._last_scrape = None
        self._metrics_missing = None
        self._failures = 0
        self._starting = True
        try:
            launch = await self.controller.start(argv)
        except ControllerError as exc:
            self._starting = False
            await self._set_state(ServerState.CRASHED, crash_class=CrashClass.UNKNOWN, crash_lines=(str(exc),), message=str(exc))
            self._journal(ev.SERVER_FAILED, {"class": "unknown", "message": str(exc), "argv": argv}, actor=actor)
            raise RestartError(str(exc)) from exc
        self._follow(offset=launch.log_offset)
        self._journal(ev.SERVER_STARTING, {"pid": launch.pid, "argv": argv, "log": launch.log_path}, actor=actor)
        await self._set_state(ServerState.STARTING, actor=actor, argv=tuple(argv), pid=launch.pid, started_at=launch.started_at,
                              ready_at=None, phase=None, phases=(), crash_class=None, crash_lines=(), message=None,
                              model=None, load=LoadView())
        self._wake.set()

    async def stop(self, *, actor: str = "optui") -> None:
        """Stop the server (SIGTERM the group, wait ``stop_timeout_s``, SIGKILL)."""
        if self.controller.launch is None and self.controller.process_state() != "running":
            await self._set_state(ServerState.DOWN, actor=actor, pid=None)
            return
        self._stopping = True
        try:
            await self._set_state(ServerState.STOPPING, actor=actor)
            outcome = await self.controller.stop(self.cfg.stop_timeout_s)
            if self._follower is not None:
                self._follower.flush()
            self._stop_follower()
            self._journal(ev.SERVER_STOPPED, {"how": outcome.how, "waited_s": round(outcome.waited_s, 3),
                                              "returncode": outcome.returncode}, actor=actor)
            await self._set_state(ServerState.DOWN, actor=actor, pid=None, ready_at=None, load=LoadView())
        finally:
            self._stopping = False

    async def restart(self, argv: list[str], *, actor: str = "optui", reason: str = "", ready_timeout_s: float | None = None) -> ServerStatus:
        """Stop, wait for the port, start with ``argv``, wait until ready or failed.
        Returns the final status; raises RestartError when it cannot begin."""
        if self.status.busy:
            raise RestartError(f"{self.name}: {self.status.busy} already in progress")
        if self.cfg.control == "none":
            raise RestartError(f"{self.name}: control = 'none' (optui only observes this server)")
        old = list(self.status.argv)
        self._set(busy="restarting")
        try:
            self._safe(lambda: self.journal.new_experiment(self.name, experiment_start(old, argv, reason), actor=actor))
            self._journal(ev.RESTART_REQUESTED, {"reason": reason, "old_argv": old, "new_argv": list(argv)}, actor=actor)
            diff = [c.describe() for c in Flags.parse(old).diff(Flags.parse(argv))]
            if diff:
                self._journal(ev.FLAGS_CHANGED, {"diff": diff, "old_argv": old, "new_argv": list(argv)}, actor=actor)
            await self.stop(actor=actor)
            if not await self._wait_port_free(10.0):
                host, port = url_host_port(self.cfg.url)
                msg = f"port {port} on {host} is still in use after stop"
                await self._set_state(ServerState.CRASHED, crash_class=CrashClass.PORT_IN_USE, crash_lines=(msg,), message=msg)
                self._journal(ev.SERVER_FAILED, {"class": "port_in_use", "message": msg, "argv": list(argv)}, actor=actor)
                return self.status
            await self.start(argv, actor=actor)
            return await self._ready_gate(ready_timeout_s or self.cfg.ready_timeout_s, actor)
        finally:
            self._starting = False
            self._set(busy=None)

    async def _wait_port_free(self, timeout_s: float) -> bool:
        host, port = url_host_port(self.cfg.url)
        deadline = time.monotonic() + timeout_s
        while await asyncio.to_thread(port_open, host, port):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def _ready_gate(self, timeout_s: float, actor: str) -> ServerStatus:
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        async with self._state_changed:
            while self.status.state not in (ServerState.READY, ServerState.CRASHED):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._state_changed.wait(), remaining)
        self._starting = False
        if self.status.state is ServerState.READY:
            ready_s = time.monotonic() - self._start_mono
            phases = [{"phase": p.phase, "t": round(p.t, 3)} for p in self.status.phases]
            info = await self.probe.server_info() or {}
            self._journal(ev.SERVER_READY, {"ready_s": round(ready_s, 3), "phases": phases, "argv": list(self.status.argv),
                                            "model": self.status.model, "server_version": info.get("version")}, actor=actor)
            self._safe(lambda: self.journal.set_last_good(self.name, list(self.status.argv)))
            self._set(last_good_argv=self.status.argv)
            return self.status
        if self.status.state is not ServerState.CRASHED:  # timed out
            msg = f"not ready after {timeout_s:.0f}s (last phase: {self.status.phase or 'none'})"
            await self.stop(actor=actor)
            await self._set_state(ServerState.CRASHED, crash_class=CrashClass.TIMEOUT, crash_lines=(msg,), message=msg)
            self._journal(ev.SERVER_FAILED, {"class": "timeout", "message": msg, "argv": list(self.status.argv)}, actor=actor)
        return self.status

    def mark_phase_marks(self) -> tuple[PhaseMark, ...]:
        """The phases of the current start (for the UI)."""
        return self.status.phases

    async def shutdown(self, stop_server: bool) -> None:
        """Called when the session closes: stop the server only when asked (demo)."""
        if stop_server and isinstance(self.controller, ProcessController) and self.controller.launch is not None:
            self._stopping = True
            await self.controller.stop(min(self.cfg.stop_timeout_s, 5.0))


def _file_size(path: str) -> int:
    try:
        import os

        return os.path.getsize(path)
    except OSError:
        return 0
