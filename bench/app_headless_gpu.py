#!/usr/bin/env python3
"""Run optui's real TUI headless on this machine's GPUs and print what it shows, as JSON.

    python bench/app_headless_gpu.py [--svg FILE] [--size 160x40]

The app runs with no config (local host, NVML source) in a temporary campaign directory,
exactly as `optui` would; after the first live GPU reading (and one more tick) it prints
``{"status", "gpus": [optui gpus --json objects], "panel": "<GPU panel text>", "ms_to_first_reading"}``
and can save an SVG screenshot. Used by ``bench/gpu_compare.py --tui``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
if SRC.is_dir():
    sys.path.insert(0, str(SRC))


async def run(size: tuple[int, int], svg: str | None) -> dict:
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "optui.toml"
        cfg.write_text('[hosts.local]\ngpu_source = "nvml"\n')
        t0 = time.perf_counter()
        session = Session(load_config(cfg))
        app = OptuiApp(session)
        async with app.run_test(size=size) as pilot:
            first = None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                hosts = session.snapshot().hosts
                if hosts and hosts[0].samples and hosts[0].status.value == "live":
                    first = first or (time.perf_counter() - t0) * 1000
                    break
                await pilot.pause(0.05)
            await pilot.pause(1.2)  # one more tick, rendered
            host = session.snapshot().hosts[0]
            panel = app.query_one("#gpus").render().plain
            if svg:
                Path(svg).write_text(app.export_screenshot(title="optui (headless, real NVML)"))
            await pilot.press("q")
    return {"status": host.status.value, "error": host.error, "gpus": [s.to_json(host.host) for s in host.samples],
            "panel": panel, "ms_to_first_reading": first}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--svg", help="save a screenshot here")
    parser.add_argument("--size", default="160x40")
    args = parser.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    os.environ.setdefault("TERM", "xterm-256color")
    result = asyncio.run(run((w, h), args.svg))
    print(json.dumps(result))
    return 0 if result["status"] == "live" else 1


if __name__ == "__main__":
    sys.exit(main())
