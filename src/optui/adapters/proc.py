"""Local processes in their own process group: spawn, signal the group, wait.

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
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: ours + ``PYTHONUNBUFFERED=1`` + ``extra``."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TEXTUAL", None)
    if extra:
        env.update(extra)
    return env


async def spawn_to_log(
    argv: Sequence[str],
    log_path: Path,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """Start ``argv`` (a list, never a shell line) in a new process group with stdout and
    stderr appended to ``log_path``. Raises OSError (e.g. FileNotFoundError for an unknown
    program) with the program name in the message."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=cwd,
                env=child_env(env),
                start_new_session=True,
            )
        except OSError as exc:
            raise OSError(exc.errno, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc


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
    """True when a process with ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state != b"Z"
    except (OSError, IndexError):
        return True


def group_pids(pgid: int) -> set[int]:
    """PIDs of the live (non-zombie) members of process group ``pgid`` (from /proc)."""
    found: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != b"Z":
                found.add(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return found


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
    proc: asyncio.subprocess.Process | None = None,
    poll_s: float = 0.05,
) -> StopOutcome:
    """SIGTERM the group, wait up to ``timeout_s`` for every member to exit, then SIGKILL
    the group and wait (bounded) again. Reaps ``proc`` when given."""
    start = time.monotonic()
    if not signal_group(pgid, signal.SIGTERM):
        rc = await _reap(proc)
        return StopOutcome("exited", 0.0, rc)
    how = "term"
    deadline = start + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), poll_s)
        else:
            await asyncio.sleep(poll_s)
        if not group_alive(pgid):
            break
    else:
        how = "kill"
        signal_group(pgid, signal.SIGKILL)
        kill_deadline = time.monotonic() + 5.0
        while group_alive(pgid) and time.monotonic() < kill_deadline:
            await asyncio.sleep(poll_s)
    rc = await _reap(proc)
    return StopOutcome(how, time.monotonic() - start, rc)


async def _reap(proc: asyncio.subprocess.Process | None) -> int | None:
    if proc is None:
        return None
    with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
        return await asyncio.wait_for(proc.wait(), 2.0)
    return proc.returncode


def kill_group_now(pgid: int) -> None:
    """SIGKILL a group without waiting (last resort at exit)."""
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)
