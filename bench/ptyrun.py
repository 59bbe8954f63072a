"""Run a program in a real pseudo-terminal and account for its CPU and memory (stdlib only).

Shared by the benchmark scripts of this folder (``idle_cpu.py``, ``memory_soak.py``,
``startup.py``, ``rack_cpu.py``, ``keypress_latency.py``); it must import nothing outside
the standard library, so the scripts run on a machine without network where only the
wheels we carry are installed.

- :class:`PtyProcess`: ``argv`` in its own session with the pty as controlling terminal of
  the given size (``TERM=xterm-256color``); a reader thread reads the terminal output
  continuously (so the program never blocks on a full pty) and can look for a marker.
- :func:`tree_pids`, :func:`tree_cpu_s`, :func:`rss_mib`: the process tree of a pid and its
  CPU seconds (utime + stime, plus the cutime + cstime of reaped children) and resident
  memory, from ``/proc``.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / 2**20
_ESCAPES = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|P[^\x1b]*\x1b\\|[@-Z\\-_])")


def parse_size(text: str) -> tuple[int, int]:
    """``"120x40"`` → ``(120, 40)`` (columns, rows)."""
    cols, _, rows = text.lower().partition("x")
    return int(cols), int(rows)


def strip_escapes(data: bytes) -> bytes:
    """Terminal output without its escape sequences (CSI, OSC, DCS, two-byte escapes)."""
    return _ESCAPES.sub(b"", data)


class PtyProcess:
    """``argv`` running in a new session whose controlling terminal is a fresh pty of
    ``size`` (columns, rows). Output is read by a daemon thread: counted in :attr:`received`
    (bytes), and with ``keep`` the escape-stripped text is kept for :meth:`wait_for`.
    ``on_output(timestamp, chunk)`` is called from the reader thread for every read."""

    def __init__(self, argv: list[str], size: tuple[int, int] = (120, 40), *, env: dict | None = None,
                 cwd: str | None = None, keep: bool = False, on_output=None) -> None:
        self.argv = list(argv)
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        full_env = dict(os.environ if env is None else env)
        full_env.setdefault("TERM", "xterm-256color")
        full_env["COLUMNS"], full_env["LINES"] = str(size[0]), str(size[1])

        def controlling_tty() -> None:  # runs after setsid (start_new_session)
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=full_env, cwd=cwd,
                                     start_new_session=True, preexec_fn=controlling_tty, close_fds=True)
        os.close(slave)
        self.pid = self.proc.pid
        self.fd = master
        self.received = 0
        self._keep = keep
        self._text = bytearray()
        self._cond = threading.Condition()
        self._on_output = on_output
        self._eof = False
        self._reader = threading.Thread(target=self._read, name=f"pty-{self.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the last process holding the slave closed it
                chunk = b""
            now = time.monotonic()
            if not chunk:
                with self._cond:
                    self._eof = True
                    self._cond.notify_all()
                return
            if self._on_output is not None:
                self._on_output(now, chunk)
            with self._cond:
                self.received += len(chunk)
                if self._keep:
                    self._text += strip_escapes(chunk)
                self._cond.notify_all()

    def wait_for(self, marker: bytes, timeout: float) -> float | None:
        """Seconds from spawn until ``marker`` appeared in the (escape-stripped) output,
        or None after ``timeout`` s / at end of output. Needs ``keep=True``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while marker not in self._text:
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return None
                self._cond.wait(min(left, 0.05))
            return time.monotonic() - self.started

    def text(self) -> bytes:
        """Everything kept so far (escape-stripped)."""
        with self._cond:
            return bytes(self._text)

    def send(self, data: bytes) -> None:
        """Type ``data`` into the terminal."""
        os.write(self.fd, data)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, quit_keys: bytes | None = b"q", grace: float = 5.0) -> int | None:
        """Quit: type ``quit_keys``, then SIGTERM to the process group, then SIGKILL; reap.
        Returns the exit status (None when it had to be killed)."""
        steps = ([(quit_keys, None)] if quit_keys else []) + [(None, signal.SIGTERM), (None, signal.SIGKILL)]
        code = None
        for keys, sig in steps:
            if self.proc.poll() is not None:
                break
            try:
                if keys:
                    self.send(keys)
                else:
                    os.killpg(self.pid, sig)
            except (OSError, ProcessLookupError):
                pass
            try:
                code = self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                continue
        try:  # whatever of its group is left (a demo server, a benchmark)
            os.killpg(self.pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
        self.proc.wait()
        self._reader.join(2)
        try:
            os.close(self.fd)
        except OSError:
            pass
        return code


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree_pids(root: int) -> list[int]:
    """``root`` and all its live descendants (by parent pid, from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def cpu_s(pid: int, *, reaped_children: bool = True) -> float:
    """CPU seconds of one process: utime + stime (+ cutime + cstime of children it has
    reaped, so short-lived children are not lost); 0.0 when it is gone."""
    fields = _stat(pid)
    if not fields:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds (utime + stime) of each live thread of ``pid``, summed by thread name
    (``/proc/PID/task/TID/comm``: optui names its threads); {} when it is gone. A thread that
    ended is not counted."""
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            task = Path(f"/proc/{pid}/task/{tid}")
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root``'s whole live tree (each including its reaped children)."""
    return sum(cpu_s(pid) for pid in tree_pids(root))


def rss_mib(pid: int) -> float:
    """Resident memory of one process in MiB (0.0 when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_MIB
    except (OSError, IndexError):
        return 0.0


def load_average() -> str:
    """The 1/5/15-min load averages, e.g. ``"0.91 1.02 0.95"``."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
