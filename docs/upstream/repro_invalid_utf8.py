"""Textual: one byte that is not UTF-8 on the terminal's input ends the app.

Run with plain Textual (no optui): ``python docs/upstream/repro_invalid_utf8.py``. It starts a
minimal app on a pseudo-terminal, waits for its first frame, writes the byte 0xFF (what an
8-bit meta key or line noise sends) and checks that the app is still running a second later.
Prints ``BUG: ...`` and exits 1 when the app died, ``OK`` otherwise. Linux / macOS.
"""

from __future__ import annotations

import os
import pty
import re
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


def main() -> int:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", APP], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(os.environ, TERM="xterm-256color"), start_new_session=True)
    os.close(slave)
    try:
        if b"ready" not in read_for(master, 15, until=b"ready"):
            print("the app did not start")
            return 2
        os.write(master, b"\xff")
        tail = read_for(master, 5)  # until the app exits and closes the terminal, or 5 s
        if proc.poll() is None:
            time.sleep(0.5)
        if proc.poll() is not None or b"UnicodeDecodeError" in tail:
            text = re.sub(r"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", "", tail.decode("utf-8", "replace"))
            print(f"BUG: after one invalid byte the app {'exited, code ' + str(proc.poll()) if proc.poll() is not None else 'panicked'}:")
            print("\n".join(line for line in text.splitlines() if "Error" in line))
            return 1
        os.write(master, b"q")
        proc.wait(5)
        print("OK: the app kept running and quit on q")
        return 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


if __name__ == "__main__":
    sys.exit(main())
