"""The dashboard's screen: its keys, its size classes from the first frame, and what shows
the focus besides the panels (the key bar).

Its base is :data:`optui.ui.textual_patches.Screen`: with Textual's patches on (the pinned
Textual), a screen whose focus changes restyle and repaint only what they changed, in one
frame (:mod:`optui.ui.textual_patches.focus_screen`, figures in ``bench/RESULTS.md``);
with them off, Textual's ``Screen``. Focus-change latency is measured by
``bench/keypress_latency.py``; ``tests/process/test_main_screen.py`` counts the frames.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.binding import Binding
from textual.widget import Widget

from optui.ui import textual_patches
from optui.ui.widgets.key_bar import KeyBar


class MainScreen(textual_patches.Screen):
    """The default screen of :class:`~optui.ui.app.OptuiApp` (pushed screens are Textual's)."""

    # Screen's own keys, with ids (remappable through [keymap])
    BINDINGS = [
        Binding("tab", "app.focus_next", "Focus next", show=False, id="app.focus_next"),
        Binding("shift+tab", "app.focus_previous", "Focus previous", show=False, id="app.focus_previous"),
        Binding("ctrl+c,super+c", "screen.copy_text", "Copy selected text", show=False, id="app.copy_text"),
    ]

    def update_for_focus(self) -> Sequence[Widget]:
        """The key bar shows the newly focused panel's keys in the same frame as its border
        (called by the patched screen; with the patches off the app redraws the key bar
        after the focus event, see ``OptuiApp.on_descendant_focus``)."""
        bars = list(self.query(KeyBar))
        for bar in bars:
            bar.update_keys()
        return bars

    @classmethod
    def for_app(cls, app) -> MainScreen:
        """The screen of ``app`` with its size classes (``-narrow``, ``-short``...) already
        set, so that its widgets are styled once, for the terminal's real size. (Textual
        sets them on the first resize, after the first frame: a side pane showed the wide
        layout for a moment; setting them on mount restyled every widget, ~12 ms.)"""
        width, height = app.size
        classes = []
        for breakpoints, size in ((app.HORIZONTAL_BREAKPOINTS or [], width), (app.VERTICAL_BREAKPOINTS or [], height)):
            reached = [name for threshold, name in sorted(breakpoints) if size >= threshold]
            classes.extend(reached[-1:])
        return cls(id="_default", classes=" ".join(classes))
