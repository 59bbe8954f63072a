#!/usr/bin/env python3
"""Paired first-frame timing of two checkouts on a loaded machine: a bare Textual app,
``optui demo`` from checkout A's ``src`` and from checkout B's ``src``, interleaved run by
run (the order reversed every other run), so the load of the moment hits all three alike.

    python bench/startup_ab.py --a /tmp/base/src --b src [--runs 20]

Prints each command's median and the median of per-run ratios to the bare run and of B to
A. Uses :func:`startup.time_to_marker` (the same markers as ``bench/startup.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from startup import BARE, PY, load_average, time_to_marker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="checkout A's src directory (e.g. a worktree of main)")
    ap.add_argument("--b", required=True, help="checkout B's src directory")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    print(f"# {args.runs} runs each, 120x40 pty, load before: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmds = {"bare": ([PY, "-c", BARE], b"ready-marker")}
        for key, src in (("A", args.a), ("B", args.b)):
            cmds[key] = (["/usr/bin/env", f"PYTHONPATH={Path(src).resolve()}", PY, "-m", "optui", "demo", "--dir",
                          str(Path(tmp) / key)], b"[5] Journal")
        for argv, marker in cmds.values():  # warm caches
            time_to_marker(argv, marker, (120, 40))
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for i in range(args.runs):
            for key in (list(cmds) if i % 2 == 0 else list(reversed(cmds))):
                times[key].append(time_to_marker(cmds[key][0], cmds[key][1], (120, 40))[0])
    for key, values in times.items():
        pairs = statistics.median(v / b for v, b in zip(values, times["bare"]))
        print(f"{key:5s} median {statistics.median(values) * 1000:7.1f} ms  min {min(values) * 1000:7.1f}"
              f"  ratio to bare (median of pairs) {pairs:.2f}")
    print(f"B / A (median of pairs) {statistics.median(b / a for a, b in zip(times['A'], times['B'])):.3f}")
    print(f"# load after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
