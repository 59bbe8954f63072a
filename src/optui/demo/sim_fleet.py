"""A simulated fleet for ``optui demo --fleet N``: N hosts x 8 H200s, nothing installed.

A :class:`~optui.session.gpu.fleet.FleetSource` that builds, at each read, the samples a
Prometheus would answer for dcgm-exporter series, and merges them through the same
:class:`~optui.core.fleet.readings.FleetState` as the real source (so the demo shows what the real
mapping does). Values are a pure function of ``(host, gpu, time)``: most GPUs serve a slowly
varying load, every 7th host's GPUs are idle but hold memory (a model loaded, no traffic),
every 11th host is empty, and host 5's exporter stops after the first minute (its GPUs turn
stale and age); inference servers (vLLM, SGLang series) run on two hosts in three of the busy
ones. Reading never raises.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time

from optui.adapters.worker_thread import SingleThreadExecutor
from optui.core.fleet.query import SAMPLE_TIME_LABEL, PromSample
from optui.core.fleet.readings import GEN_RATE_LABEL, SERVER_TIME_LABEL, FleetSnapshot, FleetState
from optui.demo.sim_gpus import _unit as _fresh_unit
from optui.demo.sim_gpus import gpu_uuid
from optui.demo.startup import H200_RESERVED_MIB, H200_TOTAL_MIB

GPUS_PER_HOST = 8
MODEL = "NVIDIA H200"
#: the host whose exporter stops (index), and after how many seconds of the demo
STOPPING_HOST, STOPS_AFTER_S = 5, 60.0


_unit = functools.lru_cache(maxsize=None)(_fresh_unit)  # a fleet's constants, hashed once


def sim_host_name(index: int) -> str:
    return f"fleet-node-{index + 1:03d}"


def sim_gpu_values(host: int, gpu: int, t: float) -> dict[str, float]:
    """dcgm-exporter metric → value for one simulated GPU at unix time ``t``."""
    free_total = H200_TOTAL_MIB - H200_RESERVED_MIB
    if host % 11 == 10:
        used, util = 0.0, 0.0
    elif host % 7 == 6:
        used, util = free_total * 0.88, 0.0
    else:
        phase = _unit("fleet", host, gpu) * 2 * math.pi
        wave = 0.5 + 0.5 * math.sin(t / 20.0 + phase)
        used = free_total * (0.55 + 0.4 * _unit("mem", host, gpu))
        util = round(100.0 * (0.3 + 0.7 * wave) * (0.6 + 0.4 * _unit("util", host, gpu)))
    return {
        "DCGM_FI_DEV_FB_USED": round(used),
        "DCGM_FI_DEV_FB_FREE": round(free_total - used),
        "DCGM_FI_DEV_FB_RESERVED": H200_RESERVED_MIB,
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": round(util * 0.6),
        "DCGM_FI_DEV_GPU_TEMP": round(31 + util * 0.5 + 4 * _unit("temp", host, gpu)),
        "DCGM_FI_DEV_POWER_USAGE": round(74 + util * 6.0, 1),
    }


class SimFleetSource:
    """``hosts`` simulated hosts (see the module doc), read every ``interval_s``."""

    def __init__(self, hosts: int, interval_s: float = 2.0, clock=time.time) -> None:
        self.hosts = hosts
        self.interval_s = interval_s
        self._clock = clock
        self._started = clock()
        self._state = FleetState(interval_s)
        self._worker = SingleThreadExecutor("optui-sim-fleet")

    def samples(self, now: float) -> list[PromSample]:
        """The answer a Prometheus would give now (scrapes every ``interval_s``)."""
        scraped = now - (now % self.interval_s)
        out = []
        for host in range(self.hosts):
            if host == STOPPING_HOST and now - self._started > STOPS_AFTER_S:
                continue  # its exporter stopped: Prometheus marked its series stale
            for gpu in range(GPUS_PER_HOST):
                labels = {"gpu": str(gpu), "UUID": gpu_uuid(sim_host_name(host), gpu), "modelName": MODEL,
                          "Hostname": sim_host_name(host), "instance": f"{sim_host_name(host)}:9400"}
                for name, value in sim_gpu_values(host, gpu, scraped).items():
                    out.append(PromSample(name, labels, now, float(value)))
                out.append(PromSample("", {**labels, SAMPLE_TIME_LABEL: "1"}, now, scraped))
            out += self._server_samples(host, scraped, now)
        return out

    def _server_samples(self, host: int, scraped: float, now: float) -> list[PromSample]:
        """An inference server's series on every 3rd host (vLLM) and the one after (SGLang),
        its load following the host's GPUs; none on idle or empty hosts."""
        if host % 7 == 6 or host % 11 == 10 or host % 3 == 2:
            return []
        util = sum(sim_gpu_values(host, gpu, scraped)["DCGM_FI_DEV_GPU_UTIL"] for gpu in range(GPUS_PER_HOST)) / 8
        kind, port = ("vllm", 8000) if host % 3 == 0 else ("sglang", 30000)
        names = {"vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"),
                 "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage")}[kind]
        labels = {"instance": f"{sim_host_name(host)}:{port}", "job": kind, "model_name": "demo/Llama-3.1-70B"}
        values = (round(util / 3), round(max(0.0, util - 60) / 4), util / 100 * 0.85)
        out = [PromSample(name, labels, now, float(value)) for name, value in zip(names, values)]
        out.append(PromSample("", {"instance": labels["instance"], "job": kind, GEN_RATE_LABEL: "1"}, now, util * 24.0))
        out.append(PromSample("", {"instance": labels["instance"], "job": kind, SERVER_TIME_LABEL: "1"}, now, scraped))
        return out

    async def read(self) -> FleetSnapshot:
        # built and merged on a worker thread, as the real source's answers (~40 ms for 512 GPUs)
        return await asyncio.wrap_future(self._worker.submit(self._read))

    def _read(self) -> FleetSnapshot:
        now = self._clock()
        return self._state.update(self.samples(now), now)

    async def close(self) -> None:
        self._worker.shutdown(wait=False)
