"""The GPU panel's per-GPU process list (issue 20: "PID, server, memory, as nvitop has"):
each compute process is named after the server whose PID is its own or an ancestor's.

The mapping is a pure function; the ancestors come from ``/proc`` (a real process tree here);
the panel is checked zoomed in the real app on the demo campaign (a real demo server on
loopback, whose simulated GPUs hold processes of its PID).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from optui.adapters.gpu_nvml import process_ancestors
from optui.config import load_config
from optui.core.gpu.samples import GpuProcess, ancestors_of, parse_ps_parents, server_of_process
from optui.demo.campaign import write_demo_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.demo import TEST_SPEED, free_port, stop_process_group
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(90)


def test_a_process_belongs_to_the_server_of_its_pid_or_an_ancestors():
    servers = {4242: "qwen", 5000: "llama"}
    assert server_of_process(GpuProcess(4242, "/usr/bin/python3", 1024.0), servers) == "qwen"
    worker = GpuProcess(4300, "/usr/bin/python3", 70_000.0, ancestors=(4299, 5000, 77))  # a TP worker's worker
    assert server_of_process(worker, servers) == "llama"
    assert server_of_process(GpuProcess(9, "/opt/other", 10.0, ancestors=(8, 7)), servers) is None
    assert server_of_process(GpuProcess(4242, "x", None), {}) is None


def test_ancestors_from_ps_output():
    text = "    1     0\n  400     1\n  401   400\n  402   401\n garbage line\n  403   999\n"
    parents = parse_ps_parents(text)
    assert parents == {1: 0, 400: 1, 401: 400, 402: 401, 403: 999}
    assert ancestors_of(402, parents.get) == (401, 400)  # up to, not including, PID 1
    assert ancestors_of(403, parents.get) == (999,)  # a parent ps did not list ends the chain
    assert ancestors_of(7, parents.get) == ()
    assert ancestors_of(5, {5: 6, 6: 5}.get) == (6, 5)  # a cycle (a torn read) ends too


def test_ancestors_come_from_proc():
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print(p.pid, flush=True); p.wait()")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        child = int(parent.stdout.readline())
        chain = process_ancestors(child)
        assert chain[:2] == (parent.pid, os.getpid()), chain
        assert 1 not in chain
        assert process_ancestors(2**22 + 12345) == ()  # no such process: no chain
    finally:
        stop_process_group(parent)


async def test_zoomed_gpu_panel_lists_processes_with_their_server(tmp_path):
    cfg = write_demo_config(tmp_path, port=free_port(), speed=TEST_SPEED)
    app = OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")
    session = app.session
    rt = session.servers["demo"]

    def node1_procs():
        hosts = {h.host: h for h in session.snapshot().hosts}
        node = hosts.get("gpu-node-1")
        return [p for s in node.samples for p in (s.processes or ())] if node else []

    async with app.run_test(size=(60, 40)) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.pid and node1_procs(), timeout=40)
        pid = rt.status.pid
        panel = app.query_one("#gpus")
        assert str(pid) not in panel.render().plain  # the dashboard keeps one line per GPU
        await pilot.press("1", "z")
        # with its memory: the simulated GPUs follow the server's state file, and their sample
        # may list the process before its memory is written (ci13: "6873 demo 0M" for a moment)
        await wait_for(pilot, lambda: re.search(rf"{pid} demo +[0-9.]+G", panel.render().plain), timeout=20,
                       what=lambda: panel.render().plain)
        lines = panel.render().plain.splitlines()
        gpu0 = next(i for i, line in enumerate(lines) if line.lstrip().startswith("0 "))
        first = lines[gpu0 + 1].split()  # GPU 0's process: PID, server, memory, program
        assert first[:2] == [str(pid), "demo"] and first[2].endswith("G"), lines
        assert any("no processes" in line for line in lines)  # GPU 2 and 3 of the node are idle
        assert all(len(line) <= panel.size.width for line in lines)
        await pilot.press("z")  # back on the dashboard: one line per GPU again
        await pilot.pause(0.2)
        assert f"{pid} demo" not in panel.render().plain
        await pilot.press("q")


async def test_nvidia_smi_processes_on_an_ssh_host_name_the_remote_server(tmp_path):
    """The demo server launched through a real OpenSSH server; the host's ``nvidia-smi``
    stand-in (``tests/helpers/fake_nvidia_smi.py``) lists a compute process of the server's
    PID on GPU 0 and a stranger's on GPU 1: the zoomed panel names the server and the program."""
    from tests.helpers.sshd import running_sshd
    from tests.process.test_ssh_servers import demo_argv, kill_group_at_end, write_campaign

    with running_sshd(tmp_path / "sshd") as sshd, kill_group_at_end() as pgids:
        port = free_port()
        cfg = write_campaign(tmp_path, sshd, port)
        app = OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")
        session = app.session
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.panels_mounted and session.gpus.snapshots.get("rack1") is not None
                           and session.gpus.snapshots["rack1"].samples, timeout=40)
            status = await session.restart_server("demo", demo_argv(port), reason="test")
            pid = session.servers["demo"].controller.launch.pid
            pgids.append(pid)
            assert status.state.value == "ready" and status.pid == pid
            (sshd.bin_dir / "apps.csv").write_text(
                f"GPU-11111111-0000-0000-0000-000000000000, {pid}, 40960, /usr/bin/python3\n"
                "GPU-11111111-0000-0000-0000-000000000001, 99999, 1024, /opt/other/trainer\n")
            panel = app.query_one("#gpus")
            await pilot.press("1", "z")
            await wait_for(pilot, lambda: f"{pid} demo" in panel.render().plain, timeout=30,
                           what=lambda: panel.render().plain)
            lines = panel.render().plain.splitlines()
            assert any(line.split()[:4] == [str(pid), "demo", "40.0G", "python3"] for line in lines), lines
            assert any(line.split()[:3] == ["99999", "trainer", "1.0G"] for line in lines), lines
            await pilot.press("z", "q")


async def test_ssh_nvidia_smi_processes_carry_their_ancestors_from_the_hosts_ps(tmp_path):
    """A server's TP workers are its children: the SSH source reads the host's ``ps`` with the
    process list, so a worker's chain reaches the server's PID."""
    from optui.adapters.gpu_smi_stream import SshNvidiaSmiSource
    from tests.helpers.sshd import running_sshd, ssh_host
    from tests.helpers.waiting import until

    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print(p.pid, flush=True); p.wait()")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        child = int(parent.stdout.readline())
        with running_sshd(tmp_path / "sshd") as sshd:
            (sshd.bin_dir / "apps.csv").write_text(f"GPU-11111111-0000-0000-0000-000000000000, {child}, 70000, python3\n")
            host = ssh_host(sshd)
            source = SshNvidiaSmiSource("rack1", host, interval_s=0.5, procs_every_s=0.3)
            try:
                await source.read()
                snap = await until(lambda: (s := source.snapshot()).samples and s.samples[0].processes and s, timeout=20)
                (proc,) = snap.samples[0].processes
                assert proc.pid == child and proc.ancestors[:2] == (parent.pid, os.getpid()), proc
                assert server_of_process(proc, {parent.pid: "qwen"}) == "qwen"
                assert snap.samples[1].processes == ()
            finally:
                await source.close()
                await host.close()
    finally:
        stop_process_group(parent)
