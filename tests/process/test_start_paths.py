"""Every path that starts or stops a server takes the same per-server lock, and a read-only
window starts, stops and rewrites nothing (issue 15, "Major").

Real parts: the demo server as real subprocesses, two real Sessions on one campaign (the
same flock a second optui process takes), the real SQLite journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time

import pytest

from optui.adapters.journal import Journal, JournalError
from optui.adapters.proc import group_pids, pid_alive
from optui.config import load_config
from optui.demo.campaign import surviving_demo_port, write_demo_config
from optui.session import Session
from tests.helpers.demo import free_port

pytestmark = pytest.mark.timeout(120)


def pidfile_pid(cfg) -> int | None:
    try:
        return json.loads((cfg.parent / ".optui" / "servers" / "demo.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def fake_server_pids(cfg) -> set[int]:
    """PIDs of the running demo servers of campaign ``cfg`` (by command line: its port;
    other tests may run demo servers at the same time)."""
    port = str(campaign_port(cfg)).encode()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"optui.demo.fake_server" in cmd and b"--port\0" + port + b"\0" in cmd and pid_alive(int(entry)):
                found.add(int(entry))
    return found


async def wait_ready(session: Session, name: str = "demo", timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while session.servers[name].status.state.value != "ready":
        assert time.monotonic() < deadline, session.servers[name].status
        await asyncio.sleep(0.1)


def campaign_port(cfg) -> int:
    """The demo server's port in campaign ``cfg``."""
    return int(cfg.read_text().split("http://127.0.0.1:")[1].split('"')[0])


@contextlib.asynccontextmanager
async def running(cfg, *, ready: bool = False, **session_kw):
    """A started Session on ``cfg`` (another optui window or process), closed at the end;
    ``ready`` waits for its demo server to be READY first."""
    s = Session(load_config(cfg), **session_kw)
    await s.start()
    try:
        if ready:
            await wait_ready(s)
        yield s
    finally:
        await s.close()


def journal_events(cfg, types=None, target=None) -> list:
    """The campaign's journal events (read-only; [] before the journal exists)."""
    if not (cfg.parent / ".optui" / "optui.db").exists():
        return []
    try:
        j = Journal(cfg.parent / ".optui" / "optui.db", read_only=True)
    except JournalError:  # the file exists, its tables not yet (the CLI is creating them)
        return []
    try:
        return j.events(types=types, target=target)
    finally:
        j.close()


@pytest.fixture
def campaign(tmp_path):
    cfg = write_demo_config(tmp_path / "c", port=free_port(), speed=40.0)
    yield cfg
    pid = pidfile_pid(cfg)
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def test_two_windows_autostarting_at_once_launch_one_server(campaign):
    before = fake_server_pids(campaign)
    a, b = Session(load_config(campaign)), Session(load_config(campaign))
    try:
        await asyncio.gather(a.start(), b.start())
        await asyncio.gather(wait_ready(a), wait_ready(b))
        launched = fake_server_pids(campaign) - before
        starts = journal_events(campaign, ["server.starting"], "demo")
        assert len(starts) == 1, [e.data for e in starts]
        assert len(launched) == 1, f"two launches: {launched} (one orphaned on the port)"
        assert a.servers["demo"].status.pid == b.servers["demo"].status.pid == pidfile_pid(campaign)
    finally:
        await a.close()
        await b.close()


async def test_a_read_only_window_quitting_stops_nothing(campaign):
    async with running(campaign, ready=True) as owner:
        pid = owner.servers["demo"].status.pid
        async with running(campaign, read_only=True, stop_servers_on_exit=True) as viewer:  # `optui --read-only demo`
            await asyncio.sleep(1.0)
        viewer.kill_leftovers()
        assert pid_alive(pid) and group_pids(pid), "a read-only window stopped another window's server"


async def test_stop_waits_for_no_one_but_refuses_during_another_restart(campaign):
    from optui.session.errors import SessionError
    from optui.session.server.locks import ServerLock

    async with running(campaign, autostart=False) as s:
        other = ServerLock(campaign.parent / ".optui", "demo")
        assert other.acquire()  # another process restarting the server
        try:
            with pytest.raises(SessionError, match="being restarted by another optui process"):
                await s.stop_server("demo")
        finally:
            other.release()


async def test_a_demo_killed_with_sigkill_leaves_a_server_the_next_demo_keeps(campaign):
    async with running(campaign, ready=True):  # not a demo session: the server keeps running, as after SIGKILL
        port = campaign_port(campaign)
    assert surviving_demo_port(campaign.parent) == port
    os.killpg(pidfile_pid(campaign), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while surviving_demo_port(campaign.parent) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _optui_popen(cfg, *args):
    import subprocess
    import sys

    from tests.helpers.demo import subprocess_env

    return subprocess.Popen([sys.executable, "-m", "optui", "-c", str(cfg), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=subprocess_env(), start_new_session=True)


async def test_records_of_an_optui_killed_mid_way_are_closed_by_the_next_process(tmp_path):
    """SIGKILL of `optui restart` during the ready gate and of `optui bench run` mid-run left
    an experiment with no outcome and a bench.started with no bench.finished."""
    from optui.session.journal.export import load_experiments

    cfg = write_demo_config(tmp_path / "k", port=free_port(), speed=1.0)  # ~6 s of startup phases
    try:
        cli = _optui_popen(cfg, "restart", "demo")
        deadline = time.monotonic() + 60
        while not journal_events(cfg, ["server.starting"]):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        cli.kill()
        cli.wait(10)
        async with running(cfg, ready=True, autostart=False):  # the next writing process
            pass
        interrupted = journal_events(cfg, ["server.restart.interrupted"])
        assert len(interrupted) == 1 and interrupted[0].data["pid"] == cli.pid, [e.data for e in interrupted]
        bench = _optui_popen(cfg, "bench", "run", "demo", "sweep")
        deadline = time.monotonic() + 60
        while not journal_events(cfg, ["bench.started"]):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        bench.kill()
        bench.wait(10)
        async with running(cfg, autostart=False):
            pass
        finished = journal_events(cfg, ["bench.finished"])
        assert [e.data["status"] for e in finished] == ["interrupted"], [e.data for e in finished]
        j = Journal(cfg.parent / ".optui" / "optui.db", read_only=True)
        try:
            exps = load_experiments(j)
        finally:
            j.close()
        assert exps and exps[-1].outcome == "ready", exps  # it came up, as the next window saw
        async with running(cfg, autostart=False):  # closed once: a third process adds nothing
            pass
        assert len(journal_events(cfg, ["server.restart.interrupted", "bench.finished"])) == 2
    finally:
        pid = pidfile_pid(cfg)
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_port_in_time_wait_is_still_the_demos_port():
    """After a quit the demo server's port keeps TIME-WAIT connections for ~60 s; a free-port
    check without SO_REUSEADDR took it for busy, so a second `optui demo` moved to a new port
    (and the port change became every later experiment's 'change')."""
    import socket

    from optui.demo.campaign import free_port as demo_free_port

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the server side closes first: its end of the connection goes to TIME-WAIT
    client.close()
    listener.close()
    time.sleep(0.2)
    assert demo_free_port(port) == port


async def test_a_demo_that_stops_its_server_at_quit_leaves_down_as_the_journaled_state(campaign):
    """Each demo start journaled `ready → starting` (the demo had stopped its server at quit
    without saying its state changed)."""
    from optui.session.server.history import last_journaled_state

    async with running(campaign, ready=True, stop_servers_on_exit=True):
        pass
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        assert last_journaled_state(j, "demo") == "down"
    finally:
        j.close()
    async with running(campaign, ready=True, stop_servers_on_exit=True):  # the next demo start
        pass
    states = [(e.data["old"], e.data["new"]) for e in journal_events(campaign, ["server.state"], "demo")]
    assert ("ready", "starting") not in states and states.count(("down", "starting")) == 2, states


async def test_a_window_that_stops_its_server_at_quit_is_no_crash_in_another_window(campaign):
    """`optui demo` quit (it stops its server) while a second window watched the server: the
    second window journaled `down → crashed`, `server.failed` (unknown, process gone) and a
    crash alert one second after the first window's `server.stopped`."""
    demo = Session(load_config(campaign), stop_servers_on_exit=True)
    await demo.start()
    closed = False
    try:
        await wait_ready(demo)
        pid = demo.servers["demo"].status.pid
        async with running(campaign, ready=True, autostart=False) as other:
            closed = True
            await demo.close()  # the demo window quits: it stops its server
            deadline = time.monotonic() + 30
            while other.servers["demo"].status.state.value not in ("down", "crashed"):
                assert time.monotonic() < deadline, other.servers["demo"].status
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.5)  # two probes later: no crash after all
            st = other.servers["demo"].status
            assert st.state.value == "down" and st.crash_class is None, st
            assert "stopped" in (st.message or ""), st.message
            assert not pid_alive(pid)
    finally:
        if not closed:
            await demo.close()
    events = journal_events(campaign, target="demo")
    assert not [e for e in events if e.type == "server.failed"], [e.data for e in events if e.type == "server.failed"]
    assert not [e for e in events if e.type == "server.state" and e.data["new"] == "crashed"]
    assert not [e for e in journal_events(campaign, ["alert"]) if "crash" in str(e.data)]


async def test_a_demo_window_quitting_stops_the_server_another_process_relaunched_before_it_looked(campaign):
    """`optui demo` beside `optui search run` (or `optui restart`) in a shell: the CLI relaunched
    the server and exited, and the window quit before its next poll saw the new launch. The
    window stopped only the launch it tracked (gone already) and the new server ran on, owned by
    no one (a CI run's leak guard found it). The window's poll here is an hour long: it never
    looks before it quits."""
    import subprocess
    import sys

    from tests.helpers.demo import subprocess_env

    campaign.write_text(campaign.read_text().replace("poll_interval_s = 1.0", "poll_interval_s = 3600"))
    demo = Session(load_config(campaign), stop_servers_on_exit=True)
    await demo.start()
    closed = False
    try:
        await wait_ready(demo)
        deadline = time.monotonic() + 30
        while demo.servers["demo"].status.busy is not None:  # its autostart's ready gate ends
            assert time.monotonic() < deadline, demo.servers["demo"].status
            await asyncio.sleep(0.1)
        first = demo.servers["demo"].status.pid
        res = subprocess.run([sys.executable, "-m", "optui", "-c", str(campaign), "restart", "demo", "--set",
                              "--max-running-requests=8"], capture_output=True, text=True, timeout=120,
                             env=subprocess_env(), stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stdout + res.stderr
        relaunched = pidfile_pid(campaign)
        assert relaunched and relaunched != first and pid_alive(relaunched) and not pid_alive(first)
        assert demo.servers["demo"].status.pid == first  # the window has not looked yet
        closed = True
        await demo.close()
        assert not pid_alive(relaunched), "the relaunched server outlived the window that stops its servers"
        assert not demo.exit_notes, demo.exit_notes
        assert pidfile_pid(campaign) is None
    finally:
        if not closed:
            await demo.close()


async def test_a_restart_is_refused_while_a_benchmark_runs_against_the_server(campaign):
    """A restart during another process's `bench run` went through: the run went on against
    the new server and its results were credited to the old experiment (break-it trial)."""
    import subprocess
    import sys

    from tests.helpers.demo import subprocess_env

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "optui", "-c", str(campaign), *args], capture_output=True,
                              text=True, timeout=120, env=subprocess_env(), stdin=subprocess.DEVNULL)

    assert cli("restart", "demo").returncode == 0
    campaign.write_text(campaign.read_text().replace('"--num-prompts", "64"', '"--num-prompts", "4000"'))
    bench = _optui_popen(campaign, "bench", "run", "demo", "sweep")
    try:
        deadline = time.monotonic() + 60
        while not journal_events(campaign, ["bench.started"]):
            assert time.monotonic() < deadline and bench.poll() is None
            await asyncio.sleep(0.1)
        res = cli("restart", "demo", "--set", "--max-running-requests=8")
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"benchmark sweep is running against it in optui process {bench.pid}" in res.stdout + res.stderr
        assert len(journal_events(campaign, ["server.restart"])) == 1  # nothing was stopped
    finally:
        bench.kill()
        bench.wait(10)


async def _restart_killed_while_starting(cfg, signal_name: str = "KILL"):
    """An `optui restart demo` of campaign ``cfg`` ended by ``signal_name`` once it journaled
    ``server.starting`` (bounded waits); its Popen, ended."""
    before = len(journal_events(cfg, ["server.starting"]))
    cli = _optui_popen(cfg, "restart", "demo")
    deadline = time.monotonic() + 60
    while len(journal_events(cfg, ["server.starting"])) == before:
        assert time.monotonic() < deadline and cli.poll() is None
        await asyncio.sleep(0.1)
    cli.send_signal(getattr(signal, f"SIG{signal_name}"))
    cli.wait(30)
    return cli


#: every CLI command, after a SIGKILLed `optui restart`, and whether it opens the journal
#: writable (it closes the restart before it runs: cli/common.close_before_command); those that
#: never open it close it too, being run on a campaign (cli/common.CLOSES_ON_A_CAMPAIGN)
AFTER_A_KILLED_RESTART = [
    (["gpus"], False), (["log", "classify", "server.log"], False), (["bench", "parse", "bench.log"], False),
    (["status", "--wait", "0"], True), (["todo", "list"], True), (["journal", "tail"], True),
    (["search", "status"], True), (["bench", "import", "bench.log"], True), (["mcp"], True),
    (["bench", "run", "demo", "sweep", "--repeat", "1"], True), (["restart", "demo", "--no-wait"], True)]


@pytest.mark.timeout(600)
async def test_a_killed_optui_restart_is_closed_by_the_next_optui_command_of_any_kind(tmp_path):
    """Issue 30: after SIGKILL of `optui restart` the interrupted record was written only by a
    TUI or by `status`, `todo`, `journal`, `search`; then by every command that opens the
    journal writable; now by every command run on the campaign, in one place (the CLI group's
    entry), once: `gpus`, `log classify`, `bench parse` (which never open the journal for
    themselves) too, and they still exit 0. Real processes, the walk's commands one by one
    after a new killed restart each."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from optui.cli.common import closes_on_a_campaign, opens_journal
    from tests.helpers.demo import subprocess_env

    cfg = write_demo_config(tmp_path / "k", port=free_port(), speed=1.0)  # ~6 s of startup phases
    shutil.copy(Path(__file__).parents[1] / "fixtures" / "bench" / "vllm_2025.log", cfg.parent / "bench.log")
    (cfg.parent / "server.log").write_text("Loading weights\n")
    try:
        for command, opens in AFTER_A_KILLED_RESTART:
            assert opens_journal(command) is opens, command
            assert closes_on_a_campaign(command) is not opens, command
            cli = await _restart_killed_while_starting(cfg)
            assert [e for e in journal_events(cfg, ["server.restart.interrupted"]) if e.data["pid"] == cli.pid] == []
            for _ in range(2):  # closed once: a second run adds nothing
                done = await asyncio.to_thread(
                    subprocess.run, [sys.executable, "-m", "optui", "-c", str(cfg), *command], capture_output=True,
                    text=True, env=subprocess_env(), timeout=180, stdin=subprocess.DEVNULL, cwd=cfg.parent)
                assert "Traceback" not in done.stderr + done.stdout, (command, done.stderr)
                assert "internal error" not in done.stderr, (command, done.stderr)
                if not opens:
                    assert done.returncode == 0, (command, done.stderr)
            mine = [e for e in journal_events(cfg, ["server.restart.interrupted"]) if e.data["pid"] == cli.pid]
            assert len(mine) == 1, (command, [e.data for e in mine])
    finally:
        pid = pidfile_pid(cfg)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_every_cli_command_either_opens_the_journal_or_closes_on_a_campaign():
    """A command added later is classified: it opens the journal (OPENS_JOURNAL) or is one of
    those that never do but close what a dead optui left on a campaign (CLOSES_ON_A_CAMPAIGN);
    either way it is closed before it runs. The walk above runs each top-level command."""
    from optui.cli.common import CLOSES_ON_A_CAMPAIGN, closes_on_a_campaign, opens_journal
    from tests.process.test_faults_inputs import _leaf_commands

    leaves = _leaf_commands()
    assert CLOSES_ON_A_CAMPAIGN <= leaves
    assert [c for c in leaves - {"demo"} if opens_journal(c.split()) is closes_on_a_campaign(c.split())] == []
    assert {c.split()[0] for c in leaves} - {"demo"} == {command[0] for command, _ in AFTER_A_KILLED_RESTART}


def _dead_restart(journal_path) -> int:
    """A `server.restart` of server demo by an optui process that is gone (its pid), journaled."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          timeout=60, check=True)
    pid = int(gone.stdout)
    journal = Journal(journal_path)
    try:
        journal.append("server.restart", "demo", {"reason": "cli", "old_argv": [], "new_argv": ["x"], "pid": pid})
    finally:
        journal.close()
    return pid


def test_gpus_closes_a_dead_optuis_restart_only_on_a_campaign_and_never_fails_for_the_journal(tmp_path):
    """Issue 30, the commands that never open the journal (`optui gpus` here, with a saved
    capture): on a campaign whose journal exists they journal a dead optui's restart as
    interrupted; without a journal they make none; a corrupt or newer-schema journal is left
    byte for byte; a journal another process holds locked is left for the next process;
    `--read-only` writes nothing; none of these changes `gpus`' exit status or output."""
    import sqlite3
    import subprocess
    import sys
    from pathlib import Path

    from optui.adapters.journal import SCHEMA_VERSION
    from tests.helpers.demo import subprocess_env

    capture = Path(__file__).parents[1] / "fixtures" / "gpu" / "custom-order-header.csv"
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[servers.demo]\nkind = "sglang"\nurl = "http://127.0.0.1:9"\n')
    db = tmp_path / ".optui" / "optui.db"

    def gpus(*options: str) -> str:
        done = subprocess.run([sys.executable, "-m", "optui", *options, "gpus", "--from-file", str(capture)],
                              cwd=tmp_path, capture_output=True, text=True, env=subprocess_env(), timeout=120,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0 and "Traceback" not in done.stderr and done.stderr == "", done.stderr
        return done.stdout

    def interrupted() -> list[int]:
        con = sqlite3.connect(db)
        try:
            return [int(json.loads(d)["pid"]) for (d,) in
                    con.execute("SELECT data FROM events WHERE type = 'server.restart.interrupted'")]
        finally:
            con.close()

    plain = gpus()  # no journal yet: none is made
    assert "0" in plain and not db.exists() and not db.parent.exists()
    db.parent.mkdir()
    db.write_bytes(os.urandom(8192))  # corrupt: left as it is
    corrupt = db.read_bytes()
    assert gpus() == plain and db.read_bytes() == corrupt
    db.unlink()
    pid = _dead_restart(db)
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 99")  # a newer optui's journal: never written
    con.close()
    newer = db.read_bytes()
    assert gpus() == plain and db.read_bytes() == newer
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    con.close()
    assert gpus("--read-only") == plain and interrupted() == []
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], "
                               "isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); "
                               "time.sleep(120)", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert gpus() == plain  # the lock's holder is another process: left for the next one
    finally:
        holder.kill()
        holder.wait(30)
    assert interrupted() == []
    assert gpus() == plain and interrupted() == [pid]
    assert gpus() == plain and interrupted() == [pid]  # once


@pytest.mark.parametrize("signal_name", ["TERM", "HUP"])
async def test_optui_restart_journals_its_own_sigterm_or_sighup(tmp_path, signal_name):
    """Issue 30: SIGTERM or SIGHUP (a closed terminal) of `optui restart` journaled nothing;
    now the restart is cancelled cleanly and journaled as interrupted by that signal, by the
    restart itself (exit 128+N), and the next command adds nothing."""
    import subprocess
    import sys

    from tests.helpers.demo import subprocess_env

    cfg = write_demo_config(tmp_path / "t", port=free_port(), speed=1.0)  # ~6 s of startup phases
    try:
        cli = await _restart_killed_while_starting(cfg, signal_name)
        assert cli.returncode == 128 + getattr(signal, f"SIG{signal_name}")
        interrupted = journal_events(cfg, ["server.restart.interrupted"])
        assert len(interrupted) == 1 and interrupted[0].data["pid"] == cli.pid, [e.data for e in interrupted]
        assert f"ended by SIG{signal_name}" in interrupted[0].data["message"], interrupted[0].data
        done = subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), "todo", "list"], capture_output=True,
                              text=True, env=subprocess_env(), timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert len(journal_events(cfg, ["server.restart.interrupted"])) == 1
    finally:
        pid = pidfile_pid(cfg)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


async def test_a_kill_9_right_after_a_cli_restart_is_not_missed_by_an_open_window(tmp_path):
    """Issue 30: `kill -9` of the server about a second after `optui restart` exited: the open
    window had not followed that launch yet (the CLI held the restart lock), found its process
    gone, and kept showing the server as before (DOWN, or an old crash cause); nothing was
    journaled. Now it shows the launch CRASHED with why, and it is journaled once."""
    import subprocess
    import sys

    from tests.helpers.demo import subprocess_env

    cfg = write_demo_config(tmp_path / "k9", port=free_port(), speed=40.0)
    try:
        async with running(cfg, autostart=False) as window:
            rt = window.servers["demo"]
            follow = rt.other_processes.follow_launch_made_elsewhere

            async def not_yet() -> bool:  # the window has not polled since the CLI exited (a loaded machine)
                return False

            rt.other_processes.follow_launch_made_elsewhere = not_yet  # type: ignore[method-assign]
            done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "optui", "-c", str(cfg), "restart", "demo"],
                                           capture_output=True, text=True, env=subprocess_env(), timeout=120,
                                           stdin=subprocess.DEVNULL)
            assert done.returncode == 0, done.stderr
            pid = pidfile_pid(cfg)
            assert pid is not None
            os.killpg(pid, signal.SIGKILL)
            rt.other_processes.follow_launch_made_elsewhere = follow  # type: ignore[method-assign]
            deadline = time.monotonic() + 30
            while rt.status.state.value != "crashed":
                assert time.monotonic() < deadline, (rt.status.state, rt.status.message)
                await asyncio.sleep(0.1)
            assert f"pid {pid} ended while no optui process watched it" in rt.status.message, rt.status.message
            assert rt.status.crash_cause and rt.status.crash_cause.startswith(f"pid {pid} ended")
            await asyncio.sleep(2.0)  # more polls: journaled once
        failed = journal_events(cfg, ["server.failed"])
        assert [(e.data.get("pid"), e.data.get("unwatched")) for e in failed] == [(pid, True)], [e.data for e in failed]
    finally:
        pid = pidfile_pid(cfg)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
