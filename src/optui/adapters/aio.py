"""asyncio helpers that behave the same on every supported Python.

Python 3.11's ``asyncio.wait_for`` drops a cancellation that arrives while the awaited
future completes (an event set at the moment a task is cancelled: CPython gh-86296, fixed
in 3.12 by rebuilding ``wait_for`` on ``asyncio.timeout``). A loop that waits on an event
with ``wait_for`` then runs on after ``Task.cancel()``, and whatever awaits that task —
``Session.close()`` at quit — hangs. :func:`wait_set` uses ``asyncio.timeout`` itself, which
keeps an outside cancellation apart from its own timeout on 3.11 too.
"""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Wait up to ``timeout_s`` seconds (None: no limit) for ``event``; True when it was set,
    False on timeout. A cancellation of the caller always propagates (CancelledError)."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
