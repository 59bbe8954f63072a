"""A one-line text prompt (notes, a sweep's points, a list to follow). Returns the text or None."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from optui.ui.colors import focus_now
from optui.ui.widgets.key_bar import screen_key_bar
from optui.ui.widgets.one_line_input import OneLineInput


class TextPrompt(ModalScreen[str | None]):
    """Ask for one line of text; Enter returns it, Esc returns None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt.cancel")]
    DEFAULT_CSS = """
    TextPrompt { align: center middle; }
    TextPrompt > Vertical { width: 80%; max-width: 100; height: auto; border: thick $primary;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, title: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, markup=False)
            yield OneLineInput(value=self.value, placeholder=self.placeholder, id="prompt-input")
        yield screen_key_bar()

    def on_mount(self) -> None:
        focus_now(self.query_one(Input))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
