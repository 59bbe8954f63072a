"""optui's terminal driver (``optui.ui.textual_patches.quiet_driver``) in a real
pseudo-terminal: the real app, a real pty, bytes written by the test. The input thread
sleeps while idle, so what could make it miss a wake-up is tested here: signals
(stop/continue, a stray SIGCONT), bytes that are not UTF-8, end of input."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.tty, pytest.mark.timeout(60)]
# in the parallel part: the idle count is of the input thread alone (it wakes only on input,
# whatever the load); the count over every thread read the GIL contention of other workers
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


class PtyApp:
    """``python -m optui -c CONFIG`` on a pty (120x40); ``screen()`` is everything it drew
    since the last ``clear()``, escape sequences removed."""

    def __init__(self, config: Path) -> None:
        master, slave = pty.openpty()
        os.set_inheritable(slave, True)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = dict(os.environ, TERM="xterm-256color")
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "optui", "-c", str(config)], stdin=slave, stdout=slave,
                                     stderr=slave, env=env, start_new_session=True, close_fds=True)
        os.close(slave)
        self.master = master
        self._out = bytearray()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        # never blocked inside read() for long: a thread in read() keeps the master's file
        # open after os.close(), so the app would never see its terminal hang up
        while not self._stop.is_set():
            try:
                if not select.select([self.master], [], [], 0.05)[0]:
                    continue
                data = os.read(self.master, 65536)
            except (OSError, ValueError):
                return
            if not data:
                return
            with self._lock:
                self._out += data

    def hang_up(self) -> None:
        """Close the terminal's master side, as a closed terminal window does (the reader
        stops first: see ``_read``); the app's end of input."""
        self._stop.set()
        self._reader.join(5)
        os.close(self.master)
        self.master = os.open("/dev/null", os.O_RDONLY)  # for kill()'s close

    def screen(self) -> str:
        with self._lock:
            return ANSI.sub(b"", bytes(self._out)).decode("utf-8", "replace")

    def clear(self) -> None:
        with self._lock:
            self._out.clear()

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen():
            assert self.proc.poll() is None, f"optui exited ({self.proc.returncode}) before showing {text!r}"
            assert time.monotonic() < deadline, f"{text!r} not on screen within {timeout} s"
            time.sleep(0.05)

    def wait_exit(self, timeout: float = 30.0) -> int | None:
        """The app's exit status, None when it has not exited within ``timeout`` s (a bound
        for a loaded machine: 5 s ran out beside a CPU hog)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        os.close(self.master)


@pytest.fixture
def app(tmp_path):
    config = tmp_path / "optui.toml"
    config.write_text('[hosts.local]\ngpu_source = "none"\n')
    running = PtyApp(config)
    try:
        running.wait_for("campaign ")
        yield running
    finally:
        running.kill()


def palette_opens_and_escape_closes_it(app: PtyApp) -> None:
    """ctrl+p opens the command palette, a lone Escape closes it. (The caller's next key,
    ``q``, quits only if it did: in the palette it would be typed into the search box.)"""
    app.clear()
    app.send(b"\x10")  # ctrl+p
    app.wait_for("Search for commands")
    time.sleep(0.2)
    app.clear()
    app.send(b"\x1b")  # a lone Escape: a key once the parser's deadline (ESCDELAY, 100 ms) passes
    # the dashboard drawn again where the palette was: the Escape was a key of its own (a fixed
    # 0.4 s was not enough beside a CPU hog: the app read Escape and the q after it together,
    # alt+q, as any terminal program would, and the palette stayed open)
    app.wait_for("[1] GPUs")


def test_stop_and_continue_then_keys_and_quit(app):
    os.kill(app.proc.pid, signal.SIGTSTP)  # as ctrl+z from a shell would: the driver stops itself

    def state() -> str:
        return Path(f"/proc/{app.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

    # a shell's fg continues a job once it has stopped. The test sent SIGCONT after a fixed 5 s
    # whether or not it had (a loaded CI machine, ci11): Python then ran both pending handlers in
    # signal-number order, SIGCONT (18) before SIGTSTP (20), so the continue was taken for a stray
    # one and the stop came after it, for good
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and state() != "T":
        time.sleep(0.05)
    assert state() == "T", f"optui did not stop itself on SIGTSTP within 30 s (state {state()})"
    os.kill(app.proc.pid, signal.SIGCONT)
    palette_opens_and_escape_closes_it(app)
    app.send(b"q")
    assert app.wait_exit() == 0, "optui did not quit after a stop / continue"


def test_a_stray_sigcont_starts_no_second_input_thread(app):
    """A terminal that hangs up sends SIGHUP and SIGCONT; Textual's driver answered any
    SIGCONT by starting another input thread, and a quit then waited on it for good."""
    for _ in range(3):
        os.kill(app.proc.pid, signal.SIGCONT)
    time.sleep(0.3)
    palette_opens_and_escape_closes_it(app)
    app.send(b"q")
    assert app.wait_exit() == 0, "optui did not quit after a stray SIGCONT"


def test_bytes_that_are_not_utf8_do_not_end_the_app(app):
    app.send(b"\xff")
    app.send(b"a\xe1b")  # an 8-bit meta key
    time.sleep(0.3)
    assert app.proc.poll() is None, app.screen()[-2000:]
    palette_opens_and_escape_closes_it(app)
    app.send(b"q")
    assert app.wait_exit() == 0


def test_the_input_and_journal_threads_sleep_while_idle(app):
    """Textual's input thread woke 10 times a second; this one only on input; the journal's
    thread only when there is something to read. Only the input
    thread is counted (it names itself for the OS): the event loop's thread wakes for the
    dashboard's work, 16 times in 3 s on a loaded CI host, which a bound over every thread
    took for the input thread's."""
    from optui.ui.textual_patches.quiet_driver import INPUT_THREAD_NAME

    tasks = Path(f"/proc/{app.proc.pid}/task")

    def switches() -> dict[str, tuple[str, int]]:
        out = {}
        for task in tasks.iterdir():
            with contextlib_suppress():
                status = (task / "status").read_text()
                name = re.search(r"^Name:\s+(.*)$", status, re.M).group(1)
                out[task.name] = (name, int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", status).group(1)))
        return out

    time.sleep(1.0)
    before = switches()
    time.sleep(3.0)
    after = switches()
    woke = {f"{after[t][0]}/{t}": after[t][1] - before[t][1] for t in before if t in after}
    print(woke)
    input_threads = [n for name, n in woke.items() if name.startswith(INPUT_THREAD_NAME + "/")]
    assert len(input_threads) == 1, woke  # one input thread, named, alive through the window
    assert input_threads[0] <= 15, woke  # Textual's input thread alone: ~30 in 3 s
    # the journal thread reads the journal only when its files changed (and every 5 s whatever
    # they say): an idle window woke it 16 times in 3 s (two reads a second), now 0
    journal_threads = [n for name, n in woke.items() if name.startswith("optui-journal/")]
    assert len(journal_threads) == 1, woke
    assert journal_threads[0] <= 4, woke
    app.send(b"q")
    assert app.wait_exit() == 0


def contextlib_suppress():
    import contextlib

    return contextlib.suppress(OSError, AttributeError)


def test_end_of_input_ends_the_app(app):
    """The terminal is gone and no SIGHUP came (this pty is not the app's controlling
    terminal): Textual's input thread spun on select at 100% of a core; optui exits."""
    app.hang_up()
    code = app.wait_exit()
    assert code is not None, "optui did not exit at the end of its input"


async def test_the_driver_writes_the_first_frame_itself_then_through_the_writer_thread():
    """Until ``textual_patches.first_frame_shown``, the driver writes and flushes in the calling
    thread (the event loop's: the frame is on the terminal when Ready comes, whatever the loop
    does next); after it, through Textual's writer thread, as Textual's driver does."""
    import io

    from textual.app import App

    from optui.ui import textual_patches
    from optui.ui.textual_patches.quiet_driver import QuietLinuxDriver

    class Recorder:
        def __init__(self) -> None:
            self.written: list[str] = []

        def write(self, text: str) -> None:
            self.written.append(text)

    app = App()
    driver = QuietLinuxDriver(app, size=(80, 24))
    terminal, writer = io.StringIO(), Recorder()
    driver._file, driver._writer_thread = terminal, writer
    driver.write("first frame")
    assert terminal.getvalue() == "first frame" and writer.written == []
    app._driver = driver  # what App.run sets
    textual_patches.first_frame_shown(app)
    driver.write("next frame")
    assert terminal.getvalue() == "first frame" and writer.written == ["next frame"]
    textual_patches.first_frame_shown(App())  # no driver (not running, headless): nothing to do
