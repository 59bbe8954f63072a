"""The restart flow and ready gate of a :class:`~optui.session.server.runtime.ServerRuntime`.

    server.restart, flags.changed → stop (server.stopped) → port free → the old PIDs' GPU
    memory released → start (server.starting) → ready gate: /health 200 [+ 1-token
    generation] [+ stability window] → server.ready (phases with durations, the configuration
    the server reports checked against the argv; last good flags stored) | server.failed
    (class, lines, phases)

:class:`RestartFlow` is an object of the runtime: it is given the server's configuration,
controller, probe, shell, journal events and status keeper
(:mod:`optui.session.server.transitions`) and the :class:`Launcher` that starts and stops
the server (the runtime), so that it runs with fakes of any of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from optui.core.flags.argv import Flags
from optui.core.flags.catalog import FlagCatalog
from optui.core.journal import events as ev
from optui.core.journal.experiments import config_key, experiment_start
from optui.core.server.effective_config import check_config
from optui.core.server.state import CrashClass, ServerState, ServerStatus

if TYPE_CHECKING:
    from optui.adapters.controller import Controller
    from optui.adapters.probe import ServerProbe
    from optui.adapters.shell import Shell
    from optui.config import ServerConfig
    from optui.session.server.transitions import ServerEvents, StatusKeeper

#: After /health said ready, how long to let the log catch up (llama.cpp logs from a
#: thread, so its phase lines can trail HTTP) before the phases are journaled.
LOG_CATCH_UP_S = 2.0
#: a server that left READY in its stability window: how long the exit handler may take to
#: see an exit (s), and to drain a journal or remote log once it did (its own limit is 10 s)
UNSTABLE_GRACE_S = 1.5
EXIT_DRAIN_S = 11.0
_KINDS_WITH_READY_LINE = ("sglang", "vllm", "llamacpp")


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


#: ``gpu_holders(after)``: PIDs holding GPU memory on the server's host in a GPU reading
#: taken after Unix time ``after``; None when no GPU source sees processes there.
GpuHolders = Callable[[float], Awaitable["set[int] | None"]]


class Launcher(Protocol):
    """What a restart flow needs of the runtime that starts, stops and watches the server
    (:class:`~optui.session.server.runtime.ServerRuntime`)."""

    async def start(self, argv: list[str], *, actor: str = "optui", extra: dict | None = None) -> None:
        """Launch ``argv`` (STARTING; journaled with ``extra``); RestartError when it cannot."""

    async def stop(self, *, actor: str = "optui") -> None:
        """Stop the server (DOWN); RestartError when it cannot."""

    def elapsed(self) -> float:
        """Seconds since the current start."""

    def phase_durations(self, end_t: float | None = None) -> list[dict]:
        """The current start's phases with their durations (the last one ends at ``end_t`` s)."""

    async def catch_up_log(self, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` for the log's readiness line, then show its phases."""

    def generation_passed(self) -> bool:
        """The 1-token generation of the current start worked."""

    def end_start(self) -> None:
        """The current start is over (ready, failed or given up): probes stop treating it as one."""


class RestartFlow:
    """Restart and ready gate of one server (module doc)."""

    def __init__(self, cfg: ServerConfig, controller: Controller, events: ServerEvents, keeper: StatusKeeper, *,
                 launcher: Launcher, probe: ServerProbe, shell: Shell, gpu_holders: GpuHolders | None = None,
                 catalog: Callable[[], FlagCatalog | None] = lambda: None) -> None:
        self.cfg = cfg
        #: the server's learned flag catalogue, if any: how an experiment's flags are named
        self._catalog = catalog
        self.controller = controller
        self._events = events
        self._keeper = keeper
        self._launcher = launcher
        self._probe = probe
        self._shell = shell
        self._gpu_holders = gpu_holders

    @property
    def status(self) -> ServerStatus:
        """The server's status now."""
        return self._keeper.status

    @property
    def name(self) -> str:
        """The server's name."""
        return self._events.server

    async def restart(self, argv: list[str], *, actor: str = "optui", reason: str = "", ready_timeout_s: float | None = None,
                      todo_id: int | None = None, base: Sequence[str] | None = None) -> ServerStatus:
        """Stop, wait for the port and the GPU memory, start with ``argv``, wait until
        ready or failed. Opens a new experiment (``exp-NNNN``: every later event of this
        server carries it; ``todo_id`` links it to the todo item that asked for it).
        ``base``: the argv the change was applied to (a checked restart's base flags: the
        last good ones when the server is down); the experiment's and ``flags.changed``'s
        diff are taken against it; None: the status's argv.
        Returns the final status; raises RestartError when it cannot begin."""
        if self.status.busy:
            raise RestartError(f"{self.name}: {self.status.busy} already in progress")
        if self.cfg.control == "none":
            raise RestartError(f"{self.name}: control = 'none' (optui only observes this server)")
        old = list(self.status.argv)
        prev = list(base) if base is not None else old  # a failed argv or the config's is not what changed
        self._keeper.set(busy="restarting")
        try:
            extra_exp = {} if todo_id is None else {"todo_id": todo_id}
            if not await self._continues_current_experiment(argv, reason):
                catalog = self._catalog()
                names = catalog.canonical_names([prev, argv]) if catalog is not None else None
                await self._events.read(lambda: self._events.journal.new_experiment(
                    self.name, experiment_start(prev, argv, reason, names=names, **extra_exp), actor=actor))
            self._events.record(ev.RESTART_REQUESTED, {"reason": reason, "old_argv": old, "new_argv": list(argv),
                                                        "pid": os.getpid()}, actor=actor)
            diff = [c.describe() for c in Flags.parse(prev).diff(Flags.parse(argv))]
            if diff:
                self._events.record(ev.FLAGS_CHANGED, {"diff": diff, "old_argv": prev, "new_argv": list(argv)}, actor=actor)
            old_pids = await self._server_pids()
            stopped_at = time.time()
            ours_running = self.controller.process_state() == "running"
            await self._launcher.stop(actor=actor)
            # our own server may take a while to let go of its port; nothing of ours ran: someone else holds it
            if not await self._wait_port_free(10.0 if ours_running else 1.0):
                host, port = url_host_port(self.cfg.url)
                who = "still in use after stop" if ours_running else "in use by another process"
                holders = await self._port_holders(port)
                if holders:  # e.g. a child of the old server that left its process group
                    who += " (" + "; ".join(f"pid {pid}: {cmd[:120]}" for pid, cmd in sorted(holders.items())) + ")"
                return await self._fail_before_start(CrashClass.PORT_IN_USE, f"port {port} on {host} is {who}; not starting",
                                                     argv, actor)
            left = await self._leftovers(old_pids)
            if left:
                listed = "; ".join(f"pid {pid}: {cmd[:120]}" for pid, cmd in sorted(left.items()))
                msg = (f"the old server's processes outlived its stop (they left its process group): {listed}; "
                       "not starting (leftovers = \"kill\" in the server's config stops them)")
                return await self._fail_before_start(CrashClass.UNKNOWN, msg, argv, actor)
            held, waited = await self._wait_gpu_released(old_pids, stopped_at)
            if held:
                pids = ", ".join(map(str, sorted(held)))
                msg = f"GPU memory still held by the old server's PIDs {pids} {waited:.0f} s after stop; not starting"
                return await self._fail_before_start(CrashClass.OOM, msg, argv, actor)
            extra = {} if waited is None else {"gpu_released_after_s": round(waited, 3)}
            await self._launcher.start(argv, actor=actor, extra=extra)
            return await self._ready_gate(ready_timeout_s or self.cfg.ready_timeout_s, actor)
        finally:
            self._launcher.end_start()
            self._keeper.set(busy=None)

    async def _continues_current_experiment(self, argv: list[str], reason: str) -> bool:
        """An autostart with the flags the server's current experiment started with (its port aside:
        :func:`~optui.core.journal.experiments.config_key`) continues
        that experiment: a new optui session (the demo stops its server on quit) is not a
        new configuration, and the experiments list would fill with identical entries."""
        if reason != "autostart":
            return False
        journal = self._events.journal
        exp = await self._events.read(lambda: journal.current_experiment(self.name))
        if not exp:
            return False
        started = await self._events.read(lambda: journal.events(experiment=exp, types=[ev.EXPERIMENT_STARTED], limit=1))
        return started is not None and bool(started) and config_key(started[0].data.get("argv") or ()) == config_key(argv)

    async def _fail_before_start(self, crash: CrashClass, msg: str, argv: list[str], actor: str) -> ServerStatus:
        await self._keeper.set_state(ServerState.CRASHED, crash_class=crash, crash_lines=(msg,), message=msg)
        self._events.record(ev.SERVER_FAILED, {"class": str(crash), "message": msg, "argv": list(argv)}, actor=actor)
        return self.status

    async def _server_pids(self) -> set[int]:
        """The old server's processes before its stop: its process group and, on this
        machine, every descendant (a child that left the group is still the old server's)."""
        if self.controller.launch is None:
            return set()
        pids: set[int] = set()
        with contextlib.suppress(Exception):
            pids = await self.controller.pids()
        if pids and getattr(self._shell, "local", False):
            from optui.adapters.proc import descendants

            pids |= await asyncio.to_thread(descendants, pids)
        return pids

    async def _leftovers(self, old_pids: set[int]) -> dict[int, str]:
        """``{pid: command line}`` of the old server's processes still alive after its stop
        (local servers); with ``leftovers = "kill"`` they are SIGKILLed first and only those
        that survive 5 s are returned."""
        if not old_pids or not getattr(self._shell, "local", False):
            return {}
        from optui.adapters import proc

        alive = {pid for pid in old_pids if proc.pid_alive(pid)}
        if alive and self.cfg.leftovers == "kill":
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            deadline = time.monotonic() + 5.0
            while alive and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                alive = {pid for pid in alive if proc.pid_alive(pid)}
        return {pid: proc.command_line(pid) for pid in sorted(alive)}

    async def _wait_gpu_released(self, pids: set[int], after: float) -> tuple[set[int], float | None]:
        """Wait until none of ``pids`` holds GPU memory (per a GPU reading taken after
        ``after``), at most ``stop_timeout_s``. Returns (PIDs still holding, seconds waited);
        seconds None when no GPU source can tell."""
        if not pids or self._gpu_holders is None:
            return set(), None
        t0 = time.monotonic()
        while True:
            holders = await self._gpu_holders(after)
            if holders is None:
                return set(), None
            still = pids & holders
            waited = time.monotonic() - t0
            if not still or waited >= self.cfg.stop_timeout_s:
                return still, waited
            await asyncio.sleep(0.5)

    async def _port_holders(self, port: int) -> dict[int, str]:
        """``{pid: command line}`` of what listens on ``port`` when the server's host is this
        machine (empty for an SSH host or when it cannot be told)."""
        if not getattr(self._shell, "local", False):
            return {}
        from optui.adapters.proc import port_holders

        with contextlib.suppress(Exception):
            return await asyncio.to_thread(port_holders, port)
        return {}

    async def _wait_port_free(self, timeout_s: float) -> bool:
        host, port = url_host_port(self.cfg.url)
        deadline = time.monotonic() + timeout_s
        while await asyncio.to_thread(port_open, host, port):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def _ready_gate(self, timeout_s: float, actor: str) -> ServerStatus:
        deadline = time.monotonic() + timeout_s
        await self._keeper.wait_for(lambda s: s in (ServerState.READY, ServerState.CRASHED), deadline)
        if self.status.state is ServerState.READY:
            ready_s = self._launcher.elapsed()
            if self.cfg.kind in _KINDS_WITH_READY_LINE:
                await self._launcher.catch_up_log(LOG_CATCH_UP_S)
            if self.cfg.stability_s > 0:
                left = await self._keeper.wait_for(lambda s: s is not ServerState.READY, time.monotonic() + self.cfg.stability_s)
                if left:
                    return await self._unstable(actor)
            self._launcher.end_start()
            stable_s = self._launcher.elapsed()
            # what the server really runs, against the argv this experiment is credited to
            running = await self._probe.running_config(self.cfg.kind)
            check = check_config(self.cfg.kind, list(self.status.argv), running)
            version = running.version if running is not None else (await self._probe.server_info() or {}).get("version")
            self._keeper.set(config_mismatch=check.describe())
            self._events.record(ev.SERVER_READY, {"ready_s": round(ready_s, 3), "stable_s": round(stable_s, 3),
                                                   "phases": self._launcher.phase_durations(ready_s),
                                                   "argv": list(self.status.argv), "model": self.status.model,
                                                   "generate_probe": self._launcher.generation_passed(),
                                                   "server_version": version, "config_check": check.to_json()}, actor=actor)
            argv = list(self.status.argv)
            # queued like an event (in order after server.ready): the status holds it meanwhile
            self._events.write(lambda: self._events.journal.set_last_good(self.name, argv))
            self._keeper.set(last_good_argv=self.status.argv)
            return self.status
        self._launcher.end_start()
        if self.status.state is not ServerState.CRASHED:  # timed out
            msg = f"not ready after {timeout_s:.0f}s (last phase: {self.status.phase or 'none'})"
            phases = self._launcher.phase_durations(self._launcher.elapsed())
            await self._launcher.stop(actor=actor)
            await self._keeper.set_state(ServerState.CRASHED, crash_class=CrashClass.TIMEOUT, crash_lines=(msg,), message=msg)
            self._events.record(ev.SERVER_FAILED, {"class": "timeout", "message": msg, "argv": list(self.status.argv),
                                                    "phases": phases}, actor=actor)
        return self.status

    async def _unstable(self, actor: str) -> ServerStatus:
        """The server left READY inside the stability window: a failed restart."""
        self._launcher.end_start()
        # A process that exits is usually first seen as degraded (its health check fails
        # before the exit is reaped and its log drained): let the exit handler classify it.
        crashed = lambda s: s is ServerState.CRASHED  # noqa: E731
        await self._keeper.wait_for(crashed, time.monotonic() + UNSTABLE_GRACE_S)
        if self.status.state is not ServerState.CRASHED and self.controller.process_state() == "exited":
            await self._keeper.wait_for(crashed, time.monotonic() + EXIT_DRAIN_S)
        if self.status.state is ServerState.CRASHED:
            return self.status  # _on_exit journaled it with its class
        msg = f"became {self.status.state} within the {self.cfg.stability_s:.0f}s stability window"
        phases = self._launcher.phase_durations(self._launcher.elapsed())
        await self._launcher.stop(actor=actor)
        await self._keeper.set_state(ServerState.CRASHED, crash_class=CrashClass.UNKNOWN, crash_lines=(msg,), message=msg)
        self._events.record(ev.SERVER_FAILED, {"class": "unknown", "message": msg, "argv": list(self.status.argv),
                                                "phases": phases}, actor=actor)
        return self.status
