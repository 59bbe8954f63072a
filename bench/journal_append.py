"""Journal append throughput (target: 10,000 events in <= 1 s).

Appends N realistic events (server phases/states, bench events with a full result, todo
changes, notes; about 0.5 KB of JSON each) to a fresh WAL journal three ways and prints
the wall time of each: one ``append()`` per event (one transaction each, the way a session
journals live transitions), the same while a second process appends concurrently, and
``append_many()`` (one transaction).

    python bench/journal_append.py [N] [--repeat R] [--dir DIR]

Each figure is the best of R runs (the machine is shared: the median is printed too).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, not an installed copy

from optui.adapters.journal import Journal  # noqa: E402

RESULT = {"tool": "sglang", "completed": 64, "failed": 0, "duration_s": 4.3, "request_throughput": 14.87,
          "output_throughput_tok_s": 669.45, "ttft_ms": {"mean": 667.7, "median": 651.6, "p90": 891.7, "p99": 1180.2},
          "itl_ms": {"mean": 5.78, "median": 5.45, "p99": 12.4}, "tpot_ms": {"mean": 5.9, "median": 5.8, "p99": 7.0},
          "workload": {"tool": "sglang", "dataset": "random", "input_len": 256, "output_len": 96, "num_prompts": 64}}


def sample_events(n: int):
    """``(type, target, data)`` tuples cycling through a realistic mix."""
    kinds = [
        ("server.phase", "qwen", {"phase": "loading_weights", "t": 12.5}),
        ("server.state", "qwen", {"old": "starting", "new": "ready", "phase": "ready"}),
        ("bench.finished", "qwen", {"bench": "c16", "status": "ok", "duration_s": 42.1, "result": RESULT}),
        ("todo.changed", "todo:3", {"op": "status", "before": {"content": "try tp 8", "status": "pending"},
                                    "after": {"content": "try tp 8", "status": "in_progress"}}),
        ("note", "qwen", {"text": "p99 TTFT went up with the bigger batch; check prefill chunking"}),
    ]
    for i in range(n):
        yield kinds[i % len(kinds)]


_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
from optui.adapters.journal import Journal
j = Journal(sys.argv[2])
for i in range(int(sys.argv[3])):
    j.append("note", "other", {"text": "x" * 300})
"""


def timed_appends(path: Path, n: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``n`` single-event appends to a fresh journal at ``path``."""
    j = Journal(path)
    events = list(sample_events(n))
    t0, c0 = time.perf_counter(), time.process_time()
    for type_, target, data in events:
        j.append(type_, target, data, experiment="exp-0001")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    j.close()
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="runs of the single-append case; the best is reported")
    parser.add_argument("--dir", default=None, help="where to create the journals (default: a temp dir)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        base = Path(tmp)
        runs = [timed_appends(base / f"one-{i}.db", opts.n) for i in range(opts.repeat)]
        walls = sorted(w for w, _ in runs)
        one, cpu = walls[0], min(c for _, c in runs)
        print(f"append() x {opts.n}, one transaction each: best {one:.3f} s wall ({opts.n / one:,.0f} events/s), "
              f"median {statistics.median(walls):.3f} s, CPU {cpu:.3f} s")

        # the same with another process appending to the same file at the same time
        Journal(base / "two.db").close()
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(ROOT / "src"), str(base / "two.db"), str(opts.n)],
                                 stdin=subprocess.DEVNULL)
        two, _ = timed_appends(base / "two.db", opts.n)
        child.wait()
        total = Journal(base / "two.db").count_events()
        print(f"append() x {opts.n} while another process appends {opts.n}: {two:.3f} s ({total:,} events in the file after)")

        j = Journal(base / "many.db")
        t0 = time.perf_counter()
        j.append_many(sample_events(opts.n))
        many = time.perf_counter() - t0
        size = (base / "many.db").stat().st_size + (base / "many.db-wal").stat().st_size
        print(f"append_many() of {opts.n}, one transaction: {many:.3f} s ({opts.n / many:,.0f} events/s; "
              f"{size / opts.n:.0f} B/event on disk)")
        j.close()
        print(f"target: {opts.n} single appends <= 1 s: {'ok' if one <= 1.0 else 'SLOW'}")


if __name__ == "__main__":
    main()
