"""A server optui launches outlives the optui process that launched it (issue 14).

Every optui process here runs under :mod:`tests.helpers.strict_exit`, which closes the
asyncio subprocess transports left open at interpreter exit the way Python >= 3.12 does (that
close SIGKILLs a child still running). A server whose lifetime hangs on such a transport dies
under it on every Python, so these tests fail on 3.11 too when that regresses.

Real parts: the demo server as a real subprocess, the real CLI in child interpreters, the real
TUI in a real tmux terminal, the real SQLite journal.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optui.adapters.journal import Journal
from optui.adapters.proc import pid_alive
from optui.demo.campaign import write_demo_config
from tests.helpers.demo import SRC, free_port, http_status, subprocess_env

pytestmark = pytest.mark.timeout(150)
REPO = SRC.parent
#: the repo (for tests.helpers) and src first; what the environment had after (a target dir of wheels)
CHILD_PATH = os.pathsep.join(filter(None, [str(REPO), str(SRC), os.environ.get("PYTHONPATH")]))


def strict_optui(cfg: Path, *args: str, timeout: float = 90, report: Path | None = None) -> subprocess.CompletedProcess:
    """``optui -c CFG ARGS`` in a child interpreter that ends like Python 3.12 (module doc)."""
    env = subprocess_env({"PYTHONPATH": CHILD_PATH,
                          **({"OPTUI_STRICT_EXIT_REPORT": str(report)} if report else {})})
    return subprocess.run([sys.executable, "-X", "dev", "-m", "tests.helpers.strict_exit", "-c", str(cfg), *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, env=env,
                          start_new_session=True, cwd=REPO)


def recorded_pid(cfg: Path) -> int | None:
    try:
        return json.loads((cfg.parent / ".optui" / "servers" / "demo.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def server_url(cfg: Path) -> str:
    return next(line.split('"')[1] for line in cfg.read_text().splitlines() if line.startswith("url = "))


def kill_group(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached in {timeout} s"
        time.sleep(0.1)


@pytest.fixture
def campaign(tmp_path):
    cfg = write_demo_config(tmp_path / "c", port=free_port(), speed=20.0)
    # 8 prompts, not 64: a benchmark here only has to find the server up (~15 s less a run)
    cfg.write_text(cfg.read_text().replace('"--num-prompts", "64"', '"--num-prompts", "8"'))
    yield cfg
    kill_group(recorded_pid(cfg))


def status_json(cfg: Path) -> dict:
    res = strict_optui(cfg, "status", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)


def demo_status(cfg: Path) -> dict:
    return next(s for s in status_json(cfg)["servers"] if s["name"] == "demo")


def test_cli_restart_server_outlives_the_cli_and_status_shows_it_ready(campaign, tmp_path):
    report = tmp_path / "closed-transports.txt"
    res = strict_optui(campaign, "restart", "demo", "--json", report=report)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["state"] == "ready"
    pid = recorded_pid(campaign)
    assert pid is not None
    time.sleep(0.5)  # the old code's server died at the CLI's exit, a zombie 0.2 s later
    closed = report.read_text() if report.exists() else ""
    assert pid_alive(pid), f"the server (pid {pid}) died with the CLI that launched it; transports closed at exit: {closed}"
    assert "Close running child process" not in res.stderr, res.stderr
    assert "ResourceWarning" not in res.stderr, res.stderr  # -X dev: nothing tracks the server at exit
    assert http_status(server_url(campaign) + "/health") == 200
    st = demo_status(campaign)
    assert st["state"] == "ready" and st["pid"] == pid, st
    # a benchmark from the next CLI process finds it up (the operator's failing sequence)
    bench = strict_optui(campaign, "bench", "run", "demo", "sweep", "--json", timeout=120)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert pid_alive(pid)
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        states = [(e.data.get("old"), e.data.get("new")) for e in j.events(target="demo", types=["server.state"])]
    finally:
        j.close()
    assert ("ready", "starting") not in states, states


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_sigkill_of_the_cli_mid_restart_leaves_the_server_running_and_attachable(campaign, sig):
    env = subprocess_env({"PYTHONPATH": CHILD_PATH})
    cli = subprocess.Popen([sys.executable, "-m", "tests.helpers.strict_exit", "-c", str(campaign), "restart", "demo"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           start_new_session=True, cwd=REPO)
    try:
        wait_until(lambda: recorded_pid(campaign) is not None, 60, "the server launched")
        pid = recorded_pid(campaign)
        os.kill(cli.pid, sig)
        cli.wait(10)
    finally:
        if cli.poll() is None:
            cli.kill()
    wait_until(lambda: http_status(server_url(campaign) + "/health") == 200, 60, "the orphaned server ready")
    assert pid_alive(pid)
    st = demo_status(campaign)
    assert st["pid"] == pid and st["state"] == "ready", st


def test_server_that_died_unwatched_is_journaled_when_noticed(campaign):
    res = strict_optui(campaign, "restart", "demo", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    pid = recorded_pid(campaign)
    os.killpg(pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), 10, "the server gone")
    st = demo_status(campaign)  # an observer: shows it, journals nothing
    assert st["state"] == "crashed" and f"pid {pid} ended while no optui process watched it" in st["message"], st
    # the next writing process (here a benchmark, refused: the server is gone) journals it once
    bench = strict_optui(campaign, "bench", "run", "demo", "sweep", "--json")
    assert bench.returncode != 0 and "crashed" in bench.stdout + bench.stderr, bench.stdout + bench.stderr
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        failed = j.events(target="demo", types=["server.failed"])
        states = [(e.data.get("old"), e.data.get("new")) for e in j.events(target="demo", types=["server.state"])]
    finally:
        j.close()
    assert failed, f"the death of pid {pid} was never journaled; states: {states}"
    data = failed[-1].data
    assert data["pid"] == pid and data["unwatched"] is True, data
    assert data["last_seen_alive"] >= failed[-1].ts - 60 and data["lines"], data
    assert ("ready", "starting") not in states and states[-1] == ("ready", "crashed"), states
    # the next process does not journal the death again
    strict_optui(campaign, "bench", "run", "demo", "sweep", "--json")
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        assert len(j.events(target="demo", types=["server.failed"])) == len(failed)
    finally:
        j.close()


SOCKET = f"optui-lifetime-{os.getpid()}"


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=check, capture_output=True, text=True).stdout


def test_server_started_by_the_tui_survives_its_quit_and_is_reattached(campaign):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")
    text = campaign.read_text()  # a campaign (not `optui demo`): quitting must leave the server running
    assert "autostart = true" in text
    env = (f"env -u COLUMNS -u LINES TERM=xterm-256color PYTHONPATH={shlex.quote(CHILD_PATH)} "
           f"OPTUI_TEST_RUN={os.environ.get('OPTUI_TEST_RUN', '')}")
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "50", "-c", str(REPO),
             f"{env} {sys.executable} -X dev -m tests.helpers.strict_exit -c {campaign}")
        wait_until(lambda: http_status(server_url(campaign) + "/health") == 200, 90, "the autostarted server ready")
        pid = recorded_pid(campaign)
        wait_until(lambda: "READY" in tmux("capture-pane", "-p", "-t", "t", check=False), 30, "READY on screen")
        tmux("send-keys", "-t", "t", "q")
        wait_until(lambda: "t" not in tmux("list-sessions", "-F", "#{session_name}", check=False).split(), 20, "the TUI quit")
    finally:
        tmux("kill-server", check=False)
    time.sleep(0.5)
    assert pid_alive(pid), f"the server (pid {pid}) died when the TUI that started it quit"
    st = demo_status(campaign)
    assert st["state"] == "ready" and st["pid"] == pid, st
