"""A thread's kernel name (``top -H``): set without starting a process.

The input thread names itself while the first frame is drawn; ``ctypes.util.find_library``
ran ``ldconfig -p`` (and gcc and ld where that failed) as subprocesses to find libc for it.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from optui.adapters.thread_names import set_native_thread_name
from tests.helpers.unit_guard import guard

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names through /proc are Linux's")


def _named_in_a_thread(name: str) -> tuple[bool, str, list[str]]:
    attempts: list[str] = []
    out: dict[str, object] = {}

    def body() -> None:
        with guard(attempts.append):
            out["ok"] = set_native_thread_name(name)
        out["comm"] = Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().rstrip("\n")

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(10)
    return bool(out["ok"]), str(out["comm"]), attempts


def test_the_kernel_sees_the_name_and_no_process_was_started():
    ok, comm, attempts = _named_in_a_thread("optui-input")
    assert (ok, comm, attempts) == (True, "optui-input", [])


def test_a_long_name_is_cut_to_the_kernels_15_bytes():
    ok, comm, attempts = _named_in_a_thread("optui-journal-thread")
    assert (ok, comm, attempts) == (True, "optui-journal-t", [])
