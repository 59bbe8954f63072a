"""The terminal mode from the first moment of a TUI start.

Python's start-up and optui's imports take ~0.3 s before Textual's driver puts the terminal
in raw mode. Keys typed meanwhile sat in the terminal's line editor: echoed onto the screen,
Enter turned into a line feed (ctrl+j for the app) and the whole line held until then, so a
note or a todo typed right after launching was lost. :func:`keys_kept_from_the_start` sets
the input part of the raw mode at once (no line editing, no echo, Enter stays a carriage
return; ctrl+c still interrupts until the app takes over) and puts back the terminal's
original mode when the app is done, after the driver has restored the mode it found.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def keys_kept_from_the_start() -> Iterator[None]:
    """Around a TUI run: stdin's terminal without line editing, echo or CR→LF mapping
    until the end (a no-op when stdin is not a terminal)."""
    try:
        import termios

        fd = sys.stdin.fileno()
        original = termios.tcgetattr(fd)
    except Exception:  # noqa: BLE001 - not a terminal (a pipe, CI), or no termios (Windows)
        yield
        return
    early = [*original[:6], list(original[6])]
    early[3] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN)  # lflag
    early[0] &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR)  # iflag
    early[6][termios.VMIN], early[6][termios.VTIME] = 1, 0
    with contextlib.suppress(termios.error):
        termios.tcsetattr(fd, termios.TCSANOW, early)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, original)
