"""A confirm dialog for destructive actions: shows exactly what will happen, Cancel
focused, ``y`` confirms, ``n``/Esc cancels, the arrows and page keys scroll a long body
(its buttons stay on screen whatever the terminal's height)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from optui.core.text.safe_text import safe_line, safe_text
from optui.ui.colors import focus_now
from optui.ui.safe_screen import visible_text
from optui.ui.widgets.key_bar import screen_key_bar


class ConfirmScreen(ModalScreen[bool]):
    """Returns True when confirmed. ``body`` is plain text or Rich Text (no markup)."""

    BINDINGS = [
        Binding("escape,n", "cancel", "Cancel", id="confirm.cancel"),
        Binding("y", "confirm", "Confirm", id="confirm.yes"),
        Binding("up", "scroll_body(-1)", "Scroll", show=False, id="confirm.scroll_up"),
        Binding("down", "scroll_body(1)", "Scroll", show=False, id="confirm.scroll_down"),
        Binding("pageup", "scroll_body(-10)", "Scroll", show=False, id="confirm.page_up"),
        Binding("pagedown", "scroll_body(10)", "Scroll", show=False, id="confirm.page_down"),
    ]
    #: toasts wait until it closes (the app's notify): one over the buttons hid the question
    HOLDS_TOASTS = True
    #: rows the dialog takes beside its body: border 2, title 1, buttons 3
    FRAME_ROWS = 6
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1; }
    ConfirmScreen #confirm-title { text-style: bold; color: $warning; }
    ConfirmScreen VerticalScroll { height: auto; max-height: 30; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """

    def __init__(self, title: str, body: str | Text, confirm_label: str = "Confirm") -> None:
        super().__init__()
        self.title_text = safe_line(title)
        self.body = visible_text(body) if isinstance(body, Text) else safe_text(body)
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="confirm-title", markup=False)
            with VerticalScroll():
                yield Static(self.body, id="confirm-body", markup=False)
            with Horizontal():
                yield Button("Cancel (n)", id="cancel", variant="default")
                yield Button(f"{self.confirm_label} (y)", id="confirm", variant="warning")
        yield screen_key_bar()

    def on_mount(self) -> None:
        self._fit_body()
        focus_now(self.query_one("#cancel", Button))

    def on_resize(self) -> None:
        self._fit_body()

    def _fit_body(self) -> None:
        """The body scrolls within what the screen leaves beside the title and the buttons
        (the dialog: at most 90 % of the height): at 50x30 a failed restart's log lines pushed
        the diff and the buttons off screen, and ``y`` rolled back blind."""
        self.query_one(VerticalScroll).styles.max_height = max(3, int(self.size.height * 0.9) - self.FRAME_ROWS)

    def action_scroll_body(self, rows: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=rows, animate=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_confirm(self) -> None:
        self.dismiss(True)
