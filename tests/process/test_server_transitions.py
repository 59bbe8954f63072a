"""A server's status changes through one door (session/server/transitions.py), and the
restart flow is an object that runs on what it is given (issue 17 §4).

Real parts: the toy server and a sleeping Python as real subprocesses, the real SQLite
journal, a real listening socket; the restart-flow tests give the flow a fake launcher,
controller and probe instead of a ServerRuntime (no Session, no server process).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time

import pytest

from optui.adapters.controller import ProcessController
from optui.adapters.journal import Journal
from optui.adapters.shell import LocalShell
from optui.config import ServerConfig
from optui.core.server.fsm import after_load_reading
from optui.core.server.state import CrashClass, ServerState, ServerStatus
from optui.session.server.restart import RestartFlow
from optui.session.server.runtime import ServerRuntime
from optui.session.server.transitions import ServerEvents, StatusKeeper
from tests.helpers.demo import free_port
from tests.helpers.runtime import ENV

pytestmark = pytest.mark.timeout(60)


def toy(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "tests.helpers.toy_server", "--port", str(port), *flags]


async def until(done, what, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what()
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def watched_runtime(tmp_path, argv, *, restarting_elsewhere=lambda: False):
    """``(runtime, statuses)``: a monitored ServerRuntime of ``argv`` whose every published
    status is appended to ``statuses`` (so no transition is missed between two polls)."""
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else free_port()
    cfg = ServerConfig(url=f"http://127.0.0.1:{port}", kind="sglang", argv=argv, env=ENV, ready_timeout_s=20,
                       stop_timeout_s=3, poll_interval_s=0.2)
    journal = Journal(tmp_path / "journal.db")
    statuses: list[ServerStatus] = []
    rt = ServerRuntime("s", cfg, ProcessController("s", tmp_path / "state", env=ENV), journal,
                       on_change=lambda: statuses.append(rt.status), restarting_elsewhere=restarting_elsewhere)
    monitor = asyncio.create_task(rt.run())
    try:
        await rt.attached.wait()
        yield rt, statuses
    finally:
        await rt.shutdown(True)
        monitor.cancel()
        await asyncio.gather(monitor, return_exceptions=True)
        journal.close()


# ---------------------------------------------------------------- the two adoption paths


async def test_following_a_launch_made_elsewhere_stamps_state_since(tmp_path):
    """Another optui process (here: a second controller on the same pidfile) launches the
    server while this one shows it DOWN: the adopted STARTING carries its own state_since
    (it kept the DOWN's, None, when this path set the state itself)."""
    argv = toy(free_port())
    async with watched_runtime(tmp_path, argv) as (rt, statuses):
        assert rt.status.state is ServerState.DOWN
        before = time.time()
        other = ProcessController("s", tmp_path / "state", env=ENV)  # the other process's view of the pidfile
        launch = await other.start(argv)
        try:
            await until(lambda: any(s.pid == launch.pid for s in statuses), lambda: statuses[-3:])
            adopted = next(s for s in statuses if s.pid == launch.pid)
            assert adopted.state is ServerState.STARTING
            assert adopted.state_since is not None and adopted.state_since >= before, adopted
            assert rt.other_processes.adopted and rt.other_processes.elsewhere_since == launch.started_at
        finally:
            await other.stop(3.0)


async def test_an_exit_during_another_process_restart_stamps_state_since(tmp_path):
    """This process's server exits while another optui process holds the restart lock: DOWN
    ("being restarted by another optui process") with a fresh state_since (it kept the
    READY's when this path set the state itself)."""
    elsewhere = [False]
    argv = toy(free_port())
    async with watched_runtime(tmp_path, argv, restarting_elsewhere=lambda: elsewhere[0]) as (rt, statuses):
        status = await rt.restart(argv)
        assert status.state is ServerState.READY
        elsewhere[0] = True
        before, seen = time.time(), len(statuses)
        os.killpg(status.pid, signal.SIGKILL)
        await until(lambda: rt.status.state is ServerState.DOWN, lambda: rt.status)
        down = next(s for s in statuses[seen:] if s.state is ServerState.DOWN)
        assert down.message == "being restarted by another optui process"
        assert down.state_since is not None and down.state_since >= before, down
        elsewhere[0] = False


# ---------------------------------------------------------------- the status keeper


async def test_the_state_changes_only_through_set_state(tmp_path):
    journal = Journal(tmp_path / "journal.db")
    try:
        changes = []
        keeper = StatusKeeper(ServerStatus(name="s", kind="sglang", url="http://127.0.0.1:1"), ServerEvents(journal, "s"),
                              on_change=lambda: changes.append(keeper.status))
        with pytest.raises(ValueError, match="set_state"):
            keeper.set(state=ServerState.READY)
        keeper.set(message="hello")
        assert keeper.status.state is ServerState.DOWN and keeper.status.state_since is None
        before = time.time()
        await keeper.set_state(ServerState.STARTING, phase="launching")
        assert keeper.status.state_since >= before and len(changes) == 2
        await keeper.set_state(ServerState.STARTING)  # same state, nothing new: no change, no event
        assert len(changes) == 2
        states = [e.data for e in journal.events(types=["server.state"])]
        assert states == [{"old": "down", "new": "starting", "phase": "launching"}]
    finally:
        journal.close()


async def test_a_poll_that_saw_ready_before_a_stop_never_sets_it_after(tmp_path):
    """A new user's journal: 'ready → stopping', then 'stopping → ready', then 'stopped' and
    'ready → down'. A poll read the server READY, then awaited its load (/metrics) while the
    stop began, and wrote its stale READY over STOPPING. Here the load read waits until the
    stop has begun: the states go ready → stopping → down, nothing else."""
    from optui.core.server.state import ServerState as S

    argv = toy(free_port())
    async with watched_runtime(tmp_path, argv) as (rt, statuses):
        await rt.start(argv)
        await until(lambda: rt.status.state is S.READY, lambda: rt.status)
        read_load, stop_begun, in_load = rt._read_load, asyncio.Event(), asyncio.Event()

        async def slow_read_load(state):
            in_load.set()
            await stop_begun.wait()  # the stop sets STOPPING meanwhile
            return await read_load(state)

        rt._read_load = slow_read_load
        await until(lambda: in_load.is_set(), lambda: "a poll in its load read")
        statuses.clear()
        stopping = asyncio.create_task(rt.stop())
        await until(lambda: rt.status.state is S.STOPPING, lambda: rt.status)
        stop_begun.set()
        await stopping
        rt._read_load = read_load
        changes = [s.state for n, s in enumerate(statuses) if n == 0 or s.state is not statuses[n - 1].state]
        assert changes == [S.STOPPING, S.DOWN], changes
        journaled = [(e.data["old"], e.data["new"]) for e in rt._events.journal.events(types=["server.state"])][-2:]
        assert journaled == [("ready", "stopping"), ("stopping", "down")], journaled


async def test_the_phase_always_agrees_with_the_state(tmp_path):
    # issue 20: the panel said WARMING under "phase ready"; `status --json` said state ready, phase warmup
    journal = Journal(tmp_path / "journal.db")
    try:
        seen = []
        keeper = StatusKeeper(ServerStatus(name="s", kind="sglang", url="http://127.0.0.1:1"), ServerEvents(journal, "s"),
                              on_change=lambda: seen.append((keeper.status.state, keeper.status.phase)))
        await keeper.set_state(ServerState.STARTING, phase="launching")
        keeper.set(phase="warmup")
        await keeper.set_state(ServerState.WARMING)
        keeper.set(phase="ready")  # the log says ready; the health probe has not seen it answer yet
        assert keeper.status.phase == "probe"
        await keeper.set_state(ServerState.READY, phase="warmup")  # e.g. a log read from its middle
        assert keeper.status.phase == "ready"
        keeper.set(phase="warmup")
        await keeper.set_state(ServerState.DEGRADED, message="503")
        await keeper.set_state(ServerState.CRASHED, phase="cuda_graph")  # a crash keeps the phase it died in
        assert seen == [(ServerState.STARTING, "launching"), (ServerState.STARTING, "warmup"),
                        (ServerState.WARMING, "warmup"), (ServerState.WARMING, "probe"), (ServerState.READY, "ready"),
                        (ServerState.READY, "ready"), (ServerState.DEGRADED, "ready"), (ServerState.CRASHED, "cuda_graph")]
        states = [(e.data["new"], e.data["phase"]) for e in journal.events(types=["server.state"])]
        assert states == [("starting", "launching"), ("warming", "warmup"), ("ready", "ready"), ("degraded", "ready"),
                          ("crashed", "cuda_graph")]
    finally:
        journal.close()


async def test_only_the_process_that_launched_the_server_journals_its_transitions(tmp_path):
    # issue 20: `warming → ready` was journaled by both the CLI and the TUI watching one server
    from optui.session.server.transitions import launched_by_another_live_process

    journal = Journal(tmp_path / "journal.db")
    launcher = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")
    try:
        journal.append("server.restart", "s", {"reason": "cli", "old_argv": [], "new_argv": ["x"], "pid": launcher.pid})
        watcher = StatusKeeper(ServerStatus(name="s", kind="sglang", url="http://127.0.0.1:1"), ServerEvents(journal, "s"),
                               on_change=lambda: None,
                               launched_elsewhere=lambda: launched_by_another_live_process(journal, "s"))
        for state in (ServerState.STARTING, ServerState.WARMING, ServerState.READY):
            await watcher.set_state(state)
        assert watcher.status.state is ServerState.READY
        assert journal.events(types=["server.state"]) == []  # the launcher journals them, not a watcher
        launcher.kill()
        await launcher.wait()
        await watcher.set_state(ServerState.DEGRADED, message="503")  # the launcher is gone: the first to see it
        assert [(e.data["old"], e.data["new"]) for e in journal.events(types=["server.state"])] == [("ready", "degraded")]
        journal.append("server.restart", "s", {"reason": "tui", "old_argv": [], "new_argv": ["x"], "pid": os.getpid()})
        await watcher.set_state(ServerState.READY)  # this process launched it: it journals
        assert journal.events(types=["server.state"])[-1].data["new"] == "ready"
    finally:
        if launcher.returncode is None:
            launcher.kill()
            await launcher.wait()
        journal.close()


def test_two_watchers_seeing_one_change_at_once_journal_its_alert_once(tmp_path, monkeypatch):
    """Issue 30: alerts once per event whatever the number of watchers. Two processes (two
    connections to one journal file, each with its ServerEvents) see the same recovery at the
    same moment; reading "not journaled yet" and appending were two steps, so both could read
    before either wrote (widened here to 0.5 s): now one write lock holds both steps."""
    import threading

    from optui.session.server import transitions as server_transitions

    read = server_transitions.newest_transition_alert

    def slow_read(journal, server, kinds):
        found = read(journal, server, kinds)
        time.sleep(0.5)  # the other watcher's poll lands here
        return found

    monkeypatch.setattr(server_transitions, "newest_transition_alert", slow_read)
    path = tmp_path / "journal.db"
    Journal(path).append("alert", "s", {"kind": "hung", "message": "stalled"})
    journals = [Journal(path), Journal(path)]
    start = threading.Barrier(2, timeout=30)

    def watcher(journal: Journal) -> None:
        start.wait()
        ServerEvents(journal, "s").record_transition_alert({"kind": "recovered", "message": "health answers 200 again"})

    threads = [threading.Thread(target=watcher, args=(journal,)) for journal in journals]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in threads)
        kinds = [e.data["kind"] for e in journals[0].events(types=["alert"])]
        assert kinds == ["hung", "recovered"], kinds
    finally:
        for journal in journals:
            journal.close()


def test_a_load_reading_decides_hung_and_recovered_in_the_state_machine():
    assert after_load_reading(ServerState.READY, "hung", hung=True) is ServerState.HUNG
    assert after_load_reading(ServerState.HUNG, "recovered", hung=False) is ServerState.READY
    assert after_load_reading(ServerState.DEGRADED, None, hung=True) is ServerState.HUNG
    assert after_load_reading(ServerState.DEGRADED, None, hung=False) is ServerState.DEGRADED


# ---------------------------------------------------------------- the restart flow with fakes


class FakeController:
    """Nothing of ours runs (no launch, no PIDs)."""

    launch = None

    def process_state(self) -> str:
        return "unknown"


class FakeProbe:
    async def running_config(self, kind):
        return None

    async def server_info(self):
        return {"version": "fake-1"}


class FakeLauncher:
    """Starts and stops by setting the state (READY at once, or CRASHED), as a runtime would."""

    def __init__(self, keeper: StatusKeeper, *, comes_up: bool = True) -> None:
        self.keeper, self.comes_up, self.calls = keeper, comes_up, []

    async def start(self, argv, *, actor="optui", extra=None):
        self.calls.append(("start", list(argv)))
        await self.keeper.set_state(ServerState.STARTING, argv=tuple(argv))
        if self.comes_up:
            await self.keeper.set_state(ServerState.READY, model="m")
        else:
            await self.keeper.set_state(ServerState.CRASHED, crash_class=CrashClass.BAD_FLAG)

    async def stop(self, *, actor="optui"):
        self.calls.append(("stop",))
        await self.keeper.set_state(ServerState.DOWN, pid=None)

    def elapsed(self) -> float:
        return 1.5

    def phase_durations(self, end_t=None):
        return [{"phase": "ready", "t": 0.0, "dur": end_t}]

    async def catch_up_log(self, timeout_s):
        self.calls.append(("catch_up_log", timeout_s))

    def generation_passed(self) -> bool:
        return False

    def end_start(self) -> None:
        self.calls.append(("end_start",))


@contextlib.contextmanager
def restart_flow(tmp_path, port: int, *, comes_up: bool = True):
    journal = Journal(tmp_path / "journal.db")
    try:
        events = ServerEvents(journal, "s")
        keeper = StatusKeeper(ServerStatus(name="s", kind="sglang", url=f"http://127.0.0.1:{port}", argv=("srv", "--a", "1")),
                              events, on_change=lambda: None)
        launcher = FakeLauncher(keeper, comes_up=comes_up)
        cfg = ServerConfig(url=f"http://127.0.0.1:{port}", kind="sglang", argv=["srv", "--a", "1"], stability_s=0)
        flow = RestartFlow(cfg, FakeController(), events, keeper, launcher=launcher, probe=FakeProbe(),
                           shell=LocalShell("local"))
        yield flow, launcher, journal
    finally:
        journal.close()


async def test_a_restart_flow_runs_on_what_it_is_given(tmp_path):
    with restart_flow(tmp_path, free_port()) as (flow, launcher, journal):
        status = await flow.restart(["srv", "--a", "2"], reason="try 2")
        assert status.state is ServerState.READY and flow.status.busy is None
        assert [c[0] for c in launcher.calls] == ["stop", "start", "catch_up_log", "end_start", "end_start"]
        types = [e.type for e in journal.events(target="s")]
        assert types[:3] == ["experiment.started", "server.restart", "flags.changed"] and "server.ready" in types
        ready = journal.events(types=["server.ready"])[0].data
        assert (ready["ready_s"], ready["server_version"], ready["argv"]) == (1.5, "fake-1", ["srv", "--a", "2"])
        assert journal.last_good("s") == ["srv", "--a", "2"] and status.last_good_argv == ("srv", "--a", "2")


async def test_a_restart_flow_journals_the_launchers_failure_and_refuses_a_busy_port(tmp_path):
    with restart_flow(tmp_path, free_port(), comes_up=False) as (flow, launcher, journal):
        status = await flow.restart(["srv", "--a", "x"])
        assert status.state is ServerState.CRASHED and journal.last_good("s") is None
    with socket.socket() as held:  # something else listens on the server's port
        held.bind(("127.0.0.1", 0))
        held.listen()
        (tmp_path / "busy").mkdir()
        with restart_flow(tmp_path / "busy", held.getsockname()[1]) as (flow, launcher, journal):
            status = await flow.restart(["srv", "--a", "3"])
            assert (status.state, status.crash_class) == (ServerState.CRASHED, CrashClass.PORT_IN_USE)
            assert "in use by another process" in status.message
            assert ("start", ["srv", "--a", "3"]) not in launcher.calls
            assert journal.events(types=["server.failed"])[0].data["class"] == "port_in_use"
