"""adapters/aio.wait_set: a cancel that arrives with the event always ends the waiting loop
(3.11's wait_for dropped it: Session.close() then hung at quit, seen in the tmux smoke test)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from optui.adapters.aio import wait_set


async def _loop(event: asyncio.Event, wait) -> None:
    while True:
        event.clear()
        await wait(event)


async def _cancel_with_the_event(wait) -> bool:
    """True when the waiting loop ended on a cancel sent in the same tick as the event."""
    event = asyncio.Event()
    task = asyncio.create_task(_loop(event, wait))
    await asyncio.sleep(0)
    event.set()
    task.cancel()
    try:
        await asyncio.wait_for(asyncio.shield(task), 1.0)
    except asyncio.CancelledError:
        return True
    except TimeoutError:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
    return False


async def test_a_cancel_arriving_with_the_event_ends_the_loop():
    assert await _cancel_with_the_event(lambda e: wait_set(e, 10.0))


async def test_wait_set_times_out_and_returns_set():
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    event.set()
    assert await wait_set(event, 1.0) is True


@pytest.mark.skipif(__import__("sys").version_info >= (3, 12), reason="3.12 rebuilt wait_for on asyncio.timeout")
async def test_the_hazard_on_3_11_wait_for_drops_that_cancel():
    """Why the helper exists: the same loop on wait_for runs on after the cancel."""
    async def with_wait_for(e):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(e.wait(), 10.0)

    assert not await _cancel_with_the_event(with_wait_for)
