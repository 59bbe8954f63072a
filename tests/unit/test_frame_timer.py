"""The screen's frame timer (issue 8, key press to screen): a repaint asked for after a quiet
spell is painted at once, one asked for right after a frame within one frame period, and
two frames are never closer than one period. Textual's own timer waited 1-2 periods after
a late tick."""

from __future__ import annotations

import asyncio
import time

from textual.app import App

from optui.ui.textual_patches.frame_timer import FrameTimer

PERIOD = 0.2  # long, so that a loaded machine's scheduling delays stay well inside it


class Target:
    """The screen's part: a frame callback that pauses the timer, as Screen's does."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self.timer: FrameTimer | None = None

    def on_frame(self) -> None:
        self.timer.pause()
        self.ticks.append(time.monotonic())


async def wait_ticks(target: Target, n: int, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while len(target.ticks) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    assert len(target.ticks) >= n, f"{len(target.ticks)} ticks, expected {n}"


async def test_frames_come_at_once_after_a_pause_and_one_period_after_a_frame():
    target = Target()
    async with App().run_test():  # the timer calls back in a running app, as the screen's does
        timer = target.timer = FrameTimer(target, PERIOD, callback=target.on_frame, pause=True)
        timer._start()
        try:
            await check_frames(target, timer)
        finally:
            timer.stop()


async def check_frames(target: Target, timer: FrameTimer) -> None:
    for n in (1, 3, 5):
        # a quiet spell that ends off the period's grid, then a repaint: painted at once
        if target.ticks:
            await asyncio.sleep(target.ticks[-1] + 2.25 * PERIOD - time.monotonic())
        else:
            await asyncio.sleep(0.35)
        asked = time.monotonic()
        timer.resume()
        await wait_ticks(target, n)
        assert target.ticks[-1] - asked < PERIOD / 2, f"frame {n}: a repaint after a quiet spell waited for a grid point"
        # a repaint asked for right after that frame: one period later, not 1-2
        timer.resume()
        await wait_ticks(target, n + 1)
        gap = target.ticks[-1] - target.ticks[-2]
        assert PERIOD - 0.01 <= gap < 1.5 * PERIOD, f"frame {n + 1}: {gap * 1000:.0f} ms after the previous one"
    await asyncio.sleep(2 * PERIOD)
    assert len(target.ticks) == 6, "the timer ticked while paused"
