"""The details of a journal event or an experiment: titled sections with coloured lines
(flag diffs, phase timings, crash class and log excerpt, metrics vs baseline, todo
before/after). ``j`` toggles the raw JSON of an event."""

from __future__ import annotations

import json

from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.binding import Binding
from textual.widgets import Static

from optui.core.journal.event_details import Section
from optui.core.journal.events import Event
from optui.core.text.safe_text import safe_line
from optui.ui.colors import style
from optui.ui.screens.details import DetailsScreen

_TONE_VAR = {"good": "delta-good", "bad": "delta-bad", "warn": "warning"}


def sections_text(app: App, sections: list[Section]) -> Text:
    """Render ``sections`` as Rich Text (no markup: log lines and flags are untrusted)."""
    out = Text()
    for n, section in enumerate(sections):
        if n:
            out.append("\n")
        out.append(section.title + "\n", style=style(app, "primary", bold=True))
        for text, tone in section.lines:
            line_style: Style | str
            if tone == "dim":
                line_style = style(app, dim=True)
            elif tone == "head":
                line_style = style(app, bold=True)
            else:
                var = _TONE_VAR.get(tone)
                line_style = style(app, var) if var else ""
            out.append("  " + safe_line(text) + "\n", style=line_style)
    return out


class EventDetailsScreen(DetailsScreen):
    """Details of one event; ``j`` switches between the readable view and raw JSON."""

    BINDINGS = [Binding("j", "toggle_json", "Raw JSON", id="details.json")]

    def __init__(self, event: Event, sections: list[Section]) -> None:
        self.event = event
        self.sections = sections
        self.raw = False
        super().__init__(f"#{event.seq} {event.type} {event.target or ''}   (j: raw JSON, Esc: close)", Text())

    def on_mount(self) -> None:
        self.body = sections_text(self.app, self.sections)
        self._update()

    def _update(self) -> None:
        body = json.dumps(self.event.to_json(), indent=2, default=str) if self.raw else self.body
        self.query_one("#details-body", Static).update(body)

    def action_toggle_json(self) -> None:
        self.raw = not self.raw
        self._update()
