#!/usr/bin/env python3
"""Headline verdicts against per-workload verdicts, for a recorded campaign (issue 29).

    python bench/workload_verdicts.py JOURNAL.db        # a campaign's journal (.optui/optui.db)
    python bench/workload_verdicts.py --demo DIR        # record one on the demo first, then read it

For every experiment of the journal that was compared with a baseline on at least one
workload (a preset at one concurrency or request rate and one length mix), printed: each
workload's verdict (:func:`optui.core.journal.experiments.workload_verdict`), the headline
verdict optui shows (``Experiment.verdict``: the one rule
:func:`optui.core.bench.compare.overall_verdict` over them), and the headline the code before
issue 29 showed (the primary workload's verdict alone). Then how often each headline
disagrees with its per-workload verdicts: a headline disagrees when the rule over the
per-workload verdicts gives another verdict (target: 0).

``--demo DIR`` records the issue's done-when campaign in DIR through the CLI (the demo server at
``--speed``, a builtin preset at concurrency 1 and 16, 3 repeats): the baseline
``--max-running-requests 2`` restarted 3 times (the restart-to-restart spread), then
``--max-running-requests 16``, then ``16`` with CUDA graphs off (helps c=16, costs c=1).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SWEEP = """
[benchmarks.pair]
server = "demo"
builtin = { concurrency = [1, 16], input_len = 32, output_len = 16, prompts = 16 }
"""


def record_demo(directory: Path, speed: float) -> Path:
    """Record the campaign of the module doc in ``directory``; returns its journal's path."""
    import socket

    from optui.demo.campaign import write_demo_config

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    directory.mkdir(parents=True, exist_ok=True)
    cfg = write_demo_config(directory, port=port, speed=speed)
    cfg.write_text(cfg.read_text() + SWEEP)

    def optui(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], capture_output=True, text=True,
                             timeout=600, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise SystemExit(f"optui {' '.join(args)} failed ({res.returncode}): {res.stderr}{res.stdout}")
        return res.stdout

    try:
        for sets, extra in ((["--max-running-requests=2"], ["--restarts", "3"]),
                            (["--max-running-requests=16"], []),
                            (["--max-running-requests=16", "--cuda-graph-max-bs=0"], [])):
            optui("restart", "demo", *(a for s in sets for a in ("--set", s)), "--json")
            summary = json.loads(optui("bench", "run", "demo", "pair", "--repeat", "3", "--json", *extra))
            s = summary["experiment_summary"]
            print(f"recorded {summary['experiment']} ({' '.join(sets)}): {s['verdict']}", file=sys.stderr)
    finally:
        pidfile = directory / ".optui" / "servers" / "demo.json"
        try:
            os.killpg(json.loads(pidfile.read_text())["pid"], signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
    return directory / ".optui" / "optui.db"


def analyse(journal_path: Path) -> int:
    """Print the table and the counts of the module doc; returns the number of headlines
    that disagree with their per-workload verdicts."""
    from optui.adapters.journal import Journal
    from optui.core.bench.compare import overall_verdict
    from optui.core.journal.experiments import workload_point, workload_verdict
    from optui.session.journal.export import load_experiments

    if not journal_path.is_file():
        raise SystemExit(f"{journal_path}: no such journal")
    j = Journal(journal_path)
    try:
        experiments = load_experiments(j)
    finally:
        j.close()
    rows = []
    for x in experiments:
        if x.is_baseline or x.verdict in ("failed", "incomplete"):
            continue
        per = [(workload_point(w), workload_verdict(x, w)) for w in x.workloads]
        if not any(v for _, v in per):
            continue
        old = (workload_verdict(x, x.primary) if x.primary is not None else None) or "untested"
        rows.append((x.id, per, x.verdict, old, overall_verdict(v for _, v in per)))
    print(f"journal: {journal_path}")
    print(f"{'experiment':<10}  {'per-workload verdicts':<44}  {'headline':<14}  {'old headline (primary only)'}")
    for exp_id, per, headline, old, _rule in rows:
        text = ", ".join(f"{p} {v or '-'}" for p, v in per)
        print(f"{exp_id:<10}  {text:<44}  {headline:<14}  {old}")
    now = sum(headline != rule for _, _, headline, _, rule in rows)
    before = sum(old != rule for _, _, _, old, rule in rows)
    print(f"headline vs per-workload verdicts: {now} of {len(rows)} disagree "
          f"(the primary-only headline: {before} of {len(rows)})")
    return now


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("journal", nargs="?", type=Path, help="a campaign's journal (.optui/optui.db)")
    ap.add_argument("--demo", type=Path, metavar="DIR", help="record the demo campaign in DIR first, then read it")
    ap.add_argument("--speed", type=float, default=0.5, help="--demo: the demo server's speed (default 0.5)")
    args = ap.parse_args()
    if (args.journal is None) == (args.demo is None):
        ap.error("give a JOURNAL or --demo DIR")
    path = record_demo(args.demo, args.speed) if args.demo is not None else args.journal
    return 1 if analyse(path) else 0


if __name__ == "__main__":
    sys.exit(main())
