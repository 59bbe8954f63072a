"""A read-only details view (journal event, server log tail) with scrolling."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from optui.core.safe_text import safe_line, safe_text
from optui.ui.safe_screen import visible_text


class DetailsScreen(ModalScreen[None]):
    """Show ``body`` (plain text or Rich Text, never markup; control characters shown
    escaped) under ``title`` (one line)."""

    BINDINGS = [Binding("escape,q,enter", "close", "Close", id="details.close")]
    DEFAULT_CSS = """
    DetailsScreen { align: center middle; }
    DetailsScreen > Vertical { width: 95%; height: 90%; border: thick $primary; background: $surface; }
    DetailsScreen #details-title { text-style: bold; }
    """

    def __init__(self, title: str, body: str | Text) -> None:
        super().__init__()
        self.title_text = safe_line(title)
        self.body = visible_text(body) if isinstance(body, Text) else safe_text(body)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="details-title", markup=False)
            with VerticalScroll():
                yield Static(self.body, markup=False, id="details-body")

    def action_close(self) -> None:
        self.dismiss(None)
