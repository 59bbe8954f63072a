"""The kernel's name of the calling thread, so that ``top -H``, ``ps -L`` and
``/proc/PID/task/TID/comm`` tell optui's threads apart (Python before 3.14 names only its
``threading.Thread`` objects, which the OS never sees: every thread reads ``python``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_PR_SET_NAME = 15  # <linux/prctl.h>; the kernel keeps 15 bytes and a NUL


def set_native_thread_name(name: str) -> bool:
    """Name the calling OS thread ``name`` (cut to 15 bytes, the kernel's limit). Returns
    False where it cannot (not Linux, no libc): a name is for people looking, nothing
    depends on it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
