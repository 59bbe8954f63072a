#!/usr/bin/env python3
"""Startup to first frame: optui vs a bare Textual app that shows one Static.

    .venv/bin/python bench/startup.py [--runs 10] [--size 120x40]

Each command runs in a pseudo-terminal of the given size; the clock starts before the
process is spawned and stops when the terminal output contains the command's first-frame
marker (the bare app's text; optui's panel titles and first data). Runs alternate between
the commands (so drift on a noisy machine hits all of them alike); medians and the ratio
optui / bare are printed. Target (issue 8): ratio <= 1.3.

Commands:
- bare: ``python -c`` a Textual app with one ``Static("ready")``.
- optui-demo: ``optui demo --dir TMP`` (simulated rack and server).
- optui-nvml: ``optui -c optui.toml`` with ``[hosts.local] gpu_source = "nvml"`` (on a machine
  without NVIDIA driver the panel shows "no_gpu"; the frame still counts).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
OPTUI = str(ROOT / ".venv" / "bin" / "optui")
BARE = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Bare(App):\n"
    "    def compose(self):\n"
    "        yield Static('ready-marker')\n"
    "Bare().run()\n"
)


def time_to_marker(argv: list[str], marker: bytes, size: tuple[int, int], timeout: float = 20.0) -> float:
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    seen = b""
    elapsed = float("nan")
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
            if marker in seen:
                elapsed = time.perf_counter() - t0
                break
    os.kill(pid, signal.SIGTERM)
    end = time.perf_counter() + 5
    while time.perf_counter() < end:  # drain so it can exit, then reap
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                break
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--size", default="120x40")
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "nvml" / "optui.toml"
        cfg.parent.mkdir()
        cfg.write_text('[hosts.local]\ngpu_source = "nvml"\n')
        commands = {
            "bare": ([PY, "-c", BARE], b"ready-marker"),
            "optui-demo": ([OPTUI, "demo", "--dir", str(Path(tmp) / "demo")], b"Servers"),
            "optui-nvml": ([OPTUI, "-c", str(cfg)], b"Servers"),
        }
        for argv, marker in commands.values():  # warm caches (bytecode, page cache)
            time_to_marker(argv, marker, size)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, marker) in commands.items():
                times[name].append(time_to_marker(argv, marker, size))
    bare = statistics.median(times["bare"])
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:12s} median {med * 1000:7.1f} ms  min {min(values) * 1000:7.1f}  max {max(values) * 1000:7.1f}"
              f"  ratio to bare {med / bare:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
