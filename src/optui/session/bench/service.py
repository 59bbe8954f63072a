"""Benchmark runs of a session: start a preset (plain, sweep or repeats), abort it, store
its results, pin baselines, and build the comparison rows the UI shows. One run at a time
(the UI shows one output stream)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from optui.adapters.aio import task_end, within
from optui.adapters.journal import Journal, JournalError, StoredResult
from optui.config import Config
from optui.core.bench.compare import Entry, Row, build_rows, group_entries
from optui.core.bench.result import IMPORTED_KEY, BenchResult, comparable
from optui.core.bench.sweep import SweepSpec, sweep_spec
from optui.core.bench.validity import StateTimeline
from optui.core.journal import events as ev
from optui.core.server.state import ServerState
from optui.session.bench.run import BenchRun
from optui.session.errors import SessionError
from optui.session.journal.writer import JournalWriter

if TYPE_CHECKING:
    from optui.adapters.shell import Shell
    from optui.session.server.runtime import ServerRuntime

#: Journal event: a result was pinned as the baseline of its workload.
BENCH_BASELINE = ev.BENCH_BASELINE
#: Journal event: results were imported from files (``optui bench import``).
BENCH_IMPORTED = "bench.imported"
#: Stored results the comparisons look at (newest first).
HISTORY_LIMIT = 2000


class BenchService:
    """``session.benches``: the current/last :class:`BenchRun`, its task, and the
    comparison of stored results.

    ``writer``: the session's journal; ``config``: the campaign's (presets, log and failure
    limits); ``server(name)``: the runtime of a server (SessionError when unknown);
    ``shell(host)``: where a host's commands run; ``on_change()``: the view changed;
    ``on_command(host, argv, rc, duration_s, kind)``: a command ran (the command log);
    ``ensure_experiment(server)``: the experiment id results are stored under."""

    def __init__(self, writer: JournalWriter, config: Config, *, server: Callable[[str], ServerRuntime],
                 shell: Callable[[str], Shell], on_change: Callable[[], None],
                 on_command: Callable[[str, Sequence[str], int | None, float, str], None],
                 ensure_experiment: Callable[[str], str | None]) -> None:
        self._writer = writer
        self._config = config
        self._server = server
        self._shell = shell
        self._on_change = on_change
        self._on_command = on_command
        self._ensure_experiment = ensure_experiment
        self.current: BenchRun | None = None
        self._task: asyncio.Task | None = None
        self._baselines: dict[str, StoredResult | None] = {}
        self._rows: dict[int | None, list[Row]] = {}
        self._stored: dict[int, StoredResult] | None = None  # id -> stored result (the newest HISTORY_LIMIT)
        self._shown: dict[int, StoredResult] = {}  # the history the rows were last built from

    @property
    def running(self) -> bool:
        """A run is in progress."""
        return self.current is not None and self.current.view.status == "running"

    # ------------------------------------------------------------------ runs
    def run(self, name: str, *, sweep: SweepSpec | None = None, repeats: int = 1) -> BenchRun:
        """Start benchmark preset ``name`` in the background; returns the run. ``sweep``
        measures one point per value, ``repeats`` runs each point that many times. Raises
        SessionError for an unknown preset, a run in progress, or read-only mode."""
        self._writer.check_writable("running a benchmark")
        cfg = self.preset(name)
        if self.current is not None and self.running:
            raise SessionError(f"benchmark {self.current.name} is still running (A aborts it)")
        rt = self._server(cfg.server)
        api_key = os.environ.get(rt.cfg.api_key_env) if rt.cfg.api_key_env else None
        # the states the server goes through while it is measured: a run over a HUNG or
        # DEGRADED server is invalid (issue 29: one across a 65 s SIGSTOP became the baseline)
        states = StateTimeline(str(rt.status.state), time.monotonic())
        unwatch = rt.watch_states(lambda state: states.enter(str(state), time.monotonic()))
        run = BenchRun(name, cfg, base_url=rt.cfg.url, max_lines=self._config.log_max_lines, on_change=self._on_change,
                       server_healthy=lambda: rt.status.state.is_up, api_key=api_key, sweep=sweep,
                       repeats=max(1, repeats), shell=self._shell(cfg.host), max_failed_pct=self._config.max_failed_pct_of(name),
                       states=states)
        run.on_command = lambda argv, rc, dt: self._on_command(cfg.host, argv, rc, dt, "bench")
        self.current = run
        self._task = asyncio.create_task(self._run(run, rt), name=f"bench-{name}")
        self._task.add_done_callback(lambda _task: unwatch())
        self._on_change()
        return run

    def preset(self, name: str):
        """The config of preset ``name``; SessionError naming the known ones."""
        cfg = self._config.benchmarks.get(name)
        if cfg is None:
            known = ", ".join(self._config.benchmarks) or "none configured"
            raise SessionError(f"unknown benchmark {name!r} (known: {known})")
        return cfg

    def default_sweep(self, name: str) -> SweepSpec:
        """The preset's configured ``sweep`` (concurrency 1,2,4,8,16 when none)."""
        cfg = self.preset(name)
        if cfg.sweep is not None and cfg.sweep.request_rate:
            return sweep_spec("request_rate", cfg.sweep.request_rate)
        return sweep_spec("concurrency", (cfg.sweep.concurrency if cfg.sweep else None) or (1, 2, 4, 8, 16))

    async def _run(self, run: BenchRun, rt: ServerRuntime) -> None:
        w = self._writer
        # results are compared per experiment (read, or opened, on the journal thread off the loop)
        exp = await w.call(lambda: self._ensure_experiment(run.cfg.server))
        state = rt.status.state
        if state is not ServerState.READY:  # asked first (TUI confirm, CLI --force); the run says so too
            why = f" ({rt.status.message})" if rt.status.message else ""
            run.add_line(f"optui: {run.cfg.server} is {state.value.upper()}{why}: these numbers are not a healthy server's")
        w.record(ev.BENCH_STARTED, run.cfg.server, {
            "bench": run.name, "argv": run.cfg.argv, "run_id": run.view.run_id, "plan": run.view.plan or None,
            "pid": os.getpid(),  # who runs it: a later process closes it as interrupted once that one is gone
            "builtin": run.cfg.builtin.model_dump() if run.cfg.builtin else None,
            "server_argv": list(rt.status.argv), "server_state": str(state),
            "server_message": rt.status.message if state is not ServerState.READY else None}, experiment=exp)
        try:
            view = await run.run()
        except asyncio.CancelledError:
            run.mark_finished("aborted", "aborted by operator")
            view = run.view
        for result in view.results:  # on the journal thread off the loop, before bench.finished
            w.submit(functools.partial(w.journal.add_result, result, server=run.cfg.server, bench=run.name,
                                       experiment=exp))
        if view.status == "stalled":
            w.record(ev.ALERT, run.cfg.server, {
                "kind": "bench_stalled", "bench": run.name,
                "message": f"{view.error}; server {rt.status.state.value}; process group {run.pid} killed"})
        w.record(ev.BENCH_FINISHED, run.cfg.server, {
            "bench": run.name, "status": view.status, "error": view.error, "run_id": view.run_id,
            "duration_s": round((view.finished_at or time.time()) - view.started_at, 3),
            "result": view.results[0].to_json() if len(view.results) == 1 else None,
            "results": [r.to_json() for r in view.results] if len(view.results) > 1 else None,
            "server_argv": list(rt.status.argv),
            # the commands as run: the preset's argv of bench.started plus the --seed optui added
            "commands": run.commands or None,
        }, experiment=exp)
        w.refresh()

    def abort(self) -> bool:
        """Abort the running benchmark (kills its process group); False when none runs."""
        current = self.current
        if current is None or not self.running:
            return False
        current.abort()
        if current.cfg.builtin is not None and self._task is not None:
            self._task.cancel()
        return True

    async def wait(self) -> None:
        """Wait for the current run's task to finish (tests, CLI). In the TUI its result may
        still be queued on the journal thread (``session.synced()`` waits for that): under
        another process's lock a result waits there up to a minute, and this must not."""
        if self._task is not None:
            await task_end(self._task)

    # ------------------------------------------------------------ baselines
    def baseline_for(self, result: BenchResult) -> StoredResult | None:
        """The stored baseline of ``result``'s workload (pinned, else the first ok one)."""
        key = result.workload.key()
        if key not in self._baselines:
            try:
                self._baselines[key] = self._writer.journal.baseline_for(key)
            except Exception:
                self._baselines[key] = None
        return self._baselines[key]

    def pin_baseline(self, result_id: int) -> None:
        """Pin stored result ``result_id`` (and so its group of repeats) as the baseline of
        its workload; journaled as ``bench.baseline``. SessionError when unknown."""
        self._writer.check_writable("pinning a baseline")
        stored = next((r for r in self._history() if r.id == result_id), None)
        _check_pinnable(stored)
        try:
            self._pin(result_id, stored, self._repeats_of(stored))
        except JournalError as exc:
            raise SessionError(str(exc)) from None
        self._pinned()

    async def pin_baseline_async(self, result_id: int) -> None:
        """:meth:`pin_baseline` with its journal write (and ``bench.baseline`` event) on the
        journal thread once the session runs off the loop: another process's lock is waited
        out there. SessionError when unknown, read-only or the write fails."""
        self._writer.check_writable("pinning a baseline")
        stored = next((r for r in self._history() if r.id == result_id), None)
        _check_pinnable(stored)
        repeats = self._repeats_of(stored)
        try:
            await self._writer.call(lambda: self._pin(result_id, stored, repeats))
        except JournalError as exc:
            raise SessionError(str(exc)) from None
        self._pinned()

    def _repeats_of(self, stored: StoredResult | None) -> list[StoredResult]:
        """The results of ``stored``'s group (its run's repeats of its workload, itself
        included): a pinned baseline is compared as that group, its median."""
        if stored is None:
            return []
        group = Entry(stored.id, stored.result).run_id, stored.result.workload.key()
        return [r for r in self._history() if (Entry(r.id, r.result).run_id, r.result.workload.key()) == group]

    def _pin(self, result_id: int, stored: StoredResult | None, repeats: Sequence[StoredResult] = ()) -> None:
        """The journal half of a pin (safe on the journal thread): the pin and its event,
        which says the out tok/s the rows are compared with: the median of ``repeats`` (the
        pinned result's group; the event said the one result's 677.6 where the table showed the
        group's 669.7). SessionError for an unknown id; JournalError when the write fails."""
        w = self._writer
        try:
            w.journal.set_baseline(result_id)
        except KeyError as exc:
            raise SessionError(str(exc.args[0])) from None
        data: dict[str, object] = {"result_id": result_id}
        if stored is not None:
            group = group_entries(Entry(r.id, r.result) for r in repeats or [stored])[0].sample("output_throughput_tok_s")
            data.update(bench=stored.bench, workload=stored.result.workload.key(),
                        concurrency=stored.result.max_concurrency,
                        output_throughput_tok_s=group.median if group.n else stored.result.output_throughput_tok_s,
                        runs=group.n or 1)
        w.record(BENCH_BASELINE, stored.server if stored else None, data,
                 experiment=stored.experiment if stored else None)

    def _pinned(self) -> None:
        """The event loop's half of a pin: every cached baseline and row is stale."""
        self.forget_baselines()
        self._writer.refresh()
        self._on_change()

    def forget_baselines(self) -> None:
        """Forget everything cached: baselines, history, comparison rows."""
        self._baselines.clear()
        self._rows.clear()
        self._stored = None

    def results_changed(self, latest: Sequence[StoredResult], events: Sequence = ()) -> None:
        """The journal's results changed (``Session.sync_journal``): ``latest`` are the
        newest stored results, ``events`` the new journal events. New results are merged
        into the cached history; a pinned baseline or an import (here or in another optui
        process) reloads it, as does a gap (more new results than ``latest`` holds)."""
        self._baselines.clear()
        self._rows.clear()
        if self._stored is None:
            return
        if any(e.type in (BENCH_BASELINE, BENCH_IMPORTED) for e in events) or not self._merge(self._stored, latest):
            self._stored = None

    @staticmethod
    def _merge(cache: dict[int, StoredResult], latest: Sequence[StoredResult]) -> bool:
        """Merge ``latest`` into ``cache`` (the cached history, trimmed to HISTORY_LIMIT);
        False when results between the cache and ``latest`` are missing."""
        if not latest:
            return True
        known = max(cache, default=0)
        if min(r.id for r in latest) > known + 1:
            return False  # results between the cache and ``latest`` are missing
        for stored in latest:
            cache[stored.id] = stored
        if len(cache) > HISTORY_LIMIT:
            for old in sorted(cache)[: len(cache) - HISTORY_LIMIT]:
                del cache[old]
        return True

    # ----------------------------------------------------------- comparison
    def wants_history(self, latest: Sequence[StoredResult], events: Sequence = ()) -> bool:
        """True when the cached history cannot take in ``latest`` / ``events`` (what a sync
        read): it is not loaded, a baseline was pinned, results were imported, or results are
        missing between. Asked on the journal thread by the session's sync once it runs off
        the loop: the sync then reads the history there (:meth:`load_history`)."""
        cache = self._stored
        if cache is None or any(e.type in (BENCH_BASELINE, BENCH_IMPORTED) for e in events):
            return True
        return bool(latest) and min(r.id for r in latest) > max(cache, default=0) + 1

    @staticmethod
    def load_history(journal: Journal) -> dict[int, StoredResult]:
        """The newest :data:`HISTORY_LIMIT` stored results by id (JournalError when unreadable)."""
        return {r.id: r for r in journal.results(limit=HISTORY_LIMIT)}

    def history_loaded(self, history: dict[int, StoredResult]) -> None:
        """The history a sync read (:meth:`load_history`) replaces the cache (on the loop,
        after :meth:`results_changed`); the comparison rows are rebuilt from it."""
        self._stored = history
        self._shown = history
        self._rows.clear()

    def _history(self) -> list[StoredResult]:
        """The newest :data:`HISTORY_LIMIT` stored results, newest first (cached). Off the
        loop a missing cache is never read here: the rows show the last history they had
        until the sync that follows every change of it brings the new one (its read loads it:
        :meth:`wants_history`)."""
        if self._stored is None and self._writer.off_loop:
            shown = self._shown
            return [shown[i] for i in sorted(shown, reverse=True)]
        if self._stored is None:
            try:
                self._stored = {r.id: r for r in self._writer.journal.results(limit=HISTORY_LIMIT)}
            except Exception:
                self._stored = {}
        self._shown = self._stored
        return [self._stored[i] for i in sorted(self._stored, reverse=True)]

    def rows(self, last: int | None = None) -> list[Row]:
        """Comparison rows of the stored result groups, oldest first (cached until the
        results change): medians over repeats, deltas vs baseline, scaling efficiency.
        ``last``: only the newest that many groups (their baselines still come from the
        whole history), which keeps the bench panel cheap on a long campaign."""
        rows = self._rows.get(last)
        if rows is None:
            entries = [Entry(r.id, r.result, r.bench, r.baseline, r.experiment, r.ts) for r in self._history()]
            groups = group_entries(entries)
            rows = self._rows[last] = build_rows(groups[-last:] if last else groups, groups)
        return rows

    async def close(self) -> None:
        """Abort a running benchmark and wait (bounded) for its group to be gone."""
        if self.running:
            self.abort()
            if self._task is not None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await within(asyncio.shield(self._task), 5.0)

    def kill_leftovers(self) -> None:
        """SIGKILL a running benchmark's process group (no event loop needed; a remote one
        also dies with its SSH channel when optui exits)."""
        from optui.adapters import proc as procs

        run = self.current
        if run is None or not run.pid:
            return
        if not run.shell.local:
            run.shell.kill_group_now(run.pid)
        elif procs.group_alive(run.pid):
            procs.kill_group_now(run.pid)


def _check_pinnable(stored: StoredResult | None) -> None:
    """SessionError when ``stored`` is a result that is never compared (invalid, degraded,
    failed): it can never be a baseline (issue 29)."""
    if stored is not None and not comparable(stored.result):
        why = f": {stored.result.error}" if stored.result.error else ""
        raise SessionError(f"result {stored.id} is {stored.result.status}{why}; it is never compared, "
                           "so it cannot be the baseline")


def import_results(journal: Journal, results: Sequence[BenchResult], *, source: str, server: str | None,
                   bench: str | None, actor: str = "cli", experiment: str | None = None) -> list[int]:
    """Store ``results`` read from file ``source`` (each with the workload it describes;
    marked imported: ``extra[IMPORTED_KEY]`` = ``source``) under ``experiment`` (None:
    under no experiment, whichever runs on ``server`` now) and journal one
    ``bench.imported`` event; returns the new result ids. Raises JournalError when the
    journal cannot be written."""
    marked = [replace(r, extra={**r.extra, IMPORTED_KEY: source}) for r in results]
    ids = [journal.add_result(result, server=server, bench=bench, experiment=experiment) for result in marked]
    journal.append(BENCH_IMPORTED, server, {
        "file": source, "bench": bench, "result_ids": ids, "experiment": experiment,
        "results": [{"id": i, "tool": r.tool, "status": r.status, "workload": r.workload.key(),
                     "output_throughput_tok_s": r.output_throughput_tok_s} for i, r in zip(ids, results)],
    }, actor=actor, experiment=experiment)
    return ids
