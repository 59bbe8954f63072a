"""Benchmark actions: choose and run a preset, abort the run."""

from __future__ import annotations

from optui.session import SessionError
from optui.ui.colors import focus_now
from optui.ui.intents.base import IntentBase
from optui.ui.screens.text_prompt import TextPrompt


class BenchIntents(IntentBase):
    """Benchmark actions: choose and run a preset, abort the run."""

    def action_bench(self) -> None:
        names = list(self.session.config.benchmarks)
        if not names:
            self.notify("no benchmarks configured ([benchmarks.NAME] in optui.toml)", severity="warning")
            return
        server = self._selected_server()
        preferred = [n for n in names if self.session.config.benchmarks[n].server == server] or names
        if len(preferred) == 1:
            self.start_bench(preferred[0])
            return

        def chosen(value: str | None) -> None:
            if value:
                self.start_bench(value.strip())

        self.push_screen(TextPrompt(f"Benchmark to run ({', '.join(preferred)}):", preferred[0]), chosen)

    def start_bench(self, name: str) -> None:
        """Start benchmark preset ``name``."""
        try:
            self.session.benches.run(name)
            focus_now(self.query_one("#bench-log"))
        except SessionError as exc:
            self._fail(exc)

    def action_abort_bench(self) -> None:
        if self.session.benches.abort():
            self.notify("benchmark aborted")

