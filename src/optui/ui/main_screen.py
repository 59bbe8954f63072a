"""The dashboard's screen: Textual's default screen with cheaper focus changes, painted in
one frame, by a frame timer that does not add a period (:mod:`optui.ui.frame_timer`).

A focus change (keys ``1``-``5``, tab) cost ~75 ms on a 2-core VM at 120x40 with Textual's
default screen, for two reasons, both removed here:

- ``Screen.focused`` is a reactive that repaints the whole screen (every widget rendered
  again). Nothing needs that: the widgets that lose and gain the focus refresh themselves
  (``Focus`` / ``Blur`` handlers and their ``:focus`` styles), and the key bar redraws its
  own line.
- For ``:focus-within`` rules the screen restyles the panel *and every widget inside it*
  (a dozen nodes per panel, each ~0.5 ms, and each then re-rendered). Only the panels
  themselves have such a rule (``.panel:focus-within`` in ``optui.tcss``: border colours),
  so only the nodes that have one are restyled; their children keep their render caches.
  A rule that styles a descendant by its ancestor's focus (``.panel:focus-within Log``)
  would not be applied here: style the panel itself instead.

And a focus change is painted in one frame (it took two, ~30 ms apart: 45-60 ms from key to
screen). Each widget hands its repaint to the screen from its own message loop, so the
screen painted the widgets that handled their ``Focus`` / ``Blur`` first and the rest (the
panels' borders, the key bar) one or two frame periods later. Here the new ``:focus``
state is applied at once and every widget the change touched hands its repaint over before
the key's handler returns (Textual 8.2's ``Widget._check_refresh``; textual is pinned).
Focus-change latency is measured by ``bench/keypress_latency.py`` (figures in
``bench/RESULTS.md``); ``tests/test_main_screen.py`` counts the frames.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.dom import DOMNode
from textual.reactive import Reactive
from textual.screen import UPDATE_PERIOD, Screen
from textual.timer import Timer
from textual.widget import Widget

from optui.ui.frame_timer import FrameTimer
from optui.ui.widgets.key_bar import KeyBar


class MainScreen(Screen):
    """The default screen of :class:`~optui.ui.app.OptuiApp` (pushed screens are Textual's)."""

    # Screen's own keys, with ids (remappable through [keymap])
    BINDINGS = [
        Binding("tab", "app.focus_next", "Focus next", show=False, id="app.focus_next"),
        Binding("shift+tab", "app.focus_previous", "Focus previous", show=False, id="app.focus_previous"),
        Binding("ctrl+c,super+c", "screen.copy_text", "Copy selected text", show=False, id="app.copy_text"),
    ]

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    _frame_timer: FrameTimer | None = None

    @property
    def _update_timer(self) -> Timer:
        """The timer that paints this screen: a :class:`~optui.ui.frame_timer.FrameTimer`
        (a frame within one period of a repaint, not up to two)."""
        if self._frame_timer is None:
            self._frame_timer = FrameTimer(self, UPDATE_PERIOD, name="screen_update", callback=self._on_timer_update, pause=True)
            self._frame_timer._start()
            self._timers.add(self._frame_timer)  # stopped with the screen, as set_interval's are
        return self._frame_timer

    def _update_focus_styles(self, focused: Widget | None = None, blurred: Widget | None = None) -> None:
        nodes: set[DOMNode] = set()
        for widget in (focused, blurred):
            if widget is not None:
                nodes.update(node for node in widget.ancestors_with_self if node._has_focus_within)
        if nodes:
            self.app.stylesheet.update_nodes(nodes, animate=True)

    def set_focus(self, widget: Widget | None, scroll_visible: bool = True, from_app_focus: bool = False) -> None:
        """Focus ``widget``; the next frame paints the whole change: the two panels' borders,
        the widgets' ``:focus`` styles and the new keys in the key bar."""
        blurred = self.focused
        super().set_focus(widget, scroll_visible, from_app_focus)
        focused = self.focused
        if focused is blurred:
            return
        touched: list[Widget] = []
        for node, has_focus in ((blurred, False), (focused, True)):
            if node is not None:
                node.has_focus = has_focus  # its :focus styles now; the Focus / Blur event finds it done
                touched.append(node)
        for bar in self.query(KeyBar):
            bar.update_keys()
            touched.append(bar)
        for node in (blurred, focused):
            for panel in node.ancestors if node is not None else ():
                if isinstance(panel, Widget) and panel._has_focus_within:  # restyled: its border
                    touched.append(panel)
                    touched.extend(panel.children)  # the border title's colour repaints these
        self._hand_over_repaints(touched)

    def _hand_over_repaints(self, widgets: list[Widget]) -> None:
        """Mark the pending repaints of ``widgets`` on the screen now, so that the next frame
        paints them all (Textual 8.2: what ``Widget._check_refresh`` and the screen's
        ``Update`` handler do, a few ms later and one widget at a time)."""
        for widget in dict.fromkeys(widgets):
            if widget._layout_required or widget._refresh_styles_required:
                widget._check_refresh()  # rare here: let Textual lay out / restyle its way
            elif widget._repaint_required and widget.display and widget in self._compositor:
                widget._repaint_required = False
                self._dirty_widgets.add(widget)
        self.check_idle()

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
