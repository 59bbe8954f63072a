"""Server controllers: how optui starts and stops a server (one interface, chosen per
server in the config by ``control``).

:class:`ProcessController` launches the argv itself (own process group, stdin closed,
``PYTHONUNBUFFERED=1``, stdout+stderr to a log file) and remembers the launch in a small
JSON "pidfile" so a later optui re-attaches to a server that kept running. The server's
life is never tied to optui's: quitting the TUI leaves it running (except in the demo).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from optui.adapters import proc


class ControllerError(Exception):
    """A start or stop that could not be done (program missing, permission...)."""


@dataclass(frozen=True, slots=True)
class Launch:
    """What a start produced: group leader pid, argv, log file and the byte offset where
    this start's output begins, Unix start time."""

    pid: int
    argv: tuple[str, ...]
    log_path: str
    log_offset: int
    started_at: float


class Controller(Protocol):
    """The interface of every controller."""

    launch: Launch | None

    async def start(self, argv: list[str]) -> Launch:
        """Start the server with ``argv``; raises ControllerError."""
        ...

    async def stop(self, timeout_s: float) -> proc.StopOutcome:
        """Stop it: SIGTERM (or the unit's stop), wait ``timeout_s``, then SIGKILL."""
        ...

    def process_state(self) -> str:
        """"running", "exited" or "unknown" (not managed / cannot tell)."""
        ...

    def returncode(self) -> int | None:
        """Exit status of the last launch when known."""
        ...

    def attach(self) -> Launch | None:
        """Re-attach to a launch that survived an optui restart, if any."""
        ...


class ProcessController:
    """Runs the server as optui's child in its own process group (see module doc).

    ``state_dir`` holds ``servers/NAME.json`` (the pidfile) and ``logs/NAME.log`` (the
    log; the previous start's log is kept as ``NAME.log.1``).
    """

    def __init__(self, name: str, state_dir: Path, *, cwd: str | None = None, env: dict[str, str] | None = None,
                 log_file: str | None = None) -> None:
        self.name = name
        self.cwd = cwd
        self.env = env or {}
        self.pidfile = state_dir / "servers" / f"{name}.json"
        self.log_path = Path(log_file) if log_file else state_dir / "logs" / f"{name}.log"
        self.launch: Launch | None = None
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self, argv: list[str]) -> Launch:
        if not argv:
            raise ControllerError(f"{self.name}: empty argv")
        self._rotate_log()
        try:
            child = await proc.spawn_to_log(argv, self.log_path, cwd=self.cwd, env=self.env)
        except OSError as exc:
            raise ControllerError(f"{self.name}: {exc.strerror or exc}") from exc
        self._proc = child
        self.launch = Launch(child.pid, tuple(argv), str(self.log_path), 0, time.time())
        self._write_pidfile()
        return self.launch

    def _rotate_log(self) -> None:
        if self.log_path.exists() and self.log_path.stat().st_size:
            with contextlib.suppress(OSError):
                os.replace(self.log_path, self.log_path.with_name(self.log_path.name + ".1"))

    def _write_pidfile(self) -> None:
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.pidfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.launch)))
        os.replace(tmp, self.pidfile)

    def _clear_pidfile(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pidfile.unlink()

    async def stop(self, timeout_s: float) -> proc.StopOutcome:
        if self.launch is None:
            return proc.StopOutcome("exited", 0.0, None)
        outcome = await proc.stop_group(self.launch.pid, timeout_s=timeout_s, proc=self._proc)
        self._clear_pidfile()
        return outcome

    def process_state(self) -> str:
        if self.launch is None:
            return "unknown"
        if self._proc is not None:
            # asyncio's child watcher sets returncode as soon as the leader exits
            return "exited" if self._proc.returncode is not None else "running"
        return "running" if proc.pid_alive(self.launch.pid) else "exited"

    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    async def wait_exit(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the process to exit; its return code or None."""
        if self._proc is None:
            return None
        with contextlib.suppress(asyncio.TimeoutError):
            return await asyncio.wait_for(self._proc.wait(), timeout_s)
        return None

    def recorded(self) -> Launch | None:
        """The launch the pidfile names (possibly another optui process's), without
        attaching to it; None when there is no readable pidfile."""
        try:
            data = json.loads(self.pidfile.read_text())
            return Launch(**{**data, "argv": tuple(data["argv"])})
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def attach(self) -> Launch | None:
        launch = self.recorded()
        if launch is None:
            return None
        if not proc.pid_alive(launch.pid):
            self._clear_pidfile()
            return None
        self.launch = launch
        self._proc = None
        return launch

    def kill_now(self) -> None:
        """SIGKILL the group immediately (used when the demo exits)."""
        if self.launch is not None:
            proc.kill_group_now(self.launch.pid)
            self._clear_pidfile()


class ObservedController:
    """``control = "none"``: optui only watches the server; start/stop are refused."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.launch = None

    async def start(self, argv: list[str]) -> Launch:
        raise ControllerError(f"{self.name}: control = 'none' (optui only observes this server)")

    async def stop(self, timeout_s: float) -> proc.StopOutcome:
        raise ControllerError(f"{self.name}: control = 'none' (optui only observes this server)")

    def process_state(self) -> str:
        return "unknown"

    def returncode(self) -> int | None:
        return None

    def attach(self) -> Launch | None:
        return None
