"""Handles of processes on an SSH host (made by :class:`~optui.adapters.shell_ssh.SshShell`):
a detached server (:class:`RemoteSpawned`), a streamed command such as a benchmark
(:class:`RemotePiped`), and a log file followed with ``tail -F`` that resumes from its byte
offset after the link came back (:class:`RemoteFileFollower`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import asyncssh

from optui.adapters.aio import within
from optui.adapters.shell import CommandResult, ShellError
from optui.core.text.textstream import LineSplitter

CHUNK = 64 * 1024


class SshShell(Protocol):
    """What the handles here use of the host's :class:`~optui.adapters.shell_ssh.SshShell`
    (a Protocol, so this module does not import the one that makes its handles)."""

    host: str

    async def run(self, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult: ...

    async def start_stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                           merge_stderr: bool = True) -> tuple[asyncssh.SSHClientProcess, int]: ...

    async def file_size(self, path: str) -> int: ...

    async def read_file(self, path: str) -> str | None: ...

    async def pid_alive(self, pid: int) -> bool: ...


def exit_code(status: int | None, signal_name: str | None = None) -> int | None:
    """A remote exit as Python reports a local one: ``-N`` for death by signal N (from the
    SSH exit-signal, or a shell's ``128+N``), else the status."""
    if signal_name:
        with contextlib.suppress(KeyError):
            return -int(signal.Signals["SIG" + signal_name.removeprefix("SIG")])
        return -1
    if status is not None and 128 < status <= 128 + 64:
        return -(status - 128)
    return status


def parse_exit_status(text: str | None) -> int | None:
    """The text of a launch's ``LOG.exit`` (what its wrapper wrote when the server ended) →
    the server's exit status as :func:`exit_code` gives it; None when absent or not a number."""
    text = (text or "").strip()
    return exit_code(int(text)) if text.lstrip("-").isdigit() else None


async def reap(handle) -> int | None:
    """Wait (5 s at most) for ``handle`` (a remote process handle or None) to end; its exit status."""
    if handle is None:
        return None
    with contextlib.suppress(TimeoutError, ShellError):
        return await within(handle.wait(), 5.0)
    return handle.returncode


class RemoteSpawned:
    """A detached remote server (:meth:`SshShell.spawn_to_log`): ``pid`` (= its process
    group); ``returncode`` once :meth:`poll` saw it gone (from ``LOG.exit``; ``-9`` when the
    wrapper itself was killed and wrote nothing). ``on_exit(returncode)`` is called once
    when the exit is first seen (the command log's row of the start)."""

    def __init__(self, shell: SshShell, pid: int, status_path: str,
                 on_exit: Callable[[int | None], None] | None = None) -> None:
        self.shell = shell
        self.pid = pid
        self.status_path = status_path
        self.returncode: int | None = None
        self.on_exit = on_exit

    async def poll(self) -> int | None:
        """Check once whether it exited; the exit status or None. Raises ShellError when
        the host cannot be asked."""
        if self.returncode is None and not await self.shell.pid_alive(self.pid):
            status = parse_exit_status(await self.shell.read_file(self.status_path))
            self.returncode = -9 if status is None else status
            if self.on_exit is not None:
                report, self.on_exit = self.on_exit, None
                report(self.returncode)
        return self.returncode

    async def wait(self) -> int:
        """Poll until it exits (an unreachable host is waited for)."""
        while True:
            with contextlib.suppress(ShellError):
                if (returncode := await self.poll()) is not None:
                    return returncode
            await asyncio.sleep(0.3)


class RemotePiped:
    """A streamed remote command (:meth:`SshShell.spawn_piped`): ``pid`` (its remote
    process group), ``stdout``/``stderr`` readers (``await read(n)`` → bytes, ``b""`` at
    the end), ``returncode`` after :meth:`wait`; ``lost`` says why when the channel ended
    without an exit status (the connection died; the remote group then kills itself)."""

    def __init__(self, shell: SshShell, process: asyncssh.SSHClientProcess, pid: int) -> None:
        self.shell = shell
        self.process = process
        self.pid = pid
        self.stdout = _SafeReader(process.stdout)
        self.stderr = _SafeReader(process.stderr)
        self.returncode: int | None = None
        self.lost: str | None = None

    async def wait(self) -> int | None:
        """Wait for the end of the command; its exit status (None when ``lost``)."""
        try:
            await self.process.wait_closed()
        except (asyncssh.Error, OSError) as exc:
            self.lost = str(exc) or type(exc).__name__
        status, sig = self.process.exit_status, self.process.exit_signal
        if status is None and sig is None:
            self.lost = self.lost or f"connection to {self.shell.host} lost"
            return None
        self.returncode = exit_code(status if status != -1 else None, sig[0] if sig else None)
        return self.returncode

    def close(self) -> None:
        """Close the channel (the remote watcher then kills the group)."""
        self.process.close()


class _SafeReader:
    """An SSH stream reader whose ``read`` ends (``b""``) instead of raising when the
    channel dies."""

    def __init__(self, reader) -> None:
        self.reader = reader

    async def read(self, n: int) -> bytes:
        try:
            return await self.reader.read(n)
        except (asyncssh.Error, OSError):
            return b""


class RemoteFileFollower:
    """``tail -c +N -F PATH`` on the host, streamed: calls ``on_line`` per complete line.

    ``offset`` counts the bytes of the complete lines delivered (``None`` at the start: the
    end of the file now), so when the stream ends (the link dropped, tail died) it resumes
    from there after the reconnect without losing or repeating lines. A file found shorter
    than the offset was rotated/truncated: it is read from its start. tail's own notices
    ("has been replaced", "truncated") reset the count the same way.
    """

    def __init__(self, shell: SshShell, path: str, on_line: Callable[[str], None], *, offset: int | None = 0,
                 retry_s: float = 0.5) -> None:
        self.shell = shell
        self.path = path
        self.on_line = on_line
        self.offset = offset
        self.retry_s = retry_s
        self.rotations = 0
        self.restarts = 0
        self._splitter = LineSplitter()
        self._pending = 0  # bytes of the current unterminated line
        self._stopped = False
        self._process: asyncssh.SSHClientProcess | None = None

    def stop(self) -> None:
        self._stopped = True
        if self._process is not None:
            self._process.close()

    def flush(self) -> None:
        for line in self._splitter.close().lines:
            self.on_line(line)
        self._splitter = LineSplitter()

    async def drain(self) -> None:
        """Stop following and read what the file holds beyond the lines delivered (the
        writer exited: its last lines may still be in flight on the stream)."""
        self.stop()
        if self.offset is None:
            return
        done = await self.shell.run(["tail", "-c", f"+{self.offset + 1}", "--", self.path], timeout_s=10.0)
        if not done.ok:
            return
        self._splitter = LineSplitter()  # a partial line is in ``done`` whole
        data = done.stdout.encode()
        self.offset += len(data)
        for line in self._splitter.feed(data).lines:
            self.on_line(line)

    async def run(self) -> None:
        delay = self.retry_s
        while not self._stopped:
            try:
                delivered = await self._follow_once()
            except (ShellError, OSError):
                delivered = False
            if self._stopped:
                break
            self.restarts += 1
            delay = self.retry_s if delivered else min(10.0, delay * 2)
            await asyncio.sleep(delay)

    async def _follow_once(self) -> bool:
        size = await self.shell.file_size(self.path)
        if self.offset is None:
            self.offset = size
        elif size < self.offset:
            self.rotations += 1
            self.offset = 0
        self._splitter = LineSplitter()  # a partial line is read again, whole, from the offset
        process, _pgid = await self.shell.start_stream(["tail", "-c", f"+{self.offset + 1}", "-F", "--", self.path],
                                                        merge_stderr=False)
        self._process = process
        notices = asyncio.create_task(self._watch_notices(process))
        delivered = False
        try:
            while not self._stopped:
                try:
                    chunk = await process.stdout.read(CHUNK)
                except (asyncssh.Error, OSError):
                    break
                if not chunk or self._stopped:  # stopped: drain() reads the rest from the offset
                    break
                cut = chunk.rfind(b"\n")
                lines = self._splitter.feed(chunk).lines
                if cut >= 0:  # bytes up to the last newline are complete lines
                    self.offset += cut + 1 + self._pending
                    self._pending = len(chunk) - cut - 1
                else:
                    self._pending += len(chunk)
                for line in lines:
                    self.on_line(line)
                    delivered = True
        finally:
            notices.cancel()
            process.close()
            self._process = None
            self._pending = 0
        return delivered

    async def _watch_notices(self, process: asyncssh.SSHClientProcess) -> None:
        splitter = LineSplitter()
        with contextlib.suppress(asyncssh.Error, OSError):
            while chunk := await process.stderr.read(CHUNK):
                for line in splitter.feed(chunk).lines:
                    if "truncated" in line or "replaced" in line or "has appeared" in line:
                        self.rotations += 1
                        self.offset, self._pending = 0, 0
