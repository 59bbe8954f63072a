"""A screen whose focus changes are cheap and painted in one frame, by a frame timer that
does not add a period (:mod:`.frame_timer`).

Measured reason (``bench/RESULTS.md``, "Key press to screen", issue 8): a focus change (keys
``1``-``5``, tab) cost ~75 ms on a 2-core VM at 120x40 with Textual's default screen, and
was painted in two frames 20-30 ms apart. Focus key → screen with no benchmark running, H200
machine, median / p95: 52.3 / 106 ms before this patch and :mod:`.frame_timer`, 23.2 /
67.1 ms with both (commit ce1e230); while a benchmark streams 20k lines/s, 47.0 / 89.7 ms
before, 34.7 / 50.9 ms in the final code (with ``gc.freeze`` too). Three parts, each reading
or replacing a private name of Textual 8.2.8 (canaries: ``tests/process/test_textual_patches.py``):

- ``Screen.focused`` is a reactive that repaints the whole screen (every widget rendered
  again). Nothing needs that: the widgets that lose and gain the focus refresh themselves
  (``Focus`` / ``Blur`` handlers and their ``:focus`` styles). Here it does not repaint.
- For ``:focus-within`` rules the screen restyles the panel *and every widget inside it*
  (``Screen._update_focus_styles``; a dozen nodes per panel, each ~0.5 ms, each then
  re-rendered). Only the nodes that have such a rule (``DOMNode._has_focus_within``) are
  restyled here; their children keep their render caches. A rule that styles a descendant by
  its ancestor's focus (``.panel:focus-within Log``) is not applied: style the panel itself.
  Upstream: Textual made this cheaper once (PR #2460 for issue #2396, "optimize focus"), and
  it still restyles every descendant of the nearest focus-within node; issue #6524 reports
  the same walk in ``update_node_styles``.
- Each widget hands its repaint to the screen from its own message loop
  (``Widget._check_refresh`` → the screen's ``Update`` handler), so the screen painted the
  widgets that handled their ``Focus`` / ``Blur`` first and the rest one or two frame periods
  later. Here the new ``:focus`` state is applied at once and every widget the change touched
  is put on the screen's dirty set (``Screen._dirty_widgets``, when it is in
  ``Screen._compositor``) before the key's handler returns.

No upstream issue covers the last one or the reactive's repaint (searched Textual's issues for
focus repaint and latency, 2026-12-01). With the patches off optui uses Textual's ``Screen``.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.dom import DOMNode
from textual.reactive import Reactive
from textual.screen import UPDATE_PERIOD, Screen
from textual.timer import Timer
from textual.widget import Widget

from optui.ui.textual_patches.frame_timer import FrameTimer


class OneFrameFocusScreen(Screen):
    """Textual's ``Screen`` with cheap focus changes painted in one frame. A subclass says
    what else shows the focus by overriding :meth:`update_for_focus`."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    _frame_timer: FrameTimer | None = None

    @property
    def _update_timer(self) -> Timer:
        """The timer that paints this screen: a :class:`~.frame_timer.FrameTimer` (a frame
        within one period of a repaint, not up to two)."""
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

    def update_for_focus(self) -> Sequence[Widget]:
        """Update what shows the focus besides the widgets' own styles and their
        ``:focus-within`` ancestors (a key bar...), right after a focus change; the widgets
        so changed, to be painted in the same frame. None here."""
        return []

    def set_focus(self, widget: Widget | None, scroll_visible: bool = True, from_app_focus: bool = False) -> None:
        """Focus ``widget``; the next frame paints the whole change: the ``:focus-within``
        ancestors (borders), the widgets' ``:focus`` styles and :meth:`update_for_focus`'s."""
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
        touched.extend(self.update_for_focus())
        for node in (blurred, focused):
            for panel in node.ancestors if node is not None else ():
                if isinstance(panel, Widget) and panel._has_focus_within:  # restyled: its border
                    touched.append(panel)
                    touched.extend(panel.children)  # the border title's colour repaints these
        self._hand_over_repaints(touched)

    def _hand_over_repaints(self, widgets: list[Widget]) -> None:
        """Mark the pending repaints of ``widgets`` on the screen now, so that the next frame
        paints them all (what ``Widget._check_refresh`` and the screen's ``Update`` handler
        do, a few ms later and one widget at a time)."""
        for widget in dict.fromkeys(widgets):
            if widget._layout_required or widget._refresh_styles_required:
                widget._check_refresh()  # rare here: let Textual lay out / restyle its way
            elif widget._repaint_required and widget.display and widget in self._compositor:
                widget._repaint_required = False
                self._dirty_widgets.add(widget)
        self.check_idle()
