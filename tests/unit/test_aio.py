"""adapters/aio.wait_set and within: a cancel that arrives with the event always ends the waiting loop
(3.11's wait_for dropped it: Session.close() then hung at quit, seen in the tmux smoke test)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from optui.adapters.aio import wait_set, within


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


async def test_a_cancel_arriving_as_the_awaited_work_ends_ends_the_loop():
    """As an SSH GPU source's process poll: cancelled while its command finished, it ran on
    and its ``close()`` hung (CI)."""
    assert await _cancel_with_the_event(lambda e: within(e.wait(), 10.0))


async def test_within_returns_the_result_and_times_out():
    async def answer():
        await asyncio.sleep(0)
        return 42

    assert await within(answer(), 1.0) == 42
    with pytest.raises(TimeoutError):
        await within(asyncio.sleep(5), 0.01)


def test_optui_never_calls_asyncio_wait_for():
    """Every timed wait in optui goes through within (or wait_set): wait_for drops a cancel on 3.11."""
    from pathlib import Path

    import optui

    root = Path(optui.__file__).parent
    offenders = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py")
                 for n, line in enumerate(p.read_text().splitlines(), 1) if "asyncio.wait_for(" in line]
    assert offenders == [], offenders


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
