"""A server's log (``l``): why it failed (crash class and the lines that say so) above its
last log lines, opened at the newest line. ``h`` hides the access lines of monitoring
requests (``GET /health``, ``/metrics``, ``/slots``... of uvicorn and llama-server, see
:func:`optui.core.server.log.is_probe_line`), which are most of a running server's log;
``h`` again shows them. The hint and the count are in the title (the body opens at its
tail, scrolled away from its head), and the screen's own key bar (over the dashboard's,
which showed the panel behind's keys) lists its keys."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from optui.core.server.log import is_probe_line
from optui.ui.safe_screen import visible_text
from optui.ui.screens.details import DetailsScreen
from optui.ui.widgets.key_bar import KeyBar


class ServerLogScreen(DetailsScreen):
    """``lines`` (oldest first) of server ``name``'s log, whose whole file is ``where``;
    ``crash`` is the failed start's ``(class, message, relevant lines)`` or None."""

    BINDINGS = [Binding("h", "toggle_probes", "Hide/show probe lines", id="server_log.probes")]

    def __init__(self, name: str, where: str, lines: Sequence[str],
                 crash: tuple[str, str, Sequence[str]] | None = None) -> None:
        self.lines = list(lines)
        self.crash = crash
        self.hide_probes = False
        self.probe_count = sum(1 for line in self.lines if is_probe_line(line))
        self._head, self._where = f"{name} log", where
        super().__init__(self._title(), self._body())

    def _title(self) -> str:
        """The title with what ``h`` does now (the body's head line scrolls away), before
        the file's path (a long one is cut at the screen's edge)."""
        if self.hide_probes:
            return f"{self._head} — {self.probe_count} probe lines hidden (h shows them) — {self._where}"
        if self.probe_count:
            return (f"{self._head} — {self.probe_count} of {len(self.lines)} lines are probe requests (h hides them)"
                    f" — {self._where}")
        return f"{self._head} ({self._where})"

    def _body(self) -> Text:
        body = Text()
        if self.crash is not None:
            crash_class, message, crash_lines = self.crash
            body.append(crash_class, style="bold red")
            body.append(f"  {message}\n")
            for line in crash_lines:
                body.append(f"  {line}\n", style="red")
            body.append("\n")
        shown = [line for line in self.lines if not (self.hide_probes and is_probe_line(line))]
        if self.hide_probes:
            head = f"last {len(self.lines)} lines, {self.probe_count} probe lines hidden (h shows them):\n"
        elif self.probe_count:
            head = f"last {len(self.lines)} lines ({self.probe_count} are probe requests: h hides them):\n"
        else:
            head = f"last {len(self.lines)} lines:\n"
        body.append(head, style="bold")
        body.append("\n".join(shown) or "(no log lines yet)")
        return body

    def on_mount(self) -> None:
        self._to_newest()
        self.call_after_refresh(self.query_one("#details-keys", KeyBar).update_keys)

    def _to_newest(self) -> None:
        scroll = self.query_one(VerticalScroll)
        # after the layout that knows the body's height: scrolling before it stays at the top
        self.call_after_refresh(scroll.scroll_end, animate=False, immediate=True)

    def action_toggle_probes(self) -> None:
        self.hide_probes = not self.hide_probes
        self.title_text = self._title()
        self.query_one("#details-title", Static).update(self.title_text)
        self.body = visible_text(self._body())
        self.query_one("#details-body", Static).update(self.body)
        self._to_newest()
