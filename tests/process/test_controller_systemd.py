"""The systemd controller against fake ``systemctl``/``journalctl`` executables (real
processes on PATH, see tests/helpers/fake_systemd.py): the drop-in it writes, the exact
command sequence, journal following with cursors, exit classification, and a full restart
of the demo server through ServerRuntime."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

import pytest

from optui.adapters.controller_systemd import JournalFollower, SystemdController
from optui.adapters.journal import Journal
from optui.adapters.shell import LocalShell
from optui.config import ServerConfig
from optui.core.server.systemd_unit import parse_exec_start, render_dropin, render_exec_start
from optui.session.server.runtime import ServerRuntime
from tests.helpers import fake_systemd
from tests.helpers.demo import SRC, free_port

pytestmark = pytest.mark.timeout(60)

UNIT = "sglang-test.service"
ARGV_PROBE = [sys.executable, "-c", "import json, sys, time; print(json.dumps(sys.argv[1:]), flush=True); time.sleep(60)"]
NASTY = ["--api-key", 'a b "c" \\d', "--json", '{"x": "$HOME", "p": "50%"}', "--multi", "line1\nline2", "--empty", ""]


@pytest.fixture
def fake(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    fake_systemd.install(bin_dir)
    state, units = tmp_path / "systemd-state", tmp_path / "units"
    monkeypatch.setenv("FAKE_SYSTEMD_DIR", str(state))  # read by the helpers in this process
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SYSTEMD_DIR": str(state), "FAKE_SYSTEMD_UNITS": str(units),
           "PYTHONPATH": str(SRC)}
    yield LocalShell(env=env), units
    fake_systemd.cleanup()


def controller(shell, units, tmp_path, **kw) -> SystemdController:
    return SystemdController("qwen", UNIT, tmp_path / "state", shell=shell, unit_dir=str(units), **kw)


async def test_a_user_units_drop_in_is_under_the_home_of_its_host(tmp_path, monkeypatch):
    """``~`` is left to the shell: over SSH it is the remote user's home (it used to be
    expanded to the local one before the path went to the host)."""
    ctl = SystemdController("qwen", UNIT, tmp_path / "state", user=True)
    assert ctl.dropin_path == f"~/.config/systemd/user/{UNIT}.d/optui.conf"
    assert f"write ~/.config/systemd/user/{UNIT}.d/optui.conf on local" in ctl.preview(["/usr/bin/x", "--a"])
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    shell = LocalShell()
    await shell.write_file(ctl.dropin_path, "[Service]\n")
    written = tmp_path / "home" / ".config" / "systemd" / "user" / f"{UNIT}.d" / "optui.conf"
    assert written.read_text() == "[Service]\n" and await shell.read_file(ctl.dropin_path) == "[Service]\n"


def test_exec_start_quoting_round_trips():
    argv = ["/usr/bin/python3", "-m", "sglang.launch_server", *NASTY]
    line = render_exec_start(argv)
    assert line.startswith('/usr/bin/python3 "-m" "sglang.launch_server" "--api-key" "a b \\"c\\" \\\\d"')
    assert '"{\\"x\\": \\"$$HOME\\", \\"p\\": \\"50%%\\"}"' in line and '"line1\\nline2"' in line and line.endswith('""')
    assert parse_exec_start(line) == argv
    with pytest.raises(ValueError, match="absolute"):
        render_exec_start(["python3", "-m", "x"])
    text = render_dropin(argv, env={"HF_HOME": "/data/hf 1", "PCT": "100%"}, cwd="/srv/models")
    assert text.splitlines()[1:4] == ["[Service]", "ExecStart=", "ExecStart=" + line]
    assert 'Environment="PYTHONUNBUFFERED=1"' in text and 'Environment="HF_HOME=/data/hf 1"' in text
    assert 'Environment="PCT=100%%"' in text and "WorkingDirectory=/srv/models" in text


async def test_start_writes_dropin_runs_exact_commands_and_the_service_gets_the_argv(fake, tmp_path):
    shell, units = fake
    ctl = controller(shell, units, tmp_path, env={"GREETING": "hi $there"})
    fake_systemd.set_unit(UNIT, ActiveState="failed", SubState="failed", Result="start-limit-hit")
    fake_systemd.journal_append(UNIT, "a line of the previous start", pid=1, invocation="old")
    argv = [*ARGV_PROBE, *NASTY]
    launch = await ctl.start(argv)
    dropin = units / f"{UNIT}.d" / "optui.conf"
    assert dropin.read_text() == render_dropin(argv, env={"GREETING": "hi $there"})
    assert fake_systemd.calls()[:5] == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "show", UNIT, "-p", "ActiveState,SubState,Result,NRestarts,InvocationID,ExecMainPID,ExecMainCode,"
         "ExecMainStatus,ControlGroup"],
        ["systemctl", "reset-failed", UNIT],  # the unit had hit its start limit
        ["journalctl", "-u", UNIT, "-n", "1", "-o", "json", "--no-pager"],
        ["systemctl", "restart", "--no-block", UNIT],
    ]
    assert launch.invocation and launch.pid > 0
    lines: list[str] = []
    follower = ctl.open_log(lines.append)
    task = asyncio.create_task(follower.run())
    try:
        deadline = time.monotonic() + 10
        while not any(line.startswith("[") for line in lines) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        follower.stop()
        task.cancel()
    got = json.loads(next(line for line in lines if line.startswith("[")))
    assert got == NASTY  # every element arrived intact through systemd's quoting
    assert launch.cursor and "a line of the previous start" not in lines
    assert ["journalctl", "-u", UNIT, "-o", "json", "-f", "--no-pager", f"--after-cursor={launch.cursor}"] in fake_systemd.calls()
    await ctl.refresh()
    assert ctl.process_state() == "running"
    outcome = await ctl.stop(10)
    assert outcome.how == "term" and ["systemctl", "stop", UNIT] in fake_systemd.calls()
    await ctl.refresh()
    assert ctl.process_state() == "exited"


async def test_relative_program_is_refused_before_touching_the_unit(fake, tmp_path):
    shell, units = fake
    with pytest.raises(Exception, match="absolute program path"):
        await controller(shell, units, tmp_path).start(["python3", "-m", "x"])
    assert fake_systemd.calls() == []


async def test_kill_9_is_seen_as_exit_status_minus_9_with_systemd_note(fake, tmp_path):
    shell, units = fake
    ctl = controller(shell, units, tmp_path)
    launch = await ctl.start(ARGV_PROBE)
    os.killpg(launch.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await ctl.refresh()
        if ctl.process_state() == "exited":
            break
        await asyncio.sleep(0.1)
    assert ctl.process_state() == "exited" and ctl.returncode() == -9
    assert ctl.exit_note() == "systemd: ActiveState=failed SubState=failed Result=signal"


async def test_a_restart_behind_our_back_counts_as_exit(fake, tmp_path):
    shell, units = fake
    ctl = controller(shell, units, tmp_path)
    await ctl.start(ARGV_PROBE)
    fake_systemd.set_unit(UNIT, NRestarts=1)  # Restart=on-failure restarted it
    await ctl.refresh()
    assert ctl.process_state() == "exited"


def test_journal_messages_as_byte_arrays_and_progress_redraws():
    lines: list[str] = []
    follower = JournalFollower(LocalShell(), lambda *a: ["journalctl", *a], lines.append)
    message = list(b"\x1b[32mLoading 10%\r\x1b[32mLoading 100%\x1b[0m")
    follower.deliver(json.dumps({"__CURSOR": "c1", "MESSAGE": message, "_PID": "7"}))
    follower.deliver(json.dumps({"__CURSOR": "c2", "MESSAGE": "two\nlines"}))
    follower.deliver(json.dumps({"__CURSOR": "c3", "MESSAGE": None}))
    follower.deliver("-- No entries --")
    assert lines == ["Loading 100%", "two", "lines", ""] and follower.cursor == "c3"
    assert follower._argv()[-1] == "--after-cursor=c3"


async def test_demo_server_through_systemd_restart_and_crash(fake, tmp_path):
    shell, units = fake
    port = free_port()
    base = [sys.executable, "-m", "optui.demo.fake_server", "--port", str(port), "--model-path", "demo/M", "--demo-speed", "40"]
    cfg = ServerConfig(url=f"http://127.0.0.1:{port}", kind="sglang", control="systemd", unit=UNIT, argv=base,
                       env={"PYTHONPATH": str(SRC)}, ready_timeout_s=30, stop_timeout_s=5, poll_interval_s=0.2)
    ctl = controller(shell, units, tmp_path, env=dict(cfg.env))
    journal = Journal(tmp_path / "j.db")
    rt = ServerRuntime("qwen", cfg, ctl, journal, on_change=lambda: None)
    monitor = asyncio.create_task(rt.run())
    try:
        status = await rt.restart(base, reason="test")
        assert status.state.value == "ready", (status.crash_class, status.crash_lines)
        phases = [p.phase for p in status.phases]
        assert phases[0] == "launching" and "loading_weights" in phases and phases[-1] == "ready"  # from the journal
        status = await rt.restart([*base, "--max-running-requests", "8"], reason="test")
        assert status.state.value == "ready" and "8" in status.argv
        status = await rt.restart([*base, "--no-such-flag"], reason="test")
        assert (status.state.value, str(status.crash_class)) == ("crashed", "bad_flag")
        assert any("unrecognized arguments: --no-such-flag" in line for line in status.crash_lines)
        failed = journal.events(types=["server.failed"])[-1].data
        assert failed["returncode"] == 2 and failed["class"] == "bad_flag"
    finally:
        monitor.cancel()
        await asyncio.gather(monitor, return_exceptions=True)
        journal.close()
