"""The help (``?``): every key that works now, the focused panel's first, then the global
ones, each with its label: the rows of :func:`optui.ui.key_table.key_rows`, the table the
key bar and the palette read too. It follows the focus while it is open."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from optui.ui.binding_ids import with_ids
from optui.ui.colors import style
from optui.ui.key_table import GLOBAL, KeyRow, key_rows


def help_text(rows: list[KeyRow], key_style="bold") -> Text:
    """``rows`` as the help shows them: one section per place (``Bench``, then ``global``),
    a key column right-aligned to the widest keys, then the label."""
    text = Text(no_wrap=True, overflow="ellipsis")
    width = max((len(r.keys) for r in rows), default=0)
    sections: dict[str, list[KeyRow]] = {}
    for row in rows:
        sections.setdefault(row.where, []).append(row)
    for i, (where, section) in enumerate(sorted(sections.items(), key=lambda s: s[0] == GLOBAL)):
        if i:
            text.append("\n")
        text.append(f"{where}\n", style="bold underline")
        for row in section:
            text.append(f"{row.keys:>{width}} ", style=key_style)
            text.append(f"{row.label}\n")
    return text


class KeyHelp(VerticalScroll, can_focus=False):
    """The help beside the dashboard (``?`` opens and closes it, so does Esc); never
    focused (the keys it lists are the focused panel's), scrolled with the mouse when
    taller than the terminal."""

    BINDINGS = with_ids(VerticalScroll.BINDINGS, "help")  # never focused: ids for the keymap's sake only
    DEFAULT_CSS = """
    KeyHelp { split: right; width: 33%; min-width: 30; max-width: 60; height: 100%;
        border-left: vkey $foreground 30%; padding: 0 1; }
    KeyHelp > Static { width: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple = ()

    def compose(self) -> ComposeResult:
        yield Static("", markup=False)

    def on_mount(self) -> None:
        self.watch(self.screen, "focused", lambda _focused: self.update_rows(), init=False)
        # keys also come and go with the state (A while a benchmark runs, read-only...): only
        # while the help is open, a cheap comparison twice a second
        self.set_interval(0.5, self.update_rows)
        self.update_rows()

    def rows(self) -> list[KeyRow]:
        """The table this help shows now."""
        return key_rows(self.screen)

    def text(self) -> Text:
        """What the help shows now (see :func:`help_text`)."""
        return help_text(self.rows(), style(self.app, "accent", bold=True))

    def update_rows(self) -> None:
        """Show the table again when it changed (focus, state)."""
        shown = tuple((r.keys, r.label, r.where) for r in self.rows())
        if shown != self._shown:
            self._shown = shown
            self.query_one(Static).update(self.text())
