"""Textual: a full ``Log`` (``max_lines`` reached) stops repainting: new lines do not show.

``Log.write_lines`` appends, prunes the oldest lines, then refreshes the appended lines by the
index they had *before* the pruning (``refresh_lines(start_line, len(new_lines))`` with
``start_line = len(self._lines)`` taken before ``_prune_max_lines``). Once the log is full,
that index is past its end: nothing visible is repainted, and a log that fits its view (no
scrolling to trigger a repaint) shows the same lines while new ones arrive.

Run with plain Textual (no optui): ``python docs/upstream/repro_log_write_lines_pruning.py``.
It starts an app with a 5-line ``Log(max_lines=5)`` holding "line 1" to "line 5" on a
pseudo-terminal, presses ``a`` (which writes "line 6") and checks that "line 6" reaches the
terminal within 1.5 s. Prints ``BUG: ...`` and exits 1 when it does not, ``OK`` otherwise.
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
from textual.widgets import Log

class Repro(App):
    CSS = "Log { height: 5; }"
    BINDINGS = [("a", "add", "Add a line"), ("q", "quit")]
    count = 5

    def compose(self):
        yield Log(max_lines=5)

    def on_mount(self):
        self.query_one(Log).write_lines([f"line {n}" for n in range(1, 6)])

    def action_add(self):
        self.count += 1
        self.query_one(Log).write_line(f"line {self.count}")

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


def main() -> int:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", APP], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(os.environ, TERM="xterm-256color"), start_new_session=True)
    os.close(slave)
    try:
        if b"line 5" not in read_for(master, 15, until=b"line 5"):
            print("the app did not start")
            return 2
        read_for(master, 0.5)
        os.write(master, b"a")
        if b"line 6" not in read_for(master, 1.5, until=b"line 6"):
            print("BUG: the full Log was given 'line 6' and did not repaint: the terminal never showed it")
            return 1
        print("OK: the full Log showed 'line 6'")
        return 0
    finally:
        if proc.poll() is None:
            os.write(master, b"q")
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
        os.close(master)


if __name__ == "__main__":
    sys.exit(main())
