"""The key bar at the bottom: the keys of the focused panel and the global ones, in one
line (one widget, cheap to redraw).

In a narrow terminal (tmux side pane) only the essential keys are shown; ``?`` lists them
all. Bindings hidden by the policy (read-only, loading) disappear from the bar.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from optui.ui.colors import style

#: binding ids kept in a narrow terminal
ESSENTIAL = frozenset({"app.quit", "app.help", "app.zoom", "server.restart", "bench.run", "todo.add",
                       "todo.cycle", "bench.panel_abort", "journal.open"})


class KeyBar(Widget):
    """Renders the active bindings; call :meth:`update_keys` when focus or state changes."""

    DEFAULT_CSS = "KeyBar { height: 1; dock: bottom; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text = Text()
        self._key: tuple = ()

    def update_keys(self) -> None:
        """Recompute the bar from the screen's active bindings (no-op when unchanged)."""
        try:
            bindings = self.screen.active_bindings
        except Exception:  # no screen yet
            return
        narrow = self.screen.has_class("-narrow")
        items = []
        seen = set()
        for active in bindings.values():
            binding = active.binding
            if not binding.show or not active.enabled or binding.action in seen:
                continue
            if narrow and binding.id not in ESSENTIAL:
                continue
            seen.add(binding.action)
            items.append((self.app.get_key_display(binding), binding.description))
        signature = (narrow, tuple(items), self.size.width)
        if signature == self._key:
            return
        self._key = signature
        self._text = self._render_items(items)
        self.refresh()

    def _render_items(self, items: list[tuple[str, str]]) -> Text:
        key_style = style(self.app, "accent", bold=True)
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (key, description) in enumerate(items):
            if i:
                text.append("  ")
            text.append(key, style=key_style)
            text.append(f" {description}")
        hint = Text("^p palette", style="dim")
        room = self.size.width - len(text.plain) - len(hint.plain) - 2
        if room > 0:
            text.append(" " * room)
            text.append_text(hint)
        return text

    def render(self) -> Text:
        return self._text

    def on_resize(self) -> None:
        self.update_keys()
