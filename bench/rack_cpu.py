#!/usr/bin/env python3
"""CPU cost of optui watching a rack of 8 hosts x 8 GPUs over SSH at 1 s, and the time from a
GPU change on a host to the screen.

    python bench/rack_cpu.py [--seconds 60] [--hosts 8] [--size 200x50] [--samples 10]

Setup (all real, on this machine): one OpenSSH server on 127.0.0.1 (tests/helpers/sshd.py,
needs Debian's openssh-server) with an ``nvidia-smi`` stand-in replaying 8 GPUs; optui's
config names 8 hosts, each its own SSH connection and ``nvidia-smi -lms 1000`` stream.

1. CPU: ``optui -c optui.toml`` runs in a pseudo-terminal of the given size (the real
   renderer, not headless); after 5 s of start-up, its CPU time (utime+stime of the optui
   process, from /proc; its process tree apart) is counted for ``--seconds`` (default 60)
   and printed as % of one core. (The sshd and the stand-ins are not optui's cost and are
   not counted.) The readings change every second meanwhile (util, power, temperature,
   memory of every GPU), as on a busy rack, so every tick redraws (``--static``: they
   never change). Target (issue 8): <= 5% of one core on a 2-core machine.
2. Refresh latency: the real app runs headless with the same rack; the GPU rows file is
   changed and the time until the GPU panel shows the new value is measured (10 samples,
   at different phases of the 1 s tick), in ms. It includes up to one interval of waiting
   for the host's next ``nvidia-smi -lms 1000`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from ptyrun import PtyProcess, cpu_s, load_average, parse_size, tree_cpu_s  # noqa: E402

from tests.helpers.sshd import Sshd  # noqa: E402

ROW = "{i}, GPU-77777777-0000-0000-0000-00000000000{i}, NVIDIA H200, {used}, 143771, 616, {util}, {bw}, {temp}, {power:.2f}, 700.00, 1980"


def gpu_rows(used: int, tick: int = 0) -> str:
    """8 GPU rows; ``tick`` moves util / bandwidth / temperature / power like a busy GPU."""
    return "\n".join(ROW.format(i=i, used=used + i, util=(50 + i + 7 * tick) % 100, bw=(10 + i + 3 * tick) % 60,
                                temp=50 + (i + tick) % 9, power=400 + 10 * i + 23 * (tick % 11)) for i in range(8)) + "\n"


def write_rows(path: Path, text: str) -> None:
    """Replace the stand-in's rows at once (it reads the file on every tick)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def vary_rows(path: Path, stop: threading.Event) -> None:
    """New readings every second (memory too), as busy GPUs give, until ``stop``."""
    tick = 0
    while not stop.wait(1.0):
        tick += 1
        write_rows(path, gpu_rows(20000 + 37 * (tick % 50), tick))


def write_config(root: Path, sshd: Sshd, hosts: int, interval: float) -> Path:
    text = "refresh_s = 1.0\n"
    for i in range(1, hosts + 1):
        text += (f'[hosts.node{i}]\nssh = "rack1"\nssh_config = "{sshd.ssh_config}"\nknown_hosts = "{sshd.known_hosts}"\n'
                 f'identity_file = "{sshd.client_key}"\ninterval_s = {interval}\n\n')
    path = root / "optui.toml"
    path.write_text(text)
    return path


def measure_cpu(config: Path, seconds: float, size: tuple[int, int], rows: Path | None) -> dict:
    """optui on ``config`` in a pty: % of one core over ``seconds`` after 5 s of start-up;
    with ``rows``, the GPUs' readings change every second meanwhile."""
    stop = threading.Event()
    if rows is not None:
        threading.Thread(target=vary_rows, args=(rows, stop), daemon=True).start()
    proc = PtyProcess([sys.executable, "-m", "optui", "-c", str(config)], size)
    try:
        time.sleep(5.0)  # start-up left out
        c0, own0, t0, r0 = tree_cpu_s(proc.pid), cpu_s(proc.pid, reaped_children=False), time.monotonic(), proc.received
        time.sleep(seconds)
        c1, own1, t1, r1 = tree_cpu_s(proc.pid), cpu_s(proc.pid, reaped_children=False), time.monotonic(), proc.received
        alive = proc.alive()
    finally:
        stop.set()
        proc.stop()
    return {"cpu_pct_of_one_core": 100 * (own1 - own0) / (t1 - t0), "tree_pct_of_one_core": 100 * (c1 - c0) / (t1 - t0),
            "seconds": t1 - t0, "terminal_bytes_per_s": (r1 - r0) / (t1 - t0), "alive_at_end": alive}


async def measure_latency(config: Path, sshd: Sshd, interval: float, samples: int) -> list[float]:
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    app = OptuiApp(Session(load_config(config)))
    out = []
    async with app.run_test(size=(200, 50)) as pilot:
        deadline = time.monotonic() + 30
        while not app.panels_mounted and time.monotonic() < deadline:  # they mount after the first frame
            await pilot.pause(0.05)
        panel = app.query_one("#gpus")
        while time.monotonic() < deadline and panel.render().plain.count("8×H200") < 8:
            await pilot.pause(0.05)
        for n in range(samples):
            used = 20000 + 1000 * n
            expected = f"{(8 * used + 28) / 1024:.0f}G/1123G"  # host total after the change
            await asyncio.sleep(interval * (0.3 + 0.07 * n))  # sample different phases of the tick
            t0 = time.monotonic()
            write_rows(sshd.gpus_file, gpu_rows(used))
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
    parser.add_argument("--static", action="store_true", help="GPU readings never change during the CPU count")
    args = parser.parse_args()
    size = parse_size(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        sshd = Sshd(Path(tmp) / "sshd")
        sshd.setup()
        sshd.gpus_file.write_text(gpu_rows(20000))
        sshd.start()
        try:
            config = write_config(Path(tmp), sshd, args.hosts, 1.0)
            print(f"# load before: {load_average()}", flush=True)
            cpu = measure_cpu(config, args.seconds, size, None if args.static else sshd.gpus_file)
            print(f"rack {args.hosts}x8 GPUs at 1 s, {args.size} pty: optui CPU {cpu['cpu_pct_of_one_core']:.2f}% of one core "
                  f"(process tree {cpu['tree_pct_of_one_core']:.2f}%) over {cpu['seconds']:.0f} s "
                  f"({cpu['terminal_bytes_per_s']:.0f} B/s to the terminal)"
                  + ("" if cpu["alive_at_end"] else "  ** OPTUI EXITED BEFORE THE END **"), flush=True)
            lat = asyncio.run(measure_latency(config, sshd, 1.0, args.samples))
            print(f"GPU change on a host -> on screen: median {statistics.median(lat) * 1000:.0f} ms, "
                  f"max {max(lat) * 1000:.0f} ms (n={len(lat)}, interval 1 s; the stream itself delivers once a second)")
            print(f"# load after: {load_average()}")
        finally:
            sshd.stop()  # kills every connection and what runs in it (the nvidia-smi stand-ins)
    return 0


if __name__ == "__main__":
    sys.exit(main())
