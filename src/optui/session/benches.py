"""Benchmark runs of a session: start one preset, abort it, store its results, find
baselines. One run at a time (the UI shows one output stream)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import TYPE_CHECKING

from optui.adapters.journal import JournalError, StoredResult
from optui.core import events as ev
from optui.core.bench_result import BenchResult
from optui.session.bench_run import BenchRun
from optui.session.errors import SessionError

if TYPE_CHECKING:
    from optui.session.server_runtime import ServerRuntime
    from optui.session.session import Session


class BenchService:
    """``session.benches``: the current/last :class:`BenchRun` and its task."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.current: BenchRun | None = None
        self._task: asyncio.Task | None = None
        self._baselines: dict[str, StoredResult | None] = {}

    @property
    def running(self) -> bool:
        """A run is in progress."""
        return self.current is not None and self.current.view.status == "running"

    def run(self, name: str) -> BenchRun:
        """Start benchmark preset ``name`` in the background; returns the run. Raises
        SessionError for an unknown preset, a run in progress, or read-only mode."""
        s = self.session
        s.check_writable("running a benchmark")
        cfg = s.config.benchmarks.get(name)
        if cfg is None:
            known = ", ".join(s.config.benchmarks) or "none configured"
            raise SessionError(f"unknown benchmark {name!r} (known: {known})")
        if self.running:
            raise SessionError(f"benchmark {self.current.name} is still running (x aborts it)")
        rt = s.server(cfg.server)
        api_key = os.environ.get(rt.cfg.api_key_env) if rt.cfg.api_key_env else None
        run = BenchRun(name, cfg, base_url=rt.cfg.url, max_lines=s.config.log_max_lines, on_change=s.touch,
                       server_healthy=lambda: rt.status.state.is_up, api_key=api_key)
        self.current = run
        self._task = asyncio.create_task(self._run(run, rt), name=f"bench-{name}")
        s.touch()
        return run

    async def _run(self, run: BenchRun, rt: ServerRuntime) -> None:
        s = self.session
        exp = s.ensure_experiment(run.cfg.server)  # results are compared per experiment
        s.record(ev.BENCH_STARTED, run.cfg.server, {"bench": run.name, "argv": run.cfg.argv,
                                                    "builtin": run.cfg.builtin.model_dump() if run.cfg.builtin else None,
                                                    "server_argv": list(rt.status.argv)}, experiment=exp)
        try:
            view = await run.run()
        except asyncio.CancelledError:
            run.mark_finished("aborted", "aborted")
            view = run.view
        for result in view.results:
            try:
                s.journal.add_result(result, server=run.cfg.server, bench=run.name, experiment=exp)
            except JournalError as exc:
                s.journal_failed(exc)
        s.record(ev.BENCH_FINISHED, run.cfg.server, {
            "bench": run.name, "status": view.status, "error": view.error,
            "duration_s": round((view.finished_at or time.time()) - view.started_at, 3),
            "result": view.results[0].to_json() if len(view.results) == 1 else None,
            "results": [r.to_json() for r in view.results] if len(view.results) > 1 else None,
            "server_argv": list(rt.status.argv),
        }, experiment=exp)

    def abort(self) -> bool:
        """Abort the running benchmark (kills its process group); False when none runs."""
        if not self.running:
            return False
        self.current.abort()
        if self.current.cfg.builtin is not None and self._task is not None:
            self._task.cancel()
        return True

    async def wait(self) -> None:
        """Wait for the current run's task to finish (tests, CLI)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def baseline_for(self, result: BenchResult) -> StoredResult | None:
        """The stored baseline of ``result``'s workload (pinned, else the first ok one)."""
        key = result.workload.key()
        if key not in self._baselines:
            try:
                self._baselines[key] = self.session.journal.baseline_for(key)
            except Exception:
                self._baselines[key] = None
        return self._baselines[key]

    def forget_baselines(self) -> None:
        """Results changed: look baselines up again."""
        self._baselines.clear()

    async def close(self) -> None:
        """Abort a running benchmark and wait (bounded) for its group to be gone."""
        if self.running:
            self.abort()
            if self._task is not None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(self._task), 5.0)

    def kill_leftovers(self) -> None:
        """SIGKILL a running benchmark's process group (no event loop needed)."""
        from optui.adapters import proc as procs

        run = self.current
        if run is not None and run.pid and procs.group_alive(run.pid):
            procs.kill_group_now(run.pid)
