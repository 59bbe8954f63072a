"""The key bar at the bottom: the keys of the focused panel and the global ones, in one
line (one widget, cheap to redraw): the shown rows of :func:`optui.ui.key_table.key_rows`,
the table the help and the palette read too.

In a narrow terminal (tmux side pane) only the essential keys are shown; ``?`` lists them
all. Keys that do not fit the width are left out whole, from the end of the line (the
global keys after the panel's), never ``q`` and ``?``: no key is cut in the middle.
Bindings hidden by the policy (read-only, loading) disappear from the bar.

Every screen pushed over the dashboard (a dialog, a view) has its own bar
(:func:`screen_key_bar`, docked over the dashboard's): that screen's keys, first the way to
leave it with every key bound to it (``esc/n Cancel``, :data:`~optui.ui.key_table.LEAVE_IDS`),
never left out; the dashboard's ``q Quit`` does not work there and is not shown.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from optui.ui.colors import style
from optui.ui.key_table import LEAVE_IDS, key_rows

#: binding ids kept in a narrow terminal
ESSENTIAL = frozenset({"app.quit", "app.help", "app.zoom", "server.restart", "bench.run", "todo.add",
                       "todo.cycle", "bench.panel_abort", "journal.open",
                       "fleet.host", "fleet.sort", "fleet.filter", "fleet.idle",
                       "results.close", "results.pin", "results.pareto",  # the results screen's own
                       "todo.input_add", "todo.input_save", "todo.input_keep",  # the todo's inline input
                       "todo.input_cancel", "todo.input_cancel_edit", "todo.input_clear"})
#: binding ids never left out for want of width
ALWAYS = frozenset({"app.quit", "app.help"})
SEPARATOR = "  "


def fit_items(items: list[tuple[str, str, str | None]], width: int,
              keep: frozenset[str] = ALWAYS) -> list[tuple[str, str, str | None]]:
    """``items`` — (key, description, binding id) in display order — less the last ones
    (but never those in ``keep``, :data:`ALWAYS` by default) until ``key description`` joined
    by two spaces fits ``width`` columns."""
    kept = list(items)

    def length() -> int:
        return sum(len(k) + 1 + len(d) for k, d, _ in kept) + len(SEPARATOR) * max(0, len(kept) - 1)

    while length() > width:
        droppable = [i for i, (_, _, bid) in enumerate(kept) if bid not in keep]
        if not droppable:
            break
        del kept[droppable[-1]]
    return kept


class KeyBar(Widget):
    """Renders the active bindings; call :meth:`update_keys` when focus or state changes."""

    DEFAULT_CSS = """
    KeyBar { height: 1; dock: bottom; }
    KeyBar.-screen { width: 100%; background: $panel; }
    """

    def __init__(self, *, id: str | None = None, also: tuple[tuple[str, str], ...] = (),
                 palette_hint: bool = True) -> None:
        """``also``: (key, description) of keys a focused Textual widget handles without a
        binding of optui's (an Input's Enter), shown after the way out; ``palette_hint``:
        ``^p palette`` at the end where room is left (not in the palette itself)."""
        super().__init__(id=id)
        self._text = Text()
        self._key: tuple = ()
        self._also = also
        self._palette_hint = palette_hint

    def update_keys(self) -> None:
        """Recompute the bar from the screen's active bindings (no-op when unchanged)."""
        try:
            rows = key_rows(self.screen)
        except Exception:  # no screen yet
            return
        pushed = self.has_class("-screen")  # a dialog's or a view's own bar: its few keys, the way out first
        narrow = self.screen.has_class("-narrow") and not pushed
        items = []
        seen = set()
        for row in rows:
            if not row.shown or row.action in seen:
                continue
            if narrow and row.binding_id not in ESSENTIAL:
                continue
            if pushed and row.node is self.app:  # the dashboard's keys (a full screen such as the results view
                continue  # reaches them too): the help (?) lists them, the bar this screen's own
            seen.add(row.action)
            leave = row.binding_id in LEAVE_IDS
            # the first key (room is short), but every key that leaves: esc/n, esc/q
            items.append((row.keys.replace(" ", "/") if leave else row.keys.split(" ")[0], row.label, row.binding_id))
        keep = ALWAYS
        if pushed:
            items.sort(key=lambda item: item[2] not in LEAVE_IDS)
            keep = ALWAYS | LEAVE_IDS
        if self._also:
            at = sum(1 for item in items if item[2] in LEAVE_IDS)
            items[at:at] = [(key, description, None) for key, description in self._also]
        if self.screen.maximized is not None:  # zoomed: the way back first, never left out
            items.sort(key=lambda item: item[2] != "app.zoom")
            keep = ALWAYS | {"app.zoom"}
        if not pushed and self.screen.query("KeyHelp"):  # the help open: how to close it first, never left out
            items = [("esc", "Close help", "app.close_help"), *(item for item in items if item[2] != "app.close_help")]
            keep = keep | {"app.close_help"}
        signature = (narrow, tuple(items), self.size.width)
        if signature == self._key:
            return
        self._key = signature
        self._text = self._render_items(fit_items(items, self.size.width, keep) if self.size.width else items)
        self.refresh()

    def _render_items(self, items: list[tuple[str, str, str | None]]) -> Text:
        key_style = style(self.app, "accent", bold=True)
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (key, description, _) in enumerate(items):
            if i:
                text.append(SEPARATOR)
            text.append(key, style=key_style)
            text.append(f" {description}")
        hint = Text("^p palette", style="dim")
        room = self.size.width - len(text.plain) - len(hint.plain) - 2
        if room > 0 and self._palette_hint:
            text.append(" " * room)
            text.append_text(hint)
        return text

    def render(self) -> Text:
        return self._text

    def on_resize(self) -> None:
        self.update_keys()


def screen_key_bar(*, id: str | None = None, also: tuple[tuple[str, str], ...] = (),
                   palette_hint: bool = True) -> KeyBar:
    """The key bar of a screen pushed over the dashboard (yield it from its ``compose``): the
    pushed screen's keys, the way to leave it first (module doc); ``also`` and
    ``palette_hint``: see :class:`KeyBar`."""
    bar = KeyBar(id=id, also=also, palette_hint=palette_hint)
    bar.add_class("-screen")
    return bar
