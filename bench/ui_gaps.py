"""The UI's longest frozen moment during each fault test (issue 30: speed belongs in bench/,
never in a test's assertion).

The fault tests (tests/process/test_faults_*.py, test_journal_off_loop.py and the SSH
lost-host test) run a 50 ms heartbeat timer in the real app while they break something (a
1 MB bench line, a journal locked by another process, a dead SSH host...); the longest time
between two ticks is the longest the UI could not react. The tests check what happened;
this script runs them alone (no xdist, nothing beside them), collects each heartbeat's gap
through ``$OPTUI_UI_GAPS`` (tests/helpers/faults.Heartbeat) and prints it against its
target (1.0 s; 0.4 s for the journal-lock edits, whose old code froze 461-556 ms).

    python bench/ui_gaps.py [--runs N] [-k EXPR]

Prints one row per heartbeat: the test, the median and max gap over the runs (ms), the
target, and ``over`` where the max passed it; exit status 1 when a median passed its target
(a max alone is one bad scheduling moment on a shared machine), 2 when a test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/process/test_faults_bench.py", "tests/process/test_faults_gpu_config.py",
         "tests/process/test_faults_journal.py", "tests/process/test_faults_server.py",
         "tests/process/test_journal_off_loop.py",
         "tests/process/test_ssh_servers.py::test_lost_host_never_blocks_the_ui_or_the_other_host"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="runs of the whole set (default 1)")
    ap.add_argument("-k", default=None, help="pytest -k expression: only these tests")
    args = ap.parse_args()
    rows: dict[tuple[str, str], list[dict]] = {}
    failed = False
    for n in range(args.runs):
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out:
            env = {**os.environ, "OPTUI_UI_GAPS": out.name}
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *TESTS]
            if args.k:
                cmd += ["-k", args.k]
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
            print(f"run {n + 1}/{args.runs}: pytest exit {proc.returncode}: {last}", file=sys.stderr)
            failed = failed or proc.returncode not in (0, 5)
            for line in out.read().splitlines():
                rec = json.loads(line)
                rows.setdefault((rec["test"], rec["what"]), []).append(rec)
    print(f"{'test':<100} {'n':>2} {'median ms':>9} {'max ms':>7} {'target ms':>9}")
    over_median = False
    for (test, what), recs in sorted(rows.items()):
        gaps = [r["gap_s"] * 1000 for r in recs]
        target = recs[0]["target_s"] * 1000
        med, top = statistics.median(gaps), max(gaps)
        name = test.split("::", 1)[-1] + (f" ({what})" if what else "")
        flag = "  over" if top > target else ""
        over_median = over_median or med > target
        print(f"{name[:100]:<100} {len(gaps):>2} {med:>9.0f} {top:>7.0f} {target:>9.0f}{flag}")
    if not rows:
        print("no heartbeat recorded (no test selected?)", file=sys.stderr)
    return 2 if failed else 1 if over_median else 0


if __name__ == "__main__":
    sys.exit(main())
