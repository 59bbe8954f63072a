"""adapters/proc.py on psutil, against real processes: liveness (a zombie is not alive),
start times in /proc's clock ticks (what the SSH side reads on a remote host), process
groups, descendants that left the group, parents, and who listens on a port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from optui.adapters import proc
from tests.helpers.demo import stop_process_group

LISTEN = """
import socket, sys, time
family = socket.AF_INET6 if sys.argv[1] == "::1" else socket.AF_INET
s = socket.socket(family, socket.SOCK_STREAM)
s.bind((sys.argv[1], 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)
"""


def wait_until(check, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def stat_field_22(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[19])


def test_start_ticks_are_procs_own_and_a_zombie_is_not_alive():
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert proc.process_start_ticks(child.pid) == stat_field_22(child.pid)  # pidfiles compare it with SSH's reads
        assert proc.pid_alive(child.pid) and proc.parent_pid(child.pid) == os.getpid()
        # read until it reads the command: on a loaded machine a read just after the start gave "?"
        assert wait_until(lambda: proc.command_line(child.pid) == "sleep 30"), proc.command_line(child.pid)
        os.kill(child.pid, 9)
        assert wait_until(lambda: not proc.pid_alive(child.pid))  # a zombie until reaped: not alive
    finally:
        stop_process_group(child)
    assert proc.process_start_ticks(child.pid) is None and proc.command_line(child.pid) == "?"
    assert proc.parent_pid(child.pid) is None


def test_group_members_and_descendants_that_left_the_group(tmp_path):
    # the leader starts one child in its group and one that calls setsid (vLLM's EngineCore can)
    script = "sleep 30 & setsid sleep 31 & wait"
    leader = proc.spawn_detached_sync(["sh", "-c", script], tmp_path / "log")
    try:
        # (a forked child reads as the shell until it has exec'd sleep)
        assert wait_until(lambda: {proc.command_line(k) for k in proc.descendants({leader.pid})} == {"sleep 30", "sleep 31"})
        in_group = proc.group_pids(leader.pid)
        assert leader.pid in in_group and len(in_group) == 2  # the setsid one left the group
        assert proc.group_alive(leader.pid)
    finally:
        for k in proc.descendants({leader.pid}):
            os.kill(k, 9)
        proc.kill_group_now(leader.pid)
        assert wait_until(lambda: leader.returncode is not None)
    # the killed members are zombies until their new parent reaps them: a moment on a loaded machine
    assert wait_until(lambda: not proc.group_alive(leader.pid) and proc.group_pids(leader.pid) == set())


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_port_holders_names_the_listening_process(host):
    if host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6")
    child = subprocess.Popen([sys.executable, "-c", LISTEN, host], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
        if not line.strip():
            pytest.skip(f"cannot listen on {host}")
        port = int(line)
        holders = proc.port_holders(port)
        assert list(holders) == [child.pid] and holders[child.pid].startswith(sys.executable)
    finally:
        stop_process_group(child)
    assert proc.port_holders(port) == {}
