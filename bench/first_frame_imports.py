#!/usr/bin/env python3
"""What ``optui demo`` imports before its first frame, timed by ``python -X importtime``
(load-independent: it counts modules and their own import time, not the machine's load).

    python bench/first_frame_imports.py [--runs 5] [--top 25] [--src PATH]

The probe of ``tests/process/test_import_hygiene.py`` runs ``optui demo`` in a 120x40 pty and ends
the process at the first frame (``events.Ready``), so only the first frame's imports are
listed. Prints the number of modules, the median over runs of the summed self times of every
import (ms), and the optui modules with the largest cumulative times. ``--src`` runs another
checkout's ``src`` (e.g. an older commit's worktree) with this interpreter.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PROBE = textwrap.dedent(
    """
    import os, sys
    import textual.events

    def first_frame(self, *args, **kwargs):
        os._exit(0)

    textual.events.Ready.__init__ = first_frame
    sys.argv = ["optui", *sys.argv[1:]]
    from optui.cli import main

    main()
    """
)
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def one_run(src: str | None) -> list[tuple[int, int, int, str]]:
    """(self µs, cumulative µs, depth, module) of every import before the first frame."""
    import pty

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp, "probe.py")
        probe.write_text(PROBE)
        env = dict(os.environ, TERM="xterm-256color", HOME=tmp, COLUMNS="120", LINES="40")
        if src:
            env["PYTHONPATH"] = src
        master, slave = pty.openpty()
        err = Path(tmp, "importtime.txt")
        with open(err, "w") as f:
            proc = subprocess.Popen([sys.executable, "-X", "importtime", str(probe), "demo", "--dir", str(Path(tmp, "c"))],
                                    stdin=slave, stdout=slave, stderr=f, env=env, cwd=tmp, start_new_session=True)
            os.close(slave)
            try:
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                os.close(master)
        rows = []
        for line in err.read_text().splitlines():
            m = LINE.match(line)
            if m:
                rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
        return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--src", default=None)
    args = ap.parse_args()
    one_run(args.src)  # warm: byte-code caches
    runs = [one_run(args.src) for _ in range(args.runs)]
    totals = [sum(r[0] for r in rows) / 1000 for rows in runs]
    optui = [sum(r[0] for r in rows if r[3].startswith("optui")) / 1000 for rows in runs]
    print(f"modules imported before the first frame: {len(runs[-1])} ({sum(1 for r in runs[-1] if r[3].startswith('optui'))} optui)")
    print(f"sum of self import times: median {statistics.median(totals):.1f} ms (runs: {', '.join(f'{t:.1f}' for t in totals)})")
    print(f"of which optui modules:   median {statistics.median(optui):.1f} ms")
    cum: dict[str, list[int]] = {}
    for rows in runs:
        for _s, c, _d, name in rows:
            cum.setdefault(name, []).append(c)
    print(f"largest cumulative (median ms), top {args.top}:")
    for name, cs in sorted(cum.items(), key=lambda kv: -statistics.median(kv[1]))[: args.top]:
        print(f"  {statistics.median(cs) / 1000:8.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
