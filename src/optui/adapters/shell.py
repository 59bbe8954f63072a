"""Where commands run: the :class:`Shell` interface and its local implementation.

Controllers (process, script, systemd), the flag catalogue and benchmark commands never
call ``subprocess`` or touch files directly; they go through a Shell, so the same code
drives this machine (:class:`LocalShell`) and an SSH host
(:class:`optui.adapters.shell_ssh.SshShell`, chosen by :func:`optui.session.ssh_hosts.shell_for`). Everything is an
argv list: the SSH shell joins it with ``shlex.join`` at the SSH boundary and nowhere else
(never ``shell=True`` locally).

:class:`LocalShell` runs on this machine; ``env`` is merged into every command's
environment (tests put fake ``systemctl``/``journalctl`` scripts first on ``PATH``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from optui.adapters import proc
from optui.adapters.aio import within
from optui.adapters.log_follow import LogFollower
from optui.core.text.textstream import iter_lines

#: How many earlier server logs a start keeps beside the current one (``NAME.log.1`` newest)
#: when it does not know which experiment the current one belongs to.
KEPT_LOGS = 5
#: Logs kept one per experiment (``NAME.log.exp-0007``): at most this many, the newest ...
KEPT_EXPERIMENT_LOGS = 50
#: ... and at most this many bytes together (the newest one is always kept).
KEPT_EXPERIMENT_LOG_BYTES = 1 << 30


class ShellError(Exception):
    """A command that could not run (program missing, timeout) or failed when checked;
    the message names the command and ends with its stderr."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A finished command: ``returncode``, decoded ``stdout``/``stderr``, ``duration_s``."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        """Exit status 0."""
        return self.returncode == 0

    def check(self) -> CommandResult:
        """Self when ok; else ShellError with the command and the end of its stderr."""
        if self.ok:
            return self
        tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-3:]
        raise ShellError(f"`{' '.join(self.argv)}` exited {self.returncode}" + (": " + " / ".join(tail) if tail else ""))


class Spawned(Protocol):
    """A launched long-running process: its PID (= process group id) and exit status."""

    # read-only members (properties): an implementation may compute them (DetachedProcess
    # reaps its child when asked for the returncode)
    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int:
        """Wait for the exit; the exit status."""
        ...


class LogSource(Protocol):
    """A follower calling ``on_line`` for each new log line (file tail, journal...)."""

    async def run(self) -> None:
        """Follow until :meth:`stop`."""
        ...

    def stop(self) -> None:
        """Ask :meth:`run` to return."""
        ...

    def flush(self) -> None:
        """Deliver whatever is buffered (the writer exited)."""
        ...


class Piped(Protocol):
    """A command started with :meth:`Shell.spawn_piped`: ``pid`` (= its process group),
    ``stdout``/``stderr`` readers (``await read(n)`` → bytes, ``b""`` at the end) and the
    exit status once :meth:`wait` returned."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdout(self) -> object: ...

    @property
    def stderr(self) -> object: ...

    async def wait(self) -> int | None:
        """Wait for the exit; the exit status."""
        ...


class Shell(Protocol):
    """Commands and files on one host (see module doc). ``host`` is its config name;
    ``local`` is True for this machine (paths and PIDs are this machine's)."""

    host: str
    local: bool

    def default_log_path(self, name: str, state_dir: Path) -> str:
        """Where server ``name``'s log goes when the config names none (on that host)."""
        ...

    async def run(self, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult:
        """Run a short command to completion (stdin closed). Raises ShellError when it
        cannot start or exceeds ``timeout_s`` (its process group is killed)."""
        ...

    async def spawn_to_log(self, argv: Sequence[str], log_path: str, *, cwd: str | None = None,
                           env: Mapping[str, str] | None = None) -> Spawned:
        """Start a long-running process in its own process group, stdin closed,
        ``PYTHONUNBUFFERED=1``, stdout+stderr appended to ``log_path``. Raises OSError."""
        ...

    async def spawn_piped(self, argv: Sequence[str], *, cwd: str | None = None,
                          env: Mapping[str, str] | None = None) -> Piped:
        """Start ``argv`` in its own process group, stdin closed, stdout and stderr
        streamed back separately (a benchmark). Raises OSError when it cannot start."""
        ...

    def stream_lines(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncGenerator[str, None]:
        """Run ``argv`` and yield its output lines (stdout and stderr) until it exits or
        the iterator is closed (then its process group is killed). Raises OSError when it
        cannot start."""
        ...

    def follow_file(self, path: str, on_line: Callable[[str], None], *, offset: int | None = 0) -> LogSource:
        """``tail -F`` of ``path`` from byte ``offset`` (None: from its end now)."""
        ...

    async def file_size(self, path: str) -> int:
        """Size of ``path`` in bytes (0 when missing)."""
        ...

    async def read_file(self, path: str) -> str | None:
        """Text of ``path`` (``~/`` is the host's home), None when it does not exist.
        Raises ShellError otherwise."""
        ...

    async def write_file(self, path: str, text: str) -> None:
        """Write ``path`` (``~/`` is the host's home) atomically, parents created. Raises
        ShellError (e.g. permission)."""
        ...

    async def rotate_file(self, path: str, keep_as: str | None = None) -> None:
        """Put a non-empty ``path`` aside before a start writes it anew. ``keep_as`` (the
        experiment whose launch wrote it, e.g. ``exp-0007``): kept as ``path.exp-0007``, one
        per experiment (an earlier one of the same experiment is replaced), the newest
        :data:`KEPT_EXPERIMENT_LOGS` and :data:`KEPT_EXPERIMENT_LOG_BYTES` of them (by
        modification time); else ``path.1``, the earlier ones as ``.2`` ... ``.5``
        (:data:`KEPT_LOGS`). Either way a failed start's log survives the rollback after it."""
        ...

    async def pid_alive(self, pid: int) -> bool:
        """True when ``pid`` exists and is not a zombie."""
        ...

    async def process_start(self, pid: int) -> str | None:
        """An opaque identity of when process ``pid`` started (local: clock ticks since boot;
        SSH: ``ps -o lstart``), None when no such process. A pidfile's PID is the same
        process only while this matches what was recorded at launch (PIDs are reused)."""
        ...

    async def group_pids(self, pgid: int) -> set[int]:
        """PIDs of the live members of process group ``pgid``."""
        ...

    async def group_stopped(self, pgid: int) -> bool:
        """True when the leader of process group ``pgid`` is stopped (SIGSTOP: state
        ``T``/``t``, :func:`optui.adapters.proc.group_stopped`; SSH: ``ps -o stat=``)."""
        ...

    async def stop_group(self, pgid: int, *, timeout_s: float, handle: Spawned | Piped | None = None) -> proc.StopOutcome:
        """SIGTERM the group, wait ``timeout_s``, SIGKILL; reap ``handle``."""
        ...

    def kill_group_now(self, pgid: int) -> None:
        """SIGKILL the group without waiting (last resort at exit)."""
        ...


class LocalShell:
    """:class:`Shell` on this machine."""

    local = True

    def __init__(self, host: str = "local", env: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.env = dict(env or {})
        #: ``on_command(host, argv, returncode, duration_s, what, running=False)``: the command
        #: log; for a ``running`` command (a server start) it returns ``ended(returncode)``
        self.on_command: Callable[..., Callable[[int | None], None] | None] | None = None

    def _log(self, argv: Sequence[str], rc: int | None, duration_s: float, what: str) -> None:
        if self.on_command is not None:
            self.on_command(self.host, list(argv), rc, duration_s, what)

    def _log_start(self, argv: Sequence[str], what: str) -> Callable[[int | None], None] | None:
        if self.on_command is None:
            return None
        return self.on_command(self.host, list(argv), None, 0.0, what, running=True)

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return {**self.env, **(env or {})}

    async def run(self, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult:
        argv = [str(a) for a in argv]
        t0 = time.monotonic()
        try:
            child = await proc.spawn_piped(argv, cwd=cwd, env=self._env(env))
        except OSError as exc:
            raise ShellError(str(exc)) from exc
        try:
            out, err = await within(child.communicate(), timeout_s)
        except TimeoutError:
            proc.kill_group_now(child.pid)
            with contextlib.suppress(Exception):
                await within(child.wait(), 5.0)
            raise ShellError(f"`{' '.join(argv)}` did not finish in {timeout_s:.0f} s") from None
        except asyncio.CancelledError:
            proc.kill_group_now(child.pid)
            raise
        result = CommandResult(tuple(argv), child.returncode or 0, out.decode("utf-8", "replace"),
                               err.decode("utf-8", "replace"), time.monotonic() - t0)
        self._log(argv, result.returncode, result.duration_s, "run")
        return result

    def default_log_path(self, name: str, state_dir: Path) -> str:
        return str(state_dir / "logs" / f"{name}.log")

    async def spawn_to_log(self, argv: Sequence[str], log_path: str, *, cwd: str | None = None,
                           env: Mapping[str, str] | None = None) -> Spawned:
        spawned = await proc.spawn_to_log(list(argv), Path(log_path), cwd=cwd, env=self._env(env))
        spawned.on_exit = self._log_start(argv, "server start")  # puts its exit code on the record
        return spawned

    async def spawn_piped(self, argv: Sequence[str], *, cwd: str | None = None,
                          env: Mapping[str, str] | None = None) -> Piped:
        return await proc.spawn_piped([str(a) for a in argv], cwd=cwd, env=self._env(env))

    async def stream_lines(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncGenerator[str, None]:
        argv = [str(a) for a in argv]
        try:  # stderr joins stdout: a complaint of the tool (permissions...) shows up in order
            child = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                env=proc.child_env(self._env(env)), start_new_session=True)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
        try:
            assert child.stdout is not None
            stdout = child.stdout
            async for line in iter_lines(lambda: stdout.read(64 * 1024)):
                yield line
        finally:
            proc.kill_group_now(child.pid)
            with contextlib.suppress(Exception):
                await within(child.wait(), 2.0)

    def follow_file(self, path: str, on_line: Callable[[str], None], *, offset: int | None = 0) -> LogSource:
        if offset is None:
            try:
                offset = os.path.getsize(path)
            except OSError:
                offset = 0
        return LogFollower(Path(path), on_line, offset=offset)

    async def file_size(self, path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0

    async def read_file(self, path: str) -> str | None:
        try:
            return Path(path).expanduser().read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ShellError(f"cannot read {path}: {exc.strerror or exc}") from exc

    async def write_file(self, path: str, text: str) -> None:
        target = Path(path).expanduser()
        tmp = target.with_name(f".{target.name}.optui-tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text, encoding="utf-8")
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise ShellError(f"cannot write {path}: {exc.strerror or exc}") from exc

    async def rotate_file(self, path: str, keep_as: str | None = None) -> None:
        with contextlib.suppress(OSError):
            if not os.path.getsize(path):
                return
            if keep_as:
                os.replace(path, f"{path}.{keep_as}")
                _prune_experiment_logs(path)
                return
            for n in range(KEPT_LOGS - 1, 0, -1):  # .4 -> .5 ... .1 -> .2: the oldest falls off
                with contextlib.suppress(FileNotFoundError):
                    os.replace(f"{path}.{n}", f"{path}.{n + 1}")
            os.replace(path, path + ".1")

    async def pid_alive(self, pid: int) -> bool:
        return proc.pid_alive(pid)

    async def process_start(self, pid: int) -> str | None:
        ticks = proc.process_start_ticks(pid)
        return None if ticks is None else str(ticks)

    async def group_pids(self, pgid: int) -> set[int]:
        return await asyncio.to_thread(proc.group_pids, pgid)  # a scan of every process: not on the loop

    async def group_stopped(self, pgid: int) -> bool:
        return proc.group_stopped(pgid)

    async def stop_group(self, pgid: int, *, timeout_s: float, handle: Spawned | Piped | None = None) -> proc.StopOutcome:
        return await proc.stop_group(pgid, timeout_s=timeout_s, proc=handle)  # type: ignore[arg-type]

    def kill_group_now(self, pgid: int) -> None:
        proc.kill_group_now(pgid)


def _prune_experiment_logs(path: str) -> None:
    """Delete the oldest ``path.exp-*`` beyond :data:`KEPT_EXPERIMENT_LOGS` files or
    :data:`KEPT_EXPERIMENT_LOG_BYTES` bytes (the newest is kept whatever its size)."""
    folder, base = os.path.split(path)
    kept: list[tuple[float, int, str]] = []
    with os.scandir(folder or ".") as entries:
        for entry in entries:
            if entry.name.startswith(base + ".exp-") and entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                kept.append((info.st_mtime, info.st_size, entry.path))
    kept.sort(reverse=True)  # newest first
    total = 0
    for index, (_mtime, size, name) in enumerate(kept):
        total += size
        if index and (index >= KEPT_EXPERIMENT_LOGS or total > KEPT_EXPERIMENT_LOG_BYTES):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
