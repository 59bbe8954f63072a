"""A dialog that fits its terminal: its buttons whole at any width, and on screen at any height.

At 50x30 (a tmux side pane) the dialogs' buttons were cut (issue 34): the ``X`` queue confirm's
and the rollback offer's titles wrapped to two lines, pushing the buttons under the dialog's
bottom edge; ``Cancel  Remove (ctrl+d)  Save (ctrl+s)`` (56 columns) and ``Cancel  Review &
restart (ctrl+s)`` (47) were wider than the dialog (43 columns inside).

- :class:`ButtonRow`: a dialog's buttons, right-aligned; when their labels do not fit the row,
  each shows its short label (``Save`` for ``Save (ctrl+s)``: the dialog's key bar names the
  keys) without Textual's minimum button width.
- :func:`fit_flexible_height`: the one part of a dialog that can shrink (a scrolling body, a
  preview) gets the rows the dialog's other parts leave within its maximum height, measured
  as laid out (a title that wraps takes its two lines).
"""

from __future__ import annotations

import re

from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button

#: a label's key hint, dropped from a compact button: ``"Save (ctrl+s)"`` → ``"Save"``
_KEY_HINT = re.compile(r"\s*\([^()]*\)$")
#: Textual's button: 1 column of padding and 1 of border each side, 16 columns at least
_BUTTON_FRAME, _BUTTON_MIN = 4, 16
#: the columns before each button (``margin-left``): full, compact
_GAP, _GAP_COMPACT = 2, 1


def short_label(label: str) -> str:
    """``label`` without its trailing key hint (``"Cancel (n)"`` → ``"Cancel"``)."""
    return _KEY_HINT.sub("", label) or label


class ButtonRow(Horizontal):
    """A dialog's buttons (compose them inside it), right-aligned, each whole at any width:
    class ``-compact`` (short labels, no minimum width, one column between them) when their
    full labels do not fit the row's width (module doc)."""

    DEFAULT_CSS = """
    ButtonRow { height: auto; align-horizontal: right; }
    ButtonRow > Button { margin-left: 2; }
    ButtonRow.-compact > Button { min-width: 0; margin-left: 1; }
    """

    def __init__(self, *children: Widget, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(*children, id=id, classes=classes)
        self._labels: dict[int, str] = {}  # id(button) → its full label

    def full_width(self) -> int:
        """Columns the buttons take with their full labels (margins included)."""
        return sum(_GAP + max(_BUTTON_MIN, len(self._label(b)) + _BUTTON_FRAME) for b in self.query_children(Button))

    def _label(self, button: Button) -> str:
        return self._labels.setdefault(id(button), str(button.label))

    def on_resize(self) -> None:
        self.fit()

    def fit(self) -> None:
        """Full labels where they fit the row's width, else the short ones."""
        width = self.size.width
        if not width:
            return
        compact = self.full_width() > width
        self.set_class(compact, "-compact")
        for button in self.query_children(Button):
            label = self._label(button)
            shown = short_label(label) if compact else label
            if str(button.label) != shown:
                button.label = shown


def fit_flexible_height(container: Widget, flexible: Widget, share: float, *, most: int | None = None) -> None:
    """Set ``flexible``'s max height (a child of ``container``, the dialog's frame) to the rows
    ``container`` has within ``share`` of its screen's height (its CSS ``max-height``: 0.9 for
    90 %; the screen less its docked key bar) once its border, padding and other children (as
    laid out: call it after a refresh) are taken; at least 3, at most ``most``."""
    parent = container.parent if isinstance(container.parent, Widget) else container.screen
    docked = sum(w.outer_size.height for w in parent.children  # the screen's key bar
                 if w is not container and isinstance(w, Widget) and str(w.styles.dock) in ("top", "bottom"))
    rows = int((parent.size.height - docked) * share)
    frame = container.outer_size.height - container.content_size.height
    if not container.outer_size.height:  # not laid out yet: its border and padding from its styles
        frame = container.styles.gutter.height
    others = sum(child.outer_size.height for child in container.children if child is not flexible and child.display)
    room = max(3, rows - frame - others)
    flexible.styles.max_height = min(room, most) if most is not None else room
