"""The screen's frame timer: a frame at most one frame period after it is asked for.

Textual paints a screen from a paused interval timer that its widgets resume when they need
a repaint. After a tick that came late (the timer had been paused), Textual 8.2's timer
(``Timer._run``) re-aligns to its grid one period too far: the next frame waits 1-2 periods
(17-33 ms at 60 fps) instead of 0-1. While a benchmark streams, frames come often, so a key
press waited 25 ms on average before its frame could start. :class:`FrameTimer` keeps frames
at least one period apart and no more: a repaint asked for after a quiet spell is painted at
once, one asked for right after a frame waits out the rest of that period.

Measured reason (``bench/RESULTS.md``, "Key press to screen", issue 8; together with the
one-frame focus of :mod:`.focus_screen`): focus key press → screen while a benchmark streams
20k lines/s, 47.0 / 89.7 ms median / p95 before, 38.7 / 93.4 ms with both; todo key
34.7 / 79.6 → 29.1 / 48.1 ms (H200 machine). ``tests/unit/test_frame_timer.py`` runs this
timer and Textual's on a fake clock: Textual's paints a repaint asked for right after a frame
more than one period after it.

Private names (Textual 8.2.8): it overrides ``Timer._run`` and uses ``Timer._interval``,
``Timer._active``, ``Timer._tick`` and ``textual._time``'s clock and sleep (the ones Textual's
timer uses, so that ``run_test``'s clock applies). Upstream: no issue found for the grid
re-alignment (searched Textual's issues for timer pause / skip / late tick, 2026-12-01).
"""

from __future__ import annotations

from textual._time import get_time, sleep
from textual.timer import EventTargetGone, Timer


class FrameTimer(Timer):
    """An interval timer for frames (``interval`` in s): ticks while resumed, never two
    ticks less than ``interval`` apart, and without waiting for a grid point."""

    async def _run(self) -> None:
        interval = self._interval
        _ = self._active  # the Event is created in this task, as Timer does
        last_tick = float("-inf")
        count = 0
        while True:
            await self._active.wait()
            wait = last_tick + interval - get_time()
            if wait > 0:
                await sleep(wait)
                await self._active.wait()
            last_tick = get_time()
            count += 1
            try:
                await self._tick(next_timer=last_tick, count=count)
            except EventTargetGone:
                break
