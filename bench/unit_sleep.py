"""Where each test's wall time goes: a pytest plugin (issue 33, tests/unit under 30 s).

Per test (setup, call, teardown), the main thread's time on a CPU and waiting for one, from
``/proc/self/task/<tid>/schedstat`` (Linux, ns); "asleep" is wall - both, i.e. fixed pauses,
timers and waits on other threads, which a quiet machine does not shorten (unlike the time
spent waiting for a CPU, which the load adds). Prints the total and the 25 most asleep tests:

    PYTHONPATH=bench .venv/bin/python -m pytest tests/unit -q -p no:cacheprovider -p unit_sleep
"""

from __future__ import annotations

import threading
import time

import pytest

_rows: list[tuple[float, float, float, str]] = []  # asleep s, wall s, on CPU s, node id


def _schedstat() -> tuple[float, float]:
    """The main thread's (on CPU s, waiting for a CPU s) so far."""
    run, wait, _ = open(f"/proc/self/task/{threading.main_thread().native_id}/schedstat").read().split()
    return int(run) / 1e9, int(wait) / 1e9


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.monotonic()
    run0, wait0 = _schedstat()
    result = yield
    run1, wait1 = _schedstat()
    wall = time.monotonic() - start
    _rows.append((wall - (run1 - run0) - (wait1 - wait0), wall, run1 - run0, item.nodeid))
    return result


def pytest_terminal_summary(terminalreporter):
    asleep, run, wall = (sum(r[i] for r in _rows) for i in (0, 2, 1))
    terminalreporter.write_line(f"asleep {asleep:.1f} s, main thread on CPU {run:.1f} s, tests' wall {wall:.1f} s")
    for asleep, wall, run, node in sorted(_rows, key=lambda r: -r[0])[:25]:
        terminalreporter.write_line(f"asleep {asleep:6.2f} s  wall {wall:6.2f} s  on CPU {run:6.2f} s  {node}")
