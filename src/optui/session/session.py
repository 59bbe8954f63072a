"""The headless session: owns GPU sources, servers, benchmark runs, todo items and the
journal; publishes :class:`~optui.session.state.SessionState` snapshots. The TUI and the CLI
both drive it; it imports nothing from ``optui.ui``.

Intents (restart, run a benchmark, edit a todo) are plain async/sync methods. State changes
bump :attr:`Session.version` and wake :meth:`Session.wait_changed`, so a renderer can
coalesce bursts (one repaint for many changes).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from optui.adapters import journal_thread
from optui.adapters.aio import wait_set, within
from optui.adapters.controller_factory import build_controller
from optui.adapters.gpu_source import GpuSource, NoGpuSource
from optui.adapters.journal import Journal, JournalError, on_read_only_fs
from optui.adapters.journal_defer import DeferringJournal
from optui.adapters.journal_thread import ExperimentFeed, ExperimentsUpdate, JournalThread
from optui.config import HostConfig, LoadedConfig
from optui.core.journal import events as ev
from optui.core.journal.events import Event
from optui.core.journal.experiments import StoredResult
from optui.core.server.state import ServerStatus
from optui.core.todo.items import TodoItem
from optui.session.alerts import AlertWatcher
from optui.session.bench.service import BenchService
from optui.session.command_log import CommandLog
from optui.session.config_watch import ConfigWatcher
from optui.session.errors import SessionError
from optui.session.gpu.fleet import FleetPoller, fleet_source, with_fleet_series
from optui.session.gpu.inventory import InventoryRecorder
from optui.session.gpu.poller import GpuPoller
from optui.session.journal.health import JournalHealth
from optui.session.journal.writer import JournalWriter
from optui.session.search import SearchRunner
from optui.session.server.flag_catalogs import CatalogStore
from optui.session.server.gpu_release import gpu_holders
from optui.session.server.locks import ServerLock
from optui.session.server.restart_checks import restart_end
from optui.session.server.runtime import RestartError, ServerRuntime
from optui.session.snapshot_types import Alert, RestartEnd, RestartResult
from optui.session.ssh_hosts import shell_for, with_host_problems
from optui.session.state import (
    BENCH_ROWS_SHOWN,
    AlertRaised,
    BenchOutput,
    EventStream,
    FollowFailed,
    RestartFinished,
    SessionState,
    TodoRunFinished,
    TodoRunsView,
)
from optui.session.todo.runs import TodoRunQueue
from optui.session.todo.service import TodoService
from optui.session.todo.sync import TodoFollowService

EVENTS_KEPT = 300
#: the journal watch reads the journal at least every this many 0.5 s ticks, even when its
#: files' stamps did not change (a file system with coarse timestamps)
WATCH_ANYWAY_TICKS = 10
T = TypeVar("T")


def make_gpu_source(host: str, hcfg: HostConfig, ssh=None, interval_s: float = 1.0) -> GpuSource:
    """The GPU source for a host's configured ``gpu_source`` (``ssh``: its SshHost)."""
    source = hcfg.source
    if source == "nvidia-smi" and ssh is not None:
        from optui.adapters.gpu_smi_stream import SshNvidiaSmiSource

        return SshNvidiaSmiSource(host, ssh, interval_s=interval_s, nvidia_smi=hcfg.nvidia_smi)
    if source == "demo":
        from optui.demo.sim_gpus import DemoGpuSource

        seed = sum(host.encode()) % 1000
        return DemoGpuSource(host, gpus=hcfg.demo_gpus, state_path=hcfg.demo_state, seed=seed)
    if source == "nvml":
        from optui.adapters.gpu_nvml import NvmlGpuSource

        return NvmlGpuSource(host)
    if source == "replay":
        from optui.adapters.gpu_replay import ReplayGpuSource

        return ReplayGpuSource(host, hcfg.replay_file or "", hcfg.fields)
    if source == "none":
        return NoGpuSource(host)
    return NoGpuSource(host, f"gpu_source {source!r} is not available yet on this host")


class Session:
    """One campaign (config + journal) being watched and driven (see module doc)."""

    def __init__(self, loaded: LoadedConfig, *, actor: str = "tui", read_only: bool | None = None,
                 stop_servers_on_exit: bool = False, autostart: bool = True, observer: bool = False) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.actor = actor
        self.read_only = self.config.read_only if read_only is None else read_only
        #: read-only from the start (--read-only, the config): such a session never starts, stops or
        #: rewrites anything, not even the demo's own server at exit (another window runs it)
        self.started_read_only = self.read_only
        self.stop_servers_on_exit = stop_servers_on_exit
        #: what the operator is told after quitting (a server left running: another window started it)
        self.exit_notes: list[str] = []
        self.autostart = autostart  # one-shot CLI commands never start servers on their own
        self.state_dir = loaded.journal_path.parent
        # an observer (``optui status``) reads the journal and never writes to it
        self.observer = observer
        if observer and not loaded.journal_path.exists():
            Journal(loaded.journal_path).close()  # an empty campaign DB, then read-only
        # writes wait at most 0.5 s for another process's lock; events wait in memory meanwhile
        self.read_only_reason: str | None = None  # why the session turned read-only while running
        if observer:
            self.journal = Journal(loaded.journal_path, read_only=True)
        elif on_read_only_fs(loaded.journal_path):
            # a campaign on a read-only filesystem (a snapshot, a ro mount) can still be watched
            self.journal = Journal(loaded.journal_path, read_only=True)
            self.journal.write_error = "it is on a read-only filesystem"
            self.read_only, self.read_only_reason = True, "the journal is on a read-only filesystem"
        else:
            self.journal = DeferringJournal(loaded.journal_path)
        self.journal_health = JournalHealth(self.journal, self.touch)
        #: the journal's own thread: the async journal API below (and the UI's client) runs there
        self.journal_thread = JournalThread(self.journal)
        if self.read_only_reason:  # the status line says why from the first frame
            self.journal_health.error = f"{loaded.journal_path}: journal is read-only ({self.journal.write_error})"
        self.config_watch = ConfigWatcher(loaded.path)
        self.version = 0
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._snapshot: SessionState | None = None
        self._output: BenchOutput | None = None  # the bench output's value, rebuilt when it grew
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self._last_seq = 0
        self._todos: tuple[TodoItem, ...] = ()
        self._todos_read = False  # the whole list was read once (then only changed items)
        #: set by start(journal_off_loop=True) (the TUI): every journal call of the session's own
        #: runs on the journal thread from then on (see record, sync_journal, _watch_journal)
        self._off_loop = False
        self._sync_task: asyncio.Task | None = None
        self._sync_wanted = False
        self._results: tuple[StoredResult, ...] = ()
        self.command_log = CommandLog(on_change=self.touch)
        self._alert_watcher = AlertWatcher(self.config.mem_alert_pct)
        self.alerts: deque[Alert] = deque(maxlen=100)  # newest last
        #: what happened, said once each, in order (alerts, todo runs, follow errors, restarts):
        #: the TUI reads it with a cursor (SessionClient.new_events)
        self.events = EventStream(self.touch)
        #: servers whose restart in progress is told to an operator by its caller (no alert
        #: meanwhile), counted: a second restart refused by the lock ends before the first
        self._told_by_caller: Counter[str] = Counter()
        #: ``[export] mlflow``: experiments sent to a tracking server as they end (None: not configured)
        self.tracking = None
        if self.config.export.mlflow and not observer:
            from optui.session.journal.tracking_export import TrackingExporter

            self.tracking = TrackingExporter(self.config.export.mlflow, loaded, self._tracking_failed)
        # the services get what they use of the session, never the session (no import cycle)
        writer = JournalWriter(self.journal, self.actor, record=self.record, failed=self.journal_failed,
                               refresh=self.sync_journal, check_writable=self.check_writable,
                               thread=self.journal_thread)
        self.benches = BenchService(writer, self.config, server=self.server, shell=self.shell, on_change=self.touch,
                                    on_command=self._log_command, ensure_experiment=self.ensure_experiment)
        # the list itself (a tuple, swapped whole on the loop): readable from the journal thread
        self.todos = TodoService(writer, self.config.todo, items=lambda: self._todos, written=self._todo_written)
        self.todo_follow = TodoFollowService(writer, self.config.todo, on_change=self.touch,
                                             on_failed=lambda key, error: self.events.emit(FollowFailed(key, error)))
        self.todo_runs = TodoRunQueue(writer, self.config, server=self.server, todos=self.todos, benches=self.benches,
                                      restart=self.restart_checked, current_experiment=self.current_experiment,
                                      on_change=self.touch,
                                      on_finished=lambda outcome: self.events.emit(TodoRunFinished(outcome)))
        self.search = SearchRunner(writer, self.config, server=self.server, todos=self.todos, todo_runs=self.todo_runs,
                                   benches=self.benches, restart=self.restart_checked,
                                   gpu_snapshot=lambda host: self.gpus.snapshots.get(host), state_dir=self.state_dir,
                                   on_change=self.touch)
        self.paused = False
        from optui.session.ssh_hosts import make_ssh_hosts

        # one connection per SSH host, shared by its GPU stream, controllers, logs and benchmarks
        self.ssh_hosts = make_ssh_hosts(self.config, on_state=self.touch,
                                        on_command=lambda host, argv, rc, dt: self._log_command(host, argv, rc, dt, "ssh"))
        self.servers: dict[str, ServerRuntime] = {}
        catalogs = CatalogStore(self.state_dir)
        for name, cfg in self.config.servers.items():
            controller = build_controller(name, cfg, self.state_dir, self.shell(cfg.host))
            self.servers[name] = ServerRuntime(name, cfg, controller, self.journal, on_change=self.touch,
                                               journal_failed=self.journal_failed, on_journal=self.sync_journal,
                                               restarting_elsewhere=ServerLock(self.state_dir, name).held_by_other,
                                               gpu_holders=self._gpu_holders_on(cfg.host),
                                               catalogs=catalogs, journal_thread=self.journal_thread)
            shell = getattr(controller, "shell", None)
            if shell is not None:  # a remote shell logs its server starts only (its connection, the rest)
                shell.on_command = self.command_log.add
        sources = {}
        intervals = {}
        for host in self.config.host_names():
            hcfg = self.config.host(host)
            intervals[host] = hcfg.interval_s or self.config.refresh_s
            sources[host] = make_gpu_source(host, hcfg, self.ssh_hosts.get(host), intervals[host])
        self.gpus = GpuPoller(sources, intervals, self.touch)
        self.fleet = FleetPoller(fleet_source(self.config.fleet), self.touch) if self.config.fleet else None
        self._inventory = InventoryRecorder(self.journal)
        self.sync_journal()

    # ---------------------------------------------------------- publishing
    def _todo_written(self, item: TodoItem) -> None:
        """An item this session just added or changed, put into its list at once (on the
        journal's thread: no wake-up here; the edit's caller shows the list, the next journal
        read confirms it), so the next edit computes from it: two quick ``J`` moved an item
        once when the second read the list of before the first (a loaded machine)."""
        items = [t for t in self._todos if t.id != item.id] + [item]
        items.sort(key=lambda t: (t.order, t.id))  # the journal's ORDER BY ord, id
        self._todos = tuple(items)
        self._snapshot = None

    def touch(self) -> None:
        """Something changed: bump the version and wake renderers."""
        self.version += 1
        self._snapshot = None
        self._changed.set()

    async def wait_changed(self, seen_version: int, timeout: float | None = None) -> int:
        """Wait until :attr:`version` exceeds ``seen_version`` (or ``timeout`` seconds);
        returns the current version."""
        while self.version <= seen_version:
            self._changed.clear()
            if not await wait_set(self._changed, timeout):  # a cancel always propagates (adapters/aio.py)
                break
        return self.version

    def snapshot(self) -> SessionState:
        """The current immutable state (cached until the next change)."""
        if self._snapshot is None:
            self._snapshot = SessionState(
                version=self.version,
                hosts=tuple(self.gpus.snapshots.values()),
                servers=with_fleet_series(with_host_problems(self.servers.values(), self.ssh_hosts),
                                          self.fleet.snapshot if self.fleet is not None else None),
                todos=self._todos,
                events=tuple(self._events),
                bench=self.benches.current.view if self.benches.current else None,
                results=self._results,
                journal_path=str(self.journal.path),
                journal_error=self.journal_health.status(),
                read_only=self.read_only,
                paused=self.paused,
                config_error=self.config_watch.error,
                gpu_history=self.gpus.history.window(),
                alerts=tuple(self.alerts),
                bench_rows=tuple(self.benches.rows(last=BENCH_ROWS_SHOWN)) if self._results else (),
                bench_output=self._bench_output(),
                todo_runs=self._todo_runs_view(),
                follows=tuple(self.todo_follow.statuses.items()),
                fleet=self.fleet.snapshot if self.fleet is not None else None,
                search=self.search.progress,
            )
        return self._snapshot

    def _bench_output(self) -> BenchOutput | None:
        run = self.benches.current
        if run is None:
            return None
        cached = self._output
        if cached is None or cached.run_id != run.view.run_id or cached.total != run.total_lines:
            cached = self._output = BenchOutput(run.view.run_id, run.total_lines, tuple(run.lines))
        return cached

    def _todo_runs_view(self) -> TodoRunsView:
        runner = self.todo_runs
        steps = [(runner.current.todo_id, runner.current.step)] if runner.current is not None else []
        steps += [(i, "queued") for i in runner.queue]
        return TodoRunsView(tuple(steps), runner.running, tuple(runner.outcomes))

    def _log_command(self, host: str, argv: Sequence[str], rc: int | None, duration_s: float, what: str = "") -> None:
        """A command that ran and ended (a benchmark's, an SSH host's), into the command log."""
        self.command_log.add(host, argv, rc, duration_s, what)

    @property
    def journal_error(self) -> str | None:
        """Why the journal cannot be written (None when it can)."""
        return self.journal_health.error

    def journal_failed(self, exc: JournalError) -> None:
        """The journal could not be written: show why (the session keeps running); when it
        cannot be written any more (disk full...) the session turns read-only."""
        if self.observer:
            return
        if self._off_loop and self.journal_thread.on_thread():  # told on the loop (touch is not thread-safe)
            self.journal_thread.to_loop(self.journal_failed, exc)
            return
        if self.journal_health.failed(exc) and not self.read_only:
            self.read_only = True
            self.read_only_reason = f"the journal cannot be written: {self.journal.write_error}"
            self.touch()

    def record(self, type: str, target: str | None, data: dict, *, experiment: str | None = None) -> None:
        """Append an event as this session's actor and refresh the view of the journal. Off
        the loop (:meth:`start`), the append is queued on the journal thread in order and
        the view refreshes once it landed; a failure reaches :meth:`journal_failed`."""
        if self._off_loop:
            ts, thread = time.time(), self.journal_thread

            def append(journal: Journal) -> None:
                try:
                    journal.append(type, target, data, actor=self.actor, experiment=experiment, ts=ts)
                except JournalError as exc:
                    thread.to_loop(self.journal_failed, exc)
                thread.to_loop(self.sync_journal)

            thread.submit(append)
            return
        try:
            self.journal.append(type, target, data, actor=self.actor, experiment=experiment)
        except JournalError as exc:
            self.journal_failed(exc)
        self.sync_journal()

    def sync_journal(self) -> None:
        """Pull new events, todos and results from the DB (ours and other processes'). Off
        the loop the reads run on the journal thread and this only asks for them (one read
        in flight at a time; :meth:`synced` waits for the result)."""
        if not self._off_loop:
            self._apply_journal(self._read_journal(self.journal))
            return
        if self.journal_thread.on_thread():  # a service call on the thread: the loop applies it
            self.journal_thread.to_loop(self.sync_journal)
            return
        self._sync_wanted = True
        if self._sync_task is None or self._sync_task.done():
            self._sync_task = asyncio.get_running_loop().create_task(self._sync_off_loop(), name="journal-sync")

    async def _sync_off_loop(self) -> None:
        while self._sync_wanted:
            self._sync_wanted = False
            try:
                read = await self.journal_thread.run(self._read_journal)
            except RuntimeError:  # the thread is shut down (closing)
                return
            self._apply_journal(read)

    async def _synced_unless_locked(self) -> None:
        """:meth:`synced`, unless another process holds the journal's write lock: the events
        then wait in memory (a :class:`DeferringJournal`) behind a write that waits out the lock
        on the journal thread for up to a minute, and a restart under a locked journal
        returned only then (the server long ready); bounded by ``EDIT_WAIT_S`` for a lock met
        meanwhile."""
        if getattr(self.journal, "deferred", 0):
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(journal_thread.EDIT_WAIT_S):
                await self.synced()

    async def synced(self) -> None:
        """Wait until the session's view holds everything the journal had when this was
        called (inline when the session is not off the loop)."""
        self.sync_journal()
        while self._sync_task is not None and not self._sync_task.done():
            await asyncio.shield(self._sync_task)

    def _read_journal(self, journal: Journal) -> tuple | JournalError:
        """The SQLite half of a sync (safe on the journal thread: it reads only the fields
        that :meth:`_apply_journal` replaces, one read at a time): ``(new events, todos,
        results, the bench rows' whole history or None)``, or the JournalError that the read met.
        Off the loop the history is read here when the bench rows' cache cannot take in the
        new results (:meth:`BenchService.wants_history`), so the snapshot never reads it."""
        try:
            new = journal.events(since_seq=self._last_seq)
            todos = self._todos_after(journal, new)
            results = tuple(journal.results(limit=50))
            history = self.benches.load_history(journal) \
                if self._off_loop and self.benches.wants_history(results, new) else None
            return new, todos, results, history
        except Exception as exc:  # sqlite3 errors while another process holds a lock
            return JournalError(str(exc))

    def _apply_journal(self, read: tuple | JournalError) -> None:
        """The event loop's half of a sync: take in what :meth:`_read_journal` read."""
        if isinstance(read, JournalError):
            self.journal_failed(read)
            return
        new, todos, results, history = read
        new = [e for e in new if e.seq > self._last_seq]
        if new:
            self._events.extend(new)
            self._last_seq = new[-1].seq
            for e in new:  # a ready gate of another optui process (the CLI) checked what its server runs
                if e.type == ev.SERVER_READY and e.target in self.servers:
                    self.servers[e.target].show_config_check(e.data)
            if self.tracking is not None:
                self.tracking.events(new, self.actor)
        self._todos_read = True
        results_changed = [(r.id, r.baseline) for r in results] != [(r.id, r.baseline) for r in self._results]
        changed = bool(new) or todos != self._todos or results_changed
        if results_changed or any(e.type.startswith("bench.") for e in new):
            self.benches.results_changed(results, new)  # also a baseline pinned elsewhere
        if history is not None:
            self.benches.history_loaded(history)
        self._todos, self._results = todos, results
        if changed:
            self.touch()

    def _tracking_failed(self, message: str) -> None:
        """An ``[export] mlflow`` export failed: an alert (the next ending event tries again)."""
        self._raise_alert(Alert("export", "mlflow", message, "warning"))

    def _todos_after(self, journal: Journal, new: list) -> tuple[TodoItem, ...]:
        """The todo list once ``new`` events are in: only the items they name are read again
        (every todo write journals its ``todo.changed`` in the same transaction), so one edit
        of a 15,000-item list reads one row, not 15,000 (0.25 s per key). The whole list at
        the first read and after many changes."""
        ids = {int(e.target[5:]) for e in new
               if e.type == ev.TODO_CHANGED and e.target and e.target.startswith("todo:") and e.target[5:].isdigit()}
        if not self._todos_read or len(ids) > 1000:
            return tuple(journal.todos())
        if not ids:
            return self._todos
        now = journal.todos_now(ids)
        items = [t for t in self._todos if t.id not in now] + [t for t in now.values() if t is not None]
        items.sort(key=lambda t: (t.order, t.id))  # the journal's ORDER BY ord, id
        return tuple(items)

    # ---------------------------------------------------------- lifecycle
    async def start(self, *, journal_off_loop: bool = False) -> None:
        """Start polling and monitoring; autostart servers that are configured so.
        ``journal_off_loop`` (the TUI): from now on the session's own journal calls (events,
        syncs, the watch, todo edits through :meth:`on_journal_thread`) run on the journal
        thread, so the event loop never waits on SQLite for them."""
        if journal_off_loop:
            self.journal_thread.bind(asyncio.get_running_loop())
            self._off_loop = True
        self.record(ev.SESSION_STARTED, None, {"pid": os.getpid(), "actor": self.actor,
                                                "config": str(self.loaded.path) if self.loaded.path else None})
        self._tasks.append(asyncio.create_task(self.gpus.run(), name="gpus"))
        if self.fleet is not None:
            self._tasks.append(asyncio.create_task(self.fleet.run(), name="fleet"))
        for rt in self.servers.values():
            self._tasks.append(asyncio.create_task(rt.run(), name=f"server-{rt.name}"))
        self._tasks.append(asyncio.create_task(self._watch_journal(), name="journal-watch"))
        if not self.read_only:
            if self._off_loop:
                await self.on_journal_thread(self.todo_runs.recover)
            else:
                self.todo_runs.recover()
            try:
                from optui.session.server.interrupted import close_interrupted

                def close(journal: Journal) -> int:
                    return close_interrupted(journal, actor=self.actor,
                                             restart_locked=lambda server: ServerLock(self.state_dir, server).held_by_other())

                if await self.journal_thread.run(close) if self._off_loop else close(self.journal):
                    self.sync_journal()
            except JournalError as exc:
                self.journal_failed(exc)
            self.todo_follow.start()
        autostart = [rt for rt in self.servers.values() if rt.cfg.autostart]
        if autostart:  # let monitors re-attach (systemd asks systemctl) before deciding on autostart
            with contextlib.suppress(TimeoutError):
                await within(asyncio.gather(*(rt.attached.wait() for rt in autostart)), 15)
        for rt in self.servers.values():
            if self.autostart and rt.cfg.autostart and rt.controller.launch is None and not self.read_only:
                self._tasks.append(asyncio.create_task(self._autostart(rt), name=f"autostart-{rt.name}"))

    async def _autostart(self, rt: ServerRuntime) -> None:
        """Start an ``autostart`` server that runs nowhere, through the same per-server lock
        as every other start: two windows opened in the same second must not both launch it
        (the loser's process used to stay orphaned on the port)."""
        with contextlib.suppress(RestartError, SessionError):
            await self.restart_result(rt.name, list(rt.cfg.argv), reason="autostart", only_if_down=True)

    async def _watch_journal(self) -> None:
        stamp = None
        for tick in itertools.count(1):
            await asyncio.sleep(0.5)
            snapshots = list(self.gpus.snapshots.values())
            # the journal's SQLite work of a tick (one call on the journal thread: an idle TUI's only
            # journal work; tests/process/test_driver.py counts an idle app's wake-ups), only when it
            # can find something: a commit since the last look (the files' stamps: two stats), events
            # waiting for the lock or an inventory to journal; and every WATCH_ANYWAY_TICKS whatever
            # the stamps say (an idle window on an H200 spent two thread hops a second on nothing)
            now = self.journal.files_stamp()
            if now != stamp or tick % WATCH_ANYWAY_TICKS == 0 or self.journal_health.waiting \
                    or self._inventory.may_change(snapshots):
                stamp = now
                await self._watch_tick(snapshots)
            if tick % 4 == 0:  # every 2 s: a stat of the config file
                self._check_config()
            self._check_alerts()

    async def _watch_tick(self, snapshots: list) -> None:
        """What a watch tick read in the journal, applied: events written that waited for the
        lock, another process's commits, GPU inventory changes journaled."""
        flushed, changed, seen = await self.journal_thread.run(self._watch_reads, snapshots) if self._off_loop \
            else self._watch_reads(self.journal, snapshots)
        if isinstance(flushed, JournalError):
            self.journal_failed(flushed)
        elif flushed:  # events that waited for another process's lock
            self.journal_health.flushed()
            self.sync_journal()
        if changed:
            self.sync_journal()
        for host, data in seen:  # GPU inventory for reports (hosts.seen)
            self.record(ev.HOSTS_SEEN, host, data)

    def _watch_reads(self, journal: Journal, snapshots: list) -> tuple[bool | JournalError, bool, list]:
        """The SQLite half of a watch tick (on the journal thread off the loop): whether events
        that waited for the lock were written now (or why not), whether another connection
        committed since the last tick, and the GPU inventory changes of ``snapshots`` to
        journal as ``hosts.seen`` ((host, data) pairs)."""
        try:
            flushed: bool | JournalError = self.journal_health.flush()
        except JournalError as exc:
            flushed = exc
        try:
            changed = journal.changed()
        except Exception:
            changed = True
        seen: list = []
        with contextlib.suppress(Exception):  # an inventory read that fails is tried next tick
            seen = list(self._inventory.changes(snapshots))
        return flushed, changed, seen

    def _check_config(self) -> None:
        """The config file was edited: journal and show whether it still loads (it is
        applied at the next start only, see :mod:`optui.session.config_watch`)."""
        change = self.config_watch.check()
        if change is None or self.observer:
            return
        self.record(ev.CONFIG_CHANGED, None, change.event_data())
        self._raise_alert(Alert("config", change.path, change.message(), "information" if change.valid else "error"))

    def _raise_alert(self, alert: Alert) -> None:
        """Keep ``alert`` for the snapshot and say it once in the event stream (which wakes the readers)."""
        self.alerts.append(alert)
        self.events.emit(AlertRaised(alert))

    def _check_alerts(self) -> None:
        """Turn new transitions into alerts: journaled (unless their producer already wrote
        an ``alert`` event: hung, stalled bench) and queued for the UI."""
        state = self.snapshot()
        # a server's first state once its runtime has attached is where its transitions start:
        # what it found then (a crash the journal holds, a launch that died unwatched) is not news
        settled = tuple(s for s in state.servers if s.name not in self.servers or self.servers[s.name].attached.is_set())
        # a server whose restart's caller tells the operator how it ended (the TUI's restart
        # sequence): its crash is no second alert; the watcher learns the state it left (restart_result)
        watched = tuple(s for s in settled if s.name not in self._told_by_caller)
        if len(watched) != len(state.servers):
            state = replace(state, servers=watched)
        for alert in self._alert_watcher.check(state):
            if alert.kind not in ("hung", "bench_stalled") and not self.observer:
                self.record(ev.ALERT, alert.target, {"kind": alert.kind, "message": alert.message})
            self._raise_alert(alert)

    async def close(self) -> None:
        """Stop everything optui started for this session (benchmarks always; servers only
        with ``stop_servers_on_exit``), then the background tasks."""
        await self.search.close()
        await self.todo_runs.close()
        await self.todo_follow.close()
        await self.benches.close()
        for rt in self.servers.values():  # a read-only window never stops what another window runs
            with contextlib.suppress(Exception):
                note = await rt.shutdown(self.stop_servers_on_exit and not self.started_read_only)
                if note:
                    self.exit_notes.append(note)
        for ssh in self.ssh_hosts.values():
            with contextlib.suppress(Exception):
                await ssh.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.fleet is not None:
            await self.fleet.close()
        if self._off_loop:  # what was queued on the journal thread lands first (a stuck call: not waited for)
            with contextlib.suppress(Exception):
                await within(self.journal_thread.run(lambda j: None), 10)
                if self._sync_task is not None:
                    await within(self._sync_task, 10)
            self._off_loop = False
        self.journal_health.flush_before_close()
        with contextlib.suppress(JournalError):
            self.journal.append(ev.SESSION_ENDED, None, {"pid": os.getpid()}, actor=self.actor)
        self.journal_thread.close()
        self.journal.close()

    def kill_leftovers(self) -> None:
        """Last-resort synchronous cleanup after the event loop is gone: SIGKILL a running
        benchmark's process group, and demo-managed servers. Safe to call twice."""
        from optui.adapters import proc as procs

        self.benches.kill_leftovers()
        if self.stop_servers_on_exit and not self.started_read_only:
            for rt in self.servers.values():
                kill = getattr(rt.controller, "kill_now", None)
                local = getattr(getattr(rt.controller, "shell", None), "local", True)  # no loop left for a remote kill
                owner_elsewhere = getattr(rt.controller, "owner_elsewhere", lambda: None)
                if (kill is not None and local and rt.controller.launch is not None
                        and procs.pid_alive(rt.controller.launch.pid) and owner_elsewhere() is None):
                    kill()

    # ---------------------------------------------------------- servers
    def shell(self, host: str):
        """The :class:`~optui.adapters.shell.Shell` of ``host`` (over its shared SSH
        connection for an SSH host)."""
        return shell_for(host, self.ssh_hosts.get(host))

    def _gpu_holders_on(self, host: str) -> Callable[[float], Awaitable[set[int] | None]]:
        """A server's ``gpu_holders`` hook: :func:`~optui.session.server.gpu_release.gpu_holders` of
        ``host`` through this session's GPU poller (looked up on each call: the servers are
        built before the poller)."""
        return lambda after: gpu_holders(self.gpus, host, after)

    def server(self, name: str) -> ServerRuntime:
        """The runtime of server ``name``; SessionError when unknown."""
        rt = self.servers.get(name)
        if rt is None:
            known = ", ".join(self.servers) or "none configured"
            raise SessionError(f"unknown server {name!r} (known: {known})")
        return rt

    def check_writable(self, what: str) -> None:
        """Raise SessionError in read-only mode (with the reason when it began while running)."""
        if self.read_only:
            why = f" ({self.read_only_reason})" if self.read_only_reason else ""
            raise SessionError(f"read-only mode: {what} is disabled{why}")

    async def restart_server(self, name: str, argv: list[str], *, reason: str = "", actor: str | None = None,
                             ready_timeout_s: float | None = None, todo_id: int | None = None, only_if_down: bool = False,
                             base: Sequence[str] | None = None) -> ServerStatus:
        """Restart ``name`` with ``argv`` and wait for ready/failure; the server's status after
        (:meth:`restart_result` says what the restart did)."""
        result = await self.restart_result(name, argv, reason=reason, actor=actor, ready_timeout_s=ready_timeout_s,
                                           todo_id=todo_id, only_if_down=only_if_down, base=base)
        return result.status

    async def restart_result(self, name: str, argv: list[str], *, reason: str = "", actor: str | None = None,
                             ready_timeout_s: float | None = None, todo_id: int | None = None,
                             only_if_down: bool = False, base: Sequence[str] | None = None,
                             told_by_caller: bool = False) -> RestartResult:
        """Restart ``name`` with ``argv`` and wait for ready/failure (see
        :meth:`ServerRuntime.restart`; ``base``: the argv the change applied to, the journaled
        diff's old side); ``rollback = "auto"`` restarts a failed start with the last good
        flags. Returns what it did (:class:`~optui.session.snapshot_types.RestartResult`:
        ready, unverified, failed with its crash class, rolled back, skipped), also said once
        in the event stream as :class:`~optui.session.state.RestartFinished`.
        ``told_by_caller``: the caller tells an operator how it ended (the TUI's restart
        sequence): the server's transitions meanwhile raise no alert (its crash is journaled as
        its alert, not said twice); otherwise (autostart, todo runs, the CLI, agents) a crash
        is an alert as at any other time. Raises SessionError when it cannot begin, e.g.
        another optui process is restarting the same server (nothing is said in the stream:
        the caller reports the refusal). ``only_if_down`` (autostart): once the lock is held,
        do nothing when a launch is recorded by now (another process made it). Returns once the
        restart's events are in the journal (written on the journal thread, read back into the
        session's view)."""
        if told_by_caller:
            self._told_by_caller[name] += 1
        try:
            result = await self._restart(name, argv, reason=reason, actor=actor, ready_timeout_s=ready_timeout_s,
                                         todo_id=todo_id, only_if_down=only_if_down, base=base)
        finally:
            if told_by_caller:
                self._told_by_caller[name] -= 1
                if self._told_by_caller[name] <= 0:
                    del self._told_by_caller[name]
                self._alert_watcher.seen(self.server(name).status)  # the state it left is no transition to alert
        if told_by_caller and result.failed is not None:
            self._journal_restart_crash(result.failed)
        self.events.emit(RestartFinished(result, told_by_caller))
        return result

    async def _restart(self, name: str, argv: list[str], *, reason: str, actor: str | None,
                       ready_timeout_s: float | None, todo_id: int | None, only_if_down: bool,
                       base: Sequence[str] | None) -> RestartResult:
        """:meth:`restart_result` but the event: the lock, the restart, the automatic rollback."""
        self.check_writable("restarting a server")
        rt = self.server(name)
        lock = ServerLock(self.state_dir, name)
        if not lock.acquire():
            raise SessionError(f"{name} is being restarted by another optui process ({lock.holder()}); try again when it is done")
        try:
            if only_if_down and (rt.controller.launch is not None or await rt.controller.attach() is not None):
                return RestartResult(name, RestartEnd.SKIPPED, rt.status, tuple(argv), reason)
            await self._refuse_during_a_benchmark(name)
            status = await rt.restart(list(argv), actor=actor or self.actor, reason=reason,
                                      ready_timeout_s=ready_timeout_s, todo_id=todo_id, base=base)
        except RestartError as exc:
            raise SessionError(str(exc)) from exc
        finally:
            lock.release()
            self.sync_journal()
        # the restart's events are queued on the journal thread: it returns once they are
        # written and read back (a caller that reads the journal next finds them there)
        await self._synced_unless_locked()
        end = restart_end(status)
        if end is RestartEnd.FAILED and status.state.value == "crashed" and rt.cfg.rollback == "auto" \
                and rt.status.last_good_argv and list(rt.status.last_good_argv) != list(argv):
            back = await self._rollback(name, reason=f"auto after {status.crash_class}", actor=actor)
            return RestartResult(name, RestartEnd.ROLLED_BACK, back.status, tuple(argv), reason, failed=status)
        return RestartResult(name, end, status, tuple(argv), reason, failed=status if end is RestartEnd.FAILED else None)

    def _journal_restart_crash(self, failed: ServerStatus) -> None:
        """A crash of a restart its caller tells journaled as the ``alert`` the watcher would
        have written (said to the operator by that caller, not as a second AlertRaised)."""
        alert = self._alert_watcher.crash_alert(failed)
        if alert is not None and not self.observer:
            self.alerts.append(alert)
            self.record(ev.ALERT, alert.target, {"kind": alert.kind, "message": alert.message})

    def restart_base(self, name: str) -> tuple[tuple[str, ...], str]:
        """The argv a change of ``name``'s flags starts from and where it comes from
        ("running", "last good", "config"): :func:`optui.session.server.restart_checks.base_argv`."""
        from optui.session.server.restart_checks import base_argv

        rt = self.server(name)
        # off the loop (the TUI) the status holds the last good flags (read when the runtime
        # started, kept at every ready): no journal read on the event loop
        last_good = rt.status.last_good_argv or (None if self._off_loop else self._safe_last_good(name))
        return base_argv(rt.status, running=rt.controller.process_state() == "running", last_good=last_good)

    def _safe_last_good(self, name: str) -> list[str] | None:
        try:
            return self.journal.last_good(name)
        except Exception:  # sqlite3 errors: no last good flags to start from
            return None

    async def restart_checked(self, name: str, *, argv: list[str] | None = None, sets: Iterable[str] = (),
                              unsets: Iterable[str] = (), preset: str | None = None, reason: str = "",
                              actor: str | None = None, ready_timeout_s: float | None = None,
                              todo_id: int | None = None, plan=None, refuse_unknown: bool = False,
                              force: bool = False, told_by_caller: bool = False):
        """The restart every door uses (TUI flag editor and presets, ``optui restart``, agents):
        base flags, the catalogue's checks before anything stops, the restart and the rollback
        policy (:mod:`optui.session.server.restart_checks`). ``argv`` (already edited) or the changes
        ``preset`` → ``unsets`` → ``sets`` on the base flags; ``plan``: one made by
        :meth:`plan_restart` already; ``refuse_unknown``, ``force``: as for :meth:`plan_restart`;
        ``told_by_caller``: as for :meth:`restart_result`. Returns a RestartOutcome; raises
        SessionError (and its RestartRefused) when it cannot begin, FlagError for a malformed edit."""
        from optui.session.server.restart_checks import RestartOutcome, rollback_offer

        self.check_writable("restarting a server")
        rt = self.server(name)
        if rt.cfg.control == "none":
            raise SessionError(f"{name}: control = 'none' (optui only observes this server)")
        plan = plan or await self.plan_restart(name, argv=argv, sets=sets, unsets=unsets, preset=preset,
                                               refuse_unknown=refuse_unknown, force=force)
        # the restart says what it did (no journal read: the rollback is its own)
        result = await self.restart_result(name, list(plan.argv), reason=reason, actor=actor,
                                           ready_timeout_s=ready_timeout_s, todo_id=todo_id, base=plan.base,
                                           told_by_caller=told_by_caller)
        offer = None if result.end is RestartEnd.ROLLED_BACK else rollback_offer(rt.cfg.rollback, plan.argv, result.status)
        return RestartOutcome(plan, result, offer)

    async def plan_restart(self, name: str, *, argv: list[str] | None = None, sets: Iterable[str] = (),
                           unsets: Iterable[str] = (), preset: str | None = None, refuse_unknown: bool = False,
                           force: bool = False):
        """What :meth:`restart_checked` would run, checked (RestartRefused on a catalogue
        error; also on a flag the catalogue does not know with ``refuse_unknown``; never with
        ``force``), without restarting anything."""
        from optui.session.server.restart_checks import plan_restart

        return await plan_restart(self.server(name), argv=argv, sets=sets, unsets=unsets, preset=preset,
                                  refuse_unknown=refuse_unknown, force=force)

    def restart_refusal_now(self, name: str) -> str | None:
        """Why a restart of ``name`` would be refused, from what this process knows at once
        (read-only, control = 'none', another process's restart lock, a benchmark of this
        process running against it), or None: asked on the event loop before the flag editor
        opens (no journal read). :meth:`restart_refusal` adds another process's benchmark.
        Raises SessionError for an unknown server."""
        rt = self.server(name)
        try:
            self.check_writable("restarting a server")
            if rt.cfg.control == "none":
                raise SessionError(f"{name}: control = 'none' (optui only observes this server)")
            lock = ServerLock(self.state_dir, name)
            if lock.held_by_other():  # a few bytes of a local file: no wait worth a thread
                raise SessionError(f"{name} is being restarted by another optui process ({lock.holder()}); "
                                   "try again when it is done")
            current = self.benches.current
            if self.benches.running and current is not None and current.cfg.server == name:
                raise SessionError(f"{name}: benchmark {current.name} is running against it; abort it (A) or wait for it")
        except SessionError as exc:
            return str(exc)
        return None

    async def restart_refusal(self, name: str) -> str | None:
        """:meth:`restart_refusal_now`, and a benchmark another optui process runs against
        ``name`` (a journal read), or None. :meth:`restart_server` checks the same again when
        it begins (the answer may change meanwhile). Raises SessionError for an unknown server."""
        why = self.restart_refusal_now(name)
        if why:
            return why
        try:
            await self._refuse_during_a_benchmark(name)
        except SessionError as exc:
            return str(exc)
        return None

    async def _refuse_during_a_benchmark(self, name: str) -> None:
        """SessionError when a benchmark runs against server ``name``, in this process or
        another: a restart under it credited its results to the old experiment and mixed two
        configurations in one run (found by a break-it trial)."""
        current = self.benches.current
        if self.benches.running and current is not None and current.cfg.server == name:
            raise SessionError(f"{name}: benchmark {current.name} is running against it; abort it (A) or wait for it")
        from optui.session.server.interrupted import bench_running_on

        try:
            other = await self._read(lambda: bench_running_on(self.journal, name))
        except JournalError:
            other = None
        if other is not None:
            raise SessionError(f"{name}: benchmark {other[0]} is running against it in optui process {other[1]}; "
                               "wait for it or stop that process first")

    async def rollback(self, name: str, *, reason: str = "operator", actor: str | None = None) -> ServerStatus:
        """Restart ``name`` with its last good flags (journaled as ``rollback``); its status after
        (:meth:`rollback_result` says what the restart did)."""
        return (await self.rollback_result(name, reason=reason, actor=actor)).status

    async def rollback_result(self, name: str, *, reason: str = "operator", actor: str | None = None,
                              told_by_caller: bool = False) -> RestartResult:
        """:meth:`rollback`, returning what the restart did (as :meth:`restart_result`, said
        once in the event stream too). SessionError when there are no last good flags."""
        return await self._rollback(name, reason=reason, actor=actor, say=True, told_by_caller=told_by_caller)

    async def _rollback(self, name: str, *, reason: str, actor: str | None, say: bool = False,
                        told_by_caller: bool = False) -> RestartResult:
        self.check_writable("rolling back a server")  # before the rollback event is journaled
        rt = self.server(name)
        last_good = rt.status.last_good_argv
        if not last_good:
            stored = await self._read(lambda: self.journal.last_good(name))
            last_good = tuple(stored) if stored else None
        if not last_good:
            raise SessionError(f"{name}: no last good flags recorded yet")
        self.record(ev.ROLLBACK, name, {"reason": reason, "from_argv": list(rt.status.argv), "to_argv": list(last_good)},
                    experiment=await self._read(lambda: self.current_experiment(name)))  # closes the failed experiment
        if say:
            return await self.restart_result(name, list(last_good), reason=f"rollback: {reason}", actor=actor,
                                             told_by_caller=told_by_caller)
        # the automatic rollback inside a restart: that restart's result says it (one event)
        return await self._restart(name, list(last_good), reason=f"rollback: {reason}", actor=actor,
                                   ready_timeout_s=None, todo_id=None, only_if_down=False, base=None)

    async def stop_server(self, name: str, *, actor: str | None = None) -> None:
        """Stop ``name`` (SIGTERM, wait, SIGKILL the group)."""
        self.check_writable("stopping a server")
        rt = self.server(name)
        lock = ServerLock(self.state_dir, name)  # a stop during another process's restart would race it
        if not lock.acquire():
            raise SessionError(f"{name} is being restarted by another optui process ({lock.holder()}); try again when it is done")
        try:
            await rt.stop(actor=actor or self.actor)
        except RestartError as exc:
            raise SessionError(str(exc)) from exc
        finally:
            lock.release()
            self.sync_journal()

    # ---------------------------------------------------------- experiments
    def current_experiment(self, server: str | None = None) -> str | None:
        """The current experiment of ``server`` (None: the newest of any server), or None."""
        try:
            return self.journal.current_experiment(server) if server else self.journal.latest_experiment()
        except Exception:  # sqlite3 errors: the journal is unreadable, nothing to link to
            return None

    def ensure_experiment(self, server: str) -> str | None:
        """The current experiment of ``server``; one is opened ("observed": the flags it runs
        with now) when it has none, e.g. a server optui found running and benchmarks first."""
        exp = self.current_experiment(server)
        if exp is None and server in self.servers:
            from optui.core.journal.experiments import experiment_start

            argv = list(self.servers[server].status.argv)
            catalog = self.servers[server].cached_catalog()
            names = catalog.canonical_names([argv]) if catalog is not None else None
            try:
                exp = self.journal.new_experiment(server, experiment_start(argv, argv, "first benchmark of the running server",
                                                                           names=names, observed=True),
                                                  actor=self.actor).experiment
            except JournalError as exc:
                self.journal_failed(exc)
            self.sync_journal()
        return exp

    def add_note(self, text: str, server: str | None = None) -> str | None:
        """A free-text note, linked to the current experiment of ``server`` (or the newest
        experiment); returns that experiment id (None when there is none yet)."""
        try:
            text = ev.note_text(text)
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        exp = self.current_experiment(server)
        self.record(ev.NOTE, server, {"text": text}, experiment=exp)
        return exp

    def set_verdict(self, experiment: str, decision: str, reason: str = "") -> None:
        """Record the operator's decision on ``experiment`` (keep | reject | inconclusive)."""
        from optui.core.journal.experiments import DECISIONS

        if decision not in DECISIONS:
            raise SessionError(f"verdict must be one of {', '.join(DECISIONS)}, got {decision!r}")
        server = self.journal.experiment_server(experiment)
        if server is None:
            raise SessionError(f"unknown experiment {experiment!r}")
        self.record(ev.VERDICT, server, {"decision": decision, "reason": reason}, experiment=experiment)

    def experiments(self):
        """Every experiment of the campaign with baseline, deltas and verdict (see
        :mod:`optui.core.journal.experiments`), oldest first."""
        from optui.session.journal.export import load_experiments

        return load_experiments(self.journal)

    # -------------------------------------------- the async journal API (the journal thread)
    # For the UI (through its client): the event loop awaits these and never runs SQLite.

    def experiments_reader(self) -> Callable[[], Awaitable[ExperimentsUpdate]]:
        """A reader of the experiments for one view: each await returns an
        :class:`~optui.adapters.journal_thread.ExperimentsUpdate` (every experiment, oldest
        first, and the ids changed since this reader's previous call); only the events and
        results that are new are read and only the rows they touch rebuilt, on the journal
        thread. Raises JournalError / sqlite3 errors of the read."""
        feed = ExperimentFeed()
        return lambda: self.journal_thread.experiments(feed)

    async def query_events_async(self, flt, *, since_seq: int = 0, limit: int | None = 500) -> list[Event]:
        """:meth:`query_events` on the journal thread (a text filter scanned in bounded
        windows, :meth:`JournalThread.query`): the same events, newest first."""
        return await self.journal_thread.query(flt, since_seq=since_seq, limit=limit)

    async def set_verdict_async(self, experiment: str, decision: str, reason: str = "") -> None:
        """:meth:`set_verdict` with the journal's read and write on the journal thread (a
        lock held by another process is waited for there). Raises SessionError for a bad
        decision or an unknown experiment; a failed write is reported like any journal write."""
        from optui.core.journal.experiments import DECISIONS

        if decision not in DECISIONS:
            raise SessionError(f"verdict must be one of {', '.join(DECISIONS)}, got {decision!r}")
        server = await self.journal_thread.run(lambda j: j.experiment_server(experiment))
        if server is None:
            raise SessionError(f"unknown experiment {experiment!r}")
        try:
            await self.journal_thread.append(ev.VERDICT, server, {"decision": decision, "reason": reason},
                                             actor=self.actor, experiment=experiment)
        except JournalError as exc:
            self.journal_failed(exc)
        self.sync_journal()

    async def _read(self, fn: Callable[[], T]) -> T:
        """``fn()`` (journal reads the session's own async paths make: the restart flow's) on
        the journal thread once the session runs off the loop, inline otherwise; its result
        or what it raised."""
        if not self._off_loop:
            return fn()
        return await self.journal_thread.call(fn)

    async def on_journal_thread(self, fn: Callable[[], T]) -> T:
        """``fn()`` — a service call (``lambda: session.todos.cycle(item)``) — on the journal
        thread, then the session's view brought up to date (:meth:`synced`); what ``fn``
        returned, or what it raised (SessionError, ValueError, KeyError...). Its journal
        writes wait out another process's lock there (``JournalWriter.write``) and its
        events are recorded there; the event loop only awaits. Inline when the session is
        not off the loop (:meth:`start`)."""
        if not self._off_loop:
            return fn()
        try:
            return await self.journal_thread.call(fn)
        finally:
            await self.synced()

    async def add_note_async(self, text: str, server: str | None = None) -> str | None:
        """:meth:`add_note` with its read (the current experiment) and write on the journal
        thread; the experiment id the note is linked to. SessionError for an empty note."""
        return await self.on_journal_thread(lambda: self.add_note(text, server))

    async def current_experiment_async(self, server: str | None = None) -> str | None:
        """:meth:`current_experiment`, read on the journal thread."""
        return await self.on_journal_thread(lambda: self.current_experiment(server))

    def query_events(self, flt, *, since_seq: int = 0, limit: int | None = 500) -> list[Event]:
        """Events matching ``flt`` (an :class:`~optui.core.journal.events.EventFilter`) newer than
        ``since_seq``, newest first — the whole journal, not only the events kept in memory."""
        return self.journal.query(flt, since_seq=since_seq, limit=limit)

    # ---------------------------------------------------------- misc

    def set_paused(self, paused: bool) -> None:
        """Pause/resume GPU refresh (the journal and servers keep being watched)."""
        self.paused = paused
        self.gpus.paused = paused
        self.touch()

    def refresh_now(self) -> None:
        """Read GPUs and probe servers now."""
        self.gpus.refresh_now()
        for rt in self.servers.values():
            rt.wake()
