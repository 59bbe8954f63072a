"""The immutable snapshot of a session that the UI (and ``optui status``) renders."""

from __future__ import annotations

from dataclasses import dataclass

from optui.adapters.journal import StoredResult
from optui.core.events import Event
from optui.core.gpu import HostSnapshot
from optui.core.server_state import ServerStatus
from optui.core.todo import TodoItem
from optui.session.bench_run import BenchView


@dataclass(frozen=True, slots=True)
class SessionState:
    """Everything on screen at one moment.

    ``events`` are the newest journal events, oldest first; ``results`` the newest stored
    bench results, newest first; ``journal_error`` is set when the journal cannot be
    written (disk full: the session turned read-only; locked by another process: events
    wait) — the session keeps running; ``config_error`` when the config file was edited
    into something that does not load (the session keeps the config it started with).
    """

    version: int
    hosts: tuple[HostSnapshot, ...]
    servers: tuple[ServerStatus, ...]
    todos: tuple[TodoItem, ...]
    events: tuple[Event, ...]
    bench: BenchView | None
    results: tuple[StoredResult, ...]
    journal_path: str
    journal_error: str | None
    read_only: bool
    paused: bool
    config_error: str | None = None

    def server(self, name: str) -> ServerStatus | None:
        """The status of server ``name`` or None."""
        return next((s for s in self.servers if s.name == name), None)
