"""The command log (``@``): every command optui ran for you — local or remote, server
starts, benchmark clients, systemctl/journalctl, SSH commands — with host, exit code and
duration, newest first. Secrets in argv are masked before they are recorded."""

from __future__ import annotations

import shlex
import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from optui.ui.colors import focus_now, style
from optui.ui.widgets.key_bar import screen_key_bar


class CommandLogScreen(ModalScreen[None]):
    """Shows ``records`` (CommandRecord, oldest first), newest on top."""

    BINDINGS = [Binding("escape,q,at", "close", "Close", id="commands.close")]
    DEFAULT_CSS = """
    CommandLogScreen { align: center middle; }
    CommandLogScreen > Vertical { width: 96%; height: 90%; border: thick $primary; background: $surface; }
    CommandLogScreen DataTable { height: 1fr; }
    """

    def __init__(self, records) -> None:
        super().__init__()
        self.records = list(records)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Commands optui ran ({len(self.records)}, newest first) — Esc closes", markup=False)
            yield DataTable(id="command-table", cursor_type="row", zebra_stripes=True)
        yield screen_key_bar()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label, width in (("time", "time", 8), ("host", "host", 12), ("what", "what", 12),
                                  ("rc", "exit", 7), ("dur", "time s", 7), ("argv", "command", None)):
            table.add_column(label, key=key, width=width)
        for i, r in enumerate(reversed(self.records)):
            rc = Text(r.exit_text(), style=style(self.app, "state-failed") if r.returncode not in (0, None) else "")
            table.add_row(time.strftime("%H:%M:%S", time.localtime(r.ts)), r.host, r.what, rc, "" if r.running else f"{r.duration_s:.2f}",
                          Text(shlex.join(r.argv)), key=str(i))
        focus_now(table)

    def action_close(self) -> None:
        self.dismiss(None)
