#!/usr/bin/env python3
"""Memory of ``optui demo`` over a long run: RSS every 10 s, start / end / max and the slope.

    python bench/memory_soak.py [--duration 3600] [--every 10] [--size 120x40]
                                [--bench-every 0] [--log FILE] [-- COMMAND ...]

``optui demo`` (fresh campaign in a temporary directory, default log cap) runs in a real
pseudo-terminal of the given size, so the real renderer runs. The RSS of the optui process
(``/proc/PID/statm``; the simulated server it starts is its own process and is reported
apart) is sampled every ``--every`` seconds. With ``--bench-every S`` the demo benchmark is
started every S seconds by typing ``b`` and Enter (its output goes through the bench panel's
log, so the log cap is exercised). At the end: start / end / max RSS in MiB and the slope in
MiB/hour over the second half of the run (least squares). ``--log FILE`` appends every
sample as it is taken, so a run cut short still leaves its data.

Target (issue 8): <= 150 MB after one hour with the default log cap, flat.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ptyrun import PtyProcess, load_average, parse_size, rss_mib, tree_pids  # noqa: E402


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB/hour (0.0 for < 2 samples)."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (m - mean_m) for t, m in samples)
    return cov / var * 3600


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds (default 3600)")
    parser.add_argument("--every", type=float, default=10.0, help="sampling interval in s (default 10)")
    parser.add_argument("--size", default="120x40", help="terminal COLSxROWS (default 120x40)")
    parser.add_argument("--bench-every", type=float, default=0.0, help="start the demo benchmark every S s (0: never)")
    parser.add_argument("--log", help="append each sample (JSON line) to this file")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("command", nargs="*", help="command to run instead of `python -m optui demo --dir TMP`")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="optui-soak-") as tmp:
        argv = args.command or [sys.executable, "-m", "optui", "demo", "--dir", str(Path(tmp) / "demo")]
        proc = PtyProcess(argv, parse_size(args.size))
        samples: list[tuple[float, float]] = []
        others: list[float] = []
        next_bench = args.bench_every or None
        benches = 0
        log = open(args.log, "a") if args.log else None  # noqa: SIM115
        try:
            t = 0.0
            while t <= args.duration and proc.alive():
                time.sleep(max(0.0, proc.started + t - time.monotonic()))
                now = time.monotonic() - proc.started
                rss = rss_mib(proc.pid)
                rest = sum(rss_mib(p) for p in tree_pids(proc.pid) if p != proc.pid)
                samples.append((now, rss))
                others.append(rest)
                if log:
                    log.write(json.dumps({"t_s": round(now, 1), "rss_mib": round(rss, 1), "children_rss_mib": round(rest, 1),
                                          "load": load_average()}) + "\n")
                    log.flush()
                if next_bench is not None and now >= next_bench:
                    proc.send(b"b")
                    time.sleep(1.0)
                    proc.send(b"\r")  # the preset prompt: its default
                    benches += 1
                    next_bench += args.bench_every
                t += args.every
        finally:
            alive = proc.alive()
            proc.stop()
            if log:
                log.close()
    half = [s for s in samples if s[0] >= samples[-1][0] / 2] if samples else []
    summary = {
        "command": argv if args.command else ["optui", "demo"],
        "seconds": round(samples[-1][0], 1) if samples else 0,
        "samples": len(samples),
        "alive_at_end": alive,
        "rss_start_mib": round(samples[0][1], 1) if samples else None,
        "rss_end_mib": round(samples[-1][1], 1) if samples else None,
        "rss_max_mib": round(max(m for _, m in samples), 1) if samples else None,
        "slope_last_half_mib_per_h": round(slope_per_hour(half), 2),
        "children_rss_end_mib": round(others[-1], 1) if others else None,
        "benchmarks_started": benches,
        "load_at_end": load_average(),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{' '.join(summary['command'])}: {summary['seconds']:.0f} s, {summary['samples']} samples, "
              f"{benches} benchmarks; RSS start {summary['rss_start_mib']} MiB, end {summary['rss_end_mib']} MiB, "
              f"max {summary['rss_max_mib']} MiB; slope over the last half {summary['slope_last_half_mib_per_h']} MiB/h "
              f"(children: {summary['children_rss_end_mib']} MiB at the end; load {summary['load_at_end']})")
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
