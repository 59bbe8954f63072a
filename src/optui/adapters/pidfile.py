"""A server launch as optui records it (:class:`Launch`) and its pidfile: a small JSON file in
the state dir that a later optui reads to re-attach to a server that kept running. Apart
from :mod:`optui.adapters.controller` (and its shell) so that ``optui demo`` can look for
a demo server that outlived its last start before the first frame, with nothing but ``json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from optui.adapters.private_files import private_dir, private_file


@dataclass(frozen=True, slots=True)
class Launch:
    """What a start produced: main pid (the process group for process/script), the server
    argv, the log file and the byte offset where this start's output begins, Unix start
    time; ``command`` the argv actually executed when it differs (script); ``invocation``,
    ``cursor`` and ``n_restarts`` for systemd (InvocationID, journal cursor before the
    start, NRestarts at the start); ``host`` the host it runs on ("" in pidfiles written
    before optui recorded it); ``proc_start`` the process's start identity
    (:meth:`Shell.process_start`: "" when unknown), so a reused PID is never taken for it."""

    pid: int
    argv: tuple[str, ...]
    log_path: str
    log_offset: int
    started_at: float
    command: tuple[str, ...] | None = None
    invocation: str = ""
    cursor: str = ""
    n_restarts: int | None = None
    host: str = ""
    proc_start: str = ""


def read_pidfile(path: Path) -> Launch | None:
    """The launch recorded in ``path``, None when missing or unreadable."""
    try:
        data = json.loads(path.read_text())
        data["argv"] = tuple(data["argv"])
        if data.get("command") is not None:
            data["command"] = tuple(data["command"])
        return Launch(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_pidfile(path: Path, launch: Launch) -> None:
    """Record ``launch`` atomically (a small local JSON file in the state dir)."""
    write_state_json(path, asdict(launch))


def write_state_json(path: Path, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` in the state dir atomically (a private temp file
    beside it, then a rename): a pidfile, the owner file of a launch."""
    private_dir(path.parent)
    tmp = private_file(path.with_suffix(".tmp"))
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
