"""``[export] mlflow = URI``: each experiment logged to the MLflow tracking server as it ends
(its benchmark finished, its start failed, a verdict recorded), off the event loop, one
export at a time (:func:`optui.adapters.mlflow_export.export_runs`; idempotent, so a
re-export after another run of the same experiment updates its MLflow run)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

from optui.config import LoadedConfig
from optui.core.journal import events as ev
from optui.core.journal.events import Event

#: the events after which an experiment's record is complete enough to send (again)
ENDING_EVENTS = frozenset({ev.BENCH_FINISHED, ev.SERVER_FAILED, ev.VERDICT})


class TrackingExporter:
    """Sends the experiments that ended to ``uri``. ``on_error(message)`` is told when an
    export fails (the session shows it as an alert); the next ending event tries again."""

    def __init__(self, uri: str, loaded: LoadedConfig, on_error: Callable[[str], None],
                 on_done: Callable[[tuple[str, ...]], None] | None = None) -> None:
        self.uri = uri
        self._loaded = loaded
        self._on_error = on_error
        self._on_done = on_done
        self._pending: set[str] = set()
        self._task: asyncio.Task | None = None

    def events(self, new: Iterable[Event], actor: str) -> None:
        """Take in the journal's new events; the experiments of ``actor``'s ending events (this
        session's: two windows on one campaign do not both send) are exported soon."""
        ended = {e.experiment for e in new if e.type in ENDING_EVENTS and e.experiment and e.actor == actor}
        if not ended:
            return
        self._pending |= ended
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="mlflow-export")

    async def idle(self) -> None:
        """Wait until nothing is pending or being sent (tests, shutdown)."""
        while self._task is not None and not self._task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)

    async def _run(self) -> None:
        while self._pending:
            ids, self._pending = tuple(sorted(self._pending)), set()
            try:
                await asyncio.to_thread(self._export, ids)
            except Exception as exc:  # noqa: BLE001 - reported, never a crash of the session
                self._on_error(f"MLflow export of {', '.join(ids)} to {self.uri}: {exc}")
            else:
                if self._on_done is not None:
                    self._on_done(ids)

    def _export(self, ids: tuple[str, ...]) -> None:
        """On a worker thread, with a read-only connection of its own."""
        from optui.adapters.journal import Journal
        from optui.adapters.mlflow_export import export_runs
        from optui.session.journal.export import campaign_name, tracked_runs

        journal = Journal(self._loaded.journal_path, read_only=True)
        try:
            runs = tracked_runs(journal, self._loaded, only=ids)
        finally:
            journal.close()
        export_runs(self.uri, campaign_name(self._loaded), runs)
