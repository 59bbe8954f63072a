"""One server as the session sees it: probes, log reading, state machine, restarts.

A :class:`ServerRuntime` owns the server's controller, probe, log follower and load
monitor, runs a monitor loop (controller state → health → state machine → load) and
performs restarts, journaling every step:

    server.restart, flags.changed → stop (server.stopped) → port free → the old PIDs' GPU
    memory released → start (server.starting) → phases from the log (server.phase) →
    ready gate: /health 200 [+ 1-token generation] [+ stability window] →
    server.ready (phases with durations; last good flags stored) | server.failed (class,
    lines, phases)

Health probes are strictly sequential (never faster than the previous answer) and SGLang's
use a ≥ 25 s timeout (its /health runs a real generation and may take 20 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from urllib.parse import urlsplit

from optui.adapters.controller import Controller, ControllerError, ProcessController
from optui.adapters.journal import Journal, JournalError
from optui.adapters.probe import ServerProbe
from optui.adapters.shell import LocalShell, LogSource, Shell
from optui.config import ServerConfig
from optui.core import events as ev
from optui.core.flag_catalog import FlagCatalog
from optui.core.flags import Flags
from optui.core.server_fsm import Observation, next_state
from optui.core.server_log import LogClassifier, phase_durations, process_relative_time
from optui.core.server_state import CrashClass, LoadView, ServerState, ServerStatus
from optui.session.flag_catalogs import CatalogError, CatalogStore
from optui.session.server_load import LoadMonitor

#: SGLang's /health generates a token and may need its 20 s health-check window.
SGLANG_MIN_HEALTH_TIMEOUT_S = 25.0
#: How long a hung verdict's confirming 1-token generation may take.
CONFIRM_TIMEOUT_S = 30.0
#: After /health said ready, how long to let the log catch up (llama.cpp logs from a
#: thread, so its phase lines can trail HTTP) before the phases are journaled.
LOG_CATCH_UP_S = 2.0
_KINDS_WITH_READY_LINE = ("sglang", "vllm", "llamacpp")

#: ``gpu_holders(after)``: PIDs holding GPU memory on the server's host in a GPU reading
#: taken after Unix time ``after``; None when no GPU source sees processes there.
GpuHolders = Callable[[float], Awaitable["set[int] | None"]]


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


def health_timeout_s(cfg: ServerConfig) -> float:
    """The health-probe timeout for ``cfg`` (≥ 25 s for SGLang, see module doc)."""
    if cfg.kind == "sglang":
        return max(cfg.health_timeout_s, SGLANG_MIN_HEALTH_TIMEOUT_S)
    return cfg.health_timeout_s


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
        gpu_holders: GpuHolders | None = None,
        catalogs: CatalogStore | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.controller = controller
        self.journal = journal
        self.on_change = on_change
        self.journal_failed = journal_failed
        self.on_journal = on_journal
        self.gpu_holders = gpu_holders
        self.catalogs = catalogs
        self.probe = ServerProbe(cfg.url, api_key_env=cfg.api_key_env, health_timeout_s=health_timeout_s(cfg))
        self.load = LoadMonitor(cfg.kind, self.probe, cfg.hung_after_s, confirm=self._generates)
        self.catalog: FlagCatalog | None = None
        self.log_tail: deque[str] = deque(maxlen=500)
        self.log_lines_total = 0
        self.status = ServerStatus(name=name, kind=cfg.kind, url=cfg.url, host=cfg.host, argv=tuple(cfg.argv),
                                   managed=cfg.control != "none", last_good_argv=None)
        self._classifier = LogClassifier(cfg.kind)
        self._log: LogSource | None = None
        self._log_task: asyncio.Task | None = None
        self._failures = 0
        self._starting = False
        self._stopping = False
        self._generated = False  # the 1-token probe of this start passed
        self._wake = asyncio.Event()
        self.attached = asyncio.Event()  # set once run() has tried to re-attach
        self._log_ready = asyncio.Event()
        self._state_changed = asyncio.Condition()
        self._start_mono = time.monotonic()

    # ------------------------------------------------------------ plumbing
    def _journal(self, type: str, data: dict, *, actor: str = "optui") -> None:
        try:
            self.journal.append(type, self.name, data, actor=actor)
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
            self._journal(ev.SERVER_STATE, {"old": str(old), "new": str(state), "phase": phase}, actor=actor)
        self._set(state=state, **changes)
        async with self._state_changed:
            self._state_changed.notify_all()

    def wake(self) -> None:
        """Probe now instead of at the next interval."""
        self._wake.set()

    def _elapsed(self) -> float:
        return time.monotonic() - self._start_mono

    def _phases(self, end_t: float | None = None) -> list[dict]:
        return phase_durations(self.status.phases, end_t)

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Monitor forever (cancel to stop). Re-attaches to a surviving launch first."""
        launch = await self._attach()
        if launch is not None:
            self._set(argv=launch.argv or self.status.argv, pid=launch.pid, started_at=launch.started_at)
            self._follow(resume=True)
        self.attached.set()
        last_good = self._safe(lambda: self.journal.last_good(self.name))
        if last_good:
            self._set(last_good_argv=tuple(last_good))
        try:
            while True:
                await self._poll_once()
                busy = self.status.state.is_transitional or self._starting
                interval = min(0.5, self.cfg.poll_interval_s) if busy else self.cfg.poll_interval_s
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), interval)
        finally:
            self._stop_follower()
            await self.probe.close()

    async def _attach(self):
        try:
            return await self.controller.attach()
        except (ControllerError, OSError) as exc:
            self._set(message=f"cannot re-attach: {exc}")
            return None

    def _safe(self, fn):
        try:
            return fn()
        except JournalError as exc:
            self.journal_failed(exc)
            return None

    async def _poll_once(self) -> None:
        await self.controller.refresh()
        if self.controller.process_state() == "exited" and not self._stopping:
            await self._on_exit()
            return
        health = await self.probe.health()
        process = self.controller.process_state()
        if process == "exited" and not self._stopping:
            await self._on_exit()
            return
        status = health.status
        if health.ok and self._starting and self.cfg.generate_probe and not self._generated:
            status = await self._generation_gate()
        self._failures = 0 if status == 200 else self._failures + 1
        obs = Observation(process=process, health=status, log_ready=self._classifier.ready,
                          stopping=self._stopping, starting=self._starting)
        state = next_state(self.status.state, obs, self._failures)
        if state is ServerState.READY and self.status.model is None:
            self._set(model=await self.probe.model_name() or self.cfg.model)
        if state.is_up or state is ServerState.HUNG:
            state = await self._update_load(state)
        if state is ServerState.READY and self.status.ready_at is None:
            if self._starting and not self._classifier.ready:
                self._classifier.mark("ready", self._elapsed())  # HTTP said ready before the log did
            await self._set_state(state, ready_at=time.time(), crash_class=None, phases=tuple(self._classifier.phases),
                                  phase=self._classifier.phase)
        else:
            await self._set_state(state)

    async def _generation_gate(self) -> int:
        """/health said 200 during a start: a 1-token completion must work too (else the
        server counts as still warming: 503)."""
        if self.status.model is None:
            self._set(model=await self.probe.model_name() or self.cfg.model)
        self._generated = await self.probe.generate_one(self.status.model)
        if self._generated:
            self._classifier.mark("probe", self._elapsed())
            self._set(phase="probe", phases=tuple(self._classifier.phases))
            return 200
        return 503

    async def _generates(self) -> bool:
        return await self.probe.generate_one(self.status.model, timeout_s=min(CONFIRM_TIMEOUT_S, self.cfg.hung_after_s))

    async def _update_load(self, state: ServerState) -> ServerState:
        """Read the load (metrics or log lines) and apply the hung verdict."""
        event = await self.load.update(time.monotonic())
        self._set(load=self.load.view)
        if event == "hung":
            self._journal(ev.ALERT, {"kind": "hung", "message": self.load.message, "source": self.load.view.source,
                                     "running": self.load.view.running, "waiting": self.load.view.waiting})
            return ServerState.HUNG
        if event == "recovered":
            self._journal(ev.ALERT, {"kind": "recovered", "message": "tokens are being generated again"})
            return ServerState.READY
        return ServerState.HUNG if self.load.hung else state

    async def _on_exit(self) -> None:
        rc = self.controller.returncode()
        if self._log is not None:
            self._log.flush()
        if self.status.state in (ServerState.DOWN, ServerState.CRASHED):
            return
        note = self.controller.exit_note()
        if note:
            self._classifier.feed(note, self._elapsed())
        crash = self._classifier.crash_class(rc)
        lines = tuple(self._classifier.relevant_lines())
        self._stop_follower()
        message = f"exited rc={rc}" if rc is not None else "process gone"
        await self._set_state(ServerState.CRASHED, crash_class=crash, crash_lines=lines, pid=None, message=message)
        self._journal(ev.SERVER_FAILED, {"class": str(crash), "returncode": rc, "phase": self.status.phase, "message": message,
                                         "lines": list(lines), "argv": list(self.status.argv),
                                         "phases": self._phases(self._elapsed())})

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

    def _stop_follower(self) -> None:
        if self._log is not None:
            self._log.stop()
        if self._log_task is not None:
            self._log_task.cancel()
        self._log = self._log_task = None

    def _on_log_line(self, line: str) -> None:
        self.log_tail.append(line)
        self.log_lines_total += 1
        self.load.feed_log(line)
        t = self._elapsed()
        if self._starting and self.cfg.kind == "llamacpp":
            t = process_relative_time(line) or t  # µs-exact, and immune to our polling delay
        phase = self._classifier.feed(line, t)
        if self._classifier.log_ready:
            self._log_ready.set()
        if phase is not None:
            self._set(phase=self._classifier.phase, phases=tuple(self._classifier.phases))
            self._journal(ev.SERVER_PHASE, {"phase": phase, "t": round(t, 3)})
            if phase == "ready":
                self._wake.set()
        else:
            self.on_change()

    # ------------------------------------------------------------ actions
    async def start(self, argv: list[str] | None = None, *, actor: str = "optui", extra: dict | None = None) -> None:
        """Start with ``argv`` (default: the current one) without the ready gate."""
        argv = list(argv or self.status.argv)
        self._start_mono = time.monotonic()
        self.load.reset()
        self._failures = 0
        self._generated = False
        self._starting = True
        try:
            launch = await self.controller.start(argv)
        except ControllerError as exc:
            self._starting = False
            await self._set_state(ServerState.CRASHED, crash_class=CrashClass.UNKNOWN, crash_lines=(str(exc),), message=str(exc))
            self._journal(ev.SERVER_FAILED, {"class": "unknown", "message": str(exc), "argv": argv}, actor=actor)
            raise RestartError(str(exc)) from exc
        self._follow()
        data = {"pid": launch.pid, "argv": argv, "log": launch.log_path or f"journal of {getattr(self.controller, 'unit', '?')}",
                **(extra or {})}
        self._journal(ev.SERVER_STARTING, data, actor=actor)
        await self._set_state(ServerState.STARTING, actor=actor, argv=tuple(argv), pid=launch.pid, started_at=launch.started_at,
                              ready_at=None, phase=None, phases=(), crash_class=None, crash_lines=(), message=None,
                              model=None, load=LoadView())
        self._wake.set()

    async def stop(self, *, actor: str = "optui") -> None:
        """Stop the server (SIGTERM the group / the unit, wait ``stop_timeout_s``, SIGKILL)."""
        if self.controller.launch is None and self.controller.process_state() != "running":
            await self._set_state(ServerState.DOWN, actor=actor, pid=None)
            return
        self._stopping = True
        try:
            await self._set_state(ServerState.STOPPING, actor=actor)
            outcome = await self.controller.stop(self.cfg.stop_timeout_s)
            if self._log is not None:
                self._log.flush()
            self._stop_follower()
            self._journal(ev.SERVER_STOPPED, {"how": outcome.how, "waited_s": round(outcome.waited_s, 3),
                                              "returncode": outcome.returncode}, actor=actor)
            await self._set_state(ServerState.DOWN, actor=actor, pid=None, ready_at=None, load=LoadView())
        finally:
            self._stopping = False

    async def restart(self, argv: list[str], *, actor: str = "optui", reason: str = "", ready_timeout_s: float | None = None) -> ServerStatus:
        """Stop, wait for the port and the GPU memory, start with ``argv``, wait until
        ready or failed. Returns the final status; raises RestartError when it cannot begin."""
        if self.status.busy:
            raise RestartError(f"{self.name}: {self.status.busy} already in progress")
        if self.cfg.control == "none":
            raise RestartError(f"{self.name}: control = 'none' (optui only observes this server)")
        old = list(self.status.argv)
        self._set(busy="restarting")
        try:
            self._journal(ev.RESTART_REQUESTED, {"reason": reason, "old_argv": old, "new_argv": list(argv)}, actor=actor)
            diff = [c.describe() for c in Flags.parse(old).diff(Flags.parse(argv))]
            if diff:
                self._journal(ev.FLAGS_CHANGED, {"diff": diff, "old_argv": old, "new_argv": list(argv)}, actor=actor)
            old_pids = await self._server_pids()
            stopped_at = time.time()
            await self.stop(actor=actor)
            if not await self._wait_port_free(10.0):
                host, port = url_host_port(self.cfg.url)
                return await self._fail_before_start(CrashClass.PORT_IN_USE, f"port {port} on {host} is still in use after stop",
                                                     argv, actor)
            held, waited = await self._wait_gpu_released(old_pids, stopped_at)
            if held:
                pids = ", ".join(map(str, sorted(held)))
                msg = f"GPU memory still held by the old server's PIDs {pids} {waited:.0f} s after stop; not starting"
                return await self._fail_before_start(CrashClass.OOM, msg, argv, actor)
            extra = {} if waited is None else {"gpu_released_after_s": round(waited, 3)}
            await self.start(argv, actor=actor, extra=extra)
            return await self._ready_gate(ready_timeout_s or self.cfg.ready_timeout_s, actor)
        finally:
            self._starting = False
            self._set(busy=None)

    async def _fail_before_start(self, crash: CrashClass, msg: str, argv: list[str], actor: str) -> ServerStatus:
        await self._set_state(ServerState.CRASHED, crash_class=crash, crash_lines=(msg,), message=msg)
        self._journal(ev.SERVER_FAILED, {"class": str(crash), "message": msg, "argv": list(argv)}, actor=actor)
        return self.status

    async def _server_pids(self) -> set[int]:
        if self.gpu_holders is None or self.controller.launch is None:
            return set()
        with contextlib.suppress(Exception):
            return await self.controller.pids()
        return set()

    async def _wait_gpu_released(self, pids: set[int], after: float) -> tuple[set[int], float | None]:
        """Wait until none of ``pids`` holds GPU memory (per a GPU reading taken after
        ``after``), at most ``stop_timeout_s``. Returns (PIDs still holding, seconds waited);
        seconds None when no GPU source can tell."""
        if not pids or self.gpu_holders is None:
            return set(), None
        t0 = time.monotonic()
        while True:
            holders = await self.gpu_holders(after)
            if holders is None:
                return set(), None
            still = pids & holders
            waited = time.monotonic() - t0
            if not still or waited >= self.cfg.stop_timeout_s:
                return still, waited
            await asyncio.sleep(0.5)

    async def _wait_port_free(self, timeout_s: float) -> bool:
        host, port = url_host_port(self.cfg.url)
        deadline = time.monotonic() + timeout_s
        while await asyncio.to_thread(port_open, host, port):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def _wait_state(self, done: Callable[[ServerState], bool], deadline: float) -> bool:
        """Wait until ``done(state)`` or the monotonic ``deadline``; True when reached."""
        async with self._state_changed:
            while not done(self.status.state):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._state_changed.wait(), remaining)
        return True

    async def _ready_gate(self, timeout_s: float, actor: str) -> ServerStatus:
        deadline = time.monotonic() + timeout_s
        await self._wait_state(lambda s: s in (ServerState.READY, ServerState.CRASHED), deadline)
        if self.status.state is ServerState.READY:
            ready_s = self._elapsed()
            if self.cfg.kind in _KINDS_WITH_READY_LINE and not self._classifier.log_ready:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._log_ready.wait(), LOG_CATCH_UP_S)
                self._set(phases=tuple(self._classifier.phases))
            if self.cfg.stability_s > 0:
                left = await self._wait_state(lambda s: s is not ServerState.READY, time.monotonic() + self.cfg.stability_s)
                if left:
                    return await self._unstable(actor)
            self._starting = False
            stable_s = self._elapsed()
            self._journal(ev.SERVER_READY, {"ready_s": round(ready_s, 3), "stable_s": round(stable_s, 3),
                                            "phases": self._phases(ready_s), "argv": list(self.status.argv),
                                            "model": self.status.model, "generate_probe": self._generated}, actor=actor)
            self._safe(lambda: self.journal.set_last_good(self.name, list(self.status.argv)))
            self._set(last_good_argv=self.status.argv)
            return self.status
        self._starting = False
        if self.status.state is not ServerState.CRASHED:  # timed out
            msg = f"not ready after {timeout_s:.0f}s (last phase: {self.status.phase or 'none'})"
            phases = self._phases(self._elapsed())
            await self.stop(actor=actor)
            await self._set_state(ServerState.CRASHED, crash_class=CrashClass.TIMEOUT, crash_lines=(msg,), message=msg)
            self._journal(ev.SERVER_FAILED, {"class": "timeout", "message": msg, "argv": list(self.status.argv),
                                             "phases": phases}, actor=actor)
        return self.status

    async def _unstable(self, actor: str) -> ServerStatus:
        """The server left READY inside the stability window: a failed restart."""
        self._starting = False
        if self.status.state is ServerState.CRASHED:
            return self.status  # _on_exit journaled it with its class
        msg = f"became {self.status.state} within the {self.cfg.stability_s:.0f}s stability window"
        phases = self._phases(self._elapsed())
        await self.stop(actor=actor)
        await self._set_state(ServerState.CRASHED, crash_class=CrashClass.UNKNOWN, crash_lines=(msg,), message=msg)
        self._journal(ev.SERVER_FAILED, {"class": "unknown", "message": msg, "argv": list(self.status.argv), "phases": phases},
                      actor=actor)
        return self.status

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

    async def shutdown(self, stop_server: bool) -> None:
        """Called when the session closes: stop the server only when asked (demo)."""
        if stop_server and isinstance(self.controller, ProcessController) and self.controller.launch is not None:
            self._stopping = True
            await self.controller.stop(min(self.cfg.stop_timeout_s, 5.0))
