"""The SSH Shell against a real OpenSSH server on loopback (the "remote host" is this
machine, so its processes can be checked in /proc): exact argv, cwd/env, detached launches
that survive a dropped link, TERM → KILL of a remote group by separate commands, log follow
resumed from its byte offset, streams that die with their channel, files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from optui.adapters.shell import LocalShell, ShellError
from optui.adapters.shell_ssh import SshShell, parse_group_pids, remote_path
from optui.adapters.ssh_procs import exit_code
from optui.session.ssh_hosts import shell_for
from tests.helpers.sshd import group_members, running_sshd, ssh_host
from tests.helpers.waiting import until

pytestmark = pytest.mark.timeout(90)

ARGV_JSON = "import json, sys; print(json.dumps(sys.argv[1:]), flush=True)"
TRICKY = ["two words", "it's \"quoted\"", "a; touch {canary}", "$(touch {canary})", "`id`", "a|b&&c", "*", "", "--x=1 2"]
CHILD = """
import json, os, subprocess, sys, time
print("argv", json.dumps(sys.argv[1:]))
print("unbuffered", os.environ.get("PYTHONUNBUFFERED"), "tricky", os.environ.get("TRICKY"))
print("cwd", os.getcwd())
print("stdin", repr(sys.stdin.read()))
print("leader", os.getpgid(0) == os.getppid() or os.getpgid(0) == os.getpid())
sys.stdout.flush()
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("grandchild", grandchild.pid, flush=True)
time.sleep(60)
"""
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ignoring TERM', flush=True); time.sleep(60)"


@pytest.fixture
def sshd(tmp_path):
    with running_sshd(tmp_path / "sshd") as server:
        yield server


@pytest.fixture
async def shell(sshd):
    host = ssh_host(sshd, max_backoff_s=1)
    sh = shell_for("rack1", host)
    assert isinstance(sh, SshShell) and not sh.local
    yield sh
    await host.close()


def tricky(tmp_path) -> list[str]:
    return [a.format(canary=tmp_path / "pwned") for a in TRICKY]


async def wait_line(path, prefix: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            for line in open(path).read().splitlines():
                if line.startswith(prefix):
                    return line
        await asyncio.sleep(0.05)
    raise AssertionError(f"no line starting with {prefix!r} in {path}")


def test_pure_helpers():
    assert remote_path("~/x/y.log") == "x/y.log" and remote_path("/abs") == "/abs" and remote_path("rel") == "rel"
    assert exit_code(143) == -15 and exit_code(2) == 2 and exit_code(None, "KILL") == -9 and exit_code(0) == 0
    assert parse_group_pids(" 10 10 Ss\n 11 10 Z\n 12 10 S+\n 13 99 S\n", 10) == {10, 12}
    assert shell_for("local").local


async def test_run_exact_argv_env_cwd_and_timeout(shell, tmp_path):
    args = tricky(tmp_path)
    workdir = tmp_path / "a dir; with $(stuff)"
    workdir.mkdir()
    done = await shell.run([sys.executable, "-c", ARGV_JSON, *args])
    assert done.ok and json.loads(done.stdout) == args
    done = await shell.run([sys.executable, "-c", "import os; print(os.getcwd()); print(os.environ['TRICKY'])"],
                           cwd=str(workdir), env={"TRICKY": args[1] + " $HOME ;"})
    assert done.stdout.splitlines() == [str(workdir), args[1] + " $HOME ;"]
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(ShellError, match="not valid"):
        await shell.run(["true"], env={"BAD;NAME": "x"})
    marker = f"optui-timeout-{os.getpid()}-{time.monotonic_ns()}"
    with pytest.raises(ShellError, match="did not finish"):  # the 60 s command was cut by its timeout
        await shell.run([sys.executable, "-c", "import time, sys; time.sleep(60)", marker], timeout_s=1)
    # the remote command was killed on the host, not just abandoned
    await until(lambda: not _pids_running(marker), timeout=10)


async def test_files(shell, tmp_path):
    target = tmp_path / "sub dir" / "it's.conf"
    assert await shell.read_file(str(target)) is None and await shell.file_size(str(target)) == 0
    await shell.write_file(str(target), "line 1\n$(not run) `x` 'q'\n")
    assert target.read_text() == "line 1\n$(not run) `x` 'q'\n" and oct(target.stat().st_mode)[-3:] == "644"
    assert await shell.read_file(str(target)) == target.read_text()
    assert await shell.file_size(str(target)) == len(target.read_bytes())
    await shell.rotate_file(str(target))
    assert not target.exists() and (tmp_path / "sub dir" / "it's.conf.1").exists()
    for n in range(2, 8):  # earlier starts' logs are kept, five of them (the oldest falls off)
        target.write_text(f"start {n}\n")
        await shell.rotate_file(str(target))
    kept = sorted(p.name for p in (tmp_path / "sub dir").iterdir())
    assert kept == [f"it's.conf.{n}" for n in range(1, 6)], kept
    assert (tmp_path / "sub dir" / "it's.conf.1").read_text() == "start 7\n"
    assert (tmp_path / "sub dir" / "it's.conf.5").read_text() == "start 3\n"
    with pytest.raises(ShellError):
        await shell.write_file("/proc/optui-cannot-write/x", "x")
    # "~/" is the remote user's home (the systemd user units' drop-ins go there)
    relative = f"optui-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        await shell.write_file(f"~/{relative}/u.d/optui.conf", "[Service]\n")
        assert (Path.home() / relative / "u.d" / "optui.conf").read_text() == "[Service]\n"
        assert await shell.read_file(f"~/{relative}/u.d/optui.conf") == "[Service]\n"
    finally:
        shutil.rmtree(Path.home() / relative, ignore_errors=True)


async def test_detached_launch_survives_a_dropped_link_then_stops_by_group(shell, sshd, tmp_path):
    log = tmp_path / "logs dir" / "server.log"
    args = tricky(tmp_path)
    child = await shell.spawn_to_log([sys.executable, "-c", CHILD, *args], str(log), cwd=str(tmp_path),
                                     env={"TRICKY": "a 'b' $c"})
    try:
        assert json.loads((await wait_line(log, "argv")).split(" ", 1)[1]) == args
        assert await wait_line(log, "unbuffered") == "unbuffered 1 tricky a 'b' $c"
        assert await wait_line(log, "cwd") == f"cwd {tmp_path}"
        assert await wait_line(log, "stdin") == "stdin ''"
        grandchild = int((await wait_line(log, "grandchild")).split()[1])
        assert os.getpgid(grandchild) == child.pid  # the wrapper leads the server's process group
        assert os.getsid(child.pid) == child.pid  # own session: detached from sshd's
        assert await shell.group_pids(child.pid) == set(group_members(child.pid))
        sshd.drop_connections()  # every connection and channel dies...
        await asyncio.sleep(0.5)
        assert group_members(child.pid), "the server died with the SSH link"
        assert await shell.pid_alive(child.pid)  # ...optui reconnects and still sees it
        assert await child.poll() is None
        outcome = await shell.stop_group(child.pid, timeout_s=10, handle=child)
        assert outcome.how == "term" and outcome.returncode == -15
        assert not group_members(child.pid) and not await shell.pid_alive(child.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, 9)


async def test_term_ignored_gets_kill_and_exit_status_is_read(shell, tmp_path):
    log = tmp_path / "s.log"
    quick = await shell.spawn_to_log([sys.executable, "-c", "import sys; print('bye'); sys.exit(3)"], str(log))
    assert await asyncio.wait_for(quick.wait(), 20) == 3
    child = await shell.spawn_to_log([sys.executable, "-c", STUBBORN], str(log))
    try:
        await wait_line(log, "ignoring TERM")
        outcome = await shell.stop_group(child.pid, timeout_s=0.5, handle=child)
        assert outcome.how == "kill" and outcome.returncode == -9 and not group_members(child.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, 9)
    with pytest.raises(OSError, match="not found"):
        await shell.spawn_to_log(["optui-no-such-program", "--x"], str(log))
    with pytest.raises(OSError, match="not found"):
        await shell.spawn_to_log([str(tmp_path / "nope")], str(log))


async def test_follow_resumes_from_its_offset_after_a_dropped_link(shell, sshd, tmp_path):
    log = tmp_path / "follow.log"
    log.write_text("old 1\nold 2\n")
    lines: list[str] = []
    follower = shell.follow_file(str(log), lines.append, offset=None)  # only what comes next
    task = asyncio.create_task(follower.run())
    try:
        await until(lambda: follower.offset is not None and follower._process is not None)
        with open(log, "a") as f:
            f.write("new 1\nnew 2\npartial")
        await until(lambda: lines == ["new 1", "new 2"])
        sshd.drop_connections()
        with open(log, "a") as f:  # written while the link is down
            f.write(" line\nnew 3\n")
        await until(lambda: lines == ["new 1", "new 2", "partial line", "new 3"], timeout=30)
        assert follower.restarts >= 1
        with open(log, "a") as f:
            f.write("new 4\n")
        await until(lambda: lines[-1] == "new 4")
        assert lines == ["new 1", "new 2", "partial line", "new 3", "new 4"]
    finally:
        follower.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_stream_dies_with_its_channel_and_pipes_separate_streams(shell, tmp_path):
    script = "import sys, time\nfor i in range(1000):\n    print('tick', i, flush=True); time.sleep(0.05)"
    lines = []
    stream = shell.stream_lines([sys.executable, "-c", script])
    async for line in stream:
        lines.append(line)
        if len(lines) == 3:
            break
    await stream.aclose()
    assert lines == ["tick 0", "tick 1", "tick 2"]
    # the remote tool is gone soon after the channel closed (no kill from optui's side)
    await until(lambda: not [p for p in _pids_running(script)], timeout=10)

    piped = await shell.spawn_piped([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"])
    out, err = await piped.stdout.read(1000), await piped.stderr.read(1000)
    assert await piped.wait() == 0 and out == b"out\n" and err == b"err\n"


def _pids_running(needle: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle.encode() in open(f"{entry.path}/cmdline", "rb").read():
                    found.append(int(entry.name))
    return found


async def test_unreachable_host_fails_fast_for_polls(sshd):
    host = ssh_host(sshd, max_backoff_s=30)
    shell = SshShell("rack1", host)
    try:
        assert (await shell.run(["echo", "hi"])).stdout == "hi\n"
        sshd.stop()
        await until(lambda: host.is_down(), timeout=15)
        # refused while the host is down, not held until the next reconnect (backoff up to 30 s):
        # a bound well under the backoff, not a timing
        with pytest.raises(ShellError):
            async with asyncio.timeout(15):
                await shell.pid_alive(1)
    finally:
        await host.close()


async def test_systemd_unit_over_ssh_journal_follow_resumes_from_its_cursor(tmp_path, monkeypatch):
    """The systemd controller, unchanged, over SSH (fake systemctl/journalctl first on the
    remote PATH): the drop-in is written on the host, the journal is followed over the
    connection, and after a dropped link it resumes from its cursor: no line lost or
    repeated."""
    from optui.adapters.controller_systemd import SystemdController
    from tests.helpers import fake_systemd

    state, units = tmp_path / "systemd-state", tmp_path / "units"
    monkeypatch.setenv("FAKE_SYSTEMD_DIR", str(state))
    unit = "sglang-remote.service"
    with running_sshd(tmp_path / "sshd", env={"FAKE_SYSTEMD_DIR": str(state), "FAKE_SYSTEMD_UNITS": str(units)}) as sshd:
        fake_systemd.install(sshd.bin_dir)
        host = ssh_host(sshd, max_backoff_s=1)
        ctl = SystemdController("qwen", unit, tmp_path / "state", shell=SshShell("rack1", host), unit_dir=str(units))
        ticker = [sys.executable, "-c", "import time\nfor i in range(100000):\n    print('tick', i, flush=True); time.sleep(0.1)",
                  "it's; $(x)"]
        lines: list[str] = []
        task = None
        try:
            launch = await ctl.start(ticker)
            assert (units / f"{unit}.d" / "optui.conf").exists() and launch.invocation
            follower = ctl.open_log(lines.append)
            task = asyncio.create_task(follower.run())
            await until(lambda: len(lines) >= 5)
            sshd.drop_connections()
            count = len(lines)
            await until(lambda: len(lines) >= count + 10, timeout=30)
            ticks = [int(line.split()[1]) for line in lines if line.startswith("tick ")]
            assert ticks == list(range(ticks[0], ticks[-1] + 1))  # consecutive: none lost, none twice
            assert any(call[-1].startswith("--after-cursor=") for call in fake_systemd.calls()
                       if call[0] == "journalctl" and "-f" in call)
            assert (await ctl.stop(10)).how == "term"
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            fake_systemd.cleanup()
            await host.close()


async def test_drain_reads_what_the_stream_has_not_delivered(shell, tmp_path):
    """A server that exited: its last lines are read from the follower's offset (the
    stream may still have them in flight), the unterminated one on flush."""
    log = tmp_path / "d.log"
    log.write_text("seen\nlast words\nno newline")
    lines: list[str] = []
    follower = shell.follow_file(str(log), lines.append, offset=len("seen\n"))
    await follower.drain()
    follower.flush()
    assert lines == ["last words", "no newline"]


async def test_logs_are_kept_one_per_experiment_bounded_in_count_and_bytes(tmp_path, monkeypatch):
    # issue 20: only the last few starts' logs were kept, so earlier experiments' logs were gone
    await check_kept_logs(LocalShell(), tmp_path, monkeypatch)


async def test_logs_are_kept_one_per_experiment_over_ssh(shell, tmp_path, monkeypatch):
    await check_kept_logs(shell, tmp_path, monkeypatch)


async def check_kept_logs(shell, tmp_path, monkeypatch) -> None:
    import optui.adapters.shell as local_shell
    import optui.adapters.shell_ssh as ssh_shell

    for module in (local_shell, ssh_shell):
        monkeypatch.setattr(module, "KEPT_EXPERIMENT_LOGS", 3)
        monkeypatch.setattr(module, "KEPT_EXPERIMENT_LOG_BYTES", 100)
    folder = tmp_path / "logs dir"
    folder.mkdir()
    log = folder / "demo.log"

    def kept() -> dict[str, str]:
        return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name != "demo.log"}

    for n, (experiment, size) in enumerate([("exp-0001", 10), ("exp-0002", 10), ("exp-0002", 20), ("exp-0003", 10)]):
        log.write_text(f"{n}" * size)
        os.utime(log, (1_000_000 + n, 1_000_000 + n))  # mtimes in start order, whatever the clock's resolution
        await shell.rotate_file(str(log), experiment)
        assert not log.exists()
    # one per experiment (exp-0002's later start replaced its first one), oldest first
    assert kept() == {"demo.log.exp-0001": "0" * 10, "demo.log.exp-0002": "2" * 20, "demo.log.exp-0003": "3" * 10}
    log.write_text("4" * 10)
    os.utime(log, (1_000_010, 1_000_010))
    await shell.rotate_file(str(log), "exp-0004")  # a fourth: the oldest goes (count)
    assert sorted(kept()) == ["demo.log.exp-0002", "demo.log.exp-0003", "demo.log.exp-0004"]
    log.write_text("5" * 85)
    os.utime(log, (1_000_020, 1_000_020))
    await shell.rotate_file(str(log), "exp-0005")  # 85 + 10 + 10 bytes > 100: exp-0003 goes too (bytes)
    assert sorted(kept()) == ["demo.log.exp-0004", "demo.log.exp-0005"]
    log.write_text("6" * 500)
    await shell.rotate_file(str(log), "exp-0006")  # the newest stays whatever its size
    assert sorted(kept()) == ["demo.log.exp-0006"]
    log.write_text("")
    await shell.rotate_file(str(log), "exp-0007")  # an empty log is not kept
    assert sorted(kept()) == ["demo.log.exp-0006"] and log.exists()
