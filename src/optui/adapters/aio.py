"""asyncio helpers that behave the same on every supported Python.

Python 3.11's ``asyncio.wait_for`` drops a cancellation that arrives while the awaited
future completes (an event set at the moment a task is cancelled: CPython gh-86296, fixed
in 3.12 by rebuilding ``wait_for`` on ``asyncio.timeout``). A loop that waits on an event
with ``wait_for`` then runs on after ``Task.cancel()``, and whatever awaits that task —
``Session.close()`` at quit — hangs. :func:`wait_set` and :func:`within` use
``asyncio.timeout`` itself, which keeps an outside cancellation apart from its own timeout on
3.11 too; optui's code calls :func:`within` where it would call ``asyncio.wait_for``
(tests/unit/test_ui_boundary.py checks). Seen: an SSH GPU source's process poll, cancelled as its
``ssh.run`` finished, ran on, and its ``close()`` hung (CI, 1 run in 20).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_set(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Wait up to ``timeout_s`` seconds (None: no limit) for ``event``; True when it was set,
    False on timeout. A cancellation of the caller always propagates (CancelledError)."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def within(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    """``await awaitable`` for at most ``timeout_s`` seconds (None: no limit), as
    ``asyncio.wait_for``: TimeoutError when it runs out (the awaitable is cancelled); a
    cancellation of the caller always propagates (CancelledError), whatever the awaitable
    did at that moment."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


async def task_end(task: asyncio.Future[T]) -> T | None:
    """Wait for ``task`` to end without ever cancelling it: its result, None when it was
    cancelled; its exception is raised. A cancellation of the caller propagates
    (CancelledError) and leaves ``task`` running. ``await task`` inside
    ``suppress(CancelledError)``, the way this was written before, forwarded the caller's
    cancellation into ``task`` and then swallowed it: a search waited on under a timeout
    (a test's ``wait_for`` on a loaded machine) cancelled its todo run mid-benchmark, returned
    as if nothing happened, and ended "failed: the todo run of #3 ended without an outcome"
    with the benchmark still running against the server."""
    await asyncio.wait({task})
    if task.cancelled():
        return None
    return task.result()
