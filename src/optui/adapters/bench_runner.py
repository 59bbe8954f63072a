"""Running an external benchmark command and streaming its output.

stdout and stderr are read in 64 KiB chunks (a tool may print a 1 MB line or invalid
UTF-8) and split by :class:`~optui.core.text.textstream.LineSplitter`: ``\\r`` progress bars come
out as one updating progress line, ANSI is stripped. The command runs in its own process
group, so an abort or a stall kills the tool *and* whatever it spawned.

Where it runs is its :class:`~optui.adapters.shell.Shell`: this machine, or an SSH host
(the output streams back over the connection, the remote group is killed by a separate
``kill`` command; a dropped link ends the run as "aborted" and the remote group kills
itself when its channel closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from optui.adapters.aio import within
from optui.adapters.shell import LocalShell, Shell, ShellError
from optui.core.text.textstream import LineSplitter

CHUNK = 64 * 1024


class StallWatch:
    """The stall rule of every benchmark, external client or built-in generator.

    :meth:`poke` on every sign of progress (a line printed, a token streamed); a run is
    stalled when there was none for ``stall_s`` seconds *and* ``server_healthy()`` is False,
    or for ``silent_s`` seconds whatever the server says (None: never). ``what`` names the
    progress in the reason ("output", "token streamed").
    """

    def __init__(self, stall_s: float, silent_s: float | None, server_healthy: Callable[[], bool],
                 what: str = "output") -> None:
        self.stall_s = stall_s
        self.silent_s = silent_s
        self.server_healthy = server_healthy
        self.what = what
        self.last = time.monotonic()

    def poke(self) -> None:
        """Progress now."""
        self.last = time.monotonic()

    def verdict(self) -> str | None:
        """Why the run is stalled now, or None."""
        quiet = time.monotonic() - self.last
        if quiet >= self.stall_s and not self.server_healthy():
            return f"no {self.what} for {quiet:.0f}s while the server is not healthy"
        if self.silent_s and quiet >= self.silent_s:
            return f"no {self.what} for {quiet:.0f}s although the server is healthy: the client seems stuck"
        return None

    async def wait_stalled(self) -> str:
        """Check a few times per limit until the run is stalled; return the reason."""
        limits = [self.stall_s] + ([self.silent_s] if self.silent_s else [])
        while True:
            await asyncio.sleep(min(1.0, *(limit / 4 for limit in limits)))
            if reason := self.verdict():
                return reason


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """How a command ended: ``status`` "exited", "aborted" or "stalled"; ``returncode``;
    ``duration_s``; ``reason`` for aborted/stalled runs."""

    status: str
    returncode: int | None
    duration_s: float
    reason: str | None = None


class CommandRun:
    """One benchmark command. Call :meth:`run` once; :meth:`abort` from anywhere.

    ``on_line(stream, line)`` gets every complete line ("stdout"/"stderr"), or (give one of
    the two) ``on_lines(stream, lines)`` each read's complete lines at once (a list, in
    order, never empty: a 20k lines/s flood is ~100 calls/s, not 20k);
    ``on_progress(line)`` the current carriage-return line. The stall watchdog
    (:class:`StallWatch`) fires when nothing was printed for ``stall_s`` seconds *and*
    ``server_healthy()`` is False, or for ``silent_s`` seconds whatever the server says (a
    client that hangs on its own, e.g. vllm#27886; None: never). ``shell``: where it runs
    (default: this machine).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        on_line: Callable[[str, str], None] | None = None,
        on_lines: Callable[[str, list[str]], None] | None = None,
        on_progress: Callable[[str], None] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stall_s: float = 120.0,
        silent_s: float | None = None,
        server_healthy: Callable[[], bool] = lambda: True,
        kill_timeout_s: float = 3.0,
        shell: Shell | None = None,
    ) -> None:
        self.argv = list(argv)
        self.shell: Shell = shell or LocalShell()
        if (on_line is None) == (on_lines is None):
            raise ValueError("give on_line or on_lines")
        self.on_line = on_line
        self.on_lines = on_lines
        self.on_progress = on_progress
        self.cwd = cwd
        self.env = env
        self.watch = StallWatch(stall_s, silent_s, server_healthy)
        self.kill_timeout_s = kill_timeout_s
        self.pid: int | None = None
        self._abort_reason: str | None = None
        self._stall_reason: str | None = None
        self._stop = asyncio.Event()

    def abort(self, reason: str = "aborted by operator") -> None:
        """Kill the command's process group (the run ends with status "aborted")."""
        self._abort_reason = reason
        self._stop.set()

    async def run(self) -> CommandOutcome:
        """Start, stream, wait. Raises OSError when the program cannot be started."""
        start = time.monotonic()
        shell = self.shell
        child = await shell.spawn_piped(self.argv, cwd=self.cwd, env=self.env)
        self.pid = child.pid
        readers = [
            asyncio.create_task(self._read(child.stdout, "stdout")),
            asyncio.create_task(self._read(child.stderr, "stderr")),
        ]
        watchdog = asyncio.create_task(self._watchdog())
        waiter = asyncio.create_task(child.wait())
        stopper = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            lost = getattr(child, "lost", None)
            if lost:
                self._abort_reason = self._abort_reason or f"{lost} (the remote command is stopped with its channel)"
            elif not waiter.done():
                await shell.stop_group(child.pid, timeout_s=self.kill_timeout_s, handle=child)
            elif await shell.group_pids(child.pid):
                # the leader exited; make sure nothing it spawned lingers
                await shell.stop_group(child.pid, timeout_s=self.kill_timeout_s)
            with contextlib.suppress(asyncio.TimeoutError):
                await within(asyncio.gather(*readers), 5.0)
        except ShellError as exc:  # the host cannot be asked any more (link down)
            self._abort_reason = self._abort_reason or f"cannot stop the command: {exc}"
        except asyncio.CancelledError:
            shell.kill_group_now(child.pid)
            raise
        finally:
            for task in (*readers, watchdog, stopper, waiter):
                task.cancel()
            close = getattr(child, "close", None)
            if close is not None:
                close()  # a remote channel: closing it also stops whatever is left of the group
        duration = time.monotonic() - start
        if self._stall_reason:
            return CommandOutcome("stalled", child.returncode, duration, self._stall_reason)
        if self._abort_reason:
            return CommandOutcome("aborted", child.returncode, duration, self._abort_reason)
        return CommandOutcome("exited", child.returncode, duration)

    async def _read(self, stream, name: str) -> None:
        if stream is None:
            return
        splitter = LineSplitter()
        while True:
            data = await stream.read(CHUNK)
            if not data:
                break
            self.watch.poke()
            self._emit(name, splitter.feed(data), splitter.pending_redraw())
            await asyncio.sleep(0)  # let the UI breathe during floods
        self._emit(name, splitter.close(), None)

    def _emit(self, name: str, chunk, redraw: str | None) -> None:
        if self.on_lines is not None:
            if chunk.lines:
                self.on_lines(name, chunk.lines)
        elif self.on_line is not None:
            for line in chunk.lines:
                self.on_line(name, line)
        progress = redraw if redraw is not None else chunk.progress
        if progress is not None and self.on_progress is not None:
            self.on_progress(progress)

    async def _watchdog(self) -> None:
        reason = await self.watch.wait_stalled()
        if not self._stop.is_set():  # an abort that came first keeps its own reason
            self._stall_reason = reason
            self._stop.set()
