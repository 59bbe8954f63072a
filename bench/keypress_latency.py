#!/usr/bin/env python3
"""Key press to screen update while a benchmark streams 20k lines/s into the bench panel.

    python bench/keypress_latency.py [--presses 40] [--rate 20000] [--mode focus|todo]
                                     [--size 120x40] [--json]

optui runs in a real pseudo-terminal (the real renderer and its writer thread) on a temporary
campaign: no GPUs, one server it does not control, one todo item, and a benchmark preset
that is a real subprocess printing ``--rate`` lines/s (200-line bursts every 10 ms; a tqdm
``\\r`` redraw every 100th line) for ``--seconds``. ``b`` starts it, as an operator would.
Then a key is typed ``--presses`` times, 0.2-0.6 s apart (random, so the presses land at
every phase of the render loop), and the time from writing the key to the terminal until
the terminal output (escape sequences stripped) shows what the key changed is recorded:

- ``focus``: ``3`` and ``4`` in turn: the todo / bench panel takes the focus, seen when the
  key bar shows that panel's keys (``a Add`` / ``s Sweep``).
- ``todo``: the todo list has the focus; space cycles the item's status (through the
  session and the journal), seen when the item's row shows the next status icon.

Prints median / p95 / max in ms and the lines/s the client achieved. ``--rate 0``: no
benchmark (the baseline). Target (issue 8): <= 50 ms while streaming 20k lines/s.

``--todo-items N`` (issue 15): the campaign also follows an agent's todowrite list of N items
(``[todo] follow``, written before optui starts); the presses begin once its last item is
in the list, the probe item staying first.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ptyrun import PtyProcess, load_average, parse_size, strip_escapes  # noqa: E402

FLOOD = r"""
import json, os, sys, time
rate, seconds, stats = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]

def dump(figures):  # atomically: the script reads the file while this runs
    with open(stats + ".tmp", "w") as f:
        json.dump(figures, f)
    os.replace(stats + ".tmp", stats)

out = sys.stdout
t0 = time.perf_counter()
i = 0
while time.perf_counter() - t0 < seconds:
    chunk = []
    for _ in range(200):
        if i % 100 == 99:
            chunk.append(f"\r{i % 10000 // 100:3d}%|#####     | {i}/1000000 [00:01<00:01, 20000.00it/s]\n")
        else:
            chunk.append(f"[bench] request {i} done: 96 output tokens, ttft 12.3 ms, itl 4.5 ms\n")
        i += 1
    out.write("".join(chunk))
    out.flush()
    if i % 20000 == 0:  # every second: what was printed so far
        dump({"lines": i, "seconds": time.perf_counter() - t0})
    ahead = i / rate - (time.perf_counter() - t0)
    if ahead > 0:
        time.sleep(ahead)
dump({"lines": i, "seconds": time.perf_counter() - t0, "done": True})
"""

ITEM = "keypress probe item"
TODO_ICONS = ["○", "◐", "✔"]  # pending → in progress → completed → pending (core/todo cycle)


class Watch:
    """Looks for a marker in the terminal output that arrives after :meth:`arm`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._tail = b""
        self.found_at: float | None = None
        self.event = threading.Event()

    def arm(self, marker: bytes) -> None:
        with self._lock:
            self._marker, self._tail, self.found_at = marker, b"", None
            self.event.clear()

    def feed(self, when: float, chunk: bytes) -> None:
        with self._lock:
            if self._marker is None or self.found_at is not None:
                return
            window = self._tail + chunk
            if self._marker in strip_escapes(window):
                self.found_at = when
                self.event.set()
            self._tail = window[-512:]  # a marker or escape split across reads


def timed_presses(proc: PtyProcess, watch: Watch, press: Callable[[int], tuple[bytes, bytes]], count: int,
                  rng: random.Random, record: list[tuple[int, float, float | None]] | None = None
                  ) -> tuple[list[float], int]:
    """Type ``press(n) -> (key, marker)`` ``count`` times, 0.2-0.6 s apart (random): each
    press's ms from writing the key until ``marker`` shows (5 s at most, else missed).
    Returns (latencies in ms, missed); ``record`` (if given) gets ``(n, time.monotonic() of
    the write, ms or None when missed)`` for every press, in order."""
    latencies: list[float] = []
    missed = 0
    for n in range(count):
        key, marker = press(n)
        watch.arm(marker)
        t0 = time.monotonic()
        proc.send(key)
        ms = None
        if watch.event.wait(5.0):
            ms = (watch.found_at - t0) * 1000
            latencies.append(ms)
        else:
            missed += 1
        if record is not None:
            record.append((n, t0, ms))
        time.sleep(rng.uniform(0.2, 0.6))
    return latencies, missed


def latency_summary(latencies: list[float]) -> dict:
    """``median_ms``, ``p95_ms``, ``max_ms`` of ``latencies`` (None when empty)."""
    ordered = sorted(latencies)
    return {"median_ms": round(statistics.median(ordered), 1) if ordered else None,
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1) if ordered else None,
            "max_ms": round(max(ordered), 1) if ordered else None}


def write_campaign(root: Path, rate: float, seconds: float, todo_items: int = 0) -> Path:
    (root / "flood.py").write_text(FLOOD)
    follow = ""
    if todo_items:
        plan = root / "plan.json"
        plan.write_text(json.dumps({"todos": [{"content": f"Try tensor parallel {i} with chunked prefill {i * 64}",
                                               "status": "pending", "priority": "medium"} for i in range(todo_items)]},
                                   indent=2))
        follow = f'\n[todo]\nfollow = ["todowrite:{plan}"]\n'

    bench = "" if rate <= 0 else f'''
[benchmarks.flood]
server = "s"
argv = [{sys.executable!r}, {str(root / "flood.py")!r}, "{rate}", "{seconds}", {str(root / "flood.json")!r}]
'''
    cfg = root / "optui.toml"
    cfg.write_text(f'''[hosts.local]
gpu_source = "none"

[servers.s]
url = "http://127.0.0.1:9"
control = "none"
{bench}{follow}''')
    subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), "todo", "add", ITEM], check=True,
                   stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return cfg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--rate", type=float, default=20000.0, help="benchmark lines/s (0: no benchmark)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the benchmark prints")
    parser.add_argument("--mode", choices=["focus", "todo"], default="focus")
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--todo-items", type=int, default=0, help="also follow an agent list of this many items")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    watch = Watch()
    latencies: list[float] = []
    missed = 0
    with tempfile.TemporaryDirectory(prefix="optui-keys-") as tmp:
        root = Path(tmp)
        cfg = write_campaign(root, args.rate, args.seconds, args.todo_items)
        proc = PtyProcess([sys.executable, "-m", "optui", "-c", str(cfg)], parse_size(args.size), keep=True,
                          on_output=watch.feed)
        try:
            if proc.wait_for(ITEM.encode(), 30) is None:
                raise SystemExit("optui did not show the campaign within 30 s")
            if args.todo_items:
                t_list = time.monotonic()
                proc.send(b"3G")  # the end of the list: shown once the whole list is in
                if proc.wait_for(f"Try tensor parallel {args.todo_items - 1} ".encode(), 300) is None:
                    raise SystemExit("the followed list did not appear within 300 s")
                list_s = time.monotonic() - t_list
                proc.send(b"g")
            time.sleep(1.0)
            if args.rate > 0:
                proc.send(b"b")
                if proc.wait_for(b"Run anyway", 5) is not None:  # its server is not READY (issue 16 asks first)
                    proc.send(b"y")
                if proc.wait_for(b"[bench] request ", 20) is None:
                    raise SystemExit("the benchmark output did not appear within 20 s")
                time.sleep(1.0)
            load = load_average()
            if args.mode == "todo":
                proc.send(b"3")
                time.sleep(1.0)
            t_start = time.monotonic()

            def press(n: int) -> tuple[bytes, bytes]:
                if args.mode == "focus":
                    return (b"3", b"a Add") if n % 2 == 0 else (b"4", b"s Sweep")
                return b" ", f"{TODO_ICONS[(n + 1) % 3]} M {ITEM}".encode()  # M: medium priority

            latencies, missed = timed_presses(proc, watch, press, args.presses, rng)
            elapsed = time.monotonic() - t_start
            stats = root / "flood.json"
            still_streaming = args.rate <= 0 or (stats.exists() and not json.loads(stats.read_text()).get("done"))
        finally:
            proc.stop()
        flood = json.loads((root / "flood.json").read_text()) if (root / "flood.json").exists() else None
    result = {
        "mode": args.mode,
        "rate_asked": args.rate,
        "presses": args.presses,
        "seen": len(latencies),
        "missed": missed,
        **latency_summary(latencies),
        "presses_s": round(elapsed, 1),
        "streaming_throughout": still_streaming,
        "client_lines_per_s": round(flood["lines"] / flood["seconds"]) if flood else None,
        "load_during": load,
        "size": args.size,
        "todo_items": args.todo_items,
        "list_shown_s": round(list_s, 1) if args.todo_items else None,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.mode}: {len(latencies)}/{args.presses} presses seen ({missed} missed) while streaming "
              f"{args.rate:.0f} lines/s; key -> screen median {result['median_ms']} ms, p95 {result['p95_ms']} ms, "
              f"max {result['max_ms']} ms; client printed {result['client_lines_per_s']} lines/s; "
              f"streaming throughout: {still_streaming}; load {load}"
              + (f"; {args.todo_items} followed items, shown after {result['list_shown_s']} s" if args.todo_items else ""))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
