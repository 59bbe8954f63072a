"""A GPU source that reads a saved ``nvidia-smi --query-gpu`` capture (re-read each tick).

For demos, tests and post-mortems: point ``gpu_source = "replay"`` + ``replay_file`` at a
capture (with or without header/units, see :mod:`optui.core.nvsmi`); editing the file changes
what the panel shows on the next tick. An unreadable file becomes an ERROR snapshot.
"""

from __future__ import annotations

import time
from pathlib import Path

from optui.core.gpu import HostSnapshot, HostStatus
from optui.core.nvsmi import snapshot_from_nvidia_smi


class ReplayGpuSource:
    """``read()`` parses ``path`` every time (cheap: a few hundred bytes)."""

    def __init__(self, host: str, path: str | Path) -> None:
        self.host = host
        self.path = Path(path)

    async def read(self) -> HostSnapshot:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return HostSnapshot(self.host, (), time.time(), HostStatus.ERROR, f"{self.path}: {exc.strerror or exc}", "replay")
        snap = snapshot_from_nvidia_smi(self.host, text)
        return HostSnapshot(snap.host, snap.samples, time.time(), snap.status, snap.error, "replay")

    async def close(self) -> None:
        return None
