"""Textual: when the terminal's input ends (EOF) the input thread spins (a busy loop).

A terminal that goes away without a SIGHUP (the app is not its session leader, a dropped SSH
connection whose pty is closed) leaves the app's stdin at end of input: ``select`` says it is
readable, ``os.read`` returns ``b""``, and ``LinuxDriver.run_input_thread`` goes round again,
for good. Run with plain Textual (no optui): ``python docs/upstream/repro_eof_busy_loop.py``.
It starts a minimal app on a pseudo-terminal (in its own session, so closing the terminal
sends no SIGHUP), closes the terminal, and measures the app's CPU time over 2 s
(``/proc``; Linux). Prints ``BUG: ...`` and exits 1 when the app spins, ``OK`` otherwise.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

APP = """
from textual.app import App
from textual.widgets import Static

class Repro(App):
    BINDINGS = [("q", "quit")]

    def compose(self):
        yield Static("ready")

Repro().run()
"""


def read_for(master: int, seconds: float, until: bytes | None = None) -> bytes:
    """What the app writes to the terminal within ``seconds`` (or until ``until`` shows)."""
    out, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline and not (until and until in out):
        if select.select([master], [], [], 0.05)[0]:
            try:
                out += os.read(master, 65536)
            except OSError:  # the app exited and closed the terminal
                break
    return out


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main() -> int:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", APP], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(os.environ, TERM="xterm-256color"), start_new_session=True)
    os.close(slave)
    try:
        if b"ready" not in read_for(master, 15, until=b"ready"):
            print("the app did not start")
            return 2
        os.close(master)  # the terminal is gone; no SIGHUP comes (not the app's controlling tty)
        time.sleep(0.5)
        if proc.poll() is not None:
            print(f"OK: the app exited at the end of its input (code {proc.returncode})")
            return 0
        before = cpu_seconds(proc.pid)
        time.sleep(2.0)
        used = cpu_seconds(proc.pid) - before
        if used > 0.2:  # an idle Textual app: ~0.005 s in 2 s
            print(f"BUG: at the end of its input the app used {used:.2f} s of CPU in 2 s (a busy loop)")
            return 1
        print(f"OK: the app idles at the end of its input ({used:.2f} s of CPU in 2 s)")
        return 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
