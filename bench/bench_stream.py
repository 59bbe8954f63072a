#!/usr/bin/env python3
"""Streaming benchmark output through the real app: time, event-loop lag, memory.

    python bench/bench_stream.py [--lines 100000] [--rate 0] [--max-lines 10000] [--json]

Runs the real :class:`~optui.ui.app.OptuiApp` headless (``App.run_test``) on a temporary
campaign whose benchmark preset is a real subprocess printing ``--lines`` lines (at
``--rate`` lines/s, 0 = as fast as it can; every 100th line is a tqdm ``\\r`` redraw, every
1000th a 100 KiB line). A ticker task on the app's event loop sleeps 5 ms at a time and
records how late it wakes (the loop lag). Reported:

- ``stream_s``: from starting the run until the bench panel's ``Log`` has received the
  last line (targets: 100k lines in <= 2 s);
- ``focus_repaint_ms``: the start as the ``b`` key does it: the bench log gets the focus
  and the run starts after that repaint (a full-screen restyle; not part of the stream);
- ``lag_max_ms`` / ``lag_p99_ms``: the worst and 99th-percentile ticker lateness while
  streaming (target <= 50 ms);
- ``log_lines``: lines held by the ``Log`` widget (bounded by ``log_max_lines``),
  ``buffer_lines`` held by the run, ``rss_growth_mib`` the resident-set growth.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# The flood: plain lines, a tqdm redraw every 100 lines, a 100 KiB line every 1000.
FLOOD = r"""
import sys, time
n, rate = int(sys.argv[1]), float(sys.argv[2])
out = sys.stdout
t0 = time.perf_counter()
chunk = []
for i in range(n):
    if i % 1000 == 999:
        chunk.append("L" * 100_000 + "\n")
    elif i % 100 == 99:
        chunk.append(f"\r {i * 100 // n:3d}%|#####     | {i}/{n} [00:01<00:01, 1000.00it/s]\n")
    else:
        chunk.append(f"line {i} of the flood: some text that looks like a log line\n")
    if len(chunk) >= 200:
        out.write("".join(chunk)); chunk.clear()
        if rate > 0:
            ahead = (i + 1) / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
out.write("".join(chunk))
out.flush()
"""


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run(lines: int, rate: float, max_lines: int, size: tuple[int, int]) -> dict:
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "flood.py"
        script.write_text(FLOOD)
        cfg = Path(tmp) / "optui.toml"
        cfg.write_text(f'''log_max_lines = {max_lines}
[hosts.local]
gpu_source = "none"
[servers.s]
url = "http://127.0.0.1:1"
control = "none"
[benchmarks.flood]
server = "s"
argv = [{sys.executable!r}, {str(script)!r}, "{lines}", "{rate}"]
''')
        app = OptuiApp(Session(load_config(cfg)))
        async with app.run_test(size=size) as pilot:
            await pilot.pause(0.5)
            while not app.panels_mounted:  # they mount after the first frame
                await pilot.pause(0.05)
            lags: list[float] = []
            stop = asyncio.Event()

            async def ticker() -> None:
                while not stop.is_set():
                    t = time.perf_counter()
                    await asyncio.sleep(0.005)
                    lags.append((time.perf_counter() - t - 0.005) * 1000)

            rss0 = _rss_mib()
            panel = app.query_one("#bench")
            t_key = time.perf_counter()
            app.start_bench("flood")  # as the b key: focus moves to the bench log, then the run starts
            while app.session.benches.current is None:
                await asyncio.sleep(0.001)
            focus_ms = (time.perf_counter() - t_key) * 1000
            t0 = time.perf_counter()
            tick = asyncio.create_task(ticker())
            run_ = app.session.benches.current
            expected = lines + 2  # the "$ argv" line and the final "optui: benchmark ..." line
            while panel.seen_lines < expected:
                await asyncio.sleep(0.01)
                if time.perf_counter() - t0 > 120:
                    break
            stream_s = time.perf_counter() - t0
            stop.set()
            await tick
            await pilot.pause(0.2)
            log = app.query_one("#bench-log")
            ordered = sorted(lags)
            result = {
                "lines": lines,
                "rate": rate,
                "stream_s": round(stream_s, 3),
                "lines_per_s": round(lines / stream_s),
                "lag_max_ms": round(max(lags), 1),
                "lag_p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 1),
                "ticks": len(lags),
                "focus_repaint_ms": round(focus_ms, 1),
                "status": run_.view.status,
                "seen_lines": panel.seen_lines,
                "log_lines": log.line_count,
                "log_max_lines": max_lines,
                "buffer_lines": len(run_.lines),
                "rss_growth_mib": round(_rss_mib() - rss0, 1),
            }
            await pilot.press("q")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=0.0, help="lines/s (0: as fast as possible)")
    parser.add_argument("--max-lines", type=int, default=10_000, help="log_max_lines of the campaign")
    parser.add_argument("--size", default="160x45")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    width, height = (int(v) for v in opts.size.split("x"))
    result = asyncio.run(run(opts.lines, opts.rate, opts.max_lines, (width, height)))
    if opts.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>16}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
