#!/usr/bin/env python3
"""A hostile benchmark client through :class:`~optui.adapters.bench_runner.CommandRun`: time.

    python bench/bench_runner_flood.py [--repeat 3]

The child prints one 1 MB line, a line of invalid UTF-8 and 200,000 tqdm-style ``\\r``
redraws on stderr (the input of ``tests/process/test_bench_runner.py::
test_megabyte_line_invalid_utf8_and_carriage_return_flood``, which checks what comes out).
Prints ``run_s`` (start to :meth:`CommandRun.run` returning; target <= 5 s on the 2-core
reference VM, a quadratic splitter takes minutes) and the number of callbacks.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from optui.adapters.bench_runner import CommandRun

CHILD = r"""
import sys
out = sys.stdout.buffer
out.write(b"before\n")
out.write(b"A" * 1_000_000 + b"\n")
out.write(b"bad \xff\xfe bytes \xe2\x82\n")
out.flush()
err = sys.stderr.buffer
for i in range(1, 200_001):
    err.write(b"\r %d/200000 [00:01<00:00, 9.99it/s]" % i)
err.write(b"\n")
out.write(b"after\n")
"""


async def once() -> tuple[float, int, int]:
    lines: list[tuple[str, str]] = []
    progress: list[str] = []
    run = CommandRun([sys.executable, "-c", CHILD], on_line=lambda s, t: lines.append((s, t)),
                     on_progress=progress.append)
    started = time.monotonic()
    outcome = await run.run()
    assert outcome.status == "exited" and outcome.returncode == 0, outcome
    return time.monotonic() - started, len(lines), len(progress)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for i in range(args.repeat):
        run_s, lines, progress = asyncio.run(once())
        print(f"run {i + 1}: run_s={run_s:.2f} lines={lines} progress_calls={progress}")


if __name__ == "__main__":
    main()
