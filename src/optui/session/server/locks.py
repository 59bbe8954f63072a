"""Per-server restart locks shared by every optui process of a campaign.

The TUI and the CLI (or two TUIs) must not restart the same server at once: a restart holds
an exclusive ``flock`` on ``STATE_DIR/locks/SERVER.lock`` whose content names the holder.
The kernel drops the lock when the holder dies, so a crashed optui never leaves it stuck.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from optui.adapters.private_files import FILE_MODE, private_dir, tighten_file


class ServerLock:
    """A non-blocking exclusive lock for restarting one server."""

    def __init__(self, state_dir: Path, server: str) -> None:
        self.path = Path(state_dir) / "locks" / f"{server}.lock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; False when another process holds it."""
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        tighten_file(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # no holder line: held_by_other() reads "free"
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def held_by_other(self) -> bool:
        """True while another live process holds the lock (a restart of this server runs
        elsewhere). Reads the holder line only — probing never takes the lock, so it cannot
        make another process's :meth:`acquire` fail."""
        try:
            text = self.path.read_text().strip()
        except OSError:
            return False
        if not text.startswith("pid "):
            return False
        try:
            pid = int(text[4:])
        except ValueError:
            return False
        if pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False  # died holding it: the kernel already dropped the flock
        except PermissionError:
            pass
        return True

    def holder(self) -> str:
        """Who holds it, as written by the holder (e.g. "pid 1234")."""
        try:
            return self.path.read_text().strip() or "unknown process"
        except OSError:
            return "unknown process"
