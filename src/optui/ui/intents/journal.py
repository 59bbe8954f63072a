"""Journal actions: notes, event details."""

from __future__ import annotations

import json

from optui.ui.intents.base import IntentBase
from optui.ui.screens.details import DetailsScreen
from optui.ui.screens.text_prompt import TextPrompt
from optui.ui.widgets.journal_panel import EventChosen


class JournalIntents(IntentBase):
    """Journal actions: notes, event details."""

    def action_note(self) -> None:
        def noted(text: str | None) -> None:
            if text and text.strip():
                self.session.add_note(text)

        self.push_screen(TextPrompt("Note for the journal:"), noted)

    def on_event_chosen(self, msg: EventChosen) -> None:
        e = msg.event
        body = json.dumps(e.to_json(), indent=2, default=str)
        self.push_screen(DetailsScreen(f"#{e.seq} {e.type} {e.target or ''}", body))
