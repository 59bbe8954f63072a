#!/usr/bin/env python3
"""Drive optui's real TUI headless on a campaign, the way ``optui -c CONFIG`` starts it, and
save SVG screenshots (used by ``bench/real_gpu/run.sh``).

    tui_drive.py CONFIG --out DIR --prefix NAME [--server S] [--bench] [--size 200x50] [--timeout 60]

The app is built like the CLI builds it (``OptuiApp(loader=...)``: first frame, then the
session in a worker) and run with ``App.run_test(size=...)``. It waits (bounded) until
SERVER is READY with a live GPU reading, saves ``NAME-ready.svg``; with ``--bench`` it
presses ``b`` then Enter (the preset prompt's default: the first benchmark of the config),
waits for the run to end and saves ``NAME-bench.svg``; then presses ``q`` as an operator
would. Prints one JSON object: what the screen and the session showed at each moment
(server state/pid/argv, GPU rows, the bench run's status and result), the screenshots,
and whether the app quit. Exit 0 when the server was seen READY.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
if SRC.is_dir() and str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def _server(session, name: str):
    return next((s for s in session.snapshot().servers if s.name == name), None)


def _server_json(s) -> dict | None:
    if s is None:
        return None
    return {"state": s.state.value, "phase": s.phase, "pid": s.pid, "argv": list(s.argv),
            "crash_class": s.crash_class and str(s.crash_class), "managed": s.managed,
            "load": {"running": s.load.running, "gen_tok_s": s.load.gen_tok_s, "source": s.load.source}}


def _gpus_json(session) -> list:
    rows = []
    for h in session.snapshot().hosts:
        rows.append({"host": h.host, "status": h.status.value, "error": h.error,
                     "gpus": [{k: g.to_json(h.host).get(k) for k in ("index", "mem_used_mib", "mem_total_mib", "util_gpu_pct")}
                              for g in h.samples],
                     # the compute processes NVML lists per GPU (None: the source cannot list them)
                     "processes": {str(g.index): None if g.processes is None else
                                   [{"pid": p.pid, "name": p.name, "mem_mib": p.used_mib} for p in g.processes]
                                   for g in h.samples}})
    return rows


async def _until(pilot, cond, timeout_s: float, step_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if cond():
                return True
        except Exception:  # noqa: BLE001 - a half-built app while waiting: try again
            pass
        await pilot.pause(step_s)
    return False


async def drive(config: Path, out: Path, prefix: str, server: str, bench: bool, size: tuple[int, int],
                timeout_s: float) -> dict:
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    built: list = []

    def loader():
        session = Session(load_config(config, search=False), actor="tui")
        built.append(session)
        return session

    report: dict = {"prefix": prefix, "screenshots": []}
    t0 = time.monotonic()
    app = OptuiApp(loader=loader)
    try:
        async with app.run_test(size=size) as pilot:
            mounted = await _until(pilot, lambda: app.session is not None and app.panels_mounted, timeout_s)
            report["session_s"] = round(time.monotonic() - t0, 3) if mounted else None
            ready = mounted and await _until(pilot, lambda: (s := _server(app.session, server)) is not None
                                             and s.state.value == "ready", timeout_s)
            report["ready_seen_s"] = round(time.monotonic() - t0, 3) if ready else None
            if mounted:
                await _until(pilot, lambda: any(h.samples for h in app.session.snapshot().hosts), 5)
                await pilot.pause(1.5)  # a GPU tick and a /metrics scrape, rendered
                report["server"] = _server_json(_server(app.session, server))
                report["gpus"] = _gpus_json(app.session)
                name = f"{prefix}-ready.svg"
                app.save_screenshot(filename=name, path=str(out))
                report["screenshots"].append(name)
            if mounted and bench:  # (the first drive only: $OUT brings back 8 files)
                await pilot.press("1", "z")  # the GPU panel zoomed: each GPU's processes under its line
                await pilot.pause(1.0)
                name = f"{prefix}-gpu-processes.svg"
                app.save_screenshot(filename=name, path=str(out))
                report["screenshots"].append(name)
                await pilot.press("z")
                await pilot.pause(0.3)
            if mounted and bench:
                benches = app.session.benches
                await pilot.press("b")
                await pilot.pause(0.5)
                if benches.current is None:  # more than one preset: the prompt, its default is the first
                    await pilot.press("enter")
                started = await _until(pilot, lambda: benches.current is not None, 10)
                report["bench_started"] = started
                if started:
                    run = benches.current
                    await _until(pilot, lambda: run.view.status != "running", timeout_s)
                    await pilot.pause(1.0)
                    report["bench"] = {"name": run.view.name, "status": run.view.status, "error": run.view.error,
                                       "results": [r.to_json() for r in getattr(run.view, "results", ())][:3]}
                    name = f"{prefix}-bench.svg"
                    app.save_screenshot(filename=name, path=str(out))
                    report["screenshots"].append(name)
                    report["server_after_bench"] = _server_json(_server(app.session, server))
            await pilot.press("q")
            await pilot.pause(0.5)
        report["quit"] = True
    except Exception as exc:  # noqa: BLE001 - report what broke, run.sh logs it and goes on
        report["quit"] = False
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for session in built:
            session.kill_leftovers()
    report["app_return_code"] = app.return_code
    report["wall_s"] = round(time.monotonic() - t0, 3)
    return report


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--server", default="llama")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--size", default="200x50")
    p.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    os.environ.setdefault("TERM", "xterm-256color")
    a.out.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(drive(a.config, a.out, a.prefix, a.server, a.bench, (w, h), a.timeout))
    print(json.dumps(report, indent=1, default=str))
    return 0 if report.get("ready_seen_s") is not None else 1


if __name__ == "__main__":
    sys.exit(main())
