"""Waiting in Pilot tests without fixed sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable


async def wait_for(pilot, predicate: Callable[[], object], timeout: float = 40.0, step: float = 0.05) -> bool:
    """Pause the app in ``step`` s slices until ``predicate()`` is true; AssertionError after
    ``timeout`` s (a bound for slow machines, not an expected duration)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(step)
    raise AssertionError("condition not reached in time")
