"""Throughput of ``parse_bench_output`` on a large client log (target: >= 10k blocks/s).

The log repeats the real-format fixture logs in ``tests/fixtures/bench/`` (Namespace line,
tqdm ``\\r`` redraws, warnings, one result block each: SGLang 0.5.2 / 0.5.23, vLLM 0.33 /
early 2025) until it holds N blocks. Prints the log size, the best CPU and wall time, and blocks/s.

    python bench/bench_parser.py [N] [--repeat R]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, not an installed copy

from optui.core.bench.parse import parse_bench_output  # noqa: E402

TEMPLATES = ("sglang_0.5.2.log", "sglang_0.5.23_spec.log", "vllm_0.33_spec.log", "vllm_2025.log")


def make_log(blocks: int) -> str:
    """A log of ``blocks`` single-block runs, cycling through :data:`TEMPLATES`."""
    runs = [(ROOT / "tests" / "fixtures" / "bench" / name).read_text() for name in TEMPLATES]
    return "".join(runs[i % len(runs)] for i in range(blocks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="?", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best is reported")
    opts = parser.parse_args()
    log = make_log(opts.blocks)
    wall = cpu = float("inf")
    for _ in range(opts.repeat):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        results = parse_bench_output(log)
        cpu = min(cpu, time.process_time() - start_cpu)
        wall = min(wall, time.perf_counter() - start_wall)
    if len(results) != opts.blocks:
        sys.exit(f"expected {opts.blocks} results, got {len(results)}")
    print(f"log: {opts.blocks} blocks, {len(log) / 1e6:.1f} MB (templates: {', '.join(TEMPLATES)})")
    # CPU time is the steadier figure on a shared machine; the parser is single-threaded.
    print(f"best of {opts.repeat}: cpu {cpu:.3f} s, wall {wall:.3f} s")
    print(f"{opts.blocks / cpu:,.0f} blocks/s cpu, {opts.blocks / wall:,.0f} blocks/s wall ({len(log) / 1e6 / cpu:.1f} MB/s cpu)")

if __name__ == "__main__":
    main()
