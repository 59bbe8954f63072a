"""Suite-wide guards.

Every process a test starts (demo servers, benchmarks, llama-server, sshd...) inherits the
marker ``OPTUI_TEST_RUN``; at the end of the session no process carrying it may be left
running. Survivors are listed, killed, and fail the run: a leak is a bug, not noise.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

MARKER = "OPTUI_TEST_RUN"
_RUN_ID = uuid.uuid4().hex
os.environ[MARKER] = _RUN_ID


def _marked_processes() -> list[tuple[int, str]]:
    needle = f"{MARKER}={_RUN_ID}".encode()
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(entry.name), cmd))
    return found


def pytest_collection_modifyitems(config, items):
    """The files heaviest first (``tests/file_weights.json``, see tests/helpers/file_weights.py),
    each file's tests in their own order: pytest-xdist's ``--dist loadfile`` hands files to the
    workers in this order (with ``--no-loadscope-reorder``), so the last to start are short."""
    from tests.helpers.file_weights import UNKNOWN_S_PER_TEST, load_weights

    weights = load_weights()
    counts: dict[str, int] = {}
    for item in items:
        name = item.nodeid.split("::", 1)[0]
        counts[name] = counts.get(name, 0) + 1
    first_seen = {name: i for i, name in enumerate(counts)}

    def weight(name: str) -> float:
        return weights.get(name, counts[name] * UNKNOWN_S_PER_TEST)

    items.sort(key=lambda item: (-weight(item.nodeid.split("::", 1)[0]), first_seen[item.nodeid.split("::", 1)[0]]))


@pytest.fixture(scope="session", autouse=True)
def no_leaked_processes():
    yield
    import time

    deadline = time.monotonic() + 5  # give graceful shutdowns a moment
    leaked = _marked_processes()
    while leaked and time.monotonic() < deadline:
        time.sleep(0.2)
        leaked = _marked_processes()
    for pid, _ in leaked:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not leaked, "processes left running by the test suite:\n" + "\n".join(f"  {pid}: {cmd}" for pid, cmd in leaked)


def _dump_pending_tasks(test: str) -> None:
    tasks = [o for o in gc.get_objects() if isinstance(o, asyncio.Task) and not o.done()]
    print(f"\n--- {test}: near its timeout; {len(tasks)} pending asyncio tasks ---", file=sys.stderr)
    for task in tasks:
        print(f"{task.get_name()}:", file=sys.stderr)
        task.print_stack(limit=12, file=sys.stderr)


@pytest.fixture(autouse=True)
def pending_tasks_before_timeout(request):
    """A test stalled on an await shows, under pytest-timeout, only an event loop waiting
    in ``select``: 10 s before the test's limit, print the stack of every pending asyncio
    task (stderr, in the test's report) so that the await that never ended is named."""
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0] if marker and marker.args else request.config.getini("timeout") or 0)
    if limit <= 20:
        yield
        return
    timer = threading.Timer(limit - 10, _dump_pending_tasks, args=(request.node.nodeid,))
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()


SNAPSHOT_NOW = 1_790_003_600.0  # the wall clock snapshot tests see (2026-09-21 13:33:20 UTC)


@pytest.fixture
def snapshot_clock(monkeypatch):
    """Freeze what is on screen in snapshot tests: the zone is UTC and ``time.time()`` is
    ``SNAPSHOT_NOW``, so event times (alerts raised while the app runs) do not change
    between runs. Monotonic time, which asyncio and Textual use, keeps running."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.setattr(time, "time", lambda: SNAPSHOT_NOW)
    yield SNAPSHOT_NOW
    monkeypatch.delenv("TZ")
    time.tzset()
