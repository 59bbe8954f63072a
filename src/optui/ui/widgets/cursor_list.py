"""A focusable list of pre-rendered rows with a cursor (the panels' and dialogs' lists).

Rows are Rich ``Text`` objects (one or more lines each), so untrusted text (log lines,
flags, todo content) never goes through markup, and its control characters are shown
escaped. Only the visible window is rendered; the
cursor stays visible when the list scrolls, and setting new rows keeps the cursor on the
same *key* (so live updates never make the selection jump).

A long list (a followed agent list of 15,000 items) gives :meth:`CursorList.set_lazy_rows`
a function that builds one row: only the rows on screen are built, and moving the cursor,
scrolling or a new list cost what the window shows, not what the list holds.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from optui.ui.colors import style
from optui.ui.safe_screen import visible_text

#: what a panel of the campaign shows before the session's first state arrives (the panels
#: are drawn before the campaign is loaded: "no servers configured" then was not true)
LOADING_TEXT = "loading the campaign…"


class CursorList(Widget, can_focus=True):
    """Rows with a cursor; subclasses build rows and react to :class:`Selected`."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="list.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="list.down"),
        Binding("pageup", "cursor(-10)", "Page up", show=False, id="list.page_up"),
        Binding("pagedown", "cursor(10)", "Page down", show=False, id="list.page_down"),
        Binding("home,g", "cursor_to(0)", "Top", show=False, id="list.top"),
        Binding("end,G", "cursor_to(-1)", "Bottom", show=False, id="list.bottom"),
    ]

    DEFAULT_CSS = """
    CursorList { height: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    cursor: reactive[int] = reactive(0, always_update=False)

    class Highlighted(Message):
        """The cursor moved to ``key``."""

        def __init__(self, sender: CursorList, key: Hashable | None) -> None:
            super().__init__()
            self.list = sender
            self.key = key

    def __init__(self, *, empty_text: str = "(empty)", follow_top: bool = False, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.empty_text = empty_text
        #: keep the cursor on the first row when it is there (newest-first lists)
        self.follow_top = follow_top
        #: draw the cursor also when the list is not focused
        self.cursor_when_blurred = True
        self._rows: list[Text] = []
        self._keys: list[Hashable] = []
        self._build: Callable[[int], Text] | None = None  # lazy rows: index → row
        self._top = 0

    # ------------------------------------------------------------ data
    def set_rows(self, keys: Sequence[Hashable], rows: Sequence[Text]) -> None:
        """Replace the rows; the cursor follows its key when it still exists. Control and
        bidi characters in them are shown escaped (:func:`~optui.ui.safe_screen.visible_text`);
        a panel puts one-line fields in with :func:`~optui.core.text.safe_text.safe_line`."""
        rows = [visible_text(r) for r in rows]
        if self._build is None and list(keys) == self._keys and [r.plain for r in rows] == [r.plain for r in self._rows] \
                and [r.spans for r in rows] == [r.spans for r in self._rows]:
            return
        self._set_rows(keys, list(rows), None)

    def set_lazy_rows(self, keys: Sequence[Hashable], build: Callable[[int], Text]) -> None:
        """Replace the rows with ``len(keys)`` rows that ``build(index)`` makes when they
        are drawn (it is called again at every repaint, so it should cache; the rows are
        made visible like :meth:`set_rows` does). The cursor follows its key."""
        self._set_rows(keys, None, build)

    def _set_rows(self, keys: Sequence[Hashable], rows: list[Text] | None, build: Callable[[int], Text] | None) -> None:
        current = self.current_key
        at_top = self.follow_top and self.cursor == 0
        limit = self._line_limit()
        before = self._lines_upto(limit)
        self._keys = list(keys)
        self._rows, self._build = rows if rows is not None else [], build
        relayout = self._lines_upto(limit) != before
        if at_top:
            self.cursor = 0
        elif current in self._keys:
            self.cursor = self._keys.index(current)
        else:
            self.cursor = min(self.cursor, max(0, len(self._keys) - 1))
        self.refresh(layout=relayout)

    def _row_at(self, index: int) -> Text:
        """Row ``index`` (built now for a lazy list)."""
        if self._build is None:
            return self._rows[index]
        return visible_text(self._build(index))

    def _row_count(self) -> int:
        return len(self._keys) if self._build is not None else len(self._rows)

    def _line_limit(self) -> int:
        """More lines than the list can ever show (the terminal's height)."""
        try:
            return max(self.app.size.height, self.size.height, 1) + 1
        except Exception:  # noqa: BLE001 - not mounted: no app yet
            return 200

    def _lines_upto(self, limit: int) -> int:
        """The rows' total height, counted only up to ``limit`` (bounded work for long lists)."""
        total = 0
        for i in range(self._row_count()):
            total += self._row_height(self._row_at(i))
            if total >= limit:
                break
        return total

    @property
    def current_key(self) -> Hashable | None:
        """Key of the row under the cursor, or None when empty."""
        if 0 <= self.cursor < len(self._keys):
            return self._keys[self.cursor]
        return None

    def select_key(self, key: Hashable) -> None:
        """Move the cursor to ``key`` when present."""
        if key in self._keys:
            self.cursor = self._keys.index(key)

    # ------------------------------------------------------------ keys
    def action_cursor(self, delta: int) -> None:
        if self._keys:
            self.cursor = max(0, min(len(self._keys) - 1, self.cursor + delta))

    def action_cursor_to(self, index: int) -> None:
        if self._keys:
            self.cursor = index % len(self._keys)

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        self.post_message(self.Highlighted(self, self.current_key))

    # ------------------------------------------------------------ render
    def get_content_height(self, container, viewport, width: int) -> int:
        """All rows (so ``height: auto`` fits the list; max-height caps it), counted up to
        what the container or the viewport can show."""
        return max(1, self._lines_upto(max(container.height, viewport.height, 1) + 1))

    def _row_height(self, row: Text) -> int:
        return row.plain.count("\n") + 1

    def render(self) -> Text:
        height = max(1, self.size.height)
        count = self._row_count()
        if not count:
            return Text(self.empty_text, style="dim")
        rows: dict[int, Text] = {}

        def row(i: int) -> Text:
            if i not in rows:
                rows[i] = self._row_at(i)
            return rows[i]

        def h(i: int) -> int:
            return self._row_height(row(i))

        # keep the cursor row inside the window: the lowest top from which it still shows
        # (walked back from the cursor, so a jump to the end of a long list costs a window)
        cursor = min(self.cursor, count - 1)
        lowest, used = cursor, h(cursor)
        while lowest > 0 and used + h(lowest - 1) <= height:
            lowest -= 1
            used += h(lowest)
        self._top = max(min(self._top, cursor), lowest)
        # grown taller (resize) or rows removed: fill the window instead of leaving the
        # rows above hidden behind a stale offset
        below = 0
        for i in range(self._top, count):
            below += h(i)
            if below > height:
                break
        while self._top > 0 and below + h(self._top - 1) <= height:
            self._top -= 1
            below += h(self._top)
        out = Text(no_wrap=True, overflow="ellipsis")
        used = 0
        highlight = (style(self.app, "block-cursor-foreground", "block-cursor-background", bold=True) if self.has_focus
                     else style(self.app, bg="block-cursor-blurred-background"))
        for i in range(self._top, count):
            if used >= height:
                break
            r = row(i)
            if i == self.cursor and (self.has_focus or self.cursor_when_blurred):
                r = self._highlighted(r, highlight)
            if used:
                out.append("\n")
            out.append_text(r)
            used += h(i)
        return out

    def _highlighted(self, row: Text, highlight) -> Text:
        """The row with every line padded to the full width and highlighted."""
        width = max(1, self.size.width)
        lines = row.split("\n", allow_blank=True)
        out = Text()
        for n, line in enumerate(lines):
            line = line.copy()
            line.truncate(width, overflow="ellipsis", pad=True)
            line.stylize(highlight)
            if n:
                out.append("\n")
            out.append_text(line)
        return out

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
