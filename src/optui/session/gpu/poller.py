"""Polling every host's GPU source and keeping a short per-GPU history.

One task per host calls ``source.read()`` every ``interval_s`` — or as soon as a streaming
source (one with an ``on_fresh`` hook, e.g. the SSH ``nvidia-smi -lms`` stream) says a new
tick arrived, so a change reaches the screen within one tick. A read that takes longer
than 3 intervals leaves the last snapshot marked ``stale`` (with its age) instead of
freezing anything; the history gets a gap (None) for every missed tick, so sparklines
show missing data honestly instead of interpolating. A read that fails (an ERROR snapshot, or
an exception a source raised) is shown with its reason, and the next read waits longer each
time (up to :data:`MAX_BACKOFF_INTERVALS` intervals) until one succeeds: polling never stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from optui.adapters.aio import wait_set, within
from optui.adapters.gpu_source import GpuSource
from optui.core.gpu.samples import HostSnapshot, HostStatus
from optui.session.state import GpuHistoryWindow, GpuSeries

HISTORY_S = 300  # keep 5 minutes


class GpuHistory:
    """Ring buffers of utilization % and memory % per (host, GPU index), one point per
    tick, None for a missing reading."""

    def __init__(self, points: int) -> None:
        self.points = points
        self.util: dict[tuple[str, int], deque[float | None]] = {}
        self.mem: dict[tuple[str, int], deque[float | None]] = {}
        self._window: GpuHistoryWindow | None = None

    def set_series(self, key: tuple[str, int], util: list[float | None], mem: list[float | None]) -> None:
        """Replace GPU ``key``'s (host, index) history by these points, oldest first (a
        replay, a test's fixed pattern); at most :attr:`points` are kept."""
        self.util[key] = deque(util, maxlen=self.points)
        self.mem[key] = deque(mem, maxlen=self.points)
        self._window = None

    def window(self) -> GpuHistoryWindow:
        """The history as a frozen value (built once per tick, for the snapshot)."""
        if self._window is None:
            self._window = GpuHistoryWindow(self.points, tuple(
                GpuSeries(host, index, tuple(util), tuple(self.mem.get((host, index), ())))
                for (host, index), util in self.util.items()))
        return self._window

    def add(self, snap: HostSnapshot) -> None:
        """Append the snapshot's values (or gaps when the host is not live)."""
        self._window = None
        seen = set()
        for s in snap.samples:
            key = (snap.host, s.index)
            seen.add(key)
            live = snap.status is HostStatus.LIVE and s.error is None
            self._push(self.util, key, s.util_gpu_pct if live else None)
            self._push(self.mem, key, s.mem_used_pct if live else None)
        for key in list(self.util):
            if key[0] == snap.host and key not in seen:
                self._push(self.util, key, None)
                self._push(self.mem, key, None)

    def _push(self, table: dict, key: tuple[str, int], value: float | None) -> None:
        buf = table.get(key)
        if buf is None:
            buf = table[key] = deque([None] * 0, maxlen=self.points)
        buf.append(value)


#: The longest wait between two failed reads of a host, in multiples of its interval.
MAX_BACKOFF_INTERVALS = 4


def backoff_s(interval_s: float, failures: int) -> float:
    """Seconds to wait before the next read after ``failures`` failed reads in a row:
    ``interval_s`` doubled per failure, at most :data:`MAX_BACKOFF_INTERVALS` times it."""
    return interval_s * min(2 ** failures, MAX_BACKOFF_INTERVALS) if failures else interval_s


class GpuPoller:
    """Polls ``sources`` (host → GpuSource) and publishes snapshots via ``on_change``."""

    def __init__(self, sources: dict[str, GpuSource], intervals: dict[str, float], on_change: Callable[[], None]) -> None:
        self.sources = sources
        self.intervals = intervals
        self.on_change = on_change
        self.snapshots: dict[str, HostSnapshot] = {h: HostSnapshot(h) for h in sources}
        points = int(HISTORY_S / max(0.25, min(intervals.values(), default=1.0)))
        self.history = GpuHistory(points)
        self.paused = False
        self._wake = {h: asyncio.Event() for h in sources}
        self._asked: set[str] = set()  # hosts to read once even while paused (refresh_now)
        self._last_ok: dict[str, float] = {}

    def refresh_now(self) -> None:
        """Read every host at once (ctrl+l), once even while :attr:`paused`: the operator
        asked for one fresh frame."""
        self._asked.update(self._wake)
        for event in self._wake.values():
            event.set()

    async def run(self) -> None:
        """Poll all hosts until cancelled."""
        tasks = [asyncio.create_task(self._poll_host(h), name=f"gpu-{h}") for h in self.sources]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            for source in self.sources.values():
                with contextlib.suppress(Exception):
                    await source.close()

    async def _poll_host(self, host: str) -> None:
        source = self.sources[host]
        interval = self.intervals.get(host, 1.0)
        wake = self._wake[host]
        timeout = interval
        if hasattr(source, "on_fresh"):  # a streaming source paces the reads itself
            source.on_fresh = wake.set
            timeout = 1.5 * interval  # only to refresh the age shown when its ticks stop
        me = asyncio.current_task()
        failures = 0
        while True:
            if not self.paused or host in self._asked:
                self._asked.discard(host)  # before the read: a refresh asked during it reads again
                await self._read(host, source, interval)
                failures = failures + 1 if self.snapshots[host].status is HostStatus.ERROR else 0
            wake.clear()
            await wait_set(wake, backoff_s(timeout, failures))  # a cancel always ends the loop (adapters/aio.py)
            if me is not None and me.cancelling():
                # the read's own wait_for can drop a cancel on 3.11 as the read completes
                raise asyncio.CancelledError

    async def _read(self, host: str, source: GpuSource, interval: float) -> None:
        try:
            snap = await within(source.read(), 3 * interval)
            if snap.status is HostStatus.LIVE:
                self._last_ok[host] = time.time()
        except TimeoutError:
            prev = self.snapshots[host]
            age = time.time() - self._last_ok.get(host, prev.taken_at or time.time())
            snap = replace(prev, status=HostStatus.STALE, error=f"no fresh data for {age:.0f}s")
        except Exception as exc:  # a source must not raise, but one bug must not kill polling
            snap = HostSnapshot(host, (), time.time(), HostStatus.ERROR, f"{type(exc).__name__}: {exc}", "")
        self.snapshots[host] = snap
        self.history.add(snap)
        self.on_change()
