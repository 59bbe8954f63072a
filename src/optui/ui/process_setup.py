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


def pause_collector_until_first_frame() -> None:
    """Switch the garbage collector off for the start-up (the CLI calls it before importing
    Textual; :class:`~optui.ui.app.OptuiApp` made with ``freeze_gc=True`` switches it on
    again at its first frame, :func:`resume_collector`). The imports and the first frame
    allocate ~100k objects that all live on, and each young collection walked them: ~6 ms of
    a ~190 ms start on the 2-core VM (``bench/RESULTS.md``, issue 33)."""
    import gc

    gc.disable()


def resume_collector() -> None:
    """The garbage collector on again (after :func:`pause_collector_until_first_frame`)."""
    import gc

    gc.enable()


#: generation-1 collections between two full ones once the startup objects are frozen (Python: 10)
FULL_COLLECTION_AFTER = 100


def freeze_long_lived_objects() -> None:
    """Collect garbage once, then move every object still alive (modules, widgets, styles,
    the loaded campaign: ~90k) out of the garbage collector's reach (``gc.freeze``).

    A full collection traverses every tracked object: with those it took 40-50 ms on the
    2-core VM, every ~3 s while a benchmark streamed, and a key pressed then waited for it
    (most key presses over 60 ms); without them 5-8 ms. Objects made later are collected as
    usual; the frozen ones are never freed, so this is done once, after startup.

    Full collections are also made :data:`FULL_COLLECTION_AFTER` times rarer than
    Python's default: the frozen objects out of the count, the objects made since soon
    outweigh a quarter of what is left in the oldest generation, so one came every ~3 s
    while a benchmark streamed, 65-265 ms each on the loaded 2-core VM (traversing the
    view's rendered rows, the log's lines...), on a key press as often as not
    (``bench/keypress_experiments.py``). The young generations run as before; cyclic
    garbage lives a little longer (a few thousand objects a full collection)."""
    import gc

    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, FULL_COLLECTION_AFTER))
