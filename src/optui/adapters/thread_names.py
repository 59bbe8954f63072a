"""The kernel's name of the calling thread, so that ``top -H``, ``ps -L`` and
``/proc/PID/task/TID/comm`` tell optui's threads apart (Python before 3.14 names only its
``threading.Thread`` objects, which the OS never sees: every thread reads ``python``).

The name is written to ``/proc/self/task/TID/comm`` (Linux, proc(5)), which is what
``prctl(PR_SET_NAME)`` sets: no ctypes, no ``ctypes.util.find_library`` (which runs
``ldconfig -p``, and gcc where that fails, as subprocesses: the input thread names itself
while the first frame is drawn)."""

from __future__ import annotations

import sys
import threading

#: the kernel keeps 15 bytes of a thread's name (and a NUL): TASK_COMM_LEN
COMM_MAX_BYTES = 15


def set_native_thread_name(name: str) -> bool:
    """Name the calling OS thread ``name`` (UTF-8, cut to 15 bytes, the kernel's limit).
    Returns False where it cannot (not Linux, no ``/proc``): a name is for people looking,
    nothing depends on it."""
    if not sys.platform.startswith("linux"):
        return False
    raw = name.encode()[:COMM_MAX_BYTES]
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "wb", buffering=0) as comm:
            comm.write(raw)
    except OSError:
        return False
    return True
