"""The demo server's stderr log in SGLang's format.

``[YYYY-mm-dd HH:MM:SS TP0] msg`` for scheduler lines, ``[YYYY-mm-dd HH:MM:SS] msg`` for
main-process lines and ``[...] INFO:     msg`` for uvicorn lines (reference section 4.1).
Every write is flushed: optui tails the log file live.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class SimLog:
    """Thread-safe line writer to ``stream`` (stderr by default)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._lock = threading.Lock()

    @staticmethod
    def _stamp(rank: bool) -> str:
        ts = time.strftime("%Y-%m-%d %H:%M:%S")
        return f"[{ts} TP0]" if rank else f"[{ts}]"

    def write(self, text: str) -> None:
        """Write raw text (tqdm bars with ``\\r``, tracebacks) and flush."""
        with self._lock:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):  # closed or broken stderr: keep serving
                pass

    def scheduler(self, msg: str) -> None:
        """A scheduler (rank 0) line: ``[ts TP0] msg``."""
        self.write(f"{self._stamp(True)} {msg}\n")

    def main(self, msg: str) -> None:
        """A main-process line: ``[ts] msg``."""
        self.write(f"{self._stamp(False)} {msg}\n")

    def uvicorn(self, msg: str, level: str = "INFO") -> None:
        """A uvicorn line: ``[ts] INFO:     msg`` (level padded to 9 like uvicorn)."""
        self.write(f"{self._stamp(False)} {(level + ':').ljust(9)} {msg}\n")
