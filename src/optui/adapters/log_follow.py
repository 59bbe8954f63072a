"""Following a server's log file as it grows (``tail -F`` semantics).

Resumes from a byte offset (re-attach after an optui restart), survives the file being
truncated, rotated (new inode) or deleted and re-created, and reads in bounded chunks so a
huge burst never blocks the event loop for long.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from optui.core.textstream import LineSplitter

READ_CHUNK = 256 * 1024


class LogFollower:
    """Calls ``on_line(line)`` for every complete line appended to ``path``.

    ``offset`` is where reading starts (0 = whole file; use the file size to skip history).
    ``offset`` advances as lines are read; ``on_line`` exceptions propagate.
    """

    def __init__(self, path: Path, on_line: Callable[[str], None], *, offset: int = 0, interval_s: float = 0.2) -> None:
        self.path = Path(path)
        self.on_line = on_line
        self.offset = offset
        self.interval_s = interval_s
        self.rotations = 0
        self._inode: int | None = None
        self._splitter = LineSplitter()
        self._stopped = False

    def stop(self) -> None:
        """Ask :meth:`run` to return at its next wake-up."""
        self._stopped = True

    def poll(self) -> int:
        """Read what was appended since the last call; returns the number of lines."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0
        if self._inode is not None and st.st_ino != self._inode:
            self.rotations += 1
            self.offset = 0
            self._splitter = LineSplitter()
        elif st.st_size < self.offset:  # truncated in place
            self.rotations += 1
            self.offset = 0
            self._splitter = LineSplitter()
        self._inode = st.st_ino
        if st.st_size == self.offset:
            return 0
        count = 0
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(READ_CHUNK)
        self.offset += len(data)
        for line in self._splitter.feed(data).lines:
            self.on_line(line)
            count += 1
        return count

    async def run(self) -> None:
        """Poll until :meth:`stop`; reads everything available before sleeping again."""
        while not self._stopped:
            try:
                while self.poll() and not self._stopped:
                    await asyncio.sleep(0)
            except OSError:
                pass  # a vanished/unreadable file is retried on the next tick
            await asyncio.sleep(self.interval_s)

    def flush(self) -> None:
        """Emit an unterminated last line (call once the writer has exited)."""
        self.poll()
        for line in self._splitter.close().lines:
            self.on_line(line)
