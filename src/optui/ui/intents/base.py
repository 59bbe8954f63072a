"""Shared helpers of the intent mixins."""

from __future__ import annotations


class IntentBase:
    """Helpers every intent mixin of :class:`~optui.ui.app.OptuiApp` uses."""

    def _selected_server(self) -> str | None:
        key = self.query_one("#servers").current_key
        if key is None and self.session.servers:
            key = next(iter(self.session.servers))
        return key

    def _fail(self, exc: Exception) -> None:
        self.notify(str(exc), severity="error", timeout=8)

