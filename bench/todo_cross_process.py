#!/usr/bin/env python3
"""How soon an open window shows another process's todo edit (issue 30: this was a test's
``< 1.0 s`` assertion, which failed on a loaded machine; a test now only waits, bounded).

    python bench/todo_cross_process.py [--edits 10] [--hog N]

The real app (``App.run_test``, 120x40) on a fresh campaign; ``optui todo add`` runs in its
own process ``--edits`` times; each figure is from that process's exit (the edit committed)
to the item's text on the todo panel, polled every 10 ms. ``--hog N`` runs N busy processes
beside it (a loaded machine). Prints every figure, the median and the max, in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


async def measure(edits: int) -> list[float]:
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "optui.toml"
        cfg.write_text('[hosts.local]\ngpu_source = "none"\n')
        app = OptuiApp(Session(load_config(cfg)))
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        figures = []
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.5)
            for n in range(edits):
                text = f"edit from another process {n}"
                done = await asyncio.to_thread(
                    subprocess.run, [sys.executable, "-m", "optui", "-c", str(cfg), "todo", "add", text],
                    env=env, capture_output=True, timeout=60)
                if done.returncode:
                    raise SystemExit(done.stderr.decode())
                t0 = time.monotonic()
                while text not in app.query_one("#todo-list").render().plain:
                    if time.monotonic() - t0 > 30:
                        raise SystemExit(f"edit {n} not shown after 30 s")
                    await asyncio.sleep(0.01)
                figures.append((time.monotonic() - t0) * 1000)
            await pilot.press("q")
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--hog", type=int, default=0, help="busy processes beside the app")
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)]
    try:
        figures = asyncio.run(measure(args.edits))
    finally:
        for hog in hogs:
            hog.kill()
    print("ms from the other process's exit to the text on screen:", " ".join(f"{f:.0f}" for f in figures))
    print(f"median {statistics.median(figures):.0f} ms, max {max(figures):.0f} ms "
          f"({args.edits} edits, {args.hog} busy processes beside, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
