"""tests/unit: no process, no network (issue 33).

Each test here runs (its setup, so module fixtures too, its call and its teardown) under
:func:`tests.helpers.unit_guard.guard`: starting a process or opening an INET socket raises
``UnitKindViolation``, and an attempt that the code under test swallows still fails the test.
Such a test belongs in tests/process. These hooks are this folder's: tests/process runs
without them.

    pytest tests/unit          # the quick part: no servers, sshd, tmux, Prometheus or peers
"""

from __future__ import annotations

import pytest

from tests.helpers.unit_guard import guard


def _guarded():
    attempts: list[str] = []
    with guard(attempts.append):
        result = yield
    if attempts:
        pytest.fail(f"a unit test tried to {attempts[0]} (tests/unit: no process, no network; move it to tests/process)",
                    pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    return (yield from _guarded())
