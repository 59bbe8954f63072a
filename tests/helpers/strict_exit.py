"""Run optui's CLI the way Python >= 3.12 ends it, on any Python.

``python -m tests.helpers.strict_exit ARGS...`` is ``python -m optui ARGS...`` plus an exit
hook that does what CPython 3.12+ does to asyncio subprocess transports left open at
interpreter exit: collect them and close them, which SIGKILLs a child that still runs
(``Close running child process: kill <_UnixSubprocessTransport ...>``). On 3.11 such a
transport usually survives the exit and its child lives on, so a server whose lifetime hung
on one looked fine here and died on the operator's 3.12 machine (issue 14). Under this
runner it dies on every Python, so the lifetime tests catch that regression wherever they run.

``OPTUI_STRICT_EXIT_REPORT=path`` writes one line per transport the hook closed (its repr),
so a test can also say what was found.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys


def close_leftover_transports() -> list[str]:
    """Close every asyncio subprocess transport still open (what 3.12's GC does at exit);
    the reprs of those closed."""
    from asyncio import base_subprocess

    closed = []
    gc.unfreeze()  # the TUI freezes its start-up objects (optui.ui.process_setup): frozen ones are not listed
    gc.collect()
    for obj in gc.get_objects():
        if isinstance(obj, base_subprocess.BaseSubprocessTransport) and not obj.is_closing():
            closed.append(repr(obj))
            try:
                obj.close()
            except Exception:  # a closed loop may refuse the callbacks; the kill happened first
                pass
    report = os.environ.get("OPTUI_STRICT_EXIT_REPORT")
    if report and closed:
        with open(report, "a") as f:
            f.write("".join(line + "\n" for line in closed))
    return closed


def main() -> None:
    atexit.register(close_leftover_transports)
    from optui.cli import main as optui_main

    sys.argv[0] = "optui"
    optui_main()


if __name__ == "__main__":
    main()
