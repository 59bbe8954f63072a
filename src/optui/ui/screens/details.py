"""A read-only details view (journal event, server log tail) with scrolling."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from optui.core.text.safe_text import safe_line, safe_text
from optui.ui.safe_screen import visible_text
from optui.ui.widgets.key_bar import screen_key_bar


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

    #: how to leave, on the frame (a host's details in the fleet: `q` closes it here, it does not quit)
    LEAVE = "Esc, q or Enter closes"

    def compose(self) -> ComposeResult:
        with Vertical() as frame:
            frame.border_subtitle = self.LEAVE
            yield Static(self.title_text, id="details-title", markup=False)
            with VerticalScroll():
                yield Static(self.body, markup=False, id="details-body")
        yield screen_key_bar(id="details-keys")

    def show(self, title: str, body: str | Text) -> None:
        """Show another ``title`` and ``body`` (as the constructor takes them), scrolled to
        the top: a screen kept for the next details (the experiments view) is shown again
        without being composed, styled and laid out from nothing."""
        self.title_text = safe_line(title)
        self.body = visible_text(body) if isinstance(body, Text) else safe_text(body)
        if self.is_mounted:
            self.query_one("#details-title", Static).update(self.title_text)
            self.query_one("#details-body", Static).update(self.body)
            self.query_one(VerticalScroll).scroll_home(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
