"""A real terminal: `optui demo` in tmux — start, send keys, capture the pane, resize to a
side pane, quit. (.ci/run installs tmux.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.tty, pytest.mark.timeout(120), pytest.mark.serial]
_SCRIPT = Path(sys.executable).with_name("optui")
# the installed entry point; where optui runs from a source tree with its packages on PYTHONPATH
# (the GPU machine: no venv, no console script), the same program as `python -m optui`
OPTUI = str(_SCRIPT) if _SCRIPT.exists() else (
    f"env PYTHONPATH={os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2] / 'src'), os.environ.get('PYTHONPATH')]))} "
    f"{sys.executable} -m optui")


SOCKET = f"optui-test-{os.getpid()}"  # a tmux server of this run only (two suites may run at once)


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=check, capture_output=True, text=True).stdout


def capture() -> str:
    return tmux("capture-pane", "-p", "-t", "t", check=False)


def wait_for(text: str, timeout: float = 40.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture()
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not on screen:\n{screen}")


@pytest.fixture
def tmux_demo(tmp_path):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")
    env = f"env -u COLUMNS -u LINES TERM=xterm-256color OPTUI_TEST_RUN={os.environ.get('OPTUI_TEST_RUN', '')}"
    tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "50",
         f"{env} {OPTUI} demo --fresh --dir {tmp_path / 'demo'} --speed 10")
    yield
    tmux("kill-server", check=False)


def test_demo_in_tmux_keys_resize_quit(tmux_demo):
    screen = wait_for("READY")
    assert "[1] GPUs" in screen and "[3] Todo" in screen and "[5] Journal" in screen
    tmux("send-keys", "-t", "t", "3", "a")
    time.sleep(0.3)
    tmux("send-keys", "-t", "t", "-l", "hello from tmux")
    tmux("send-keys", "-t", "t", "Enter")
    wait_for("hello from tmux")
    # several keys in one write (one read for optui): the key that opens an input, the text
    # and Enter; the text used to go to the widget focused before the input opened
    tmux("send-keys", "-t", "t", "-l", "nnote sent in one burst\r")
    wait_for("note sent in one burst")
    tmux("send-keys", "-t", "t", "-l", "3atodo sent in one burst\r")
    wait_for("todo sent in one burst")
    # a lone Escape is a key (the input thread waits for the parser's escape deadline,
    # optui.ui.textual_patches.quiet_driver), and the arrow keys' escape sequences are not Escapes
    tmux("send-keys", "-t", "t", "C-p")
    wait_for("Search for commands")
    tmux("send-keys", "-t", "t", "Down", "Up")
    time.sleep(0.3)
    assert "Search for commands" in capture(), "an arrow key's sequence closed the palette like an Escape"
    tmux("send-keys", "-t", "t", "Escape")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "Search for commands" in capture():
        time.sleep(0.1)
    assert "Search for commands" not in capture(), "Escape did not close the command palette"
    tmux("resize-window", "-t", "t", "-x", "60", "-y", "40")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # wait for the side-pane layout (compact server row)
        screen = capture()
        # the whole layout: under load a capture can land while a frame is half written
        if "[2] Servers" in screen and "[3] Todo" in screen and any("demo READY" in line for line in screen.splitlines()):
            break
        time.sleep(0.2)
    lines = screen.splitlines()
    assert max(len(line) for line in lines) <= 60, screen
    assert any("demo READY" in line for line in lines), screen
    assert "[3] Todo" in screen, screen
    tmux("send-keys", "-t", "t", "q")
    # "did not hang": the quit wakes the input thread through its pipe (quiet_driver) and ends
    # in well under 1 s; an input thread left blocked in select() keeps optui up for good
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "t" in tmux("list-sessions", "-F", "#{session_name}", check=False).split():
        time.sleep(0.2)
    assert "t" not in tmux("list-sessions", "-F", "#{session_name}", check=False).split(), \
        "optui did not quit on q (quitting waited on the input thread?)"


def journaled_notes(campaign) -> list[str]:
    """The notes in the demo campaign's journal (read-only: optui keeps writing it)."""
    from optui.adapters.journal import Journal, JournalError

    db = campaign / ".optui" / "optui.db"
    if not db.exists():
        return []
    try:
        journal = Journal(db, read_only=True)
    except JournalError:
        return []
    try:
        return [e.data["text"] for e in journal.events(types=["note"])]
    finally:
        journal.close()


def test_keys_typed_at_launch_and_the_terminal_mode_after_quit(tmp_path):
    """Keys typed in the ~0.3 s before the driver starts are not line-edited by the
    terminal (Enter stays Enter: optui.cli.terminal), and the shell gets its terminal mode
    back after quit."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")
    env = f"env -u COLUMNS -u LINES TERM=xterm-256color OPTUI_TEST_RUN={os.environ.get('OPTUI_TEST_RUN', '')}"
    stty = tmp_path / "stty.txt"
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40",
             f"{env} {OPTUI} demo --fresh --dir {tmp_path / 'demo'} --speed 10; stty -a > {stty}; sleep 30")
        # type once optui's own first step (cli.terminal) took line editing off: keys typed
        # while the interpreter is still starting are the terminal's cooked input, \r already
        # made \n by the tty (a loaded machine takes over 0.1 s to get there); the driver
        # starts ~0.3 s later, so the keys still land in the window the test is about
        pane_tty = tmux("display-message", "-p", "-t", "t", "#{pane_tty}").strip()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "-icanon" not in subprocess.run(
                ["stty", "-F", pane_tty, "-a"], capture_output=True, text=True).stdout.split():
            time.sleep(0.01)
        tmux("send-keys", "-t", "t", "-l", "nnote typed at launch\r")
        deadline = time.monotonic() + 40  # in the journal (the screen could show the terminal's echo)
        while time.monotonic() < deadline and not journaled_notes(tmp_path / "demo"):
            time.sleep(0.2)
        assert journaled_notes(tmp_path / "demo") == ["note typed at launch"], capture()
        tmux("send-keys", "-t", "t", "q")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (stty.exists() and stty.read_text()):
            time.sleep(0.1)
        modes = stty.read_text().split()
        assert {"icanon", "echo", "icrnl", "isig"} <= set(modes), modes
    finally:
        tmux("kill-server", check=False)


@pytest.mark.parametrize("signal_name", ["TERM", "HUP"])
def test_sigterm_or_sighup_quits_like_q_and_stops_the_demo_server(tmp_path, signal_name):
    """A tmux pane killed or a terminal closed: optui closes its session (the demo server it
    started is stopped), it does not just die."""
    import json

    env = f"env -u COLUMNS -u LINES TERM=xterm-256color OPTUI_TEST_RUN={os.environ.get('OPTUI_TEST_RUN', '')}"
    campaign = tmp_path / "demo"
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", f"{env} {OPTUI} demo --fresh --dir {campaign} --speed 10")
        wait_for("READY")
        server_pid = json.loads((campaign / ".optui" / "servers" / "demo.json").read_text())["pid"]
        optui_pid = int(tmux("display", "-p", "-t", "t", "#{pane_pid}").strip())
        os.kill(optui_pid, getattr(signal, f"SIG{signal_name}"))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (Path(f"/proc/{optui_pid}").exists() or Path(f"/proc/{server_pid}").exists()):
            time.sleep(0.1)
        assert not Path(f"/proc/{server_pid}").exists(), "the demo server outlived optui"
        assert not Path(f"/proc/{optui_pid}").exists(), "optui did not exit"
    finally:
        tmux("kill-server", check=False)


def test_a_path_in_a_notification_in_a_side_pane_is_folded_not_cut(tmp_path):
    """At 60 columns a toast is ~26 wide: the exported report's path in it was cut ("…")."""
    env = f"env -u COLUMNS -u LINES TERM=xterm-256color OPTUI_TEST_RUN={os.environ.get('OPTUI_TEST_RUN', '')}"
    campaign = tmp_path / "a-rather-long-directory-name" / "for-the-demo-campaign"
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "60", "-y", "40", f"{env} {OPTUI} demo --fresh --dir {campaign} --speed 10")
        wait_for("READY")
        tmux("send-keys", "-t", "t", "C-p")
        wait_for("Search for commands")
        tmux("send-keys", "-t", "t", "-l", "Export findings")
        time.sleep(0.5)
        tmux("send-keys", "-t", "t", "Enter")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not list(campaign.glob("findings-*.md")):
            time.sleep(0.1)
        report = next(campaign.glob("findings-*.md"))
        time.sleep(0.5)
        toast = [line[line.index("▌") + 1:] for line in capture().splitlines() if "▌" in line]
        shown = "".join(part.rstrip("│╮╯─ ").strip().removesuffix("…").strip() for part in toast)
        assert str(report) in shown, toast
    finally:
        tmux("kill-server", check=False)


def test_a_second_demo_window_joins_and_its_q_leaves_the_first_windows_server_ready(tmp_path):
    """Issue 30: with `optui demo` in one window, a second `optui demo` on the same campaign
    rewrote its optui.toml (the first window journaled config.changed though nothing was
    edited) and its `q` stopped the server the first window used (`○ demo DOWN`)."""
    import json

    from optui.adapters.journal import Journal

    env = f"env -u COLUMNS -u LINES TERM=xterm-256color OPTUI_TEST_RUN={os.environ.get('OPTUI_TEST_RUN', '')}"
    campaign = tmp_path / "demo"
    cfg = campaign / "optui.toml"
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "160", "-y", "40", f"{env} {OPTUI} demo --fresh --dir {campaign} --speed 10")
        wait_for("READY")
        server_pid = json.loads((campaign / ".optui" / "servers" / "demo.json").read_text())["pid"]
        config_before = (cfg.read_bytes(), cfg.stat().st_mtime_ns)
        tmux("new-session", "-d", "-s", "t2", "-x", "160", "-y", "40",
             f"{env} {OPTUI} demo --dir {campaign} --speed 10; echo QUIT; sleep 30")
        deadline = time.monotonic() + 40
        while "READY" not in tmux("capture-pane", "-p", "-t", "t2", check=False):
            assert time.monotonic() < deadline, tmux("capture-pane", "-p", "-t", "t2", check=False)
            time.sleep(0.2)
        assert (cfg.read_bytes(), cfg.stat().st_mtime_ns) == config_before, "the second window rewrote optui.toml"
        tmux("send-keys", "-t", "t2", "q")
        deadline = time.monotonic() + 20
        while "QUIT" not in (second := tmux("capture-pane", "-p", "-J", "-t", "t2", check=False)):
            assert time.monotonic() < deadline, f"the second window did not quit on q:\n{second}"
            time.sleep(0.1)
        assert f"optui: demo: left running (pid {server_pid}): the optui process" in second, second
        assert Path(f"/proc/{server_pid}").exists(), "the second window's q stopped the first window's server"
        time.sleep(2.0)  # a few probes of the first window: its server stays READY
        screen = capture()
        assert "READY" in screen and "DOWN" not in screen, screen
        journal = Journal(campaign / ".optui" / "optui.db", read_only=True)
        try:
            assert journal.events(types=["config.changed"]) == []
            assert [e for e in journal.events(types=["server.stopped"]) if e.ts > config_before[1] / 1e9] == []
        finally:
            journal.close()
        tmux("send-keys", "-t", "t", "q")  # the window that started it stops it
        deadline = time.monotonic() + 20
        while Path(f"/proc/{server_pid}").exists():
            assert time.monotonic() < deadline, "the first window's q left its server running"
            time.sleep(0.1)
    finally:
        tmux("kill-server", check=False)
