"""Servers and benchmarks on an SSH host, end to end: a real OpenSSH server on loopback,
the demo SGLang server launched *through* it (so it is a remote process of that host), the
real Session with its one connection per host. Exact argv over SSH, a server that outlives
its SSH link and optui itself, log following resumed without loss or repeats, the host's
connection problem on its servers, remote benchmarks streamed live and aborted with nothing
left."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
from pathlib import Path

import httpx
import pytest

from optui.config import load_config
from optui.core.gpu.samples import HostStatus
from optui.core.text.textstream import LineSplitter
from optui.session import Session
from optui.session.errors import SessionError
from tests.helpers.demo import SRC, free_port
from tests.helpers.sshd import group_members, host_config, running_sshd
from tests.helpers.waiting import until

pytestmark = pytest.mark.timeout(120)

TOOLS = Path(__file__).parents[1] / "helpers" / "fake_tools"
#: Flags that a shell would split, run or expand if anything joined them unquoted.
TRICKY_NAME = "it's \"q\"; touch {canary} $(touch {canary}) `id` a b"


@pytest.fixture
def sshd(tmp_path):
    with running_sshd(tmp_path / "sshd") as server:
        yield server


def demo_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "optui.demo.fake_server", "--model-path", "demo/Model-8B", "--port", str(port),
            "--demo-speed", "50", *extra]


def write_campaign(tmp_path: Path, sshd, port: int, *, benches: str = "") -> Path:
    text = host_config(sshd) + f'''
[servers.demo]
host = "rack1"
url = "http://127.0.0.1:{port}"
kind = "sglang"
control = "process"
ready_timeout_s = 60
stop_timeout_s = 10
poll_interval_s = 0.3
argv = {json.dumps(demo_argv(port))}
env = {{ PYTHONPATH = {json.dumps(str(SRC))} }}
log_file = {json.dumps(str(tmp_path / "remote logs" / "demo.log"))}
''' + benches
    path = tmp_path / "optui.toml"
    path.write_text(text)
    return path


def ssh_connections(port: int) -> int:
    """Established client TCP connections to ``port`` on 127.0.0.1 (from /proc/net/tcp)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].split(":")[1], 16) == port and fields[3] == "01":
            count += 1
    return count


@contextlib.contextmanager
def kill_group_at_end():
    """Kill the recorded remote server's group whatever the test did (the leak guard would
    fail the run otherwise)."""
    pgids: list[int] = []
    try:
        yield pgids
    finally:
        for pgid in pgids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


def log_lines_match(rt, path: Path) -> bool:
    """The runtime's log tail is exactly the end of the remote log file (as optui's line
    splitter reads it: progress redraws collapsed): no line lost or repeated by the
    (re)connections."""
    tail = list(rt.log_tail)
    lines = LineSplitter().feed(path.read_bytes()).lines
    return bool(tail) and lines[-len(tail):] == tail


async def test_remote_restart_exact_argv_survives_drops_and_optui_restart(sshd, tmp_path):
    port = free_port()
    config = write_campaign(tmp_path, sshd, port)
    log = tmp_path / "remote logs" / "demo.log"
    canary = tmp_path / "pwned"
    new_argv = demo_argv(port, "--served-model-name", TRICKY_NAME.format(canary=canary), "--max-running-requests", "7")
    with kill_group_at_end() as pgids:
        session = Session(load_config(config))
        await session.start()
        try:
            rt = session.servers["demo"]
            assert rt.controller.shell.host == "rack1" and not rt.controller.shell.local
            status = await session.restart_server("demo", new_argv, reason="test")
            pid = rt.controller.launch.pid
            pgids.append(pid)
            assert status.state.value == "ready", status
            info = httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).json()
            assert shlex.split(info["launch_command"])[3:] == new_argv[3:]  # the exact argv, quotes and all
            assert not canary.exists()
            assert os.environ["OPTUI_TEST_RUN"].encode() in Path(f"/proc/{pid}/environ").read_bytes()  # went via sshd
            assert os.getsid(pid) == pid  # detached: its own session, not sshd's
            await until(lambda: session.gpus.snapshots["rack1"].status is HostStatus.LIVE)
            assert ssh_connections(sshd.port) == 1  # GPU stream, commands and log follow share one connection
            await until(lambda: log_lines_match(rt, log))

            # the link dies: the server keeps running, optui reconnects and keeps following
            ssh = session.ssh_hosts["rack1"]
            before = ssh.reconnects
            sshd.drop_connections()
            await until(lambda: ssh.reconnects > before and ssh.state.value == "live", timeout=30)
            assert group_members(pid) and rt.status.state.value == "ready"
            seen = rt.log_lines_total
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)  # one more access line
            await until(lambda: rt.log_lines_total > seen and log_lines_match(rt, log), timeout=30)
        finally:
            await session.close()

        # optui restarts: the server is still there; it re-attaches and follows new lines only
        assert group_members(pid)
        session = Session(load_config(config))
        await session.start()
        try:
            rt = session.servers["demo"]
            await until(lambda: rt.status.state.value == "ready", timeout=30)
            assert rt.controller.launch.pid == pid and rt.status.argv == tuple(new_argv)
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            await until(lambda: any("GET /health" in line for line in rt.log_tail), timeout=30)
            await until(lambda: log_lines_match(rt, log))
            assert not any("server_args=" in line for line in rt.log_tail)  # resumed at the end, not from the start
            await session.stop_server("demo")
            assert not group_members(pid) and rt.status.state.value == "down"
        finally:
            await session.close()


async def test_host_outage_shows_on_servers_and_everything_resumes(sshd, tmp_path):
    port = free_port()
    config = write_campaign(tmp_path, sshd, port)
    log = tmp_path / "remote logs" / "demo.log"
    with kill_group_at_end() as pgids:
        session = Session(load_config(config))
        await session.start()
        try:
            rt = session.servers["demo"]
            await session.restart_server("demo", demo_argv(port), reason="test")
            pid = rt.controller.launch.pid
            pgids.append(pid)
            await until(lambda: session.gpus.snapshots["rack1"].status is HostStatus.LIVE)
            assert session.snapshot().server("demo").host_problem is None

            sshd.stop()  # connection killed mid-stream, and the host stays away for a while
            host = await until(lambda: (h := session.gpus.snapshots["rack1"]).status in (HostStatus.LOST, HostStatus.STALE)
                               and h, timeout=15)
            assert host.samples  # the last values stay visible
            problem = await until(lambda: session.snapshot().server("demo").host_problem, timeout=15)
            assert problem.startswith("ssh lost") and "retry in" in problem
            assert rt.status.state.value == "ready"  # HTTP still answers: the server is fine, the link is not
            session.ssh_hosts["rack1"].connect_timeout_s = 1.0  # how long an action waits for the link
            with pytest.raises(SessionError, match="cannot stop"):
                await session.stop_server("demo")
            assert rt.status.state.value == "ready" and group_members(pid)  # nothing half-done
            with open(log, "a") as f:  # written while optui cannot see the host
                f.write("written during the outage\n")

            sshd.start()  # same port, same host key
            session.ssh_hosts["rack1"].retry_now()
            await until(lambda: session.gpus.snapshots["rack1"].status is HostStatus.LIVE, timeout=30)
            await until(lambda: session.snapshot().server("demo").host_problem is None, timeout=10)
            await until(lambda: "written during the outage" in rt.log_tail and log_lines_match(rt, log), timeout=30,
                        what=lambda: f"follower {vars(rt._log)}, tail {list(rt.log_tail)[-3:]}")
            assert group_members(pid)
            await session.stop_server("demo")
            assert not group_members(pid)
        finally:
            await session.close()


async def test_remote_crash_is_classified_from_its_exit_status_and_last_log_lines(sshd, tmp_path):
    port = free_port()
    session = Session(load_config(write_campaign(tmp_path, sshd, port)))
    await session.start()
    try:
        status = await session.restart_server("demo", demo_argv(port, "--no-such-flag"), reason="test")
        assert (status.state.value, str(status.crash_class)) == ("crashed", "bad_flag")
        assert any("unrecognized arguments: --no-such-flag" in line for line in status.crash_lines)
        failed = session.journal.events(types=["server.failed"])[-1].data
        assert failed["returncode"] == 2  # the exit status, read from the host
    finally:
        await session.close()


async def test_remote_benchmark_streams_live_reads_its_result_file_and_aborts_clean(sshd, tmp_path):
    port = free_port()
    out = tmp_path / "remote results" / "res.jsonl"
    out.parent.mkdir()
    sglang = [sys.executable, str(TOOLS / "sglang" / "bench_serving.py")]
    benches = f'''
[benchmarks.remote]
server = "demo"
host = "rack1"
argv = {json.dumps([*sglang, "--num-prompts", "50", "--ms-per-request", "20", "--max-concurrency", "2",
                    "--output-file", str(out)])}

[benchmarks.stuck]
server = "demo"
host = "rack1"
stall_s = 300
argv = {json.dumps([*sglang, "--child", "--silent", "120"])}
'''
    session = Session(load_config(write_campaign(tmp_path, sshd, port, benches=benches)))
    try:
        run = session.benches.run("remote")
        await until(lambda: run.view.progress.done and run.view.status == "running", timeout=30)  # live, mid-run
        # the server of this campaign is not started: the run says so first, then the remote command
        assert run.lines[0].startswith("optui: demo is DOWN"), run.lines[:2]
        assert run.lines[1].startswith("rack1$ ") and any(line.startswith("benchmark_args=") for line in run.lines)
        await session.benches.wait()
        [result] = run.view.results
        assert run.view.status == "ok" and result.extra["source"] == "file"
        assert result.output_throughput_tok_s == pytest.approx(100 * 2**0.8 + 0.123456)  # the remote file, full precision

        run = session.benches.run("stuck")
        await until(lambda: any(line.startswith("benchmark_args=") for line in run.lines), timeout=30)
        pgid = run.pid
        members = group_members(pgid)
        assert len(members) >= 2  # the client and its child, in the remote group

        def marked() -> bool:  # every member carries the test run's mark (a wrapper shell may still be exiting)
            try:
                return all(os.environ["OPTUI_TEST_RUN"].encode() in Path(f"/proc/{p}/environ").read_bytes()
                           for p in group_members(pgid))
            except OSError:  # one just ended
                return False

        await until(marked, timeout=10)
        assert session.benches.abort()
        await session.benches.wait()
        assert run.view.status == "aborted"
        assert not group_members(pgid)  # nothing left on the host
    finally:
        await session.close()


async def test_lost_host_never_blocks_the_ui_or_the_other_host(tmp_path):
    """Two SSH hosts; one's sshd dies. The other keeps streaming, the dead one's server
    shows the problem, and keys are still handled: the UI's longest gap meanwhile is a duration,
    recorded for bench/ui_gaps.py, never asserted (a UI blocked on the dead link would hold the
    keys until the test's timeout)."""
    from optui.ui.app import OptuiApp
    from tests.helpers.faults import Heartbeat

    with running_sshd(tmp_path / "a") as a, running_sshd(tmp_path / "b") as b:
        config = tmp_path / "optui.toml"
        config.write_text(host_config(a, "node-a") + host_config(b, "node-b") + '''
[servers.far]
host = "node-b"
url = "http://127.0.0.1:1"
control = "none"
''')
        app = OptuiApp(Session(load_config(config)))
        async with app.run_test(size=(160, 45)) as pilot:
            session = app.session
            await until(lambda: all(session.gpus.snapshots[h].status is HostStatus.LIVE for h in ("node-a", "node-b")))
            b.stop()
            await until(lambda: session.gpus.snapshots["node-b"].status in (HostStatus.LOST, HostStatus.STALE), timeout=15)
            await until(lambda: "ssh lost" in app.query_one("#servers").render().plain, timeout=15)
            source = session.gpus.sources["node-a"]
            ticks = source.ticks
            beat = Heartbeat(app)
            for _ in range(5):
                await pilot.press("j")
                await pilot.pause()
                await asyncio.sleep(0.3)
            beat.stop("keys while node-b is lost")
            assert beat.ticks >= 5  # the app's own timers ran all along
            await until(lambda: source.ticks >= ticks + 3, timeout=10)  # node-a never stopped
            assert session.gpus.snapshots["node-a"].status is HostStatus.LIVE
            await pilot.press("q")


def test_config_benchmark_host_and_remote_defaults(tmp_path):
    from optui.adapters.controller_factory import build_controller
    from optui.adapters.ssh import SshHost
    from optui.config import ConfigError, ServerConfig, parse_config_text
    from optui.session.ssh_hosts import shell_for

    base = '[hosts.n1]\nssh = "n1"\n[servers.s]\nurl = "http://h:1"\ncontrol = "none"\n'
    cfg = parse_config_text(base + '[benchmarks.b]\nserver = "s"\nhost = "n1"\nargv = ["x"]\n')
    assert cfg.benchmarks["b"].host == "n1"
    assert parse_config_text(base + '[benchmarks.b]\nserver = "s"\nargv = ["x"]\n').benchmarks["b"].host == "local"
    with pytest.raises(ConfigError, match=r"benchmarks\.b\.host.*unknown host 'n9'"):
        parse_config_text(base + '[benchmarks.b]\nserver = "s"\nhost = "n9"\nargv = ["x"]\n')
    with pytest.raises(ConfigError, match="built-in load generator runs inside optui"):
        parse_config_text(base + '[benchmarks.b]\nserver = "s"\nhost = "n1"\nbuiltin = {}\n')
    # a server on an SSH host logs into the remote home by default; the pidfile stays local
    shell = shell_for("n1", SshHost("n1", "n1"))
    ctl = build_controller("qwen", ServerConfig(url="http://h:1", host="n1", argv=["x"]), tmp_path, shell)
    assert ctl.log_path == ".optui/logs/qwen.log" and ctl.pidfile == tmp_path / "servers" / "qwen.json"
    assert "on n1" in ctl.preview(["x", "--a b"])


async def test_a_remote_server_start_records_the_servers_own_exit_status(sshd, tmp_path):
    """The command log's row of a server started over SSH showed the exit status of the
    launch wrapper that returns at once (0, in a few ms), not the server's: it says
    ``running`` while the server runs, then the server's own status, the same as the
    journal's, for a crash and for a stop."""
    port = free_port()
    session = Session(load_config(write_campaign(tmp_path, sshd, port)))
    await session.start()

    def server_rows(argv: list[str]):
        return [r for r in session.command_log.records if r.argv == tuple(argv)]

    with kill_group_at_end() as pgids:
        try:
            bad = demo_argv(port, "--no-such-flag")
            status = await session.restart_server("demo", bad, reason="test")
            assert status.state.value == "crashed"
            await session.synced()
            failed = session.journal.events(types=["server.failed"])[-1].data
            assert failed["returncode"] == 2
            [row] = server_rows(bad)
            assert (row.host, row.running, row.exit_text()) == ("rack1", False, "2"), row

            good = demo_argv(port)
            status = await session.restart_server("demo", good, reason="test")
            pgids.append(session.servers["demo"].controller.launch.pid)
            assert status.state.value == "ready", status
            [row] = server_rows(good)
            assert row.running and row.exit_text() == "running", row
            await session.stop_server("demo")
            await session.synced()
            stopped = session.journal.events(types=["server.stopped"])[-1].data
            [row] = server_rows(good)
            assert not row.running and row.returncode == stopped["returncode"] is not None, (row, stopped)
            assert row.duration_s > 0.5  # the server's run, not the launch's few milliseconds
        finally:
            await session.close()


async def test_a_remote_server_reattached_after_optui_restarted_ends_with_its_own_exit_status(sshd, tmp_path):
    """A server optui re-attached to (started by an earlier optui process) that died was
    journaled with ``returncode: null`` ("exit status unknown"), though its launch wrapper
    had written the status next to its log: it is read from there."""
    port = free_port()
    config = write_campaign(tmp_path, sshd, port)
    with kill_group_at_end() as pgids:
        session = Session(load_config(config))
        await session.start()
        try:
            status = await session.restart_server("demo", demo_argv(port), reason="test")
            assert status.state.value == "ready", status
            pid = session.servers["demo"].controller.launch.pid
            pgids.append(pid)
        finally:
            await session.close()  # the server runs on
        session = Session(load_config(config))
        await session.start()
        try:
            rt = session.servers["demo"]
            await until(lambda: rt.status.state.value == "ready", timeout=30)
            [server] = [p for p in group_members(pid) if p != pid]  # the server itself, not its wrapper
            os.kill(server, signal.SIGKILL)
            await until(lambda: rt.status.state.value == "crashed", timeout=30)
            await session.synced()
            failed = session.journal.events(types=["server.failed"])[-1].data
            assert failed["returncode"] == -9 and failed["message"].startswith("killed by"), failed
        finally:
            await session.close()
