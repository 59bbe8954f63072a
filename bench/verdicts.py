#!/usr/bin/env python3
"""Verdicts on a real llama-server: what the old rule and the noise model conclude from the
same runs.

    python bench/verdicts.py [--runs 3] [--prompts 8] [--restarts 2]

The test peer (``tests/peers``, ``medium`` model, ``-t 2 -c 2048``) is started ``--restarts``
times with the same flags (``-np 4``), then once with ``-np 1`` (a real change: one slot for
four concurrent requests); each instance gets ``--runs`` runs of the built-in load generator
at concurrency 4. Printed per instance: out tok/s of each run. Then, against the first
instance as the baseline:

- *old rule* (before issue 16: experiments compared means and called a change better/worse
  beyond ``max(2 %, 2 x CV)``; one run against one run had no CV, so only the 2 % floor):
  the first run of each instance against the first run of the baseline, as ``optui bench run``
  (one run) compared them;
- *noise model* (:func:`optui.core.bench.compare.judge`): all runs against all runs, with the
  restart-to-restart spread of the same-flags instances, and its evidence.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))


def old_rule(value: float, base: float) -> str:
    rel = 100.0 * (value - base) / base
    return "same" if abs(rel) <= 2.0 else ("better" if rel > 0 else "worse")


def instance_runs(args, slots: int, tmp: Path, k: int) -> list[float]:
    from optui.adapters.loadgen import run_load
    from tests.peers.llama_server import DEFAULT_ARGS, build_llama_server, free_port, start_llama_server, wait_for_health
    from tests.peers.make_tiny_gguf import SIZES, make_tiny_gguf

    gguf = tmp / "medium.gguf"
    if not gguf.exists():
        make_tiny_gguf(gguf, **SIZES["medium"])
    port = free_port()
    flags = list(DEFAULT_ARGS)
    flags[flags.index("-np") + 1] = str(slots)
    with start_llama_server(build_llama_server(), gguf, port, flags, tmp / f"server{k}.log") as proc:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, proc)
        out = []
        for _ in range(args.runs):
            r = asyncio.run(run_load(url, input_len=32, output_len=32, num_prompts=args.prompts, concurrency=4))
            assert r.status == "ok", r.error
            out.append(r.output_throughput_tok_s)
        return out


def main() -> None:
    from optui.core.bench.compare import judge, sample

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--restarts", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        same = [instance_runs(args, 4, tmp, k) for k in range(args.restarts)]
        change = instance_runs(args, 1, tmp, args.restarts)
    medians = [sample(v).median for v in same]
    restart = sample(medians)
    restart_pct = 100.0 * (restart.hi - restart.lo) / restart.median if restart.n >= 2 else None
    base = same[0]
    print(f"restart-to-restart spread of -np 4 over {len(same)} instances: "
          + (f"{restart_pct:.1f} %" if restart_pct is not None else "not measured"))
    print("| instance | out tok/s per run | old rule (1 run vs 1) | noise model | evidence |")
    print("| --- | --- | --- | --- | --- |")
    for label, runs in [*((f"-np 4 #{k + 1}", v) for k, v in enumerate(same)), ("-np 1", change)]:
        cells = ", ".join(f"{v:.1f}" for v in runs)
        if runs is base:
            print(f"| {label} (baseline) | {cells} | - | - | - |")
            continue
        old = old_rule(runs[0], base[0])
        j = judge(runs, base, +1, restart_spread_pct=restart_pct if label.startswith("-np 1") else None)
        verdict = "same (same flags)" if label.startswith("-np 4") and j.decided else j.verdict
        print(f"| {label} | {cells} | {old} {100 * (runs[0] - base[0]) / base[0]:+.1f} % | "
              f"{verdict} {j.delta_pct:+.1f} % | {j.evidence()} |")


if __name__ == "__main__":
    main()
