"""Profiles a Python program's idle CPU, every thread, with yappi (CPU clock): from
``OPTUI_YAPPI_START`` s after it started to ``OPTUI_YAPPI_END`` s, then writes the functions
by own CPU time and each thread's CPU to ``OPTUI_YAPPI_OUT``. On ``PYTHONPATH`` (as
``bench/real_gpu/idle_profile.sh`` puts it), nothing happens unless ``OPTUI_YAPPI_OUT`` is set;
the processes the program starts do not inherit it."""

import os
import threading

_OUT = os.environ.pop("OPTUI_YAPPI_OUT", "")  # this process only: not the processes it starts

if _OUT:
    import yappi

    def _start() -> None:
        yappi.set_clock_type("cpu")
        yappi.start(builtins=True, profile_threads=True)

    def _stop() -> None:
        yappi.stop()
        with open(_OUT, "w") as out:
            threads = yappi.get_thread_stats()
            threads.sort("ttot")
            threads.print_all(out=out)
            funcs = yappi.get_func_stats()
            funcs.sort("tsub")
            funcs.print_all(out=out, columns={0: ("name", 70), 1: ("ncall", 9), 2: ("tsub", 8), 3: ("ttot", 8), 4: ("tavg", 8)})

    for delay, action in ((float(os.environ.get("OPTUI_YAPPI_START", 5)), _start),
                          (float(os.environ.get("OPTUI_YAPPI_END", 65)), _stop)):
        timer = threading.Timer(delay, action)
        timer.daemon = True
        timer.start()
