"""Server controllers: how optui starts and stops a server (one interface, chosen per
server in the config by ``control``).

- :class:`ProcessController` (``process``) launches the argv itself (own process group,
  stdin closed, ``PYTHONUNBUFFERED=1``, stdout+stderr to a log file) and remembers the launch
  in a small JSON "pidfile" so a later optui re-attaches to a server that kept running. The
  server's life is never tied to optui's: quitting the TUI leaves it running (except in the
  demo).
- :class:`ScriptController` (``script``): the operator's launch script, run as
  ``SCRIPT FLAGS...`` the same way, stopped through the recorded process group.
- :class:`~optui.adapters.controller_systemd.SystemdController` (``systemd``).
- :class:`ObservedController` (``none``): watch only.

:func:`~optui.adapters.controller_factory.build_controller` picks one for a server's config.

Every command and file access goes through an :class:`~optui.adapters.shell.Shell`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from optui.adapters import proc
from optui.adapters.aio import within
from optui.adapters.pidfile import Launch, read_pidfile, write_pidfile, write_state_json
from optui.adapters.shell import LocalShell, LogSource, Shell, ShellError, Spawned
from optui.core.flags.argv import Flags

#: an experiment id a kept log is named after (part of a file name; the shells prune ``.exp-*``)
_FILE_SAFE = re.compile(r"exp-[0-9]{1,12}")


class ControllerError(Exception):
    """A start or stop that could not be done (program missing, permission...)."""


class Controller(Protocol):
    """The interface of every controller."""

    launch: Launch | None

    async def start(self, argv: list[str], *, keep_log_as: str | None = None) -> Launch:
        """Start the server with ``argv``; raises ControllerError. ``keep_log_as``: the
        experiment whose launch wrote the log this start replaces (the old log is kept
        under its name: :meth:`~optui.adapters.shell.Shell.rotate_file`)."""
        ...

    async def stop(self, timeout_s: float) -> proc.StopOutcome:
        """Stop it: SIGTERM (or the unit's stop), wait ``timeout_s``, then SIGKILL."""
        ...

    async def refresh(self) -> None:
        """Update what :meth:`process_state` / :meth:`returncode` report (one query)."""
        ...

    def process_state(self) -> str:
        """"running", "exited" or "unknown" (not managed / cannot tell)."""
        ...

    def paused(self) -> bool:
        """The launch's process group is stopped (SIGSTOP), as of the last :meth:`refresh`:
        alive, answering nothing until continued (a HUNG server, never a down one)."""
        ...

    def returncode(self) -> int | None:
        """Exit status of the last launch when known (negative: killed by that signal)."""
        ...

    def exit_note(self) -> str | None:
        """A line explaining the exit beyond the log (systemd's Result), or None."""
        ...

    async def attach(self) -> Launch | None:
        """Re-attach to a launch that survived an optui restart, if any."""
        ...

    def open_log(self, on_line: Callable[[str], None], *, resume: bool = False) -> LogSource | None:
        """A follower of the current launch's log from its start (``resume``: only new
        lines, after a re-attach); None without a launch."""
        ...

    async def pids(self) -> set[int]:
        """PIDs of the server's processes now (for the GPU-memory-released check)."""
        ...

    def preview(self, argv: list[str]) -> str:
        """What a start with ``argv`` will execute, for the confirm dialog."""
        ...


def _write_owner(path: Path, server_pid: int) -> None:
    """Record this optui process (PID and start time) as the launcher of ``server_pid``."""
    write_state_json(path, {"pid": os.getpid(), "start": proc.process_start_ticks(os.getpid()) or 0,
                            "server_pid": server_pid})


def _runs_program(pid: int, program: str) -> bool:
    """True when local process ``pid``'s command line names ``program`` (its file name):
    how a pidfile written without the process start time is checked before it is trusted."""
    name = os.path.basename(str(program))
    return bool(name) and name in proc.command_line(pid)


class ProcessController:
    """Runs the server in its own process group through ``shell`` (see module doc).

    ``state_dir`` holds ``servers/NAME.json`` (the pidfile) and ``logs/NAME.log`` (the
    log; earlier starts' logs are kept one per experiment as ``NAME.log.exp-0007``, bounded
    in count and bytes, or as ``NAME.log.1`` ... ``.5`` when a start names no experiment).
    """

    def __init__(self, name: str, state_dir: Path, *, cwd: str | None = None, env: dict[str, str] | None = None,
                 log_file: str | None = None, shell: Shell | None = None) -> None:
        self.name = name
        self.cwd = cwd
        self.env = env or {}
        self.shell: Shell = shell or LocalShell()
        self.pidfile = state_dir / "servers" / f"{name}.json"
        #: which optui process launched the server the pidfile names (``{"pid", "start",
        #: "server_pid"}``): a window that did not start it never stops it on quit (issue 30)
        self.ownerfile = state_dir / "servers" / f"{name}.owner.json"
        self.log_path = str(log_file) if log_file else self.shell.default_log_path(name, state_dir)
        self.launch: Launch | None = None
        #: a launch the pidfile recorded whose process is gone (or whose PID now names
        #: another process), found by :meth:`attach`: it ended while no optui process
        #: watched it. Cleared by :meth:`forget_lost` once that is journaled.
        self.lost: Launch | None = None
        self._proc: Spawned | None = None
        self._alive: bool | None = False  # None: the host cannot be asked now
        #: a re-attached launch's exit status once it is gone, where its shell keeps one
        #: (an SSH host's LOG.exit: SshShell.exit_status); None: not known
        self._exit_status: int | None = None
        self._paused = False  # the group was stopped (SIGSTOP) at the last refresh

    def command(self, argv: list[str]) -> list[str]:
        """The argv actually executed for the server argv ``argv``."""
        return list(argv)

    def preview(self, argv: list[str]) -> str:
        return f"run in a new process group on {self.shell.host}, log {self.log_path}:\n{shlex.join(self.command(argv))}"

    async def start(self, argv: list[str], *, keep_log_as: str | None = None) -> Launch:
        if not argv:
            raise ControllerError(f"{self.name}: empty argv")
        command = self.command(argv)
        if keep_log_as is not None and not _FILE_SAFE.fullmatch(keep_log_as):
            keep_log_as = None  # not an experiment id: numbered, as without one
        try:
            await self.shell.rotate_file(self.log_path, keep_log_as)
            child = await self.shell.spawn_to_log(command, self.log_path, cwd=self.cwd, env=self.env)
        except OSError as exc:
            raise ControllerError(f"{self.name}: {exc.strerror or exc}") from exc
        except ShellError as exc:
            raise ControllerError(f"{self.name}: {exc}") from exc
        self._proc = child
        self._alive = True
        self._exit_status = None
        self.lost = None
        self.launch = Launch(child.pid, tuple(argv), self.log_path, 0, time.time(),
                             command=tuple(command) if command != list(argv) else None, host=self.shell.host)
        # recorded at once, before any other await: an optui killed (SIGKILL) while it asked
        # for the process's start time left a server no pidfile named, on the port of the next
        # start (the resumed search's trials failed `port_in_use`); without the start time the
        # command line is what the next optui checks (:meth:`attach`)
        write_pidfile(self.pidfile, self.launch)
        _write_owner(self.ownerfile, child.pid)
        try:
            identity = await self.shell.process_start(child.pid) or ""
        except ShellError:
            identity = ""
        if identity:
            self.launch = replace(self.launch, proc_start=identity)
            write_pidfile(self.pidfile, self.launch)
        return self.launch

    def _clear_pidfile(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pidfile.unlink()

    async def stop(self, timeout_s: float) -> proc.StopOutcome:
        if self.launch is None:
            return proc.StopOutcome("exited", 0.0, None)
        try:
            outcome = await self.shell.stop_group(self.launch.pid, timeout_s=timeout_s, handle=self._proc)
        except ShellError as exc:
            raise ControllerError(f"{self.name}: cannot stop: {exc}") from exc
        self._alive = False
        self._clear_pidfile()
        return outcome

    async def refresh(self) -> None:
        if self.launch is None:
            return
        try:
            if self._proc is None:
                self._alive = await self.shell.pid_alive(self.launch.pid)
                if self._alive and self.launch.proc_start:  # the PID may have been reused meanwhile
                    self._alive = await self.shell.process_start(self.launch.pid) == self.launch.proc_start
                read_exit = getattr(self.shell, "exit_status", None)
                if self._alive is False and read_exit is not None and self._exit_status is None:
                    with contextlib.suppress(ShellError):  # gone is known; only its status is not
                        self._exit_status = await read_exit(self.launch.log_path)
            elif hasattr(self._proc, "poll"):  # a remote launch: ask the host
                await self._proc.poll()
            self._paused = self.process_state() == "running" and await self.shell.group_stopped(self.launch.pid)
        except ShellError:
            self._paused = False
            if self._proc is None:
                self._alive = None  # the host cannot be asked (link down): say so, decide later

    def paused(self) -> bool:
        return self._paused and self.process_state() == "running"

    def process_state(self) -> str:
        if self.launch is None:
            return "unknown"
        if self._proc is not None:
            # asyncio's child watcher sets returncode as soon as the leader exits
            return "exited" if self._proc.returncode is not None else "running"
        if self._alive is None:
            return "unknown"
        return "running" if self._alive else "exited"

    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else self._exit_status

    def exit_note(self) -> str | None:
        return None

    async def wait_exit(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the process to exit; its return code or None."""
        if self._proc is None:
            return None
        with contextlib.suppress(TimeoutError):
            return await within(self._proc.wait(), timeout_s)
        return None

    def recorded(self) -> Launch | None:
        """The launch the pidfile names (possibly another optui process's), without
        attaching to it; None when there is no readable pidfile, or when it names a launch
        on another host (the server's ``host`` was changed in the config since: its pid
        means nothing here, and stopping it would signal an unrelated process group)."""
        launch = read_pidfile(self.pidfile)
        if launch is not None and launch.host and launch.host != self.shell.host:
            return None
        return launch

    async def attach(self) -> Launch | None:
        """Re-attach to the launch the pidfile records when its process still runs: the same
        PID *and* the same process start identity (a PID reused by an unrelated process —
        after a reboot, or long after the server died — is not the server, and stopping it
        would signal that process's group). A recorded launch whose process is gone is kept
        in :attr:`lost` (and its pidfile left) for the session to journal; returns None then."""
        launch = self.recorded()
        if launch is None:
            return None
        try:
            alive: bool | None = await self.shell.pid_alive(launch.pid)
            if alive and launch.proc_start:
                alive = await self.shell.process_start(launch.pid) == launch.proc_start
            elif alive and self.shell.local:  # a pidfile of older optui (no start time): the command must match
                alive = _runs_program(launch.pid, (launch.command or launch.argv or ("",))[0])
        except ShellError:
            alive = None  # the host is unreachable now: keep the launch, the monitor decides later
        if alive is False:
            self.lost = launch
            return None
        self.launch, self._proc, self._alive, self._exit_status = launch, None, alive, None
        return launch

    def forget_lost(self) -> None:
        """The lost launch is accounted for (journaled): drop it and its pidfile, unless the
        pidfile names a newer launch by now."""
        lost, self.lost = self.lost, None
        if lost is not None and self.recorded() == lost:
            self._clear_pidfile()

    def open_log(self, on_line: Callable[[str], None], *, resume: bool = False) -> LogSource | None:
        if self.launch is None:
            return None
        offset = None if resume else self.launch.log_offset  # None: only what comes next
        return self.shell.follow_file(self.launch.log_path, on_line, offset=offset)

    async def pids(self) -> set[int]:
        if self.launch is None:
            return set()
        return await self.shell.group_pids(self.launch.pid)

    @property
    def started_here(self) -> bool:
        """Whether this optui process launched the server it tracks now (not re-attached to
        another process's launch)."""
        return self._proc is not None and self.launch is not None and self.launch.pid == self._proc.pid

    def owner_elsewhere(self) -> int | None:
        """The PID of another optui process, still running, that launched the server tracked
        now: that process stops it when it quits, never this one. None when this process
        launched it, or its launcher is gone (a window killed with SIGKILL: this one adopts the
        server), or nothing is tracked."""
        if self.launch is None or self.started_here:
            return None
        try:
            owner = json.loads(self.ownerfile.read_text())
            pid, start, server_pid = int(owner["pid"]), int(owner["start"]), int(owner["server_pid"])
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if server_pid != self.launch.pid or pid == os.getpid():
            return None
        return pid if proc.process_start_ticks(pid) == start and proc.pid_alive(pid) else None

    def release(self) -> None:
        """optui leaves while the server runs on (it outlives optui by design): stop tracking
        the child without touching it, so nothing at interpreter exit complains about it."""
        forget = getattr(self._proc, "forget", None)
        if forget is not None:
            forget()
            # from here on it is followed like a re-attached launch (by PID), never read as exited
            self._proc, self._alive = None, True

    def kill_now(self) -> None:
        """SIGKILL the group immediately (used when the demo exits)."""
        if self.launch is not None:
            self.shell.kill_group_now(self.launch.pid)
            self._clear_pidfile()


class ScriptController(ProcessController):
    """``control = "script"``: the operator's launch script, run as ``SCRIPT FLAGS...``
    where FLAGS are the server argv after its program part (``python -m
    sglang.launch_server``), in its own process group and stopped through it. The script
    must keep the server in the foreground (``exec`` it), not detach it."""

    def __init__(self, name: str, state_dir: Path, script: str, **kwargs) -> None:
        super().__init__(name, state_dir, **kwargs)
        self.script = script

    def command(self, argv: list[str]) -> list[str]:
        flags = Flags.parse(argv)
        rest = flags.to_argv()[len(flags.program):]
        if flags.program and flags.program[0] == self.script:
            return list(argv)
        return [self.script, *rest]


class ObservedController:
    """``control = "none"``: optui only watches the server; start/stop are refused."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.launch: Launch | None = None

    async def start(self, argv: list[str], *, keep_log_as: str | None = None) -> Launch:
        raise ControllerError(f"{self.name}: control = 'none' (optui only observes this server)")

    async def stop(self, timeout_s: float) -> proc.StopOutcome:
        raise ControllerError(f"{self.name}: control = 'none' (optui only observes this server)")

    async def refresh(self) -> None:
        return None

    def process_state(self) -> str:
        return "unknown"

    def paused(self) -> bool:
        return False

    def returncode(self) -> int | None:
        return None

    def exit_note(self) -> str | None:
        return None

    async def attach(self) -> Launch | None:
        return None

    def open_log(self, on_line: Callable[[str], None], *, resume: bool = False) -> LogSource | None:
        return None

    async def pids(self) -> set[int]:
        return set()

    def preview(self, argv: list[str]) -> str:
        return "(observed only)"


__all__ = ["Controller", "ControllerError", "Launch", "ObservedController", "ProcessController", "ScriptController",
           "ShellError"]
