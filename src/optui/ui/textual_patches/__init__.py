"""Every use of Textual's private names in optui, behind one gate.

A patch here replaces or reads a part of Textual that is not its public API (a name that
starts with ``_``, a ``textual._*`` module), because it bought a measured figure
(``bench/RESULTS.md``, "Prove it: performance", issue 8) or works around a Textual bug
(reported in ``docs/upstream/``). Each module's docstring gives the figure, the upstream
issue and what Textual does without it:

- :mod:`.quiet_driver`: the terminal driver's input thread sleeps while idle (idle CPU), and
  survives bytes that are not UTF-8, the end of its input and a stray ``SIGCONT``.
- :mod:`.frame_timer`: a frame within one period of a repaint, not up to two (key press).
- :mod:`.focus_screen`: a focus change restyles and repaints only what it changed, in one
  frame (key press).
- :mod:`.theme_select`: the configured theme chosen without Textual's CSS refresh (a second
  parse of every stylesheet before the first frame). Once dropped because it crashed
  ``OptuiApp()`` on Textual 8.2.3 (no ``DOMNode.update_classes``): behind the gate, a Textual
  other than the pinned one gets ``App.theme`` set the public way.

The gate: the patches are on only when the installed Textual is :data:`PINNED_TEXTUAL`
(the version ``pyproject.toml`` pins; each private name was read in that version's source)
and the environment does not say ``OPTUI_TEXTUAL_PATCHES=0``. Otherwise optui runs on plain
Textual: the same app, with Textual's own driver, frame timer and screen. The gate is read
once, when this package is first imported. ``tests/process/test_textual_patches.py`` fails the
moment a private name a patch relies on changes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import textual

PINNED_TEXTUAL = "8.2.8"  # keep equal to the textual pin in pyproject.toml (a test checks)
SWITCH = "OPTUI_TEXTUAL_PATCHES"  # "0" (or "off", "false", "no") turns every patch off


def wanted(version: str, environ: Mapping[str, str]) -> bool:
    """Whether the patches apply to Textual ``version`` (``textual.__version__``) under
    ``environ``: only the pinned version, and not switched off by :data:`SWITCH`."""
    switched_off = environ.get(SWITCH, "").strip().lower() in {"0", "off", "false", "no"}
    return version == PINNED_TEXTUAL and not switched_off


def installed_textual() -> str:
    """The installed Textual's version: a ``textual.__version__`` set on the module (Textual
    itself computes it lazily, so only a test sets it), else the one
    ``textual-VERSION.dist-info`` beside the ``textual`` package (a directory listing), else
    ``textual.__version__`` computed, which
    imports ``importlib.metadata`` and, through it, ``email`` and ``csv`` (~15-30 ms before
    the first frame on the 2-core machine, ``python -X importtime``)."""
    if isinstance(vars(textual).get("__version__"), str):
        return vars(textual)["__version__"]
    site = Path(textual.__file__).resolve().parent.parent
    try:
        found = [p.name for p in os.scandir(site) if p.name.startswith("textual-") and p.name.endswith(".dist-info")]
    except OSError:
        found = []
    if len(found) == 1:
        return found[0].removeprefix("textual-").removesuffix(".dist-info")
    return textual.__version__  # none or several (an editable install, a stale copy): ask the metadata


ENABLED: bool = wanted(installed_textual(), os.environ)
"""The gate, read once at import: True when optui's Textual patches are in use."""


def driver_class(picked: type) -> type:
    """The terminal driver to run: ``picked`` (the one Textual chose), or
    :class:`~optui.ui.textual_patches.quiet_driver.QuietLinuxDriver` in its place when the
    patches are on and ``picked`` is Textual's ``LinuxDriver`` (Linux and macOS terminals).
    A ``TEXTUAL_DRIVER`` other than that one is kept."""
    if ENABLED and (picked.__module__, picked.__name__) == ("textual.drivers.linux_driver", "LinuxDriver"):
        from optui.ui.textual_patches.quiet_driver import QuietLinuxDriver  # after the first frame's imports

        return QuietLinuxDriver
    return picked


def first_frame_shown(app) -> None:
    """``app``'s first frame is on the terminal: its driver writes through Textual's writer
    thread from now on (:meth:`~optui.ui.textual_patches.quiet_driver.QuietLinuxDriver.first_frame_shown`;
    reads ``App._driver``). Nothing with another driver (Textual's own with the patches off,
    the headless one of tests)."""
    shown = getattr(getattr(app, "_driver", None), "first_frame_shown", None)
    if shown is not None:
        shown()


# The base class of optui's dashboard screen: OneFrameFocusScreen with the patches on,
# Textual's Screen with them off.
if ENABLED:
    from optui.ui.textual_patches.focus_screen import OneFrameFocusScreen as Screen
else:
    from textual.screen import Screen  # type: ignore[assignment]

__all__ = ["ENABLED", "PINNED_TEXTUAL", "SWITCH", "Screen", "driver_class", "first_frame_shown", "wanted"]
