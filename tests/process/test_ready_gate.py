"""The ready gate and the monitor with real processes on loopback: timeout class, 1-token
probe, stability window, sequential SGLang health with its 25 s floor, the GPU-memory
release check, script control, and hung detection from SGLang's log lines when /metrics
is missing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from optui.adapters.controller import ProcessController, ScriptController
from optui.config import ServerConfig
from optui.session.server.runtime import health_timeout_s
from tests.helpers.demo import demo_server_cmd, free_port
from tests.helpers.runtime import ENV, runtime

pytestmark = pytest.mark.timeout(60)


def toy(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "tests.helpers.toy_server", "--port", str(port), *flags]


def data(journal, type_):
    return [e.data for e in journal.events(types=[type_])]


async def test_not_ready_in_time_is_timeout_and_the_process_is_stopped(tmp_path):
    argv = [sys.executable, "-c", "import time; print('[2025-01-15 10:00:00 TP0] Load weight begin.', flush=True); time.sleep(60)"]
    async with runtime(tmp_path, argv) as (rt, journal):
        status = await rt.restart(argv, ready_timeout_s=1.5)
        assert (status.state.value, str(status.crash_class)) == ("crashed", "timeout")
        assert "not ready after 2s (last phase: loading_weights)" in status.crash_lines[0]
        failed = data(journal, "server.failed")[-1]
        assert failed["class"] == "timeout" and failed["phases"][0]["phase"] == "loading_weights"
        assert rt.controller.process_state() == "exited"


async def test_generation_probe_and_phase_durations_in_the_journal(tmp_path):
    port = free_port()
    argv = toy(port, "--generate-after", "1.0")
    async with runtime(tmp_path, argv, generate_probe=True) as (rt, journal):
        status = await rt.restart(argv)
        assert status.state.value == "ready"
        ready = data(journal, "server.ready")[-1]
        assert ready["generate_probe"] is True and ready["ready_s"] >= 1.0
        phases = [p["phase"] for p in ready["phases"]]
        # the log said ready at once; the 1-token generation worked a second later
        assert phases == ["launching", "loading_weights", "ready", "probe"]
        durations = {p["phase"]: p["dur"] for p in ready["phases"]}
        assert durations["ready"] >= 0.5 and all(d is not None and d >= 0 for d in durations.values())


async def test_generation_that_never_works_fails_the_gate(tmp_path):
    port = free_port()
    argv = toy(port, "--generate-after", "-1")
    async with runtime(tmp_path, argv, generate_probe=True) as (rt, journal):
        status = await rt.restart(argv, ready_timeout_s=2.0)
        assert str(status.crash_class) == "timeout" and status.state.value == "crashed"
        assert data(journal, "server.ready") == []


async def test_stability_window_catches_an_early_exit(tmp_path):
    port = free_port()
    argv = toy(port, "--exit-after", "0.8", "--exit-code", "3")
    async with runtime(tmp_path, argv, stability_s=4.0) as (rt, journal):
        status = await rt.restart(argv)
        assert status.state.value == "crashed" and status.message == "exited rc=3"
        assert data(journal, "server.ready") == [] and rt.status.last_good_argv is None
    port = free_port()
    argv = toy(port)
    async with runtime(tmp_path / "2", argv, stability_s=1.0) as (rt, journal):
        status = await rt.restart(argv)
        ready = data(journal, "server.ready")[-1]
        assert status.state.value == "ready" and ready["stable_s"] >= ready["ready_s"] + 1.0


async def test_sglang_health_is_sequential_with_a_25s_floor(tmp_path):
    port = free_port()
    stats = tmp_path / "stats.json"
    argv = toy(port, "--health-delay", "0.6", "--stats", str(stats))
    # 0.2 s would time out every 0.6 s answer; SGLang's floor keeps it at 25 s
    async with runtime(tmp_path, argv, health_timeout_s=0.2, poll_interval_s=0.1) as (rt, journal):
        assert health_timeout_s(rt.cfg) == 25.0 and rt.probe.health_timeout_s == 25.0
        status = await rt.restart(argv)
        assert status.state.value == "ready"
        t0 = time.monotonic()
        await asyncio.sleep(2.5)
        seen = json.loads(stats.read_text())
        # one at a time, back to back: never faster than the previous answer (0.6 s)
        assert seen["max_inflight"] == 1 and 2 <= seen["health_calls"] <= 2 + (time.monotonic() - t0) / 0.6 + 1
    assert health_timeout_s(ServerConfig(url="http://x:1", kind="vllm", argv=["x"], health_timeout_s=3)) == 3


async def test_old_pids_must_release_gpu_memory_before_the_start(tmp_path):
    port = free_port()
    argv = toy(port)
    held: dict[int, float] = {}

    async def holders(after: float):
        return {pid for pid, until in held.items() if time.monotonic() < until}

    async with runtime(tmp_path, argv, gpu_holders=holders, stop_timeout_s=1.5) as (rt, journal):
        assert (await rt.restart(argv)).state.value == "ready"
        old_pid = rt.status.pid
        held[old_pid] = time.monotonic() + 0.8  # the driver frees it 0.8 s after the stop
        status = await rt.restart([*argv, "--ready-after", "0"])
        assert status.state.value == "ready"
        assert data(journal, "server.starting")[-1]["gpu_released_after_s"] >= 0.4
        held[rt.status.pid] = time.monotonic() + 3600  # never freed
        before = len(data(journal, "server.starting"))
        status = await rt.restart(argv)
        assert (status.state.value, str(status.crash_class)) == ("crashed", "oom")
        assert "GPU memory still held by the old server's PIDs" in status.crash_lines[0]
        assert len(data(journal, "server.starting")) == before  # nothing was started


async def test_script_control_passes_the_flags_and_stops_the_group(tmp_path):
    port = free_port()
    script = tmp_path / "launch.sh"
    script.write_text(f'#!/bin/sh\necho "launch.sh got: $*"\nexec {sys.executable} -m tests.helpers.toy_server "$@"\n')
    script.chmod(0o755)
    argv = ["python", "-m", "toy", "--port", str(port), "--ready-after", "0.2"]
    ctl = ScriptController("s", tmp_path / "state", str(script), env=ENV)
    assert ctl.command(argv) == [str(script), "--port", str(port), "--ready-after", "0.2"]
    async with runtime(tmp_path, argv, controller=ctl) as (rt, journal):
        status = await rt.restart(argv)
        assert status.state.value == "ready" and status.argv == tuple(argv)
        assert f"launch.sh got: --port {port} --ready-after 0.2" in rt.log_tail
        pid = status.pid
        await rt.stop()
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.serial  # a 1.5 s stall window read from 1 s decode lines: timing a busy machine distorts
async def test_hung_from_sglang_decode_lines_without_metrics(tmp_path):
    port = free_port()
    argv = demo_server_cmd(port, "--decode-log-interval", "1", "--max-running-requests", "4", speed=40.0)
    env = {**ENV, "OPTUI_DEMO_HANG_AFTER": "1.0", "SGLANG_HEALTH_CHECK_TIMEOUT": "30"}
    ctl = ProcessController("s", tmp_path / "state", env=env)
    async with runtime(tmp_path, argv, controller=ctl, hung_after_s=1.5) as (rt, journal):
        assert (await rt.restart(argv)).state.value == "ready"
        async with httpx.AsyncClient(base_url=rt.cfg.url, timeout=60) as client:
            body = {"prompt": "hello", "max_tokens": 20000, "stream": True}
            streams = [asyncio.create_task(_drain(client, body)) for _ in range(3)]
            try:
                deadline = time.monotonic() + 20
                while rt.status.state.value != "hung" and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                assert rt.status.state.value == "hung", (rt.status.load, rt.load.detector.stalled_s, list(rt.log_tail)[-5:])
                load = rt.status.load
                assert load.source == "log" and "--enable-metrics" in (load.hint or "") and load.running == 3
                alert = data(journal, "alert")[-1]
                assert alert["kind"] == "hung" and alert["source"] == "log" and "no token generated" in alert["message"]
            finally:
                for task in streams:
                    task.cancel()
                await asyncio.gather(*streams, return_exceptions=True)


async def _drain(client: httpx.AsyncClient, body: dict) -> None:
    async with client.stream("POST", "/v1/completions", json=body) as resp:
        async for _ in resp.aiter_lines():
            pass


class _NoMetricsProbe:
    async def metrics(self):
        return 404, ""


async def test_stale_busy_from_the_log_is_confirmed_by_a_generation_before_hung():
    from optui.session.server.load import LoadMonitor

    answers = [True, False]
    confirmations = []

    async def confirm() -> bool:
        confirmations.append(time.monotonic())
        return answers.pop(0)

    monitor = LoadMonitor("sglang", _NoMetricsProbe(), hung_after_s=1.0, confirm=confirm)
    monitor.feed_log("[2025-01-15 10:01:20 TP0] Decode batch. #running-req: 2, #token: 10, token usage: 0.01, cuda graph: True, "
                     "gen throughput (token/s): 100.00, #queue-req: 0, ")
    assert await monitor.update(0.0) is None and monitor.view.source == "log" and monitor.hint.startswith("no /metrics")
    # the requests finished without another batch line: the generation answers → not hung
    assert await monitor.update(1.5) is None and len(confirmations) == 1 and monitor.view.running == 0
    monitor.feed_log("[2025-01-15 10:01:30 TP0] Decode batch. #running-req: 3, #token: 10, token usage: 0.01, cuda graph: True, "
                     "gen throughput (token/s): 100.00, #queue-req: 1, ")
    assert await monitor.update(2.0) is None
    assert await monitor.update(3.5) == "hung" and monitor.hung and "4 requests" in monitor.message
    monitor.feed_log("[2025-01-15 10:01:40 TP0] Decode batch. #running-req: 3, #token: 10, token usage: 0.01, cuda graph: True, "
                     "gen throughput (token/s): 90.00, #queue-req: 0, ")
    assert await monitor.update(4.0) == "recovered" and not monitor.hung


async def test_gpu_holders_reads_a_fresh_reading_of_the_host():
    from optui.adapters.gpu_source import NoGpuSource
    from optui.core.gpu.samples import GpuProcess, GpuSample, HostSnapshot, HostStatus
    from optui.session.gpu.poller import GpuPoller
    from optui.session.server.gpu_release import gpu_holders

    class Source:
        reads = 0

        async def read(self):
            Source.reads += 1
            sample = GpuSample(0, "GPU-0", "H200", processes=(GpuProcess(4242, "python3", 70000.0),))
            return HostSnapshot("node", (sample,), time.time(), HostStatus.LIVE, None, "fake")

        async def close(self):
            pass

    poller = GpuPoller({"node": Source(), "cpu": NoGpuSource("cpu")}, {"node": 60.0, "cpu": 60.0}, lambda: None)
    task = asyncio.create_task(poller.run())
    try:
        await asyncio.sleep(0.2)
        after = time.time()
        assert await gpu_holders(poller, "node", after) == {4242}
        assert Source.reads >= 2  # it asked for a reading newer than `after` (interval is 60 s)
        # a host without a GPU source answers None at once: it never asks for a fresh reading
        # (waiting for one would poll refresh_now() every 0.1 s for up to wait_s)
        refreshes = []
        asked = poller.refresh_now
        poller.refresh_now = lambda: (refreshes.append(1), asked())[-1]
        assert await gpu_holders(poller, "cpu", after) is None
        assert refreshes == [], "gpu_holders() waited for a reading of a host without a GPU source"
        poller.refresh_now = asked
        assert await gpu_holders(poller, "elsewhere", after) is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


ESCAPER = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
    "open(sys.argv[1], 'a').write(f'{child.pid}\\n')\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'tests.helpers.toy_server', *sys.argv[2:]])\n"
)


@pytest.mark.parametrize("leftovers", ["refuse", "kill"])
async def test_a_child_that_left_the_old_servers_group_is_named_and_refused_or_killed(tmp_path, leftovers):
    """vllm#55510: a restarted server whose old worker (a child that left its process group)
    still ran. The restart names it and refuses, or with ``leftovers = "kill"`` kills it."""
    from optui.adapters.proc import pid_alive

    pids = tmp_path / "escaped.txt"
    port = free_port()
    argv = [sys.executable, "-c", ESCAPER, str(pids), "--port", str(port)]
    async with runtime(tmp_path, argv, kind="openai", leftovers=leftovers) as (rt, journal):
        try:
            assert (await rt.restart(argv)).state.value == "ready"
            first = int(pids.read_text().split()[0])
            status = await rt.restart(argv)
            if leftovers == "refuse":
                assert status.state.value == "crashed", status
                assert f"pid {first}: " in status.message and "left its process group" in status.message, status.message
                assert pid_alive(first) and "server.starting" not in [e.type for e in journal.events()][-3:]
            else:
                assert status.state.value == "ready", status.message
                assert not pid_alive(first)
        finally:
            for pid in map(int, pids.read_text().split()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
