"""Alerts derived from snapshots (each transition once) and the command log's masking."""

from dataclasses import dataclass

from optui.core.gpu.samples import GpuSample, HostSnapshot, HostStatus
from optui.core.server.state import CrashClass, ServerState, ServerStatus
from optui.session.alerts import AlertWatcher
from optui.session.command_log import CommandLog, mask_secrets


@dataclass
class FakeState:
    servers: tuple = ()
    hosts: tuple = ()
    bench: object = None


def server(state, crash=None, lines=()):
    return ServerStatus("qwen", "sglang", "http://x", state=state, crash_class=crash, crash_lines=lines)


def gpu_host(used, status=HostStatus.LIVE):
    return HostSnapshot("n1", (GpuSample(0, "u", "H200", mem_used_mib=used, mem_reserved_mib=0, mem_total_mib=100),), 1.0, status)


def test_server_alerts_fire_once_per_transition():
    w = AlertWatcher()
    assert w.check(FakeState(servers=(server(ServerState.READY),))) == []
    crash = w.check(FakeState(servers=(server(ServerState.CRASHED, CrashClass.OOM, ("CUDA out of memory",)),)))
    assert [a.kind for a in crash] == ["oom"] and "CUDA out of memory" in crash[0].message
    assert w.check(FakeState(servers=(server(ServerState.CRASHED, CrashClass.OOM),))) == []
    w.check(FakeState(servers=(server(ServerState.READY),)))
    assert [a.kind for a in w.check(FakeState(servers=(server(ServerState.HUNG),)))] == ["hung"]


def test_a_crash_alert_quotes_the_line_of_its_class_not_the_last_line():
    """SGLang's parent ends an OOM's log with "Received sigquit from a child process": the
    alert quoted it (new user) instead of the OutOfMemoryError line that decided the class."""
    lines = ("[2026-12-01 10:00:00 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
             "[2026-12-01 10:00:01] Received sigquit from a child process. It usually means the child failed.")
    w = AlertWatcher()
    w.check(FakeState(servers=(server(ServerState.READY),)))
    crash = w.check(FakeState(servers=(server(ServerState.CRASHED, CrashClass.OOM, lines),)))
    assert [a.kind for a in crash] == ["oom"] and "OutOfMemoryError" in crash[0].message, crash
    assert "sigquit" not in crash[0].message


def test_gpu_memory_alert_with_hysteresis_and_lost_host():
    w = AlertWatcher(mem_alert_pct=90)
    assert [a.kind for a in w.check(FakeState(hosts=(gpu_host(95),)))] == ["gpu_memory"]
    assert w.check(FakeState(hosts=(gpu_host(96),))) == []
    assert w.check(FakeState(hosts=(gpu_host(87),))) == []  # still within 5 points: not re-armed
    w.check(FakeState(hosts=(gpu_host(50),)))
    assert [a.kind for a in w.check(FakeState(hosts=(gpu_host(99),)))] == ["gpu_memory"]
    assert [a.kind for a in w.check(FakeState(hosts=(gpu_host(10, HostStatus.LOST),)))] == ["host_lost"]


def test_secrets_are_masked_in_the_command_log():
    assert mask_secrets(["python", "--api-key", "sk-123", "--x", "1", "--hf-token=abc"]) == [
        "python", "--api-key", "***", "--x", "1", "--hf-token=***"]
    log = CommandLog(size=2)
    for i in range(3):
        log.add("local", ["echo", str(i)], 0, 0.1, "test")
    assert [r.argv[1] for r in log.records] == ["1", "2"]


async def test_a_server_start_record_gets_its_exit_code_when_it_ends(tmp_path):
    """issue 20: a start that already ended showed `…` as its exit code. A real child:
    ``running`` while it runs, then its exit status and how long it ran."""
    import sys

    from optui.adapters.shell import LocalShell

    log = CommandLog()
    shell = LocalShell()
    shell.on_command = log.add
    spawned = await shell.spawn_to_log([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"],
                                       str(tmp_path / "s.log"))
    assert (log.records[0].what, log.records[0].exit_text(), log.records[0].returncode) == ("server start", "running", None)
    assert await spawned.wait() == 3  # stdin is /dev/null: it exits at once
    record = log.records[0]
    assert (record.exit_text(), record.returncode, record.running) == ("3", 3, False) and record.duration_s > 0
    killed = await shell.spawn_to_log([sys.executable, "-c", "import time; time.sleep(60)"], str(tmp_path / "k.log"))
    assert log.records[1].exit_text() == "running"
    await shell.stop_group(killed.pid, timeout_s=5.0, handle=killed)
    assert log.records[1].exit_text() == "-15"


async def test_app_shows_alerts_and_the_command_log(tmp_path):
    """A server that crashes on its own → an alert notification + an `alert` event; `@`
    lists the commands optui ran (the server start), with a masked api key."""
    import asyncio
    import sys
    import time

    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    script = tmp_path / "server.py"
    script.write_text("import sys, time\nprint('starting', flush=True)\ntime.sleep(1.0)\n"
                      "print('torch.OutOfMemoryError: CUDA out of memory.', flush=True)\nsys.exit(1)\n")
    cfg = tmp_path / "optui.toml"
    cfg.write_text(f'''[hosts.local]\ngpu_source = "none"\n[servers.s]\nurl = "http://127.0.0.1:1"\n
argv = ["{sys.executable}", "{script}", "--api-key", "sk-secret"]\nready_timeout_s = 30\n''')
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    app = OptuiApp(session)
    notes: list[str] = []
    app.notify = lambda message, **kw: notes.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.3)
        rt = session.servers["s"]
        await rt.start()  # not through restart(): a crash nobody is waiting for
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("out of memory" in n for n in notes):
            await asyncio.sleep(0.1)
        assert any("out of memory" in n for n in notes), notes
        alerts = [e for e in session.journal.events(types=["alert"]) if e.data.get("kind") == "oom"]
        assert alerts and alerts[0].target == "s"
        await pilot.press("at")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "CommandLogScreen"
        table = app.screen.query_one("#command-table")
        row = [str(c) for c in table.get_row_at(0)]
        assert "server start" in row and "--api-key '***'" in row[-1] and "sk-secret" not in row[-1]
        assert row[3] == "1", row  # issue 20: the start that already ended showed `…` as its exit code
        await pilot.press("escape", "q")
