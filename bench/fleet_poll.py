#!/usr/bin/env python3
"""The fleet through a real Prometheus: what one tick costs, and optui's CPU while it polls.

    python bench/fleet_poll.py [--hosts 64] [--interval 2] [--seconds 40]

Starts HOSTS dcgm-exporter-format exporters x 8 GPUs (tests/helpers/prometheus.py, in a child
process of their own so their CPU is not counted) and Debian's Prometheus scraping them every
second, waits until every GPU is scraped, then runs optui's session poller (FleetPoller on
PrometheusFleetSource: the one query a tick, the answer parsed and merged on a worker thread)
for SECONDS at INTERVAL. Prints JSON: per tick the query's wall time, answer bytes, series,
the parse + merge time on the worker; this process's CPU over the run in % of one core
(the event loop and the worker thread: everything optui does for the fleet, nothing drawn);
the age of the GPUs' newest samples when optui had them (scrape to reading).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

# the exporters' child process: prints their targets, then reads ``HOST GPU METRIC VALUE``
# lines (that GPU serves VALUE for METRIC from its next scrape on) until stdin closes
EXPORTERS = """
import sys
import tests.helpers.prometheus as helper
set_values, computed = {}, helper.gpu_values

def gpu_values(host, gpu, generation):
    values = computed(host, gpu, generation)
    values.update(set_values.get((host, gpu), {}))
    return values

helper.gpu_values = gpu_values  # dcgm_text reads it at each scrape
ex = helper.DcgmExporters(int(sys.argv[1]))
print(" ".join(ex.targets()), flush=True)
for line in sys.stdin:
    host, gpu, metric, value = line.split()
    set_values.setdefault((int(host), int(gpu)), {})[metric] = float(value)
"""


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


async def poll(url: str, interval: float, seconds: float) -> dict:
    from optui.config import FleetConfig
    from optui.session.gpu.fleet import FleetPoller, PrometheusFleetSource

    source = PrometheusFleetSource(FleetConfig(prometheus=url, interval_s=interval, timeout_s=5))
    ticks: list[dict] = []
    merge_ms: list[float] = []
    original = source._merge  # timed where it runs: the worker thread

    def timed_merge(status: int, body: bytes):
        started = time.perf_counter()
        snapshot = original(status, body)
        merge_ms.append(1000 * (time.perf_counter() - started))
        ticks.append({"bytes": len(body), "series": snapshot.series, "gpus": len(snapshot.gpus),
                      "query_ms": round(1000 * (source.client.last_duration_s or 0), 1),
                      "ages": [g.age_s for g in snapshot.gpus if g.age_s is not None]})
        return snapshot

    source._merge = timed_merge
    poller = FleetPoller(source, lambda: None)
    await poller.read_once()  # warm: the connection, the imports
    ticks.clear()
    merge_ms.clear()
    usage0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    task = asyncio.create_task(poller.run())
    await asyncio.sleep(seconds)
    task.cancel()
    usage1, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - wall0
    await poller.close()
    cpu_s = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    ages = [a for t in ticks for a in t["ages"]]
    return {
        "ticks": len(ticks), "interval_s": interval, "wall_s": round(wall, 1),
        "gpus": ticks[-1]["gpus"] if ticks else 0, "series_per_tick": ticks[-1]["series"] if ticks else 0,
        "answer_kib_per_tick": round(statistics.median(t["bytes"] for t in ticks) / 1024, 1),
        "query_ms": {"median": statistics.median(t["query_ms"] for t in ticks), "p95": pct([t["query_ms"] for t in ticks], 95)},
        "parse_merge_ms": {"median": round(statistics.median(merge_ms), 1), "p95": round(pct(merge_ms, 95), 1)},
        "cpu_pct_of_one_core": round(100 * cpu_s / wall, 2),
        "sample_age_at_reading_s": {"median": round(statistics.median(ages), 2), "p95": round(pct(ages, 95), 2),
                                    "max": round(max(ages), 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    from tests.helpers.prometheus import Prometheus

    exporters = subprocess.Popen([sys.executable, "-c", EXPORTERS, str(args.hosts)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT)
    prom = None
    try:
        targets = exporters.stdout.readline().split()
        prom = Prometheus(Path(tempfile.mkdtemp(prefix="fleet-bench-")), targets).start()
        prom.wait_series("DCGM_FI_DEV_FB_USED", args.hosts * 8, timeout_s=60)
        result = asyncio.run(poll(prom.url, args.interval, args.seconds))
        result["hosts"] = args.hosts
        print(json.dumps(result, indent=2))
    finally:
        if prom is not None:
            prom.stop()
        exporters.stdin.close()
        exporters.wait(10)


if __name__ == "__main__":
    main()
