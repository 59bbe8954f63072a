"""The external benchmark runner (optui.adapters.bench_runner) with real subprocesses:
huge lines, invalid UTF-8, carriage-return floods, the stall watchdog, abort."""

from __future__ import annotations

import asyncio
import sys

import pytest

from optui.adapters import proc
from optui.adapters.bench_runner import CommandRun

pytestmark = pytest.mark.timeout(60)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


class Sink:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.progress: list[str] = []

    def line(self, stream: str, text: str) -> None:
        self.lines.append((stream, text))

    def redraw(self, text: str) -> None:
        self.progress.append(text)


async def test_megabyte_line_invalid_utf8_and_carriage_return_flood():
    code = r"""
import sys
out = sys.stdout.buffer
out.write(b"before\n")
out.write(b"A" * 1_000_000 + b"\n")          # one 1 MB line
out.write(b"bad \xff\xfe bytes \xe2\x82\n")   # invalid and truncated UTF-8
out.flush()
err = sys.stderr.buffer
for i in range(1, 200_001):                   # 200k tqdm-style redraws, no newline until the end
    err.write(b"\r %d/200000 [00:01<00:00, 9.99it/s]" % i)
err.write(b"\n")
out.write(b"after\n")
"""
    sink = Sink()
    run = CommandRun(python(code), on_line=sink.line, on_progress=sink.redraw)
    outcome = await run.run()  # its speed: bench/bench_runner_flood.py
    assert outcome.status == "exited" and outcome.returncode == 0
    stdout = [t for s, t in sink.lines if s == "stdout"]
    assert stdout[0] == "before" and stdout[-1] == "after"
    big = stdout[1]
    assert big.startswith("A" * 1000) and big.endswith(f"…[{1_000_000 - 64 * 1024} more characters cut]")
    assert len(big) < 64 * 1024 + 100  # capped, not a 1 MB string
    assert stdout[2] == "bad \ufffd\ufffd bytes \ufffd"
    stderr = [t for s, t in sink.lines if s == "stderr"]
    assert stderr == [" 200000/200000 [00:01<00:00, 9.99it/s]"]  # 200k redraws collapse into one line
    assert sink.progress and len(sink.progress) < 5_000  # about one progress call per chunk, not per redraw
    assert sink.progress[-1].startswith(" 200000/200000") or "/200000" in sink.progress[-1]


GOES_SILENT = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL)
print("child", child.pid, flush=True)
print("Starting main benchmark run...", flush=True)
time.sleep(300)
"""


def child_pid(sink: Sink) -> int:
    return next(int(t.split()[1]) for _, t in sink.lines if t.startswith("child "))


async def test_watchdog_marks_a_silent_tool_stalled_when_the_server_is_down_and_kills_its_group():
    sink = Sink()
    healthy = {"up": True}
    run = CommandRun(python(GOES_SILENT), on_line=sink.line, stall_s=0.8, server_healthy=lambda: healthy["up"],
                     kill_timeout_s=1.0)
    task = asyncio.create_task(run.run())
    await asyncio.sleep(2.0)
    assert not task.done()  # silent, but the server is healthy: a slow run, not a stall
    healthy["up"] = False
    outcome = await asyncio.wait_for(task, 20)
    assert outcome.status == "stalled"
    assert "no output for" in outcome.reason and "server is not healthy" in outcome.reason
    assert not proc.group_alive(run.pid) and not proc.pid_alive(child_pid(sink))


async def test_abort_kills_the_whole_group():
    sink = Sink()
    run = CommandRun(python(GOES_SILENT), on_line=sink.line, kill_timeout_s=1.0)
    task = asyncio.create_task(run.run())
    for _ in range(200):
        if any(t.startswith("child ") for _, t in sink.lines):
            break
        await asyncio.sleep(0.05)
    grandchild = child_pid(sink)
    assert proc.pid_alive(grandchild)
    run.abort("operator pressed x")
    outcome = await asyncio.wait_for(task, 20)
    assert (outcome.status, outcome.reason) == ("aborted", "operator pressed x")
    assert not proc.group_alive(run.pid) and not proc.pid_alive(grandchild)  # gone or a zombie
