"""Textual: every SIGCONT that follows no SIGTSTP starts another input thread (and writer).

``LinuxDriver._sigcont_application`` answers every ``SIGCONT`` with
``resume_application_mode()``, which starts application mode again: a new input thread and a
new writer thread, beside the ones that are running. A SIGCONT comes without a suspend when a
terminal hangs up (the kernel sends SIGHUP and SIGCONT to the foreground process group), from
``kill -CONT`` or from a job-control shell. The extra input threads read the same terminal as
the first (a key goes to whichever reads first, each with its own escape-sequence parser) and
each polls 10 times a second; a quit sets ``exit_event``, joins only the newest and clears the
event again, so an older thread that did not look in that window keeps running.

Run with plain Textual (no optui): ``python docs/upstream/repro_stray_sigcont.py``. It starts a
minimal app on a pseudo-terminal, counts its threads (``/proc``; Linux), sends three SIGCONTs
and counts again. Prints ``BUG: ...`` and exits 1 when threads were added, ``OK`` otherwise.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import threading
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


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def main() -> int:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", APP], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(os.environ, TERM="xterm-256color"), start_new_session=True)
    os.close(slave)
    drain = None
    try:
        if b"ready" not in read_for(master, 15, until=b"ready"):
            print("the app did not start")
            return 2
        read_for(master, 0.5)
        before = threads(proc.pid)
        for _ in range(3):
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.05)
        read_for(master, 0.5)
        after = threads(proc.pid)
        drain = threading.Thread(target=read_for, args=(master, 15), daemon=True)  # keep the pty from filling
        drain.start()
        os.write(master, b"q")
        try:
            proc.wait(10)
            quit_note = f"it still quit on q (code {proc.returncode})"
        except subprocess.TimeoutExpired:
            quit_note = "and it did not quit on q within 10 s"
        if after > before:
            print(f"BUG: three SIGCONTs without a SIGTSTP took the app from {before} to {after} threads; {quit_note}")
            return 1
        print(f"OK: {before} threads before and after three SIGCONTs; {quit_note}")
        return 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if drain is not None:
            drain.join()
        os.close(master)


if __name__ == "__main__":
    sys.exit(main())
