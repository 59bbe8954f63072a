#!/usr/bin/env python3
"""Startup to first frame: optui vs a bare Textual app that shows one Static.

    python bench/startup.py [--runs 10] [--size 120x40] [--only optui-demo,optui-nvml]

Each command runs in a pseudo-terminal of the given size; the clock starts before the
process is spawned and stops when the terminal output contains the command's first-frame
marker (the bare app's text; the title of optui's last panel, ``[5] Journal``, as the
whole first frame is written at once). optui's first frame is the dashboard's frame (the
five panels' borders and titles, the status line and the key bar) with a placeholder in each
panel; the panels mount right after it and the campaign loads after that, so the time until
the panels are on screen (the bench panel's ``no benchmark yet``) and until the status line
names the campaign (``campaign demo``: config, journal and session loaded, the first state
painted) are printed too. Runs
alternate between
the commands (so drift on a noisy machine hits all of them alike); medians and the ratio
optui / bare are printed. Target (issue 8): ratio <= 1.3.

Commands:
- bare: ``python -c`` a Textual app with one ``Static("ready-marker")``.
- optui-demo: ``optui demo --dir TMP`` (simulated rack and server).
- optui-demo-click (only when named in ``--only``): ``optui demo`` started through the click group
  rather than ``cli/tui.py``'s ``parse_fast`` (what the fast path saves).
- optui-nvml: ``optui -c optui.toml`` with ``[hosts.local] gpu_source = "nvml"``, ``interval_s = 1`` (on a machine
  without NVIDIA driver the panel shows "no_gpu"; the frame still counts).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ptyrun import PtyProcess, load_average, parse_size  # noqa: E402

PY = sys.executable
#: the commands' environment: this one, less PYTHONDONTWRITEBYTECODE (set on some machines,
#: this VM's among them): the warm-up run writes optui's bytecode, as ``pip install`` and a
#: user's first run do, so no run compiles optui's changed modules from source (6 ms for
#: ui/app.py alone) while Textual's, installed, have theirs
RUN_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
#: the bench panel's own text: on screen once the panels replaced the first frame's placeholders
PANELS = b"no benchmark yet"
BARE = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Bare(App):\n"
    "    def compose(self):\n"
    "        yield Static('ready-marker')\n"
    "Bare().run()\n"
)


CLICK_DEMO = ("import sys; sys.argv = ['optui', 'demo', '--dir', {dir!r}]\n"
              "from optui.cli.group import cli\n"
              "cli(prog_name='optui')\n")


def time_to_marker(argv: list[str], marker: bytes, size: tuple[int, int], timeout: float = 20.0,
                   then: tuple[bytes, ...] = ()) -> list[float]:
    """Seconds from spawn until ``marker`` is on the terminal, then until each of ``then``
    is, in order (nan after ``timeout``)."""
    proc = PtyProcess(argv, size, keep=True, env=RUN_ENV)
    times: list[float] = []
    try:
        for m in (marker, *then):
            missed = bool(times) and math.isnan(times[-1])  # an earlier marker never came: stop waiting
            t = None if missed else proc.wait_for(m, timeout)
            times.append(float("nan") if t is None else t)
    finally:
        proc.stop()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--only", default="bare,optui-demo,optui-nvml",
                        help="comma-separated commands to time (bare is always timed)")
    args = parser.parse_args()
    size = parse_size(args.size)
    print(f"# {args.runs} runs each, {args.size} pty, load before: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "nvml" / "optui.toml"
        cfg.parent.mkdir()
        cfg.write_text('refresh_s = 1.0\n\n[hosts.local]\ngpu_source = "nvml"\ninterval_s = 1.0\n')
        commands = {  # (argv, first-frame marker, (panels mounted, campaign on screen) markers)
            "bare": ([PY, "-c", BARE], b"ready-marker", ()),
            "optui-demo": ([PY, "-m", "optui", "demo", "--dir", str(Path(tmp) / "demo")], b"[5] Journal",
                           (PANELS, b"campaign demo")),
            "optui-nvml": ([PY, "-m", "optui", "-c", str(cfg)], b"[5] Journal", (PANELS, b"campaign nvml")),
            # `optui demo` through click (its group, subcommands imported lazily) instead of
            # cli/tui.py's parse_fast: what parse_fast is worth (issue 35)
            "optui-demo-click": ([PY, "-c", CLICK_DEMO.format(dir=str(Path(tmp) / "demo-click"))], b"[5] Journal",
                                 (PANELS, b"campaign demo")),
        }
        wanted = {"bare", *args.only.split(",")}
        commands = {name: spec for name, spec in commands.items() if name in wanted}
        for argv, marker, then in commands.values():  # warm caches (bytecode, page cache)
            time_to_marker(argv, marker, size, then=then)
        times: dict[str, list[float]] = {name: [] for name in commands}
        later: dict[str, list[list[float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, marker, then) in commands.items():
                first, *rest = time_to_marker(argv, marker, size, then=then)
                times[name].append(first)
                later[name].append(rest)
    bare = statistics.median(times["bare"])
    for name, values in times.items():
        med = statistics.median(values)
        paired = statistics.median(v / b for v, b in zip(values, times["bare"]))
        print(f"{name:12s} median {med * 1000:7.1f} ms  min {min(values) * 1000:7.1f}  max {max(values) * 1000:7.1f}"
              f"  ratio to bare {med / bare:.2f} (median of run pairs {paired:.2f})"
              + ("  then median: panels {:.1f} ms, campaign on screen {:.1f} ms".format(
                  *(statistics.median(run[i] for run in later[name]) * 1000 for i in range(2)))
                 if commands[name][2] else ""))
    print(f"# load after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
