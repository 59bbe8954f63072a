"""The UI's one door to the session: :class:`SessionClient`.

The app and its panels read the session only through :meth:`SessionClient.snapshot` (a frozen
:class:`~optui.session.state.SessionState`) and act through the client's verbs. Its slow
calls (journal queries: a text filter scans the whole journal) are coroutines that run the
work off the event loop — on the journal's own thread where the session has one
(``Session.query_events_async``), else in a worker thread — so a caller awaits them in a
Textual worker and posts the result back as a message; the screen never waits on SQLite.

The session this client starts runs its own journal traffic on that thread too
(``Session.start(journal_off_loop=True)``), and the verbs that need the journal's answer
(the todo edits, notes) are coroutines: the service call runs on the journal thread (a lock
held by another process is waited out there) and the caller awaits it on the loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from optui.session.errors import SessionError  # what a refused verb raises (re-exported for the UI)

if TYPE_CHECKING:  # the session (pydantic, httpx, sqlite...) is imported after the first frame
    from collections.abc import Awaitable, Callable, Mapping

    from optui.config import Config, ServerConfig
    from optui.core.agent.requests import AgentRequest
    from optui.core.bench.compare import Row
    from optui.core.bench.sweep import SweepSpec
    from optui.core.flags.catalog import FlagCatalog
    from optui.core.journal.events import Event, EventFilter
    from optui.core.journal.experiments import ExperimentsUpdate
    from optui.core.server.state import ServerStatus
    from optui.core.todo.items import TodoItem
    from optui.session import Session
    from optui.session.server.restart_checks import RestartOutcome
    from optui.session.snapshot_types import RestartResult, SearchProgress
    from optui.session.ssh_hosts import SshHost
    from optui.session.state import SessionEvent, SessionState
    from optui.session.todo.runs import TodoRunPlan

__all__ = ["SessionClient", "SessionError", "pid_alive"]


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` runs on this machine (is an agent's ``optui mcp`` still
    there: :func:`optui.core.agent.requests.request_closed`'s ``alive``)."""
    from optui.session.agent_requests import pid_alive as alive  # not before the first frame

    return alive(pid)


class SessionClient:
    """What the UI may ask of one :class:`~optui.session.Session` (see module doc)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._events = session.events.reader()  # this client's cursor on the session's event stream

    # ------------------------------------------------------------ state
    @property
    def version(self) -> int:
        """The session's change counter (bumped by every change)."""
        return self._session.version

    def snapshot(self) -> SessionState:
        """Everything on screen now, as one frozen value (cached until the next change)."""
        return self._session.snapshot()

    async def wait_changed(self, seen_version: int, timeout: float | None = None) -> int:
        """Wait until the version exceeds ``seen_version`` or ``timeout`` s pass; the version."""
        return await self._session.wait_changed(seen_version, timeout=timeout)

    def new_events(self) -> tuple[SessionEvent, ...]:
        """What happened since the last call, each event once, oldest first (alerts raised,
        todo runs finished, followed lists failing, restarts finished: the frozen values of
        :mod:`optui.session.state`)."""
        return self._events.take()

    def result_rows(self) -> list[Row]:
        """Every stored result group's comparison row (medians, deltas vs baseline, scaling),
        oldest first; the same list object until the results change."""
        return self._session.benches.rows()

    @property
    def config(self) -> Config:
        """The campaign's validated configuration (servers, benchmarks, todo, keymap...)."""
        return self._session.config

    @property
    def config_path(self) -> Path | None:
        """The campaign's ``optui.toml`` (None: run without one)."""
        return self._session.loaded.path

    def command_log_records(self):
        """The commands optui ran (the command log screen's rows; a live sequence)."""
        return self._session.command_log.records

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the session's work (GPU polling, probes, journal watch, autostart), its
        journal traffic off the event loop (on the journal thread)."""
        await self._session.start(journal_off_loop=True)

    async def close(self) -> None:
        """Stop the session's work (benchmarks; demo servers) and close the journal."""
        await self._session.close()

    # ------------------------------------------------------------ verbs
    def set_paused(self, paused: bool) -> None:
        """Pause (True) or resume GPU polling."""
        self._session.set_paused(paused)

    def refresh_now(self) -> None:
        """Read every GPU source now (ctrl+l)."""
        self._session.refresh_now()

    # ------------------------------------------------------------ servers
    def server_names(self) -> list[str]:
        """The configured servers' names, in config order."""
        return list(self._session.servers)

    def server_config(self, name: str) -> ServerConfig:
        """Server ``name``'s configuration (host, control, url, argv, presets); SessionError
        when unknown."""
        return self._session.server(name).cfg

    def server_status(self, name: str) -> ServerStatus:
        """Server ``name``'s status now (state, argv, last good argv, crash class and lines);
        SessionError when unknown."""
        return self._session.server(name).status

    def restart_base(self, name: str) -> tuple[tuple[str, ...], str]:
        """The argv a restart of ``name`` edits and where it came from (``"current"``, or
        ``"last good"`` when the server is down): the CLI's base too."""
        return self._session.restart_base(name)

    def restart_preview(self, name: str, argv: list[str]) -> str:
        """Exactly what restarting ``name`` with ``argv`` would run (its controller's words)."""
        return self._session.server(name).controller.preview(argv)

    def cached_catalog(self, name: str) -> FlagCatalog | None:
        """The flag catalogue of ``name``'s program when already learned (None: not yet)."""
        return self._session.server(name).cached_catalog()

    async def learn_catalog(self, name: str, *, refresh: bool = False) -> tuple[FlagCatalog | None, str | None]:
        """Learn (or, ``refresh``, relearn) the flag catalogue of ``name``'s program from its
        ``--help`` (slow: a subprocess, maybe over SSH). Returns ``(catalog, None)``, or
        ``(None, why)`` when it cannot be learned (the CatalogError's message)."""
        from optui.session.server.flag_catalogs import CatalogError

        try:
            return await self._session.server(name).learn_catalog(refresh=refresh), None
        except CatalogError as exc:
            return None, str(exc)

    def server_log(self, name: str) -> tuple[list[str], str]:
        """``name``'s recent log lines (oldest first) and where its full log is (a path, the
        systemd unit's journal, or ``"not started"``)."""
        rt = self._session.server(name)
        launch = rt.controller.launch
        where = (launch.log_path or f"journal of {getattr(rt.controller, 'unit', '?')}") if launch else "not started"
        return list(rt.log_tail), where

    def restart_refusal_now(self, name: str) -> str | None:
        """Why a restart of ``name`` would be refused, from what this process knows at once
        (read-only, a benchmark of this window running against it, another process restarting
        it), or None: asked before the flag editor opens, without a journal read."""
        return self._session.restart_refusal_now(name)

    async def restart_refusal(self, name: str) -> str | None:
        """Why a restart of ``name`` would be refused now (read-only, a benchmark running
        against it, another process restarting it...), asked before the flag editor opens; None
        when nothing stands in the way."""
        return await self._session.restart_refusal(name)

    async def restart_checked(self, name: str, argv: list[str], reason: str) -> RestartOutcome:
        """Restart ``name`` with ``argv`` after every door's checks (flag catalogue before
        anything stops, rollback policy); waits until it is ready or failed. Returns the
        session's RestartOutcome (``result``: what the restart did, its ``end`` and failed
        status; ``offer``: the last good flags to offer); raises SessionError or FlagError
        when refused."""
        # this window tells the operator how it ended (ServerActions.report_restart): no crash alert too
        return await self._session.restart_checked(name, argv=list(argv), reason=reason, told_by_caller=True)

    async def rollback_warning(self, name: str, argv: tuple[str, ...] | list[str]) -> str | None:
        """What the journal's experiments say against rolling ``name`` back to ``argv``
        (measured worse, rejected: :func:`~optui.core.journal.experiments.rollback_warning`),
        read on the journal thread; None when nothing. Raises what the journal raises."""
        from optui.core.journal.experiments import rollback_warning

        update = await self._session.experiments_reader()()
        return rollback_warning(update.experiments, name, argv)

    async def rollback(self, name: str, *, reason: str = "operator") -> RestartResult:
        """Restart ``name`` with its last good flags; waits; what the restart did.
        SessionError when refused (no last good flags, read-only, busy)."""
        return await self._session.rollback_result(name, reason=reason, told_by_caller=True)

    async def stop_server(self, name: str) -> None:
        """Stop ``name`` (SIGTERM its process group, then SIGKILL); waits until it is down."""
        await self._session.stop_server(name)

    # ------------------------------------------------------------ benchmarks
    def bench_server(self, name: str) -> str:
        """The server benchmark preset ``name`` runs against; SessionError when unknown."""
        return self._session.benches.preset(name).server

    @property
    def bench_running(self) -> bool:
        """True while a benchmark runs."""
        return bool(self._session.benches.running)

    def run_bench(self, name: str, *, sweep: SweepSpec | None = None, repeats: int = 1) -> None:
        """Start benchmark preset ``name`` (a sweep, ``repeats`` runs) in the background;
        SessionError when refused (read-only, one already running, unknown preset)."""
        self._session.benches.run(name, sweep=sweep, repeats=repeats)

    def abort_bench(self) -> bool:
        """Kill the running benchmark's process group; False when none runs."""
        return self._session.benches.abort()

    def default_sweep(self, name: str) -> SweepSpec:
        """Preset ``name``'s configured sweep (else the default concurrency list);
        SessionError when unknown, ValueError when its sweep is malformed."""
        return self._session.benches.default_sweep(name)

    async def pin_baseline(self, result_id: int) -> None:
        """Pin stored result ``result_id`` as its workload's baseline (written on the journal
        thread); SessionError when refused."""
        await self._session.benches.pin_baseline_async(result_id)

    @property
    def search_running(self) -> bool:
        """A flag search runs in this session (its failed trials offer no rollback)."""
        return self._session.search.running

    async def search_status(self) -> dict | None:
        """The newest flag search as its events tell it (``optui search status``'s dict), read
        on the journal thread; None: no search ran."""
        from optui.session.search import search_status

        return await self._session.on_journal_thread(lambda: search_status(self._session.journal))

    async def baseline_for(self, result):
        """The pinned (or first) baseline of ``result``'s workload, or None (a journal read
        on the journal thread once the session runs off the loop)."""
        return await self._session.on_journal_thread(lambda: self._session.benches.baseline_for(result))

    # ------------------------------------------------------------ todo list
    async def add_todo(self, text: str) -> TodoItem:
        """Add an item with ``text``; the new item. SessionError / ValueError when refused."""
        todos = self._session.todos
        return await self._session.on_journal_thread(lambda: todos.add(text))

    async def update_todo(self, item: TodoItem, **changes) -> None:
        """Change ``item``'s fields (``content=``...); SessionError / ValueError / KeyError."""
        todos = self._session.todos
        await self._session.on_journal_thread(lambda: todos.update(item, **changes))

    async def cycle_todo(self, item: TodoItem):
        """Advance ``item``'s status (pending → in progress → done); ``(item, warning or None)``."""
        todos = self._session.todos
        return await self._session.on_journal_thread(lambda: todos.cycle(item))

    async def cancel_todo(self, item: TodoItem) -> None:
        """Mark ``item`` cancelled."""
        todos = self._session.todos
        await self._session.on_journal_thread(lambda: todos.cancel(item))

    async def bump_todo_priority(self, item: TodoItem, *, up: bool) -> None:
        """Raise (``up``) or lower ``item``'s priority one step."""
        todos = self._session.todos
        await self._session.on_journal_thread(lambda: todos.bump_priority(item, up=up))

    async def move_todo(self, item: TodoItem, delta: int) -> None:
        """Move ``item`` ``delta`` places in the list (negative: up)."""
        todos = self._session.todos
        await self._session.on_journal_thread(lambda: todos.move(item, delta))

    async def delete_todo(self, item: TodoItem) -> None:
        """Delete ``item`` (:meth:`undo_delete_todo` brings it back)."""
        todos = self._session.todos
        await self._session.on_journal_thread(lambda: todos.delete(item))

    async def undo_delete_todo(self) -> TodoItem | None:
        """Restore the last deleted item; None when there is nothing to undo."""
        return await self._session.on_journal_thread(self._session.todos.undo_delete)

    async def set_todo_experiment(self, item: TodoItem, experiment: dict | None) -> None:
        """Attach ``experiment`` (the editor's dict) to ``item``, or remove it (None / empty)."""
        todos = self._session.todos
        await self._session.on_journal_thread(lambda: todos.set_experiment(item, experiment))

    async def todo_history(self, item: TodoItem) -> list[Event]:
        """Every journaled change of ``item``, oldest first (read on the journal thread)."""
        todos = self._session.todos
        return await self._session.on_journal_thread(lambda: todos.history(item))

    async def ack_todo_conflict(self, item: TodoItem) -> None:
        """Acknowledge ``item``'s flagged concurrent edit (the flag goes, the history stays)."""
        todos = self._session.todos
        await self._session.on_journal_thread(lambda: todos.ack_conflict(item))

    def queue_experiments(self, items: list[TodoItem] | None) -> list[int]:
        """Queue ``items``' experiments (None: every pending item that has one); the todo ids
        newly queued. SessionError when refused."""
        runner = self._session.todo_runs
        return runner.queue_pending() if items is None else runner.enqueue(items)

    def plan_experiments(self, items: list[TodoItem] | None) -> list[TodoRunPlan]:
        """What running ``items``' experiments (None: those ``X`` queues) would do, one after
        another (each plan against the flags the ones before leave running), to show before
        anything restarts; SessionError when one cannot run."""
        runner = self._session.todo_runs
        return runner.plans(runner.pending() if items is None else items)

    def experiments_failed_before(self) -> str:
        """The pending items whose experiment failed last time, which ``X`` leaves out
        (``"#3 oom, #5 bad_flag"``; empty: none)."""
        return self._session.todo_runs.failed_before_text()

    def stop_experiments(self, elsewhere: SearchProgress | None = None) -> bool:
        """Empty the experiment queue and abort its benchmark, and end a flag search (its
        trials are these experiments), this session's or ``elsewhere``, the
        :meth:`search_elsewhere` another optui process runs (asked through the journal);
        False when none ran."""
        stopped = self._session.search.stop() | self._session.todo_runs.stop()
        if elsewhere is not None:
            from optui.session.search import ask_to_stop

            session = self._session
            if session.journal_thread.bound:  # the TUI: never SQLite on the loop
                session.journal_thread.submit(lambda journal: ask_to_stop(journal, elsewhere, session.actor))
            else:
                ask_to_stop(session.journal, elsewhere, session.actor)
            stopped = True
        return stopped

    async def search_elsewhere(self) -> SearchProgress | None:
        """The flag search another optui process runs on this campaign (a
        :class:`~optui.session.snapshot_types.SearchProgress`), read on the journal thread; None: none."""
        import os

        from optui.session.search import running_elsewhere

        return await self._session.on_journal_thread(lambda: running_elsewhere(self._session.journal, os.getpid()))

    def follow_todo_list(self, spec: str) -> None:
        """Follow an agent's todo list (``claude:FILE``, ``opencode:DB#SESSION``...) for this
        session; SessionError for a bad spec."""
        self._session.todo_follow.follow(spec)

    async def unfollow_todo_list(self, key: str) -> None:
        """Stop following ``key`` (its items stay in the list)."""
        await self._session.todo_follow.unfollow(key)

    def write_beside_journal(self, filename: str, text: str) -> Path:
        """Write ``text`` to ``filename`` in the campaign's state directory (0600, never half
        a file, a symlink at the path replaced, not followed); the path. OSError."""
        from optui.session.journal.export import write_atomic

        path = Path(self._session.state_dir) / filename
        write_atomic(path, text)
        return path

    # ------------------------------------------------------------ journal
    async def current_experiment(self, server: str | None) -> str | None:
        """The experiment a note about ``server`` would be linked to (None: none open); read
        on the journal thread."""
        return await self._session.current_experiment_async(server)

    async def add_note(self, text: str, *, server: str | None = None) -> None:
        """Journal a free-text note, linked to ``server``'s current experiment (read and
        written on the journal thread); SessionError when refused (read-only, empty)."""
        await self._session.add_note_async(text, server=server)

    async def decide_agent_request(self, request: AgentRequest, decision: str) -> None:
        """Journal the operator's ``decision`` (approved/denied) on an agent's ``request``
        (:mod:`optui.core.agent.requests`) as this window's actor, on the journal thread;
        SessionError when read-only, RequestClosed when it no longer waits (decided in another
        window, timed out, withdrawn: nothing journaled)."""
        from optui.session.agent_requests import decide_request

        session = self._session
        session.check_writable("answering an agent's request")
        await session.on_journal_thread(lambda: decide_request(session.journal, request.seq, decision,
                                                               actor=session.actor))

    async def export_report(self, fmt: str = "md") -> Path:
        """Write the findings report (every experiment) into the campaign directory; its
        path. Its reads (every experiment of the campaign) and the file's write run on the
        session's journal thread. OSError / ValueError (unknown ``fmt``)."""
        from optui.session.journal.export import export

        session = self._session
        return await session.on_journal_thread(lambda: export(session.journal, session.loaded, fmt))

    # ------------------------------------------------------------ SSH hosts
    def ssh_hosts(self) -> Mapping[str, SshHost]:
        """The SSH hosts by name (read their ``state``, ``host_key``, ``target``, ``error``)."""
        return self._session.ssh_hosts

    def trust_host_key(self, host: str) -> None:
        """Append ``host``'s presented key to known_hosts and connect; SessionError when
        there is no unknown key to trust or the key changed."""
        from optui.session.ssh_hosts import trust_host_key

        trust_host_key(self._session.ssh_hosts[host])

    def reconnect_host(self, host: str) -> None:
        """Skip ``host``'s backoff and reconnect now."""
        self._session.ssh_hosts[host].retry_now()

    # ------------------------------------------------------------ slow calls (off the loop)
    async def query_events(self, flt: EventFilter, *, since_seq: int = 0, limit: int | None = 500) -> list[Event]:
        """The journal's events matching ``flt`` newer than ``since_seq``, newest first, at
        most ``limit``; on the session's journal thread (a text filter in bounded windows).
        Raises what the journal raises (a locked or broken file: ``JournalError``,
        ``sqlite3.Error``)."""
        return await self._session.query_events_async(flt, since_seq=since_seq, limit=limit)

    def experiments_reader(self) -> Callable[[], Awaitable[ExperimentsUpdate]]:
        """A reader of the journal's experiments for one view: each await reads only what is
        new, on the journal thread (``Session.experiments_reader``)."""
        return self._session.experiments_reader()

    async def set_verdict(self, experiment: str, decision: str, reason: str = "") -> None:
        """Record the operator's verdict on ``experiment``, the journal read and write off
        the event loop. Raises SessionError for a bad decision or an unknown experiment."""
        await self._session.set_verdict_async(experiment, decision, reason)
