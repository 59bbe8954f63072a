"""Following a server's log file as it grows (``tail -F`` semantics, plus the descriptor).

Resumes from a byte offset (re-attach after an optui restart) and reads in bounded chunks so
a huge burst never blocks the event loop for long. What happens to the file on the way:

- truncated in place (logrotate ``copytruncate``): reading starts again at 0;
- deleted while the server still writes to it (``rm server.log``): the open descriptor
  keeps being read, so no line the server writes is lost;
- rotated (renamed, a new file created at the path): the new file is followed, and the old
  one is still read through its descriptor until it has been quiet for
  :data:`DRAIN_S` — a server that keeps writing to its old descriptor loses nothing, one
  that reopens its log (``copytruncate``-free rotation with SIGHUP) is followed too.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from optui.core.text.textstream import LineSplitter

#: Bytes read per poll step: ~850 log lines, ~30 ms of classification, before the loop runs
#: again (256 KiB blocked the window ~150 ms a step during a 100 MB log flood).
READ_CHUNK = 64 * 1024
#: How long a rotated-away file must stay quiet before it is let go (s).
DRAIN_S = 30.0


class _Reader:
    """One open file being read: handle, position, line splitter, last growth (monotonic s)."""

    def __init__(self, handle: BinaryIO, offset: int) -> None:
        self.handle = handle
        self.offset = offset
        self.splitter = LineSplitter()
        self.grew_at = time.monotonic()
        self.truncations = 0

    def read(self) -> list[str]:
        """Lines completed by what was appended since the last read (restarts at 0 when
        the file shrank under the position: truncated in place)."""
        size = os.fstat(self.handle.fileno()).st_size
        if size < self.offset:
            self.offset, self.splitter = 0, LineSplitter()
            self.truncations += 1
        if size == self.offset:
            return []
        self.handle.seek(self.offset)
        data = self.handle.read(READ_CHUNK)
        self.offset += len(data)
        self.grew_at = time.monotonic()
        return self.splitter.feed(data).lines

    def close(self) -> list[str]:
        """Close the file; returns an unterminated last line, if any."""
        self.handle.close()
        return self.splitter.close().lines


class LogFollower:
    """Calls ``on_line(line)`` for every complete line appended to ``path`` (see module doc).

    ``offset`` is where reading starts (0 = whole file; use the file size to skip history);
    it advances as lines are read. ``rotations`` counts truncations and replacements seen.
    ``on_line`` exceptions propagate.
    """

    def __init__(self, path: Path, on_line: Callable[[str], None], *, offset: int = 0, interval_s: float = 0.2) -> None:
        self.path = Path(path)
        self.on_line = on_line
        self.interval_s = interval_s
        self.rotations = 0
        self._start_offset = offset
        self._inode: int | None = None
        self._current: _Reader | None = None
        self._draining: _Reader | None = None  # a rotated-away file still being written
        self._stopped = False

    @property
    def offset(self) -> int:
        """Bytes of the current file read so far."""
        return self._current.offset if self._current is not None else self._start_offset

    def stop(self) -> None:
        """Ask :meth:`run` to return at its next wake-up; open files are closed."""
        self._stopped = True
        for reader in (self._current, self._draining):
            if reader is not None:
                reader.close()
        self._current = self._draining = None

    def _check_path(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return  # deleted: keep reading the open descriptor
        if self._current is not None and st.st_ino == self._inode:
            return
        handle = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, closed in stop()
        if self._current is not None:  # replaced by a new file
            self.rotations += 1
            if self._draining is not None:
                self._emit(self._draining.close())
            self._draining = self._current
            offset = 0
        else:
            offset = self._start_offset
        self._current, self._inode = _Reader(handle, offset), os.fstat(handle.fileno()).st_ino

    def _emit(self, lines: list[str]) -> int:
        for line in lines:
            self.on_line(line)
        return len(lines)

    def poll(self) -> int:
        """Read what was appended since the last call; returns the number of lines."""
        if self._stopped:
            return 0
        self._check_path()
        count = 0
        if self._draining is not None:
            count += self._emit(self._draining.read())
            if time.monotonic() - self._draining.grew_at > DRAIN_S:
                count += self._emit(self._draining.close())
                self._draining = None
        if self._current is not None:
            before = self._current.truncations
            lines = self._current.read()
            self.rotations += self._current.truncations - before
            count += self._emit(lines)
        return count

    async def run(self) -> None:
        """Poll until :meth:`stop`; reads everything available before sleeping again."""
        try:
            while not self._stopped:
                try:
                    while self.poll() and not self._stopped:
                        await asyncio.sleep(0)
                except OSError:
                    pass  # an unreadable file is retried on the next tick
                await asyncio.sleep(self.interval_s)
        finally:
            self.stop()

    def flush(self) -> None:
        """Emit an unterminated last line (call once the writer has exited)."""
        self.poll()
        for reader in (self._draining, self._current):
            if reader is not None:
                self._emit(reader.splitter.close().lines)
                reader.splitter = LineSplitter()
