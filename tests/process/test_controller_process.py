"""The process controller through the local Shell, with real child processes: own process
group, stdin closed, PYTHONUNBUFFERED, log file and rotation, TERM → KILL of the whole
group, re-attach from the pidfile after an optui restart."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import pytest

from optui.adapters.controller import ProcessController
from optui.adapters.shell import LocalShell, ShellError

pytestmark = pytest.mark.timeout(30)

CHILD = """
import os, subprocess, sys, time
print("unbuffered", os.environ.get("PYTHONUNBUFFERED"))
print("stdin", repr(sys.stdin.read()))
print("leader", os.getpgid(0) == os.getpid())
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("grandchild", grandchild.pid)
time.sleep(60)
"""
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ignoring TERM', flush=True); time.sleep(60)"


async def wait_line(path: str, prefix: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for line in open(path).read().splitlines():
                if line.startswith(prefix):
                    return line
        except FileNotFoundError:
            pass
        await asyncio.sleep(0.02)
    raise AssertionError(f"no line starting with {prefix!r} in {path}")


async def test_child_setup_and_group_stop(tmp_path):
    ctl = ProcessController("s", tmp_path)
    launch = await ctl.start([sys.executable, "-c", CHILD])
    assert "run in a new process group on local" in ctl.preview([sys.executable, "-V"])
    assert await wait_line(launch.log_path, "unbuffered") == "unbuffered 1"
    assert await wait_line(launch.log_path, "stdin") == "stdin ''"  # closed: EOF at once
    assert await wait_line(launch.log_path, "leader") == "leader True"
    grandchild = int((await wait_line(launch.log_path, "grandchild")).split()[1])
    assert await ctl.pids() == {launch.pid, grandchild}
    outcome = await ctl.stop(5)
    assert outcome.how == "term" and outcome.returncode == -15
    assert not os.path.exists(f"/proc/{grandchild}") or open(f"/proc/{grandchild}/stat").read().split()[2] == "Z"
    assert ctl.process_state() == "exited" and not ctl.pidfile.exists()


async def test_term_ignored_is_killed_and_log_rotates(tmp_path):
    ctl = ProcessController("s", tmp_path)
    first = await ctl.start([sys.executable, "-c", "print('first start')"])
    await ctl.wait_exit(5)
    launch = await ctl.start([sys.executable, "-c", STUBBORN])
    await wait_line(launch.log_path, "ignoring TERM")
    assert open(first.log_path + ".1").read() == "first start\n"
    outcome = await ctl.stop(0.5)
    assert outcome.how == "kill" and outcome.returncode == -9


async def test_reattach_after_an_optui_restart(tmp_path):
    first = ProcessController("s", tmp_path)
    launch = await first.start([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)", "--flag", "a b"])
    await wait_line(launch.log_path, "up")
    second = ProcessController("s", tmp_path)  # a new optui process
    try:
        again = await second.attach()
        assert again is not None and again.pid == launch.pid and again.argv == launch.argv
        await second.refresh()
        assert second.process_state() == "running"
        lines: list[str] = []
        follower = second.open_log(lines.append, resume=True)  # only what comes after the re-attach
        assert follower.offset == len("up\n")
        assert (await second.stop(5)).how == "term"
        await second.refresh()
        assert second.process_state() == "exited" and await ProcessController("s", tmp_path).attach() is None
    finally:
        await first.stop(1)


async def test_a_pidfile_of_another_host_is_not_attached(tmp_path):
    """The server's host was changed in the config: the recorded pid belongs to the old
    host, so the new one must not adopt (and later stop) whatever has that pid there."""
    first = ProcessController("s", tmp_path, shell=LocalShell(host="node-1"))
    launch = await first.start([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"])
    try:
        await wait_line(launch.log_path, "up")
        assert json.loads(first.pidfile.read_text())["host"] == "node-1"
        moved = ProcessController("s", tmp_path, shell=LocalShell(host="node-2"))
        assert moved.recorded() is None and await moved.attach() is None and moved.launch is None
        same = ProcessController("s", tmp_path, shell=LocalShell(host="node-1"))
        assert (await same.attach()).pid == launch.pid
        # a pidfile written before the host was recorded is still attached
        data = json.loads(first.pidfile.read_text())
        del data["host"]
        first.pidfile.write_text(json.dumps(data))
        assert (await ProcessController("s", tmp_path, shell=LocalShell(host="node-2")).attach()).pid == launch.pid
    finally:
        await first.stop(1)


async def test_missing_program_and_shell_errors(tmp_path):
    from optui.adapters.controller import ControllerError

    with pytest.raises(ControllerError, match="no-such-program"):
        await ProcessController("s", tmp_path).start(["no-such-program-xyz", "--x"])
    shell = LocalShell()
    result = await shell.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    with pytest.raises(ShellError, match="exited 3: err"):
        result.check()
    with pytest.raises(ShellError, match="did not finish in 0 s"):
        await shell.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.3)
    lines = [line async for line in shell.stream_lines([sys.executable, "-c", "import sys; print('a'); print('b', file=sys.stderr)"])]
    assert sorted(lines) == ["a", "b"]


async def test_a_pidfile_whose_pid_now_names_another_process_is_not_attached(tmp_path):
    """A stale pidfile whose PID was reused (here: a `sleep` started afterwards gets it
    written in): re-attach compares the recorded process start time, so `restart` never
    signals that process (it SIGTERMed it before)."""
    import dataclasses
    import subprocess

    from optui.adapters.controller import read_pidfile, write_pidfile

    ctl = ProcessController("s", tmp_path)
    launch = await ctl.start([sys.executable, "-c", "import time; time.sleep(30)"])
    await ctl.stop(5.0)
    time.sleep(0.05)  # a start identity is in clock ticks (10 ms): a reused PID starts later than that
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        write_pidfile(ctl.pidfile, dataclasses.replace(launch, pid=sleeper.pid))  # the old start time, the new PID
        again = ProcessController("s", tmp_path)
        assert await again.attach() is None
        assert again.lost is not None and again.lost.pid == sleeper.pid  # kept for the session to journal
        await again.stop(1.0)
        assert sleeper.poll() is None, "the unrelated process was signalled"
        again.forget_lost()
        assert read_pidfile(ctl.pidfile) is None
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_a_pidfile_without_a_start_time_is_checked_by_its_command(tmp_path):
    """A pidfile written before optui recorded start times (or edited by hand) naming a
    `setsid sleep`: restart SIGTERMed that process group (break-it trial)."""
    import dataclasses
    import subprocess

    from optui.adapters.controller import write_pidfile

    ctl = ProcessController("s", tmp_path)
    launch = await ctl.start([sys.executable, "-c", "import time; time.sleep(30)"])
    await ctl.stop(5.0)
    time.sleep(0.05)  # a start identity is in clock ticks (10 ms): a reused PID starts later than that
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        write_pidfile(ctl.pidfile, dataclasses.replace(launch, pid=sleeper.pid, proc_start=""))
        again = ProcessController("s", tmp_path)
        assert await again.attach() is None
        await again.stop(1.0)
        assert sleeper.poll() is None, "the unrelated process group was signalled"
        real = await ctl.start([sys.executable, "-c", "import time; time.sleep(30)"])
        write_pidfile(ctl.pidfile, dataclasses.replace(real, proc_start=""))  # an old pidfile of a real server
        assert (await ProcessController("s", tmp_path).attach()).pid == real.pid
        await ctl.stop(5.0)
    finally:
        sleeper.kill()
        sleeper.wait()
