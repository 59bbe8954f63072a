#!/usr/bin/env python3
"""A stand-in for ``nvidia-smi`` on a test SSH host: replays captured rows.

Reads the GPU rows (``--format=csv,noheader,nounits`` order of optui's default query, without
the leading timestamp) from the file named by ``$FAKE_SMI_GPUS`` (default: beside this
script, ``gpus.csv``) on every tick, so a test can change what the "GPUs" show; prints the
content of ``$FAKE_SMI_ERROR`` (a file) instead when it exists (driver errors). Supports the
two calls optui makes: ``--query-gpu=... -lms N`` (loop) or once, and
``--query-compute-apps=...`` (prints ``apps.csv`` beside it, or nothing). Each loop's ``N``
(ms) is appended to ``loops.log`` beside it.
"""

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rows() -> list[str]:
    err = os.environ.get("FAKE_SMI_ERROR") or str(HERE / "error.txt")
    if Path(err).exists():
        return [Path(err).read_text().rstrip("\n")]
    path = Path(os.environ.get("FAKE_SMI_GPUS") or HERE / "gpus.csv")
    return [line for line in path.read_text().splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    if any(a.startswith("--query-compute-apps") for a in argv):
        apps = HERE / "apps.csv"
        if apps.exists():
            sys.stdout.write(apps.read_text())
        return 0
    loop_ms = None
    for i, a in enumerate(argv):
        if a == "-lms" and i + 1 < len(argv):
            loop_ms = int(argv[i + 1])
        elif a.startswith("-lms="):
            loop_ms = int(a.split("=", 1)[1])
    if loop_ms is not None:  # a test checks the cadence optui asked for
        with open(HERE / "loops.log", "a") as log:
            log.write(f"{loop_ms}\n")
    while True:
        now = time.time()
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
        out = []
        for row in rows():
            out.append(row if row.startswith(("No devices", "NVIDIA-SMI", "Unable", "Failed")) else f"{stamp}, {row}")
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
        if loop_ms is None:
            return 0
        time.sleep(loop_ms / 1000)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(141)
