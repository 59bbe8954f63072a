"""The screen's frame timer (issue 8, key press to screen): a repaint asked for after a quiet
spell is painted at once, one asked for right after a frame one frame period after that
frame, and two frames are never closer than one period. Textual's own timer waited 1-2
periods after a late tick.

Both timers run on a fake clock (``get_time`` and ``sleep`` of their modules replaced): the
times checked are the clock's, exact, and no test waits for or measures real time (a loaded
machine cannot make them fail, issue 30)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import types

import pytest
import textual.timer
from textual._context import active_app

from optui.ui.textual_patches import frame_timer
from optui.ui.textual_patches.frame_timer import FrameTimer

PERIOD = 1 / 60  # Textual's frame period at 60 fps


class FakeClock:
    """``get_time`` and ``sleep`` for a timer's module. The clock moves only when the test
    moves it (:meth:`run_until`), waking each sleeper at its deadline, as time would."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, int, asyncio.Future]] = []
        self._order = itertools.count()

    def get_time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), woken))
        await woken

    async def run_until(self, then: float) -> None:
        """Move the clock to ``then``: each sleeper due before it wakes at its own deadline,
        and the tasks it wakes run before the clock moves on."""
        while self._sleepers and self._sleepers[0][0] <= then:
            deadline, _, woken = heapq.heappop(self._sleepers)
            self.now = deadline
            woken.set_result(None)
            await settle()
        self.now = then
        await settle()


async def settle() -> None:
    """Loop turns enough for a woken timer to tick and run its callback (bounded, not timed)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Target:
    """The screen's part: a frame callback that pauses the timer, as Screen's does; each
    frame's time on the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.ticks: list[float] = []
        self.timer: textual.timer.Timer | None = None

    def on_frame(self) -> None:
        self.timer.pause()
        self.ticks.append(self.clock.now)


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    """The fake clock in both timers' modules (no app runs: none of its own timers may see
    this clock)."""
    fake = FakeClock()
    monkeypatch.setattr(frame_timer, "get_time", fake.get_time)
    monkeypatch.setattr(frame_timer, "sleep", fake.sleep)
    monkeypatch.setattr(textual.timer, "_time", types.SimpleNamespace(get_time=fake.get_time))
    monkeypatch.setattr(textual.timer, "sleep", fake.sleep)
    return fake


async def frames_of(timer_class: type[textual.timer.Timer], clock: FakeClock) -> list[tuple[float, float]]:
    """Three rounds of: a quiet spell ending off the period's grid, a repaint asked for
    (painted when?), then one asked for right after that frame (painted when?). Gives, for
    each asked repaint, (time asked, time painted) on the fake clock."""
    errors: list[BaseException] = []  # what Timer._tick looks up (no app runs), set in the test's own context
    active_app.set(types.SimpleNamespace(_exit=False, features=frozenset(), _handle_exception=errors.append))
    target = Target(clock)
    timer = target.timer = timer_class(target, PERIOD, callback=target.on_frame, pause=True)
    timer._start()
    await settle()
    asked_painted = []
    try:
        for round_ in range(3):
            await clock.run_until(clock.now + 2.25 * PERIOD + 0.37 * round_)  # a quiet spell, off the grid
            for _ in range(2):  # after the quiet spell, then right after that frame
                asked, frames = clock.now, len(target.ticks)
                timer.resume()
                await settle()
                if len(target.ticks) == frames:
                    await clock.run_until(asked + 3 * PERIOD)
                assert not errors, errors
                assert len(target.ticks) == frames + 1, f"{len(target.ticks) - frames} frames for one repaint asked"
                asked_painted.append((asked, target.ticks[-1]))
        await clock.run_until(clock.now + 10 * PERIOD)
        assert len(target.ticks) == 6, "the timer ticked while paused"
    finally:
        timer.stop()
    return asked_painted


async def test_frames_come_at_once_after_a_pause_and_one_period_after_a_frame(clock):
    asked_painted = await frames_of(FrameTimer, clock)
    for i, (asked, painted) in enumerate(asked_painted):
        if i % 2 == 0:
            assert painted == asked, f"repaint {i + 1} after a quiet spell waited {painted - asked:.4f} s for a grid point"
        else:
            previous = asked_painted[i - 1][1]
            assert painted == pytest.approx(previous + PERIOD), (
                f"repaint {i + 1} right after a frame: {painted - previous:.4f} s after it, not one period")


async def test_why_textual_timer_is_replaced_a_frame_right_after_a_late_one_waits_past_a_period(clock):
    """Textual 8.2's ``Timer._run``: the hazard :class:`FrameTimer` removes (when this fails,
    Textual fixed it and the patch can go: the gate's canary lists the patch)."""
    asked_painted = await frames_of(textual.timer.Timer, clock)
    gaps = [painted - asked_painted[i - 1][1] for i, (_, painted) in enumerate(asked_painted) if i % 2]
    assert all(gap > 1.01 * PERIOD for gap in gaps), f"frames right after a frame came {gaps} s after it"
