"""Bounded polling for tests outside Pilot (Pilot tests use tests.helpers.pilot.wait_for)."""

from __future__ import annotations

import asyncio
import time


async def until(predicate, timeout: float = 20.0, step: float = 0.05, what=None):
    """Poll ``predicate()`` until it returns something truthy (returned); AssertionError
    after ``timeout`` seconds (a bound for slow machines, not an expected duration; with
    ``what()`` in the message when given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(step)
    raise AssertionError("condition not reached in time" + (f": {what()}" if what else ""))
