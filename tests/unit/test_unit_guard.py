"""The guard that keeps tests/unit free of processes and network sockets
(tests/helpers/unit_guard.py, turned on by tests/unit/conftest.py around every test here)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess

import pytest

from tests.helpers.unit_guard import UnitKindViolation, guard


def test_starting_a_process_is_refused_and_reported():
    seen: list[str] = []
    with guard(seen.append), pytest.raises(UnitKindViolation, match="tests/process"):
        subprocess.run(["true"], check=False)
    assert seen == ["start a process ['true']"]


async def test_an_asyncio_subprocess_and_a_fork_are_refused():
    seen: list[str] = []
    with guard(seen.append):
        with pytest.raises(UnitKindViolation):
            await asyncio.create_subprocess_exec("true")
        with pytest.raises(UnitKindViolation):
            os.fork()
    assert [s.split(" ", 3)[:3] for s in seen] == [["start", "a", "process"], ["os.fork"]]


@pytest.mark.parametrize("family, address", [(socket.AF_INET, ("127.0.0.1", 0)), (socket.AF_INET6, ("::1", 0))])
def test_an_inet_socket_may_neither_bind_nor_connect(family, address):
    seen: list[str] = []
    with guard(seen.append), socket.socket(family) as s:
        with pytest.raises(UnitKindViolation):
            s.bind(address)
        with pytest.raises(UnitKindViolation):
            s.connect(address)
        with pytest.raises(UnitKindViolation):
            s.connect_ex(address)
    assert len(seen) == 3


async def test_unix_sockets_and_the_event_loop_still_work():
    with guard():
        a, b = socket.socketpair()
        with a, b:
            a.sendall(b"x")
            assert b.recv(1) == b"x"
        await asyncio.sleep(0)


def test_everything_patched_is_put_back():
    before = (subprocess.Popen._execute_child, os.fork, socket.socket.connect, socket.socket.bind)
    with guard():
        assert subprocess.Popen._execute_child is not before[0]
    assert (subprocess.Popen._execute_child, os.fork, socket.socket.connect, socket.socket.bind) == before
