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
import os
import time
from collections import deque

from optui.adapters.controller import ObservedController, ProcessController
from optui.adapters.gpu_source import GpuSource, NoGpuSource
from optui.adapters.journal import Journal, JournalError, StoredResult
from optui.config import HostConfig, LoadedConfig
from optui.core import events as ev
from optui.core.bench_result import BenchResult
from optui.core.events import Event
from optui.core.todo import Priority, TodoItem, TodoStatus, lower_priority, next_status, raise_priority
from optui.session.bench_run import BenchRun
from optui.session.gpu_poller import GpuPoller
from optui.session.locks import ServerLock
from optui.session.server_runtime import RestartError, ServerRuntime
from optui.session.state import SessionState

EVENTS_KEPT = 300


class SessionError(Exception):
    """An intent that cannot be carried out (read-only, unknown name, busy...); the
    message is meant for the operator."""


def make_gpu_source(host: str, hcfg: HostConfig) -> GpuSource:
    """The GPU source for a host's configured ``gpu_source``."""
    source = hcfg.source
    if source == "demo":
        from optui.demo.rack import DemoGpuSource

        seed = sum(host.encode()) % 1000
        return DemoGpuSource(host, gpus=hcfg.demo_gpus, state_path=hcfg.demo_state, seed=seed)
    if source == "nvml":
        from optui.adapters.gpu_nvml import NvmlGpuSource

        return NvmlGpuSource(host)
    if source == "replay":
        from optui.adapters.gpu_replay import ReplayGpuSource

        return ReplayGpuSource(host, hcfg.replay_file or "")
    if source == "none":
        return NoGpuSource(host)
    return NoGpuSource(host, f"gpu_source {source!r} is not available yet on this host")


class Session:
    """One campaign (config + journal) being watched and driven (see module doc)."""

    def __init__(self, loaded: LoadedConfig, *, actor: str = "tui", read_only: bool | None = None,
                 stop_servers_on_exit: bool = False) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.actor = actor
        self.read_only = self.config.read_only if read_only is None else read_only
        self.stop_servers_on_exit = stop_servers_on_exit
        self.state_dir = loaded.journal_path.parent
        self.journal = Journal(loaded.journal_path)
        self.journal_error: str | None = None
        self.version = 0
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._snapshot: SessionState | None = None
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self._last_seq = 0
        self._todos: tuple[TodoItem, ...] = ()
        self._results = ()
        self._baselines: dict[str, StoredResult | None] = {}
        self.bench: BenchRun | None = None
        self._bench_task: asyncio.Task | None = None
        self._deleted: list[int] = []  # undo stack of deleted todo ids
        self.paused = False
        self.servers: dict[str, ServerRuntime] = {}
        for name, cfg in self.config.servers.items():
            if cfg.control == "process":
                controller = ProcessController(name, self.state_dir, cwd=cfg.cwd, env=cfg.env, log_file=cfg.log_file)
            else:
                controller = ObservedController(name)
            self.servers[name] = ServerRuntime(name, cfg, controller, self.journal, on_change=self._touch,
                                               journal_failed=self._journal_failed, on_journal=self._sync_journal)
        sources = {}
        intervals = {}
        for host in self.config.host_names():
            hcfg = self.config.host(host)
            sources[host] = make_gpu_source(host, hcfg)
            intervals[host] = hcfg.interval_s or self.config.refresh_s
        self.gpus = GpuPoller(sources, intervals, self._touch)
        self._sync_journal()

    # ---------------------------------------------------------- publishing
    def _touch(self) -> None:
        self.version += 1
        self._snapshot = None
        self._changed.set()

    async def wait_changed(self, seen_version: int, timeout: float | None = None) -> int:
        """Wait until :attr:`version` exceeds ``seen_version`` (or ``timeout`` seconds);
        returns the current version."""
        while self.version <= seen_version:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                break
        return self.version

    def snapshot(self) -> SessionState:
        """The current immutable state (cached until the next change)."""
        if self._snapshot is None:
            self._snapshot = SessionState(
                version=self.version,
                hosts=tuple(self.gpus.snapshots.values()),
                servers=tuple(rt.status for rt in self.servers.values()),
                todos=self._todos,
                events=tuple(self._events),
                bench=self.bench.view if self.bench else None,
                results=self._results,
                journal_path=str(self.journal.path),
                journal_error=self.journal_error,
                read_only=self.read_only,
                paused=self.paused,
            )
        return self._snapshot

    def _journal_failed(self, exc: JournalError) -> None:
        if self.journal_error != str(exc):
            self.journal_error = str(exc)
            self._touch()

    def _record(self, type: str, target: str | None, data: dict) -> None:
        try:
            self.journal.append(type, target, data, actor=self.actor)
        except JournalError as exc:
            self._journal_failed(exc)
        self._sync_journal()

    def _sync_journal(self) -> None:
        """Pull new events, todos and results from the DB (ours and other processes')."""
        try:
            new = self.journal.events(since_seq=self._last_seq)
            todos = tuple(self.journal.todos())
            results = tuple(self.journal.results(limit=50))
        except Exception as exc:  # sqlite3 errors while another process holds a lock
            self._journal_failed(JournalError(str(exc)))
            return
        if new:
            self._events.extend(new)
            self._last_seq = new[-1].seq
        changed = bool(new) or todos != self._todos or len(results) != len(self._results)
        if len(results) != len(self._results):
            self._baselines.clear()
        self._todos, self._results = todos, results
        if changed:
            self._touch()

    # ---------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start polling and monitoring; autostart servers that are configured so."""
        self._record(ev.SESSION_STARTED, None, {"pid": os.getpid(), "actor": self.actor,
                                                "config": str(self.loaded.path) if self.loaded.path else None})
        self._tasks.append(asyncio.create_task(self.gpus.run(), name="gpus"))
        for rt in self.servers.values():
            self._tasks.append(asyncio.create_task(rt.run(), name=f"server-{rt.name}"))
        self._tasks.append(asyncio.create_task(self._watch_journal(), name="journal-watch"))
        await asyncio.sleep(0)  # let monitors re-attach before deciding on autostart
        for rt in self.servers.values():
            if rt.cfg.autostart and rt.controller.launch is None and not self.read_only:
                self._tasks.append(asyncio.create_task(self._autostart(rt), name=f"autostart-{rt.name}"))

    async def _autostart(self, rt: ServerRuntime) -> None:
        with contextlib.suppress(RestartError):
            await rt.restart(list(rt.cfg.argv), actor=self.actor, reason="autostart")

    async def _watch_journal(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            try:
                changed = self.journal.changed()
            except Exception:
                changed = True
            if changed:
                self._sync_journal()

    async def close(self) -> None:
        """Stop everything optui started for this session (benchmarks always; servers only
        with ``stop_servers_on_exit``), then the background tasks."""
        if self.bench is not None and self.bench.view.status == "running":
            self.abort_bench()
            if self._bench_task is not None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(self._bench_task), 5.0)
        for rt in self.servers.values():
            with contextlib.suppress(Exception):
                await rt.shutdown(self.stop_servers_on_exit)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        with contextlib.suppress(JournalError):
            self.journal.append(ev.SESSION_ENDED, None, {"pid": os.getpid()}, actor=self.actor)
        self.journal.close()

    def kill_leftovers(self) -> None:
        """Last-resort synchronous cleanup after the event loop is gone: SIGKILL a running
        benchmark's process group, and demo-managed servers. Safe to call twice."""
        from optui.adapters import proc as procs

        if self.bench is not None and self.bench._command is not None and self.bench._command.pid:
            if procs.group_alive(self.bench._command.pid):
                procs.kill_group_now(self.bench._command.pid)
        if self.stop_servers_on_exit:
            for rt in self.servers.values():
                kill = getattr(rt.controller, "kill_now", None)
                if kill is not None and rt.controller.launch is not None and procs.pid_alive(rt.controller.launch.pid):
                    kill()

    # ---------------------------------------------------------- servers
    def _server(self, name: str) -> ServerRuntime:
        rt = self.servers.get(name)
        if rt is None:
            known = ", ".join(self.servers) or "none configured"
            raise SessionError(f"unknown server {name!r} (known: {known})")
        return rt

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise SessionError(f"read-only mode: {what} is disabled")

    async def restart_server(self, name: str, argv: list[str], *, reason: str = "", actor: str | None = None):
        """Restart ``name`` with ``argv`` and wait for ready/failure (see
        :meth:`ServerRuntime.restart`). Raises SessionError when it cannot begin, e.g. another
        optui process is restarting the same server."""
        self._check_writable("restarting a server")
        rt = self._server(name)
        lock = ServerLock(self.state_dir, name)
        if not lock.acquire():
            raise SessionError(f"{name} is being restarted by another optui process ({lock.holder()}); try again when it is done")
        try:
            status = await rt.restart(list(argv), actor=actor or self.actor, reason=reason)
        except RestartError as exc:
            raise SessionError(str(exc)) from exc
        finally:
            lock.release()
            self._sync_journal()
        if status.state.value == "crashed" and rt.cfg.rollback == "auto" and rt.status.last_good_argv \
                and list(rt.status.last_good_argv) != list(argv):
            return await self.rollback(name, reason=f"auto after {status.crash_class}")
        return status

    async def rollback(self, name: str, *, reason: str = "operator", actor: str | None = None):
        """Restart ``name`` with its last good flags (journaled as ``rollback``)."""
        rt = self._server(name)
        last_good = rt.status.last_good_argv or (self.journal.last_good(name) and tuple(self.journal.last_good(name)))
        if not last_good:
            raise SessionError(f"{name}: no last good flags recorded yet")
        self._record(ev.ROLLBACK, name, {"reason": reason, "from_argv": list(rt.status.argv), "to_argv": list(last_good)})
        return await self.restart_server(name, list(last_good), reason=f"rollback: {reason}", actor=actor)

    async def stop_server(self, name: str, *, actor: str | None = None) -> None:
        """Stop ``name`` (SIGTERM, wait, SIGKILL the group)."""
        self._check_writable("stopping a server")
        await self._server(name).stop(actor=actor or self.actor)
        self._sync_journal()

    # ---------------------------------------------------------- benchmarks
    def run_bench(self, name: str) -> BenchRun:
        """Start benchmark preset ``name`` in the background; returns the run. Raises
        SessionError for an unknown preset, a run in progress, or read-only mode."""
        self._check_writable("running a benchmark")
        cfg = self.config.benchmarks.get(name)
        if cfg is None:
            known = ", ".join(self.config.benchmarks) or "none configured"
            raise SessionError(f"unknown benchmark {name!r} (known: {known})")
        if self.bench is not None and self.bench.view.status == "running":
            raise SessionError(f"benchmark {self.bench.name} is still running (x aborts it)")
        rt = self._server(cfg.server)
        api_key = os.environ.get(rt.cfg.api_key_env) if rt.cfg.api_key_env else None
        run = BenchRun(name, cfg, base_url=rt.cfg.url, max_lines=self.config.log_max_lines, on_change=self._touch,
                       server_healthy=lambda: rt.status.state.is_up, api_key=api_key)
        self.bench = run
        self._bench_task = asyncio.create_task(self._run_bench(run, rt), name=f"bench-{name}")
        return run

    async def _run_bench(self, run: BenchRun, rt: ServerRuntime) -> None:
        self._record(ev.BENCH_STARTED, run.cfg.server, {"bench": run.name, "argv": run.cfg.argv,
                                                        "builtin": run.cfg.builtin.model_dump() if run.cfg.builtin else None,
                                                        "server_argv": list(rt.status.argv)})
        try:
            view = await run.run()
        except asyncio.CancelledError:
            run._update(status="aborted", error="aborted", finished_at=time.time())
            view = run.view
        for result in view.results:
            try:
                self.journal.add_result(result, server=run.cfg.server, bench=run.name)
            except JournalError as exc:
                self._journal_failed(exc)
        self._record(ev.BENCH_FINISHED, run.cfg.server, {
            "bench": run.name, "status": view.status, "error": view.error,
            "duration_s": round((view.finished_at or time.time()) - view.started_at, 3),
            "result": view.results[0].to_json() if len(view.results) == 1 else None,
            "results": [r.to_json() for r in view.results] if len(view.results) > 1 else None,
            "server_argv": list(rt.status.argv),
        })

    def baseline_for(self, result: BenchResult) -> StoredResult | None:
        """The stored baseline of ``result``'s workload (pinned, else the first ok one)."""
        key = result.workload.key()
        if key not in self._baselines:
            try:
                self._baselines[key] = self.journal.baseline_for(key)
            except Exception:
                self._baselines[key] = None
        return self._baselines[key]

    def abort_bench(self) -> bool:
        """Abort the running benchmark (kills its process group); False when none runs."""
        if self.bench is None or self.bench.view.status != "running":
            return False
        self.bench.abort()
        if self.bench.cfg.builtin is not None and self._bench_task is not None:
            self._bench_task.cancel()
        return True

    async def wait_bench(self) -> None:
        """Wait for the current benchmark task to finish (tests, CLI)."""
        if self._bench_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._bench_task

    # ---------------------------------------------------------- todo
    def add_todo(self, content: str, priority: str = "medium") -> TodoItem:
        """Add a todo item (journaled)."""
        item = self._todo_write(lambda: self.journal.add_todo(content, priority=priority, actor=self.actor))
        return item

    def update_todo(self, item: TodoItem, op: str = "edit", **changes) -> TodoItem:
        """Change fields of ``item`` as the operator saw it (concurrent edits flagged)."""
        return self._todo_write(lambda: self.journal.update_todo(item.id, actor=self.actor, expected=item, op=op, **changes))

    def cycle_todo(self, item: TodoItem) -> tuple[TodoItem, str | None]:
        """pending → in_progress → completed → pending. Returns the item and a warning
        when more than one item is now in progress (warn, don't block)."""
        new = next_status(item.status)
        updated = self.update_todo(item, op="status", status=new)
        warning = None
        if new is TodoStatus.IN_PROGRESS:
            others = [t for t in self._todos if t.status is TodoStatus.IN_PROGRESS and t.id != item.id]
            if others:
                warning = f"{len(others) + 1} items are in progress"
        return updated, warning

    def cancel_todo(self, item: TodoItem) -> TodoItem:
        """Mark cancelled (or back to pending when already cancelled)."""
        status = TodoStatus.PENDING if item.status is TodoStatus.CANCELLED else TodoStatus.CANCELLED
        return self.update_todo(item, op="status", status=status)

    def bump_priority(self, item: TodoItem, up: bool) -> TodoItem:
        """Raise (``up``) or lower the priority one step."""
        new = raise_priority(item.priority) if up else lower_priority(item.priority)
        return self.update_todo(item, op="priority", priority=new)

    def move_todo(self, item: TodoItem, delta: int) -> TodoItem:
        """Move up (-1) or down (+1) in the list."""
        todos = list(self._todos)
        idx = next((i for i, t in enumerate(todos) if t.id == item.id), None)
        if idx is None:
            return item
        j = idx + delta
        if j < 0 or j >= len(todos):
            return item
        other = todos[j]
        if j == 0:
            order = other.order - 1
        elif j == len(todos) - 1:
            order = other.order + 1
        else:
            beyond = todos[j + (1 if delta > 0 else -1)]
            order = (other.order + beyond.order) / 2
        return self.update_todo(item, op="move", order=order)

    def delete_todo(self, item: TodoItem) -> TodoItem:
        """Delete (undo with :meth:`undo_delete`)."""
        deleted = self._todo_write(lambda: self.journal.delete_todo(item.id, actor=self.actor))
        self._deleted.append(item.id)
        return deleted

    def undo_delete(self) -> TodoItem | None:
        """Restore the most recently deleted item; None when nothing to undo."""
        if not self._deleted:
            return None
        todo_id = self._deleted.pop()
        return self._todo_write(lambda: self.journal.restore_todo(todo_id, actor=self.actor))

    def _todo_write(self, fn):
        try:
            result = fn()
        except JournalError as exc:
            self._journal_failed(exc)
            raise SessionError(str(exc)) from exc
        self._sync_journal()
        return result

    # ---------------------------------------------------------- misc
    def add_note(self, text: str, experiment: str | None = None) -> None:
        """A free-text note in the journal."""
        if not text.strip():
            raise SessionError("empty note")
        self._record(ev.NOTE, None, {"text": text.strip(), "experiment": experiment})

    def set_paused(self, paused: bool) -> None:
        """Pause/resume GPU refresh (the journal and servers keep being watched)."""
        self.paused = paused
        self.gpus.paused = paused
        self._touch()

    def refresh_now(self) -> None:
        """Read GPUs and probe servers now."""
        self.gpus.refresh_now()
        for rt in self.servers.values():
            rt._wake.set()
