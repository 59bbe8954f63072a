#!/usr/bin/env python3
"""Idle CPU of a terminal program: % of one core from ``--start`` s to ``--end`` s after it
was spawned in a real pseudo-terminal (start-up left out).

    python bench/idle_cpu.py [--size 120x40] [--start 5] [--end 65] [--runs 1] -- COMMAND [ARG ...]
    python bench/idle_cpu.py [...] --target optui-nvml            # or optui-demo
    python bench/idle_cpu.py [...] --pair optui-nvml 'nvitop --interval 1'
    python bench/idle_cpu.py [...] --target optui-nvml --threads   # where optui's idle CPU goes
    python bench/idle_cpu.py [...] --env NAME=VALUE ...             # set for the program only

The program runs in its own session with a fresh pty of the given size as its controlling
terminal (``TERM=xterm-256color``); its output is read and thrown away continuously (counted,
so the bytes/s it draws are printed), so it never blocks on the terminal. CPU = utime +
stime of the whole process tree (the program and its live descendants, plus the children
they reaped), from ``/proc``, sampled at ``--start`` and ``--end``; the program's own
process is reported apart, and with ``--threads`` each of its threads by name. Then ``q`` is typed, and SIGTERM / SIGKILL follow if needed.

Targets (instead of a command):
- ``optui-nvml``: ``python -m optui -c optui.toml`` with ``[hosts.local] gpu_source = "nvml"``,
  ``interval_s = 1`` and ``refresh_s = 1`` (the full dashboard at 1 s, local GPUs by NVML).
- ``optui-demo``: ``python -m optui demo`` (simulated rack and server; its simulated server
  is a child process and counts in the tree figure, not in the optui figure).

``--pair A B`` runs the two (each a target name or a command line, split like a shell
would) at the same time in two terminals of the same size and prints both and the ratio
A / B (tree figures). ``--runs N`` repeats and prints every run and the medians.

Standard library only (it runs on a machine with only the wheels we carry). Target
(issue 8, on an H200 machine): optui at 1 s <= 0.5 x ``nvitop --interval 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ptyrun import PtyProcess, cpu_s, load_average, parse_size, thread_cpu_s, tree_cpu_s  # noqa: E402

NVML_CONFIG = 'refresh_s = 1.0\n\n[hosts.local]\ngpu_source = "nvml"\ninterval_s = 1.0\n'


def resolve(spec: str | list[str], tmp: Path) -> tuple[str, list[str]]:
    """(label, argv) of a target name or a command (a list, or a string split like a shell)."""
    if spec == "optui-nvml":
        directory = tmp / "nvml"
        directory.mkdir(exist_ok=True)
        (directory / "optui.toml").write_text(NVML_CONFIG)
        return spec, [sys.executable, "-m", "optui", "-c", str(directory / "optui.toml")]
    if spec == "optui-demo":
        return spec, [sys.executable, "-m", "optui", "demo", "--dir", str(tmp / "demo")]
    argv = shlex.split(spec) if isinstance(spec, str) else list(spec)
    return " ".join(argv), argv


def measure(argvs: list[list[str]], size: tuple[int, int], start: float, end: float,
            env: dict[str, str] | None = None) -> list[dict]:
    """Spawn every argv at once (``env``: added to this process's environment for them),
    sample CPU at start and end (s after spawn); one dict each."""
    procs = [PtyProcess(argv, size, env={**os.environ, **(env or {})}) for argv in argvs]
    t0 = min(p.started for p in procs)
    try:
        time.sleep(max(0.0, t0 + start - time.monotonic()))
        first = [(time.monotonic(), tree_cpu_s(p.pid), cpu_s(p.pid, reaped_children=False), p.received) for p in procs]
        threads_first = [thread_cpu_s(p.pid) for p in procs]
        time.sleep(max(0.0, t0 + end - time.monotonic()))
        last = [(time.monotonic(), tree_cpu_s(p.pid), cpu_s(p.pid, reaped_children=False), p.received) for p in procs]
        threads_last = [thread_cpu_s(p.pid) for p in procs]
        alive = [p.alive() for p in procs]
    finally:
        for p in procs:
            p.stop()
    out = []
    for (ta, tree_a, own_a, bytes_a), (tb, tree_b, own_b, bytes_b), ok, th_a, th_b in zip(
            first, last, alive, threads_first, threads_last):
        wall = tb - ta
        threads = {name: 100 * (cpu - th_a.get(name, 0.0)) / wall for name, cpu in th_b.items()}
        out.append({"tree_pct": 100 * (tree_b - tree_a) / wall, "process_pct": 100 * (own_b - own_a) / wall,
                    "seconds": wall, "terminal_bytes_per_s": (bytes_b - bytes_a) / wall, "alive_at_end": ok,
                    "threads_pct": {k: round(v, 3) for k, v in sorted(threads.items(), key=lambda kv: -kv[1])}})
    return out


def main() -> int:
    argv = sys.argv[1:]
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [options] (-- COMMAND ... | --target NAME | --pair A B)")
    parser.add_argument("--size", default="120x40", help="terminal COLSxROWS (default 120x40)")
    parser.add_argument("--start", type=float, default=5.0, help="count CPU from this many s after spawn (default 5)")
    parser.add_argument("--end", type=float, default=65.0, help="... to this many s after spawn (default 65)")
    parser.add_argument("--runs", type=int, default=1, help="repeat the measurement (default 1)")
    parser.add_argument("--target", choices=["optui-nvml", "optui-demo"], help="a built-in target instead of a command")
    parser.add_argument("--pair", nargs=2, metavar=("A", "B"), help="two targets/commands at the same time; ratio A/B")
    parser.add_argument("--json", action="store_true", help="one JSON object per run, then the summary")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the measured program's environment (not this script's); repeatable")
    parser.add_argument("--threads", action="store_true",
                        help="also each thread's %% of one core, by thread name (the program's own process)")
    args = parser.parse_args(argv)
    specs = args.pair or ([args.target] if args.target else ([command] if command else []))
    if not specs or (args.pair and (command or args.target)) or (args.target and command):
        parser.error("give exactly one of: -- COMMAND, --target NAME, --pair A B")
    if not 0 <= args.start < args.end:
        parser.error("need 0 <= --start < --end")
    size = parse_size(args.size)

    runs: list[list[dict]] = []
    with tempfile.TemporaryDirectory(prefix="optui-idle-") as tmp:
        resolved = [resolve(spec, Path(tmp)) for spec in specs]
        labels = [label for label, _ in resolved]
        print(f"# {args.size} pty, CPU counted from {args.start:g} s to {args.end:g} s after spawn; "
              f"load before: {load_average()}", flush=True)
        for n in range(args.runs):
            results = measure([a for _, a in resolved], size, args.start, args.end,
                              env=dict(item.split("=", 1) for item in args.env))
            runs.append(results)
            for label, r in zip(labels, results):
                if args.json:
                    print(json.dumps({"run": n + 1, "command": label, **{k: round(v, 3) if isinstance(v, float) else v
                                                                         for k, v in r.items()}}), flush=True)
                else:
                    print(f"run {n + 1}: {label}: {r['tree_pct']:.2f}% of one core (process tree), "
                          f"{r['process_pct']:.2f}% (its own process) over {r['seconds']:.1f} s, "
                          f"{r['terminal_bytes_per_s']:.0f} B/s to the terminal"
                          + ("" if r["alive_at_end"] else "  ** EXITED BEFORE THE END **"), flush=True)
                    if args.threads:
                        print(f"run {n + 1}: {label}: threads (% of one core, 10 ms ticks): "
                              + ", ".join(f"{k} {v:.2f}" for k, v in r["threads_pct"].items()), flush=True)
            if len(results) == 2:
                a, b = results[0]["tree_pct"], results[1]["tree_pct"]
                print(f"run {n + 1}: ratio {labels[0]} / {labels[1]} = {a / b:.3f}" if b else "ratio: B used no CPU",
                      flush=True)
    summary = {"size": args.size, "start_s": args.start, "end_s": args.end, "runs": args.runs, "load_after": load_average()}
    for i, label in enumerate(labels):
        summary[label] = {"median_tree_pct": round(statistics.median(r[i]["tree_pct"] for r in runs), 3),
                          "median_process_pct": round(statistics.median(r[i]["process_pct"] for r in runs), 3)}
    if len(labels) == 2:
        ratios = [r[0]["tree_pct"] / r[1]["tree_pct"] for r in runs if r[1]["tree_pct"] > 0]
        summary["median_ratio"] = round(statistics.median(ratios), 3) if ratios else None
    if args.json:
        print(json.dumps(summary))
    else:
        for label in labels:
            print(f"median {label}: {summary[label]['median_tree_pct']:.2f}% of one core (tree), "
                  f"{summary[label]['median_process_pct']:.2f}% (process)")
        if len(labels) == 2:
            print(f"median ratio {labels[0]} / {labels[1]}: {summary['median_ratio']}")
        print(f"load after: {summary['load_after']}")
    return 0 if all(r["alive_at_end"] for run in runs for r in run) else 1


if __name__ == "__main__":
    sys.exit(main())
