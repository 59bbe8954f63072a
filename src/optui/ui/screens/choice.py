"""Pick one of a short list (the benchmark to run, sweep or repeat): the choices shown, the
default first and highlighted. Returns the chosen value or None."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from optui.ui.binding_ids import with_ids
from optui.ui.colors import focus_now
from optui.ui.widgets.key_bar import screen_key_bar


class ChoiceList(OptionList):
    """The choices (OptionList's keys, with ids so that a keymap can move them)."""

    BINDINGS = with_ids(OptionList.BINDINGS, "choice")


class ChoiceScreen(ModalScreen[str | None]):
    """Ask for one of ``choices`` — (value, label) pairs, the default first: ↑/↓ move,
    Enter returns the highlighted value, Esc returns None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="choice.cancel")]
    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical { width: 80%; max-width: 100; height: auto; max-height: 90%; border: thick $primary;
        background: $surface; padding: 0 1; }
    ChoiceScreen ChoiceList { height: auto; max-height: 20; border: none; }
    """

    def __init__(self, title: str, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.choices = list(choices)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, markup=False)
            yield ChoiceList(*(Option(label, id=value) for value, label in self.choices), id="choice-list")
            yield Static("↑/↓ choose, Enter picks, Esc cancels", classes="hint", markup=False)
        yield screen_key_bar()

    def on_mount(self) -> None:
        choices = self.query_one(ChoiceList)
        choices.highlighted = 0
        focus_now(choices)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
