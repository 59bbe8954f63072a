"""Process-wide choices for the TUI that are not widgets: the garbage collector (what it
costs and why: ``bench/RESULTS.md``, issue 8) and signals. (The terminal driver is chosen by
:func:`optui.ui.textual_patches.driver_class`.)"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


def exit_on_signals(exit_app: Callable[[], None]) -> None:
    """SIGTERM / SIGHUP (tmux pane killed, terminal closed) call ``exit_app`` like ``q``:
    the session is closed, so a demo server or a benchmark never outlives optui. Call from
    the running event loop."""
    import signal

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, exit_app)


def freeze_long_lived_objects() -> None:
    """Collect garbage once, then move every object still alive (modules, widgets, styles,
    the loaded campaign: ~90k) out of the garbage collector's reach (``gc.freeze``).

    A full collection traverses every tracked object: with those it took 40-50 ms on the
    2-core VM, every ~3 s while a benchmark streamed, and a key pressed then waited for it
    (most key presses over 60 ms); without them 5-8 ms. Objects made later are collected as
    usual; the frozen ones are never freed, so this is done once, after startup."""
    import gc

    gc.collect()
    gc.freeze()
