"""Which PIDs hold GPU memory on a host, from the session's GPU readings.

Used before a server starts again: the old server's PIDs must have released their GPU
memory (a stuck worker would make the new start fail with CUDA OOM). The PIDs come from
the GPU source's per-process list (NVML / ``nvidia-smi --query-compute-apps``), so they are
host PIDs: a server in a container with its own PID namespace is not matched (the check
then passes).
"""

from __future__ import annotations

import asyncio
import time

from optui.core.gpu.samples import HostStatus
from optui.session.gpu.poller import GpuPoller


async def gpu_holders(poller: GpuPoller, host: str, after: float, *, wait_s: float = 5.0) -> set[int] | None:
    """PIDs of compute processes on ``host``'s GPUs in the first live reading taken after
    Unix time ``after`` (asks the poller for a fresh reading); None when the host has no
    live GPU source with process lists within ``wait_s`` seconds."""
    if host not in poller.sources:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        snap = poller.snapshots.get(host)
        if snap is None or snap.status not in (HostStatus.LIVE, HostStatus.STALE, HostStatus.CONNECTING):
            return None  # no GPU source on this host (or it fails): nothing to check
        if snap.status is not HostStatus.CONNECTING and not any(s.processes is not None for s in snap.samples):
            return None  # the source does not report per-process memory
        if snap.status is HostStatus.LIVE and (snap.taken_at or 0) > after:
            return {p.pid for s in snap.samples if s.processes is not None for p in s.processes}
        if time.monotonic() > deadline:
            return None
        poller.refresh_now()
        await asyncio.sleep(0.1)
