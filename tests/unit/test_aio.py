"""adapters/aio.wait_set and within: a cancel that arrives with the event always ends the waiting loop
(3.11's wait_for dropped it: Session.close() then hung at quit, seen in the tmux smoke test)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from optui.adapters.aio import task_end, wait_set, within


async def _loop(event: asyncio.Event, wait) -> None:
    while True:
        event.clear()
        await wait(event)


async def _cancel_with_the_event(wait, bound_s: float = 1.0) -> bool:
    """True when the waiting loop ended on a cancel sent in the same tick as the event (it
    ends in that tick or a few after; ``bound_s`` is the most it is given)."""
    event = asyncio.Event()
    task = asyncio.create_task(_loop(event, wait))
    await asyncio.sleep(0)
    event.set()
    task.cancel()
    try:
        await asyncio.wait_for(asyncio.shield(task), bound_s)
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

    assert not await _cancel_with_the_event(with_wait_for, bound_s=0.2)  # a loaded machine only makes it longer


async def _until(event: asyncio.Event) -> int:
    await event.wait()
    return 7


async def test_a_waiter_that_times_out_is_told_and_leaves_the_task_running():
    """The services' ``wait()`` (a search, the todo runs, a benchmark) awaited their task
    inside ``suppress(CancelledError)``: a caller's timeout cancelled the task (a search's todo
    run mid-benchmark) and was swallowed, so the caller went on as if the task had ended (a
    loaded CI machine's 'the todo run of #3 ended without an outcome')."""
    done = asyncio.Event()
    task = asyncio.create_task(_until(done))
    with pytest.raises(TimeoutError):
        await within(task_end(task), 0.05)  # the task waits for `done`: it never ends by itself
    assert not task.done()
    done.set()
    assert await task_end(task) == 7


async def test_task_end_gives_none_for_a_cancelled_task_and_raises_a_failed_ones_error():
    cancelled = asyncio.create_task(_until(asyncio.Event()))
    await asyncio.sleep(0)
    cancelled.cancel()
    assert await task_end(cancelled) is None

    async def fails() -> None:
        raise ValueError("bad value")

    with pytest.raises(ValueError, match="bad value"):
        await task_end(asyncio.create_task(fails()))


@pytest.mark.parametrize("service", ["search", "todo_runs", "benches"])
async def test_each_services_wait_is_a_task_end(service):
    """Each service's wait() leaves its task alone when its caller gives up (see above)."""
    from optui.session.bench.service import BenchService
    from optui.session.search import SearchRunner
    from optui.session.todo.runs import TodoRunQueue

    cls = {"search": SearchRunner, "todo_runs": TodoRunQueue, "benches": BenchService}[service]
    obj = cls.__new__(cls)  # only _task is read by wait()
    done = asyncio.Event()
    obj._task = asyncio.create_task(_until(done))
    with pytest.raises(TimeoutError):
        await within(obj.wait(), 0.05)
    assert not obj._task.done()
    done.set()
    assert await obj._task == 7
