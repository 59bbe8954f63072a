"""Simulated H200 hosts for ``optui demo``: a :class:`~optui.adapters.gpu_source.GpuSource`.

A host with ``state_path`` mirrors the demo server (:mod:`optui.demo.fake_server` writes
that JSON file every 250 ms): while the file is fresh (< 2 s old) GPUs ``0..tp_size-1``
show the server's memory and utilization, with temperature and power following the
utilization; otherwise every GPU idles at 0 MiB. A host without ``state_path`` shows a
slowly varying background load that is a pure function of ``(seed, host, gpu, time)``, so
a demo rack looks alive and is reproducible. Reading never raises.
"""

from __future__ import annotations

import hashlib
import json
import math
import time

from optui.core.gpu.samples import GpuProcess, GpuSample, HostSnapshot, HostStatus
from optui.demo.startup import H200_RESERVED_MIB, H200_TOTAL_MIB

GPU_NAME = "NVIDIA H200 (demo)"
POWER_LIMIT_W = 700.0
STATE_MAX_AGE_S = 2.0
_IDLE_POWER_W = 74.0
_IDLE_TEMP_C = 31.0


def _unit(*key: object) -> float:
    """A deterministic pseudo-random number in [0, 1) for ``key``."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def gpu_uuid(host: str, index: int) -> str:
    """A stable NVML-style UUID (``GPU-xxxxxxxx-xxxx-...``) for one demo GPU."""
    h = hashlib.md5(f"{host}:{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def read_server_state(path: str, now: float) -> dict | None:
    """The demo server's state file when it exists, parses and is fresh; else None."""
    try:
        with open(path, encoding="utf-8") as fh:
            state = json.load(fh)
        if not isinstance(state, dict) or not -1.0 <= now - float(state["ts"]) < STATE_MAX_AGE_S:
            return None
        int(state["tp_size"]), float(state["mem_used_mib_per_gpu"]), float(state["util_pct"])  # validate
        return state
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


class DemoGpuSource:
    """``gpus`` simulated H200s of ``host`` (see module docstring)."""

    def __init__(self, host: str, gpus: int = 8, state_path: str | None = None, seed: int = 0) -> None:
        self.host = host
        self.gpus = max(0, gpus)
        self.state_path = state_path
        self.seed = seed

    def _sample(self, index: int, now: float, mem: float, util: float, procs: tuple[GpuProcess, ...]) -> GpuSample:
        """One GPU reading with temperature/power derived from ``util`` plus a little
        deterministic noise (changes every second)."""
        tick = int(now)
        noise = _unit(self.seed, self.host, index, tick) - 0.5
        util = min(100.0, max(0.0, util + (noise * 4.0 if util > 0 else 0.0)))
        temp = _IDLE_TEMP_C + 0.38 * util + noise * 1.5 + index * 0.3
        power = min(POWER_LIMIT_W, _IDLE_POWER_W + 5.6 * util + noise * 6.0)
        return GpuSample(
            index=index,
            uuid=gpu_uuid(self.host, index),
            name=GPU_NAME,
            mem_used_mib=round(mem, 1),
            mem_reserved_mib=H200_RESERVED_MIB,
            mem_total_mib=H200_TOTAL_MIB,
            util_gpu_pct=round(util, 1),
            util_mem_pct=round(util * 0.55, 1),
            temp_c=round(temp, 1),
            power_w=round(power, 1),
            power_limit_w=POWER_LIMIT_W,
            sm_clock_mhz=1980.0 if util > 0 else 345.0,
            processes=procs,
        )

    def _background(self, index: int, now: float) -> GpuSample:
        """A plausible independent job: some GPUs hold a model and cycle through load."""
        busy = _unit(self.seed, self.host, index, "busy") < 0.6
        if not busy:
            return self._sample(index, now, 0.0, 0.0, ())
        period = 90.0 + 120.0 * _unit(self.seed, self.host, index, "period")
        phase = 2 * math.pi * _unit(self.seed, self.host, index, "phase")
        wave = 0.5 + 0.5 * math.sin(2 * math.pi * now / period + phase)
        mem = H200_TOTAL_MIB * (0.55 + 0.35 * _unit(self.seed, self.host, index, "mem"))
        pid = 10000 + int(_unit(self.seed, self.host, index, "pid") * 50000)
        proc = (GpuProcess(pid, "/usr/bin/python3", round(mem, 1)),)
        return self._sample(index, now, mem, 20.0 + 75.0 * wave, proc)

    def _snapshot(self, now: float) -> HostSnapshot:
        if self.state_path is None:
            samples = [self._background(i, now) for i in range(self.gpus)]
            return HostSnapshot(self.host, tuple(samples), now, HostStatus.LIVE, None, "demo")
        state = read_server_state(self.state_path, now)
        tp = int(state["tp_size"]) if state else 0
        samples = []
        for i in range(self.gpus):
            if state and i < tp:
                mem = float(state["mem_used_mib_per_gpu"])
                procs = (GpuProcess(int(state.get("pid") or 0), "python3", round(mem, 1)),)
                samples.append(self._sample(i, now, mem, float(state["util_pct"]), procs))
            else:
                samples.append(self._sample(i, now, 0.0, 0.0, ()))
        return HostSnapshot(self.host, tuple(samples), now, HostStatus.LIVE, None, "demo")

    async def read(self) -> HostSnapshot:
        """One reading (the state file is a few hundred bytes: read inline). Never raises."""
        now = time.time()
        try:
            return self._snapshot(now)
        except Exception as exc:  # noqa: BLE001 - a demo source must never break the UI
            return HostSnapshot(self.host, (), now, HostStatus.ERROR, f"demo source: {exc}", "demo")

    async def close(self) -> None:
        """Nothing to release (idempotent)."""
        return None
