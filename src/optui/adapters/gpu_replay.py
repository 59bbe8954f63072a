"""A GPU source that reads a saved ``nvidia-smi --query-gpu`` capture (re-read each tick).

For demos, tests and post-mortems: point ``gpu_source = "replay"`` + ``replay_file`` at a
capture (with or without header/units, see :mod:`optui.core.gpu.nvsmi`); ``fields`` gives the
``--query-gpu=`` list of a header-less capture (else its header, else a known layout). Editing
the file changes what the panel shows on the next tick. An unreadable file, or one that does
not parse, becomes an ERROR snapshot whose message names the file and line; so does one over
:data:`~optui.adapters.bounded_read.MAX_CAPTURE_BYTES` (``/dev/zero``), read no further.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from optui.adapters.bounded_read import MAX_CAPTURE_BYTES, InputTooLarge, read_text_bounded
from optui.core.gpu.nvsmi import snapshot_from_nvidia_smi
from optui.core.gpu.samples import HostSnapshot, HostStatus


class ReplayGpuSource:
    """``read()`` parses ``path`` every time (cheap: a few hundred bytes). ``fields``: the
    queried field names of a header-less capture (None: header or known layout)."""

    def __init__(self, host: str, path: str | Path, fields: Sequence[str] | None = None) -> None:
        self.host = host
        self.path = Path(path)
        self.fields = tuple(fields) if fields is not None else None

    async def read(self) -> HostSnapshot:
        try:
            text = read_text_bounded(self.path, MAX_CAPTURE_BYTES)
        except InputTooLarge as exc:  # /dev/zero: refused, never read whole
            return HostSnapshot(self.host, (), time.time(), HostStatus.ERROR, str(exc), "replay")
        except OSError as exc:
            return HostSnapshot(self.host, (), time.time(), HostStatus.ERROR, f"{self.path}: {exc.strerror or exc}", "replay")
        snap = snapshot_from_nvidia_smi(self.host, text, self.fields, source=str(self.path))
        return HostSnapshot(snap.host, snap.samples, time.time(), snap.status, snap.error, "replay")

    async def close(self) -> None:
        return None
