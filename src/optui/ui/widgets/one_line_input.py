"""The one-line text field of optui's prompts and editors."""

from __future__ import annotations

from textual import events
from textual.widgets import Input

from optui.ui.binding_ids import with_ids


class OneLineInput(Input):
    """A Textual ``Input`` that keeps a multi-line paste whole: its non-blank lines joined by
    single spaces (Textual's keeps the first line and drops the rest without a word, so a
    note pasted from a log lost all but its first line)."""

    BINDINGS = with_ids(Input.BINDINGS, "input")

    def __init__(self, value: str | None = None, *args, **kwargs) -> None:
        # a value that holds line breaks (a todo item an agent wrote with "\n") is one line
        # too: Textual's Input draws a raw LF, which broke the panel's borders (break-it trial)
        if value:
            value = " ".join(part.strip() for part in value.splitlines() if part.strip())
        super().__init__(value, *args, **kwargs)

    def on_paste(self, event: events.Paste) -> None:
        lines = [line.strip() for line in event.text.splitlines() if line.strip()]
        if len(lines) < 2:
            return  # Input's own handler (next in the class chain) takes it as it is
        event.prevent_default()  # not Input's handler as well: it would insert the first line again
        event.stop()
        text = " ".join(lines)
        if self.selection.is_empty:
            self.insert_text_at_cursor(text)
        else:
            self.replace(text, *self.selection)
