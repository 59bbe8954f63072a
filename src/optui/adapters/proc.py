"""Local processes in their own process group: spawn, signal the group, wait; what runs
(liveness, start times, parents, descendants, who listens on a port) from psutil.

Every child optui starts (servers, benchmarks, ``nvidia-smi``) gets ``stdin`` closed (a child
reading the TTY would steal the TUI's keys), a new session (so Ctrl+C in the TUI never
reaches it and the whole group — engine workers included — can be stopped), and
``PYTHONUNBUFFERED=1`` (Python children otherwise hold their log back when piped).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from optui.adapters.aio import within
from optui.adapters.private_files import open_private_append

if TYPE_CHECKING:
    import psutil

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# psutil is imported by the functions that use it (16-26 ms on a loaded 2-core machine: a
# restart's and a stop's cost, not the first frame's; tests/process/test_import_hygiene.py)


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: ours + ``PYTHONUNBUFFERED=1`` + ``extra``."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TEXTUAL", None)
    if extra:
        env.update(extra)
    return env


class DetachedProcess:
    """A server started by :func:`spawn_to_log`: ``pid`` (= its process group id) and
    ``returncode`` (None while it runs; negative: killed by that signal).

    Deliberately a plain :class:`subprocess.Popen`, not an asyncio subprocess: an asyncio
    transport that is still open when the interpreter exits is closed by the GC, and closing
    it SIGKILLs the child (Python >= 3.12 does this at every exit; 3.11 only when the
    transport happens to be collected). A server must outlive the optui process that started
    it (CLI, TUI, ``todo run``), so nothing of its lifetime may hang on such an object: a
    ``Popen`` never signals its child, and after optui exits the server is re-parented to
    init (which reaps it) and re-attached from the pidfile by the next optui process.
    ``returncode`` reaps the child when it has exited (``waitpid(WNOHANG)``), so no zombie
    stays while optui runs.
    """

    __slots__ = ("_popen", "pid", "on_exit")

    def __init__(self, popen: subprocess.Popen) -> None:
        self._popen = popen
        self.pid = popen.pid
        #: called once with the exit status when the exit is first seen (the command log)
        self.on_exit: Callable[[int], None] | None = None

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has exited (and been reaped), else None."""
        rc = self._popen.poll()
        if rc is not None and self.on_exit is not None:
            report, self.on_exit = self.on_exit, None
            report(rc)
        return rc

    async def wait(self, poll_s: float = 0.05) -> int:
        """Wait for the exit (polling, so no thread or child watcher is involved); the exit
        status."""
        while (rc := self.returncode) is None:
            await asyncio.sleep(poll_s)
        return rc

    def forget(self) -> None:
        """Stop tracking the process without touching it (it keeps running): the Popen is
        marked finished so neither the GC nor ``-X dev`` complains at exit."""
        self.on_exit = None  # it did not exit: nothing to report
        if self._popen.returncode is None:
            self._popen.returncode = 0  # not an exit status: nothing reads it after forget()


def spawn_detached_sync(
    argv: Sequence[str],
    log_path: Path,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> DetachedProcess:
    """Start ``argv`` (a list, never a shell line) in a new session and process group, stdin
    closed, stdout and stderr appended to ``log_path`` (mode 0600: a server may print its API
    key). The process does not depend on the caller's lifetime (see
    :class:`DetachedProcess`). Raises OSError (e.g. FileNotFoundError for an unknown
    program) with the program name in the message."""
    fd = open_private_append(log_path)  # 0600 in a 0700 folder
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            cwd=cwd,
            env=child_env(env),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise OSError(exc.errno, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return DetachedProcess(popen)


async def spawn_to_log(
    argv: Sequence[str],
    log_path: Path,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> DetachedProcess:
    """:func:`spawn_detached_sync` for async callers (a ``fork``+``exec`` takes well under a
    millisecond, so it runs on the loop)."""
    return spawn_detached_sync(argv, log_path, cwd=cwd, env=env)


async def spawn_piped(
    argv: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """Start ``argv`` in a new process group with stdout and stderr as pipes (read them in
    chunks, not lines: a tool may print a 1 MB line)."""
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=child_env(env),
            start_new_session=True,
            limit=1 << 20,
        )
    except OSError as exc:
        raise OSError(exc.errno, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc


def pid_alive(pid: int) -> bool:
    """True when a process with ``pid`` exists and is not a zombie (psutil; one we may not
    inspect counts as alive)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except (psutil.AccessDenied, ValueError):
        return pid > 0


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (the unit of ``/proc/PID/stat``
    field 22, which the SSH side reads on a remote host: pidfiles compare the two); None when
    it does not exist or cannot be read. psutil's ``create_time()`` is boot time + those ticks
    / ``SC_CLK_TCK``, turned back into ticks here. With the PID, this names one process for
    good: a PID the kernel hands to a new process later comes with another start time."""
    import psutil

    try:
        created = psutil.Process(pid).create_time()
    except (psutil.Error, ValueError):
        return None
    return round((created - psutil.boot_time()) * _CLOCK_TICKS)


def parent_pid(pid: int) -> int | None:
    """The parent PID of ``pid`` (psutil); None when it cannot be read (gone, another PID
    namespace)."""
    import psutil

    try:
        return psutil.Process(pid).ppid()
    except (psutil.Error, ValueError):
        return None


def group_pids(pgid: int) -> set[int]:
    """PIDs of the live (non-zombie) members of process group ``pgid`` (psutil's process list;
    the group from ``getpgid``, which psutil does not give)."""
    import psutil

    found: set[int] = set()
    for p in psutil.process_iter(["status"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(p.pid) == pgid:
                found.add(p.pid)
    return found


def group_stopped(pgid: int) -> bool:
    """True when the leader of process group ``pgid`` (the server's main process, whose PID
    is the group's) is stopped: state ``T`` (SIGSTOP, SIGTSTP; ``kill -STOP -PGID`` stops the
    whole group) or ``t`` (stopped by a tracer) in ``/proc/PGID/stat`` (proc(5)). One file
    read, cheap enough for every poll; a child stopped alone is not seen here (its server
    turns DEGRADED by its health probe instead). Such a server accepts connections (the
    kernel's backlog) and answers nothing until continued. False when there is no such
    process or no /proc."""
    try:
        with open(f"/proc/{int(pgid)}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


def group_alive(pgid: int) -> bool:
    """True when any process of group ``pgid`` is still alive (zombies excluded)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    return bool(group_pids(pgid))


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group is already gone."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
        raise


@dataclass(frozen=True, slots=True)
class StopOutcome:
    """How a stop went: ``how`` is "exited" (already gone), "term" (SIGTERM sufficed) or
    "kill" (SIGKILL after ``waited_s`` seconds); ``returncode`` when known."""

    how: str
    waited_s: float
    returncode: int | None


async def stop_group(
    pgid: int,
    *,
    timeout_s: float,
    proc: asyncio.subprocess.Process | DetachedProcess | None = None,
    poll_s: float = 0.05,
) -> StopOutcome:
    """SIGTERM the group, wait up to ``timeout_s`` for every member to exit, then SIGKILL
    the group and wait (bounded) again. Reaps ``proc`` when given. Whether the group is still
    alive is asked on a worker thread (:func:`group_alive` scans every process: not on the
    event loop at each poll)."""
    start = time.monotonic()
    if not signal_group(pgid, signal.SIGTERM):
        rc = await _reap(proc)
        return StopOutcome("exited", 0.0, rc)
    how = "term"
    deadline = start + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await within(proc.wait(), poll_s)
        else:
            await asyncio.sleep(poll_s)
        if not await asyncio.to_thread(group_alive, pgid):
            break
    else:
        how = "kill"
        signal_group(pgid, signal.SIGKILL)
        kill_deadline = time.monotonic() + 5.0
        while await asyncio.to_thread(group_alive, pgid) and time.monotonic() < kill_deadline:
            await asyncio.sleep(poll_s)
    rc = await _reap(proc)
    return StopOutcome(how, time.monotonic() - start, rc)


async def _reap(proc: asyncio.subprocess.Process | DetachedProcess | None) -> int | None:
    if proc is None:
        return None
    with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
        return await within(proc.wait(), 2.0)
    return proc.returncode


def kill_group_now(pgid: int) -> None:
    """SIGKILL a group without waiting (last resort at exit)."""
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def port_holders(port: int) -> dict[int, str]:
    """Local processes listening on TCP ``port`` (IPv4 or IPv6): ``{pid: command line}``
    (psutil's ``net_connections``). Empty when nothing listens or it cannot be read (another
    user's process is found only as root). Used to name who holds a port a restart needs."""
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return {}
    pids = {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
    return {pid: command_line(pid) for pid in sorted(pids)}


def descendants(pids: set[int]) -> set[int]:
    """Every live descendant of ``pids`` (children, their children...; psutil's
    ``children(recursive=True)``), ``pids`` not included. A child that left its parent's
    process group (``setsid``, as vLLM's EngineCore workers can) is still found here."""
    import psutil

    found: set[int] = set()
    for pid in pids:
        with contextlib.suppress(psutil.Error, ValueError):
            found |= {c.pid for c in psutil.Process(pid).children(recursive=True) if _not_zombie(c)}
    return found - set(pids)


def _not_zombie(p: psutil.Process) -> bool:
    import psutil

    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def command_line(pid: int) -> str:
    """The command line of ``pid`` as one line ("?" when it cannot be read)."""
    import psutil

    try:
        return " ".join(psutil.Process(pid).cmdline()).strip() or "?"
    except (psutil.Error, ValueError):
        return "?"
