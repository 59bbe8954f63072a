#!/usr/bin/env python3
"""CPU cost of optui watching a rack of 8 hosts x 8 GPUs over SSH at 1 s, and the time from a
GPU change on a host to the screen.

    .venv/bin/python bench/rack_cpu.py [--seconds 60] [--hosts 8] [--size 200x50]

Setup (all real, on this machine): one OpenSSH server on 127.0.0.1 (tests/helpers/sshd.py,
needs Debian's openssh-server) with an ``nvidia-smi`` stand-in replaying 8 GPUs; optui's
config names 8 hosts, each its own SSH connection and ``nvidia-smi -lms 1000`` stream.

1. CPU: ``optui -c optui.toml`` runs in a pseudo-terminal of the given size (the real
   renderer, not headless); after 5 s of start-up, its CPU time (utime+stime of the optui
   process, from /proc) is counted for ``--seconds`` and printed as % of one core. (The
   sshd and the stand-ins are not optui's cost and are not counted.)
2. Latency: the real app runs headless with the same rack; the GPU rows file is changed and
   the time until the GPU panel shows the new value is measured (10 samples), in intervals.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import pty
import select
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.helpers.sshd import Sshd  # noqa: E402

ROW = "{i}, GPU-77777777-0000-0000-0000-00000000000{i}, NVIDIA H200, {used}, 143771, 616, {util}, {bw}, {temp}, {power:.2f}, 700.00, 1980"


def gpu_rows(used: int) -> str:
    return "\n".join(ROW.format(i=i, used=used + i, util=50 + i, bw=10 + i, temp=50 + i, power=400 + 10 * i) for i in range(8)) + "\n"


def write_config(root: Path, sshd: Sshd, hosts: int, interval: float) -> Path:
    text = "refresh_s = 1.0\n"
    for i in range(1, hosts + 1):
        text += (f'[hosts.node{i}]\nssh = "rack1"\nssh_config = "{sshd.ssh_config}"\nknown_hosts = "{sshd.known_hosts}"\n'
                 f'identity_file = "{sshd.client_key}"\ninterval_s = {interval}\n\n')
    path = root / "optui.toml"
    path.write_text(text)
    return path


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_cpu(config: Path, seconds: float, size: tuple[int, int]) -> dict:
    pid, fd = pty.fork()
    if pid == 0:  # child: optui in a terminal
        os.environ["TERM"] = "xterm-256color"
        os.execv(str(ROOT / ".venv" / "bin" / "optui"), ["optui", "-c", str(config)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    received = 0

    def drain(until: float) -> None:
        nonlocal received
        while time.monotonic() < until:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    received += len(os.read(fd, 65536))
                except OSError:
                    return

    drain(time.monotonic() + 5.0)  # start-up left out
    c0, t0, r0 = cpu_seconds(pid), time.monotonic(), received
    drain(t0 + seconds)
    c1, t1 = cpu_seconds(pid), time.monotonic()
    os.write(fd, b"q")
    drain(time.monotonic() + 3)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return {"cpu_pct_of_one_core": 100 * (c1 - c0) / (t1 - t0), "seconds": t1 - t0,
            "terminal_bytes_per_s": (received - r0) / (t1 - t0)}


async def measure_latency(config: Path, sshd: Sshd, interval: float, samples: int) -> list[float]:
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    app = OptuiApp(Session(load_config(config)))
    out = []
    async with app.run_test(size=(200, 50)) as pilot:
        panel = app.query_one("#gpus")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and panel.render().plain.count("8×H200") < 8:
            await pilot.pause(0.05)
        for n in range(samples):
            used = 20000 + 1000 * n
            expected = f"{(8 * used + 28) / 1024:.0f}G/1123G"  # host total after the change
            await asyncio.sleep(interval * (0.3 + 0.07 * n))  # sample different phases of the tick
            t0 = time.monotonic()
            sshd.gpus_file.write_text(gpu_rows(used))
            while expected not in panel.render().plain and time.monotonic() - t0 < 10 * interval:
                await asyncio.sleep(0.005)
            out.append((time.monotonic() - t0) / interval)
        await pilot.press("q")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        sshd = Sshd(Path(tmp) / "sshd")
        sshd.setup()
        sshd.gpus_file.write_text(gpu_rows(20000))
        sshd.start()
        try:
            config = write_config(Path(tmp), sshd, args.hosts, 1.0)
            cpu = measure_cpu(config, args.seconds, size)
            print(f"rack {args.hosts}x8 GPUs at 1 s, {args.size} pty: optui CPU {cpu['cpu_pct_of_one_core']:.2f}% of one core "
                  f"over {cpu['seconds']:.0f}s ({cpu['terminal_bytes_per_s']:.0f} B/s to the terminal)")
            lat = asyncio.run(measure_latency(config, sshd, 1.0, args.samples))
            print(f"GPU change on a host -> on screen: median {statistics.median(lat):.2f} intervals, "
                  f"max {max(lat):.2f} (n={len(lat)}, interval 1 s)")
        finally:
            sshd.stop()  # kills every connection and what runs in it (the nvidia-smi stand-ins)
    return 0


if __name__ == "__main__":
    sys.exit(main())
