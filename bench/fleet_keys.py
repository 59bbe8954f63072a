#!/usr/bin/env python3
"""The fleet view in a real terminal: optui's CPU while it shows 64 hosts x 8 GPUs through the
real Prometheus, and key press → screen with the grid re-sorted by each press.

    python bench/fleet_keys.py [--hosts 64] [--interval 2] [--presses 30] [--idle 20] [--size 200x50]
                               [--changes 20] [--profile stacks.txt]

Starts the exporters (a child process) and Debian's Prometheus as bench/fleet_poll.py does,
then optui in a pseudo-terminal (bench/ptyrun.py: the real renderer) on a campaign with only
``[fleet] prometheus = ...``. Once the grid shows every host it measures optui's CPU (its
process tree, in % of one core) over ``--idle`` seconds with nobody typing, then focuses the
grid (``1``) and types ``s`` ``--presses`` times, 0.2-0.6 s apart: each press re-sorts the 64 rows,
seen when the summary row names the next sort (bench/keypress_latency.py's timing). Prints JSON.

Before the presses, ``--changes`` times (0.1 s to one interval apart, random, so they land at
every phase of optui's tick), the first host's GPU 0 gets a new temperature in its exporter
(100 + n °C, the host's hottest: its row shows ``1NN°C``). For each change: Prometheus's scrape
time of the first sample with the new value (its timestamp, from a range query afterwards)
and the time the terminal showed ``1NN°C``; ``scrape_to_screen`` is that delay in seconds and
in refresh intervals (the target, issue 21: within 2 intervals).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "src"), str(ROOT)]

from fleet_poll import EXPORTERS, pct  # noqa: E402
from keypress_latency import Watch, latency_summary, timed_presses  # noqa: E402
from ptyrun import PtyProcess, load_average, parse_size, tree_cpu_s  # noqa: E402

# what the summary row says after each press (the sort it names)
SORT_MARKERS = [b"sort free memory", b"sort utilization", b"sort temperature", b"sort idle holding memory", b"sort host"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--changes", type=int, default=20, help="exporter changes timed to the screen (<= 99)")
    parser.add_argument("--profile", metavar="FILE", help="py-spy's collapsed stacks of optui during the presses")
    args = parser.parse_args()
    from tests.helpers.prometheus import Prometheus

    exporters = subprocess.Popen([sys.executable, "-c", EXPORTERS, str(args.hosts)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT)
    prom = proc = None
    watch = Watch()
    try:
        targets = exporters.stdout.readline().split()
        tmp = Path(tempfile.mkdtemp(prefix="fleet-keys-"))
        prom = Prometheus(tmp / "prom", targets)
        (tmp / "prom").mkdir()
        prom.start()
        prom.wait_series("DCGM_FI_DEV_FB_USED", args.hosts * 8, timeout_s=60)
        cfg = tmp / "optui.toml"
        cfg.write_text(f'[hosts.local]\ngpu_source = "none"\n\n[fleet]\nprometheus = "{prom.url}"\n'
                       f"interval_s = {args.interval}\n")
        proc = PtyProcess([sys.executable, "-m", "optui", "-c", str(cfg)], parse_size(args.size), keep=True,
                          on_output=watch.feed, cwd=str(tmp))
        if proc.wait_for(f"{args.hosts} hosts {args.hosts * 8} GPUs".encode(), 60) is None:
            raise SystemExit("optui did not show the fleet within 60 s")
        time.sleep(2.0)
        cpu0, t0 = tree_cpu_s(proc.pid), time.monotonic()
        time.sleep(args.idle)
        idle_pct = 100 * (tree_cpu_s(proc.pid) - cpu0) / (time.monotonic() - t0)
        load = load_average()
        changes = exporter_changes(proc, watch, exporters, prom.url, args.changes, args.interval,
                                   random.Random(args.seed))
        proc.send(b"1")  # focuses the fleet grid (a Tab after it, as before 89a68c9, left it: every s was lost)
        if proc.wait_for(b"s Sort", 5) is None:
            raise SystemExit("the fleet grid did not take the focus")
        time.sleep(0.5)
        spy = None
        if args.profile:  # py-spy samples optui while the keys are typed (collapsed stacks, one a line)
            binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")  # the venv's
            spy = subprocess.Popen([binary, "record", "--pid", str(proc.pid), "--rate", "250", "--format", "raw",
                                    "--output", args.profile, "--nonblocking"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        record: list = []
        latencies, missed = timed_presses(proc, watch, lambda n: (b"s", SORT_MARKERS[n % len(SORT_MARKERS)]),
                                          args.presses, random.Random(args.seed), record)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        missed_markers = sorted({SORT_MARKERS[n % len(SORT_MARKERS)].decode() for n, _, ms in record if ms is None})
    finally:
        if proc is not None:
            proc.stop()
        if prom is not None:
            prom.stop()
        exporters.stdin.close()
        exporters.wait(10)
    print(json.dumps({"hosts": args.hosts, "gpus": args.hosts * 8, "interval_s": args.interval, "size": args.size,
                      "idle_cpu_pct_of_one_core": round(idle_pct, 2), "idle_s": args.idle, "load_during": load,
                      "changes": changes,
                      "presses": args.presses, "seen": len(latencies), "missed": missed, "missed_markers": missed_markers,
                      **latency_summary(latencies)}))
    return 0 if not missed and not changes["missed"] else 1


def sample_time(prom_url: str, host: str, gpu: int, value: float) -> float | None:
    """Unix time of Prometheus's first ``DCGM_FI_DEV_GPU_TEMP`` sample of ``host``'s GPU
    ``gpu`` with ``value`` in the last minute (its scrape time), or None."""
    import urllib.parse
    import urllib.request

    query = f'DCGM_FI_DEV_GPU_TEMP{{Hostname="{host}",gpu="{gpu}"}}[1m]'
    with urllib.request.urlopen(f"{prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": query}),
                                timeout=5) as resp:
        result = json.load(resp)["data"]["result"]
    times = [float(t) for series in result for t, v in series["values"] if float(v) == value]
    return min(times) if times else None


def exporter_changes(proc: PtyProcess, watch: Watch, exporters: subprocess.Popen, prom_url: str, count: int,
                     interval: float, rng: random.Random) -> dict:
    """``count`` changes of the first host's GPU 0 temperature in its exporter, each timed from
    Prometheus's scrape of the new value to the terminal showing it (see the module doc)."""
    from tests.helpers.prometheus import host_name

    host, delays, missed = host_name(0), [], 0
    wall_minus_mono = time.time() - time.monotonic()  # the sample times are Unix times
    for n in range(count):
        temp = 100.0 + n
        watch.arm(f" {temp:.0f}°C".encode())
        exporters.stdin.write(f"0 0 DCGM_FI_DEV_GPU_TEMP {temp}\n")
        exporters.stdin.flush()
        if not watch.event.wait(5 * interval):
            missed += 1
            continue
        scraped = sample_time(prom_url, host, 0, temp)
        if scraped is None:
            missed += 1
            continue
        delays.append(watch.found_at + wall_minus_mono - scraped)
        time.sleep(rng.uniform(0.1, interval))

    def figures(values: list[float]) -> dict:
        return {"median": round(statistics.median(values), 3), "p95": round(pct(values, 95), 3),
                "max": round(max(values), 3)} if values else {}
    return {"count": count, "seen": len(delays), "missed": missed, "scrape_to_screen_s": figures(delays),
            "scrape_to_screen_intervals": figures([d / interval for d in delays]),
            "within_2_intervals": sum(d <= 2 * interval for d in delays)}


if __name__ == "__main__":
    sys.exit(main())
