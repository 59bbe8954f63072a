"""The terminal driver: Textual's Linux driver, with an input thread that sleeps while idle.

Textual 8.2's input thread wakes ten times a second (``select`` with a 0.1 s timeout) to see
whether the app is stopping and whether a lone Escape has waited long enough to be a key.
That alone cost ~0.2% of a core on a 2-core VM, about half of optui's idle CPU with the
dashboard at 1 s. :class:`QuietLinuxDriver` waits without a timeout instead, except while
the key parser waits for the rest of an escape sequence (then until the parser's
deadline, ``ESCDELAY``), and is woken by a pipe when the app stops reading input
(quit, suspend). Everything else is Textual's driver.

Measured reason (``bench/RESULTS.md``, "Idle CPU vs nvitop", issue 8): optui / nvitop on a
real H200, 0.481 → 0.348 (median of 3 runs) with this driver; with one idle GPU on the VM
optui went from 0.50% to 0.28% of a core; ``tests/process/test_driver.py`` counts the input thread's
wake-ups (Textual's: ~30 in 3 s); the thread names itself ``optui-input`` for the OS (``top -H``).

Three more differences, each a way Textual's driver could crash or hang (reports with
reproductions: ``docs/upstream/``):
- A ``SIGCONT`` that does not follow optui's own suspend (``ctrl+z``) is ignored. Textual's
  driver restarted application mode on any ``SIGCONT`` and so ran a second input thread;
  a terminal that hangs up sends ``SIGHUP`` and ``SIGCONT`` together
  (``docs/upstream/stray_sigcont.md``; no upstream issue found).
- Bytes that are not UTF-8 (an 8-bit meta key, line noise) become U+FFFD instead of an
  exception that ended the app (Textual issue #6456, open; PRs #6498 open, #6624 closed:
  8.2.8 still decodes strictly; ``docs/upstream/invalid_utf8.md``).
- End of input (the terminal is gone but no ``SIGHUP`` came) asks the app to exit instead of
  spinning on ``select`` (Textual PR #6690, open; ``docs/upstream/eof_busy_loop.md``).

One addition: until the app's first frame is on the terminal (``textual_patches.first_frame_shown``),
the driver writes in the calling thread, the event loop's, and flushes at once. Textual writes
every frame through a writer thread, and that thread needs the GIL for each of its steps
(take the frame, write it, flush, write again when the terminal's buffer was full): the
event loop, busy mounting the dashboard right after the first frame, gave it up only every
switch interval (5 ms), and the first frame reached the terminal 10-30 ms after Textual had
drawn it (``bench/RESULTS.md``, issue 33). A bare Textual app's loop is idle then.

Private names (Textual 8.2.8): it replaces ``LinuxDriver.run_input_thread`` and wraps
``_sigtstp_application`` / ``_sigcont_application``; it reads ``_debug``, ``_loop``,
``_app``, the parser's ``_timeout_time``, ``LinuxDriver._file`` (the terminal's output),
``App._driver``, and imports ``textual._xterm_parser.XTermParser`` and
``textual._time.get_time``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import weakref
from codecs import getincrementaldecoder

from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

from optui.adapters.thread_names import set_native_thread_name

INPUT_THREAD_NAME = "optui-input"  # the OS thread name of the input thread (15 bytes at most)


class _WakingEvent(threading.Event):
    """A ``threading.Event`` whose ``set()`` also writes a byte to ``wake_fd`` (so that a
    thread blocked in ``select`` on the other end sees it at once)."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # the pipe is full: readers are awake anyway
            os.write(self._wake_fd, b"x")


class QuietLinuxDriver(LinuxDriver):
    """Textual's ``LinuxDriver`` whose input thread blocks until input arrives, the key
    parser's escape deadline passes, or input is disabled (no polling while idle)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        # open as long as the driver: it is stopped and started again around a suspend
        weakref.finalize(self, _close_fds, self._wake_read, self._wake_write)
        self.exit_event = _WakingEvent(self._wake_write)
        self._write_through = True  # until the first frame is shown (write)

    def _sigtstp_application(self, *args) -> None:
        self._suspended_by_us = True
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args) -> None:
        if getattr(self, "_suspended_by_us", False):  # not a stray SIGCONT (hang-up, kill -CONT)
            self._suspended_by_us = False
            super()._sigcont_application(*args)

    def write(self, data: str) -> None:
        """Write ``data`` to the terminal: here and flushed until :meth:`first_frame_shown`
        (module doc), then through Textual's writer thread."""
        out = self._file
        if self._write_through and out is not None:
            out.write(data)
            out.flush()
        else:
            super().write(data)

    def first_frame_shown(self) -> None:
        """The first frame is on the terminal: write through Textual's writer thread from now on."""
        self._write_through = False

    def run_input_thread(self) -> None:
        """Read the terminal and post its events (keys, mouse, resize, paste) to the app."""
        set_native_thread_name(INPUT_THREAD_NAME)
        fileno, wake = self.fileno, self._wake_read
        selector = selectors.SelectSelector()  # as Textual's driver
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")(errors="replace").decode
        reading = True

        def process(ready: list, final: bool = False) -> None:
            nonlocal reading
            if not self.exit_event.is_set() and any(key.fd == wake for key, _ in ready):
                with contextlib.suppress(OSError):  # a byte left from an earlier stop
                    os.read(wake, 1024)
            # (once stopping, the byte stays: every thread waiting on the pipe sees it)
            for key, mask in ready:
                if key.fd != fileno or not reading or not mask & selectors.EVENT_READ:
                    continue
                data = os.read(fileno, 1024 * 4)
                if not data:  # end of input: the terminal is gone
                    reading = False
                    selector.unregister(fileno)
                    self._loop.call_soon_threadsafe(self._app.exit)
                    continue
                for event in parser.feed(decode(data, final=final)):
                    self.process_message(event)
            for event in parser.tick():  # a lone Escape whose deadline passed
                self.process_message(event)

        def timeout() -> float | None:
            deadline = parser._timeout_time  # set while an escape sequence is incomplete
            return None if deadline is None else max(0.0, deadline - get_time())

        try:
            while not self.exit_event.is_set():
                process(selector.select(timeout()))
            if reading:
                selector.unregister(fileno)
            process(selector.select(0.1), final=True)  # what Textual's driver does last
        finally:
            selector.close()
            with contextlib.suppress(Exception):
                for _ in parser.feed(""):
                    pass


def _close_fds(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
