"""Todo runs: the experiments todo items carry, run one after another (``session.todo_runs``,
``optui todo run``, ``x`` / ``X`` in the todo panel).

One todo run: restart the server with the item's flags → ready gate → benchmark(s) → compare
each result with its workload's baseline → the item becomes completed with the summary in
its ``note`` (out tok/s, Δ vs baseline, TTFT p50), or goes back to open with
``meta["experiment_run"]`` status "failed", the crash class and a log excerpt.

Every step is a journal event (``todo.run.started`` / ``todo.run.step`` /
``todo.run.finished``, target ``todo:<id>``, data ``todo_id`` and ``run_id``
``todo-<id>.<n>``; once the restart opened its experiment, the ``experiment`` column is
that ``exp-NNNN``); the restart's server events and the bench results carry the same
experiment id, which also names the todo item (``todo_id``).

Stopping (:meth:`TodoRunQueue.stop`) empties the queue and ends the current step at
once: a running benchmark is aborted (its process group killed); a restart is left to
finish on its own (the server ends ready or crashed, it is never half-killed) and the run
is recorded as aborted. Headless: the TUI and ``optui todo run`` both drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from optui.adapters import proc
from optui.adapters.aio import task_end, within
from optui.adapters.journal import JournalError
from optui.config import Config
from optui.core.bench.sweep import sweep_spec
from optui.core.todo.experiment import (
    TODO_RUN_FINISHED,
    TODO_RUN_STARTED,
    TODO_RUN_STEP,
    ExperimentSpec,
    base_medians,
    benches_for,
    result_line,
)
from optui.core.todo.items import TodoItem, TodoStatus
from optui.session.bench.service import BenchService
from optui.session.errors import SessionError
from optui.session.journal.writer import JournalWriter
from optui.session.snapshot_types import TodoRunOutcome
from optui.session.todo.service import TodoService

if TYPE_CHECKING:
    from optui.session.server.runtime import ServerRuntime

LOG_EXCERPT_LINES = 6
_T = TypeVar("_T")


def _ids(items: list[TodoItem]) -> str:
    """``"#3 oom, #5 bad_flag"``: the items and how their last run ended."""
    return ", ".join(f"#{t.id} {(t.run or {}).get('crash_class') or 'failed'}" for t in items)


@dataclass(frozen=True, slots=True)
class TodoRunProgress:
    """The todo run in progress: item, run id, step ("restart", "bench NAME", "compare"),
    Unix start time of the run and of the step."""

    todo_id: int
    run_id: str
    step: str
    started_at: float
    step_at: float


@dataclass(frozen=True, slots=True)
class TodoRunPlan:
    """What a todo run of one item will do, for the operator to confirm: the item, the
    server it restarts, its flags now (``old_argv``) and those it will start with
    (``argv``), then the benchmarks it runs (names, in order)."""

    todo_id: int
    content: str
    server: str
    old_argv: tuple[str, ...]
    argv: tuple[str, ...]
    benches: tuple[str, ...]


class _Stopped(Exception):
    """The operator stopped the queue during a step."""


class _Failed(Exception):
    def __init__(self, step: str, message: str, crash_class: str | None = None, lines: tuple[str, ...] = (),
                 offer: bool = False) -> None:
        super().__init__(message)
        self.step, self.message, self.crash_class, self.lines = step, message, crash_class, lines
        self.offer = offer  # the restart's rollback policy offers the last good flags


class TodoRunQueue:
    """The todo runs of a session, queued and run one at a time (see module doc).

    ``writer``: the session's journal; ``config``: the campaign's (servers' benchmarks,
    repeats); ``server(name)``: a server's runtime (SessionError when unknown); ``todos``
    and ``benches``: the session's todo list and benchmark runs; ``restart(server, *, argv,
    reason, todo_id)``: the session's checked restart (``Session.restart_checked``), awaited
    for its RestartOutcome; ``current_experiment(server)``: the exp-NNNN a restart opened;
    ``on_change()``: the queue or a step changed; ``on_finished(outcome)``: a queued run
    ended (each outcome once, in order)."""

    def __init__(self, writer: JournalWriter, config: Config, *, server: Callable[[str], ServerRuntime],
                 todos: TodoService, benches: BenchService, restart: Callable[..., Awaitable],
                 current_experiment: Callable[[str], str | None], on_change: Callable[[], None],
                 on_finished: Callable[[TodoRunOutcome], None] | None = None) -> None:
        self._writer = writer
        self._config = config
        self._server = server
        self._todos = todos
        self._benches = benches
        self._restart = restart
        self._current_experiment = current_experiment
        self._on_change = on_change
        self._on_finished = on_finished  # a run ended: said once (the session's event stream)
        self.queue: deque[int] = deque()
        self.current: TodoRunProgress | None = None
        self._exp: str | None = None  # experiment (exp-NNNN) of the run in progress
        self.outcomes: list[TodoRunOutcome] = []
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._background: set[asyncio.Task] = set()

    @property
    def running(self) -> bool:
        """A run is in progress or queued."""
        return self._task is not None and not self._task.done()

    # ------------------------------------------------------------ checks
    def check(self, item: TodoItem) -> ExperimentSpec:
        """The item's experiment, validated against the config; SessionError saying what
        is wrong (no experiment, unknown server or benchmark, read-only...)."""
        self._writer.check_writable("running an experiment")
        if not item.experiment:
            raise SessionError(f"#{item.id} has no experiment (E attaches one)")
        try:
            spec = ExperimentSpec.from_dict(item.experiment)
        except ValueError as exc:
            raise SessionError(f"#{item.id}: {exc}") from None
        rt = self._server(spec.server)
        if rt.cfg.control == "none":
            raise SessionError(f"#{item.id}: {spec.server} has control = 'none' (optui cannot restart it)")
        for name in self.benches_of(spec):
            bench = self._config.benchmarks.get(name)
            if bench is None:
                raise SessionError(f"#{item.id}: unknown benchmark {name!r} (known: {', '.join(self._config.benchmarks) or 'none'})")
            if bench.server != spec.server:
                raise SessionError(f"#{item.id}: benchmark {name!r} runs against {bench.server}, not {spec.server}")
        return spec

    def plan(self, item: TodoItem, running: Sequence[str] | None = None) -> TodoRunPlan:
        """What a run of ``item`` would do now (see :class:`TodoRunPlan`); ``running``: the
        flags its server will run when it begins (an earlier item's of the same queue), else
        those it runs now. SessionError as :meth:`check`, or when its base (``last_good``) is
        not known yet."""
        spec = self.check(item)
        rt = self._server(spec.server)
        old = tuple(rt.status.argv if running is None else running)
        try:
            base = list(old) if spec.base == "current" else self._base_argv_known(spec, rt)
            argv = spec.apply(base)
        except _Failed as exc:
            raise SessionError(f"#{item.id}: {exc.message}") from None
        return TodoRunPlan(item.id, item.content, spec.server, old, tuple(argv), self.benches_of(spec))

    def plans(self, items: Sequence[TodoItem]) -> list[TodoRunPlan]:
        """:meth:`plan` of each of ``items`` run one after another: each against the flags the
        items before it leave its server running (item 1's changes included for item 2; a
        ``base = "current"`` item builds on them), as the queue will run them if they start."""
        running: dict[str, tuple[str, ...]] = {}
        out = []
        for item in items:
            spec = self.check(item)
            plan = self.plan(item, running.get(spec.server))
            running[plan.server] = plan.argv
            out.append(plan)
        return out

    def benches_of(self, spec: ExperimentSpec) -> tuple[str, ...]:
        """The benchmarks a run executes (see :func:`~optui.core.todo.experiment.benches_for`)."""
        return benches_for(spec, self._config)

    # ------------------------------------------------------------ queue
    def enqueue(self, items: list[TodoItem]) -> list[int]:
        """Queue ``items`` (validated first: one bad item raises SessionError and queues
        nothing) and start the queue when idle. Returns the ids queued."""
        for item in items:
            self.check(item)
        ids = [t.id for t in items if t.id not in self.queue and (self.current is None or self.current.todo_id != t.id)]
        self.queue.extend(ids)
        if ids and not self.running:
            self._stop.clear()
            self._task = asyncio.create_task(self._worker(), name="todo-runs")
        self._on_change()
        return ids

    def pending(self) -> list[TodoItem]:
        """The items :meth:`queue_pending` queues: every pending item that carries an
        experiment (list order) but those whose last run failed (:meth:`failed_before`: a
        known failure is run again only when asked for, ``x`` on it); SessionError when
        none is left."""
        failed = {t.id for t in self.failed_before()}
        items = [t for t in self._todos.items if t.experiment and t.status is TodoStatus.PENDING and t.id not in failed]
        if not items and failed:
            raise SessionError(f"every pending experiment failed last time ({_ids(self.failed_before())}); "
                               "x on an item runs it again")
        if not items:
            raise SessionError("no pending item has an experiment (E on an item attaches one)")
        return items

    def failed_before(self) -> list[TodoItem]:
        """Pending items with an experiment whose last run failed (``⚗✗``): :meth:`pending`
        leaves them out."""
        return [t for t in self._todos.items if t.experiment and t.status is TodoStatus.PENDING
                and (t.run or {}).get("status") == "failed"]

    def failed_before_text(self) -> str:
        """:meth:`failed_before` as ``"#3 oom, #5 bad_flag"`` (empty: none)."""
        return _ids(self.failed_before())

    def queue_pending(self) -> list[int]:
        """Queue every pending item that carries an experiment (list order)."""
        return self.enqueue(self.pending())

    def stop(self) -> bool:
        """Empty the queue and end the current step (see module doc); False when idle."""
        if not self.running:
            return False
        self.queue.clear()
        self._stop.set()
        if self.current is not None and self.current.step.startswith("bench"):
            self._benches.abort()
        self._on_change()
        return True

    async def wait(self) -> None:
        """Wait until the queue is empty (tests, CLI)."""
        if self._task is not None:
            await task_end(self._task)

    async def close(self) -> None:
        """Session closing: stop, then cancel what is left (a restart in flight)."""
        self.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await within(asyncio.shield(self._task), 10.0)
            self._task.cancel()
        for task in list(self._background):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _worker(self) -> None:
        try:
            while self.queue and not self._stop.is_set():
                todo_id = self.queue.popleft()
                outcome = await self.run_one(todo_id)
                self.outcomes.append(outcome)
                if self._on_finished is not None:
                    self._on_finished(outcome)
        finally:
            self.current = None
            self._on_change()

    # ------------------------------------------------------------ recovery
    def recover(self) -> int:
        """Items whose run was "running" in a process that is gone (optui killed
        mid-run) are marked "interrupted" and reopened. Returns how many."""
        if not self._writer.writable():
            return 0
        n = 0
        for item in self._todos.items:
            run = item.run
            pid = run.get("pid") if run else None
            alive = isinstance(pid, int) and pid > 0 and proc.pid_alive(pid)
            if run and run.get("status") == "running" and not alive:
                with contextlib.suppress(SessionError):
                    self._todos.update(item, op="experiment.interrupted", status=TodoStatus.PENDING,
                                   meta={**item.meta, "experiment_run": {**run, "status": "interrupted"}})
                    self._event(item.id, run.get("id"), TODO_RUN_FINISHED,
                                {"status": "interrupted", "message": f"run {run.get('id')} interrupted (optui exited mid-run)"})
                    n += 1
        return n

    # ------------------------------------------------------------ one run
    def _event(self, todo_id: int, run_id: str | None, type: str, data: dict) -> None:
        self._writer.record(type, f"todo:{todo_id}", {"todo_id": todo_id, "run_id": run_id, **data}, experiment=self._exp)

    def _step(self, step: str) -> None:
        if self.current is not None:
            from dataclasses import replace

            self.current = replace(self.current, step=step, step_at=time.time())
            self._on_change()

    @staticmethod
    async def _until_idle(rt) -> None:
        deadline = time.monotonic() + rt.cfg.ready_timeout_s + rt.cfg.stop_timeout_s
        while rt.status.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.2)

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise _Stopped()

    async def _race(self, aw: Awaitable[_T]) -> _T:
        """Await ``aw`` unless the operator stops first (then raise _Stopped; ``aw`` keeps
        running as a background task)."""
        task = asyncio.ensure_future(aw)
        stop = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        raise _Stopped()

    async def run_one(self, todo_id: int, *, repeats: int | None = None, sweep=None) -> TodoRunOutcome:
        """Run the experiment of item ``todo_id`` now (see module doc); each benchmark
        ``repeats`` times (default: the config's for it), at the points of ``sweep`` (a
        :class:`~optui.core.bench.sweep.SweepSpec`: a subset of the preset's; None: all)."""
        w, j = self._writer, self._writer.journal
        todos, benches = self._todos, self._benches
        # every journal call here goes through w.call: on the journal thread once the session
        # runs off the event loop (the TUI), inline otherwise (the CLI)
        item, deleted = await w.call(lambda: (j.todo(todo_id), j.deleted_todo_ids()))
        if item is None or todo_id in deleted:
            return TodoRunOutcome(todo_id, None, "skipped", "start", f"#{todo_id} no longer exists")
        try:
            spec = self.check(item)
        except SessionError as exc:
            return TodoRunOutcome(todo_id, None, "skipped", "start", str(exc))
        runs, seq0, res0 = await w.call(lambda: (
            len(j.events(target=f"todo:{todo_id}", types=[TODO_RUN_STARTED])), j.last_seq(), j.last_result_id()))
        run_id = f"todo-{todo_id}.{runs + 1}"
        rt = self._server(spec.server)
        reopen = item.status if not item.done else TodoStatus.PENDING
        now = time.time()
        self.current = TodoRunProgress(todo_id, run_id, "restart", now, now)
        self._exp = None  # the exp-NNNN the restart opens
        run_meta = {"id": run_id, "status": "running", "step": "restart", "pid": os.getpid(), "ts": now}
        results: list[dict] = []
        step = "restart"
        try:
            base = await self._base_argv(spec, rt)
            argv = spec.apply(base)
            self._event(todo_id, run_id, TODO_RUN_STARTED, {
                "message": f"experiment {run_id}: {spec.describe(self.benches_of(spec))}", "spec": spec.to_dict(),
                "server": spec.server, "old_argv": list(rt.status.argv), "argv": argv})
            started: TodoItem = item
            item = await w.call(lambda: todos.update(started, op="experiment.run", status=TodoStatus.IN_PROGRESS,
                                                     meta={**started.meta, "experiment_run": run_meta}))
            self._event(todo_id, run_id, TODO_RUN_STEP, {"step": "restart", "message": f"restart {spec.server} with {spec.flags_text() or 'the same flags'}"})
            if rt.status.busy:  # a restart (autostart, the operator) is in flight: let it end
                await self._race(self._until_idle(rt))
            self._check_stop()
            # the door every restart uses: the flag catalogue refuses a bad value before anything stops
            restarted = await self._race(self._restart(spec.server, argv=argv, reason=f"experiment {run_id}",
                                                       todo_id=todo_id))
            status = restarted.status
            self._exp = await w.call(lambda: self._current_experiment(spec.server))
            if status.state.value != "ready" or list(status.argv) != argv:
                message, crash, lines = await w.call(lambda: self._crash(spec.server, seq0, status))
                if restarted.rolled_back:  # rollback = "auto"
                    message += f"; rolled back to the last good flags ({status.state.value})"
                raise _Failed("restart", message, crash, lines, offer=restarted.offer is not None)
            self._event(todo_id, run_id, TODO_RUN_STEP, {"step": "ready", "message": f"{spec.server} ready"})
            for name in self.benches_of(spec):
                step = f"bench {name}"
                self._step(step)
                self._check_stop()
                if benches.current is not None and benches.running:
                    raise _Failed(step, f"benchmark {benches.current.name} is already running")
                times = repeats or self._config.repeat_of(name)  # a verdict needs repeats: one run is untested noise
                points = sweep_spec(sweep.kind, sweep.values, times) if sweep is not None else None
                run = benches.run(name, repeats=times, sweep=points)
                self._event(todo_id, run_id, TODO_RUN_STEP, {"step": "bench", "bench": name, "repeats": times,
                                                             "message": f"benchmark {name} x{times}"})
                try:
                    await self._race(benches.wait())
                except _Stopped:
                    benches.abort()  # no-op when stop() already did it
                    await benches.wait()  # until bench.finished (aborted) is recorded
                    raise
                if run.view.status != "ok":
                    raise _Failed(step, f"benchmark {name} {run.view.status}: {run.view.error or 'no result'}")
            step = "compare"
            self._step(step)
            # the benchmark's results go to the journal thread fire-and-forget, in order:
            # a call behind them returns once they are stored (the compare read none before)
            summary, results, verdict = await w.call(lambda: self._compare(spec.server, res0))
            self._event(todo_id, run_id, TODO_RUN_STEP, {"step": "compare", "message": summary, "results": results})
            outcome = TodoRunOutcome(todo_id, run_id, "ok", step, summary, results=tuple(results))
            final = {"status": TodoStatus.COMPLETED, "note": summary}
            # the item's mark follows the experiment's verdict (a worse result is no ✓)
            run_meta = {**run_meta, "experiment": self._exp, "verdict": verdict}
        except _Stopped:
            outcome = TodoRunOutcome(todo_id, run_id, "aborted", step, f"stopped by the operator during {step}")
            final = {"status": reopen}
        except _Failed as exc:
            note = f"failed at {exc.step}: " + (f"{exc.crash_class} — {exc.message}" if exc.crash_class else exc.message)
            if exc.lines:
                note += "\n" + "\n".join(exc.lines[-LOG_EXCERPT_LINES:])
            # the rollback is offered once nothing queued restarts the server again
            queued = list(self.queue)
            later = await w.call(lambda: [j.todo(i) for i in queued])
            again = any(t is not None and (t.experiment or {}).get("server") == spec.server for t in later)
            offer = spec.server if exc.offer and not again else None
            outcome = TodoRunOutcome(todo_id, run_id, "failed", exc.step, note, exc.crash_class, exc.lines,
                                     rollback_offer=offer)
            final = {"status": reopen, "note": note}
        except (SessionError, JournalError, ValueError) as exc:
            outcome = TodoRunOutcome(todo_id, run_id, "failed", step, f"failed at {step}: {exc}")
            final = {"status": reopen, "note": outcome.summary}
        finally:
            self.current = None
            self._on_change()
        run_meta = {**run_meta, "status": outcome.status, "step": outcome.step, "summary": outcome.summary,
                    "crash_class": outcome.crash_class, "finished": time.time()}
        stored = await w.call(lambda: j.todo(todo_id))
        latest: TodoItem = stored or item
        with contextlib.suppress(SessionError, ValueError):
            await w.call(lambda: todos.update(latest, op="experiment.result", meta={**latest.meta, "experiment_run": run_meta},
                                              **final))
        self._event(todo_id, run_id, TODO_RUN_FINISHED, {
            "status": outcome.status, "step": outcome.step, "message": f"{outcome.status}: {outcome.summary}",
            "crash_class": outcome.crash_class, "lines": list(outcome.lines[-LOG_EXCERPT_LINES:])})
        return outcome

    async def _base_argv(self, spec: ExperimentSpec, rt) -> list[str]:
        """The argv a run's flags apply to (``spec.base``); the journal's last good flags are
        read through the writer (the journal thread off the loop). _Failed when unknown."""
        last = None
        if spec.base == "last_good" and not rt.status.last_good_argv:
            last = await self._writer.call(lambda: self._writer.journal.last_good(spec.server))
        return self._base_from(spec, rt, last)

    def _base_argv_known(self, spec: ExperimentSpec, rt) -> list[str]:
        """:meth:`_base_argv` for a preview on the event loop: the journal is read only when
        the session runs inline (the CLI); off the loop the status's last good flags decide."""
        last = None
        if spec.base == "last_good" and not rt.status.last_good_argv and not self._writer.off_loop:
            last = self._writer.journal.last_good(spec.server)
        return self._base_from(spec, rt, last)

    @staticmethod
    def _base_from(spec: ExperimentSpec, rt, stored_last_good) -> list[str]:
        if spec.base == "current":
            return list(rt.status.argv)
        if spec.base == "last_good":
            last = rt.status.last_good_argv or stored_last_good
            if not last:
                raise _Failed("restart", f"{spec.server}: no last good flags recorded yet (base = 'last_good')")
            return list(last)
        return list(rt.cfg.argv)

    def _crash(self, server: str, since_seq: int, status) -> tuple[str, str | None, tuple[str, ...]]:
        """Message, crash class and log lines of a failed restart (also when an automatic
        rollback brought the server back with other flags)."""
        failed = [e for e in self._writer.journal.events(since_seq=since_seq, target=server, types=["server.failed"])]
        if failed:
            d = failed[0].data
            lines = tuple(d.get("lines") or ([d["message"]] if d.get("message") else []))
            return f"{server} did not start (rc={d.get('returncode')})", d.get("class"), lines
        crash = str(status.crash_class) if status.crash_class else None
        return f"{server} ended {status.state.value}", crash, tuple(status.crash_lines)

    def _compare(self, server: str, results_after: int) -> tuple[str, list[dict], str | None]:
        """The run's results against their baselines, each line's baseline the one the
        verdict, the tables and the report compare with (:func:`~optui.core.journal.experiments.
        workload_baselines`: the median of the reference experiment's runs), then the verdict;
        ``(summary, results, verdict)``, the verdict the experiment's overall one
        (:func:`~optui.core.journal.experiments.experiment_verdict`: better | worse | mixed |
        same | untested noise | untested | baseline...; None when its experiment is not known)."""
        from optui.core.journal.experiments import workload_baselines
        from optui.session.journal.export import load_experiments

        j = self._writer.journal
        stored = sorted((r for r in j.results(server=server, limit=100) if r.id > results_after), key=lambda r: r.id)
        x = next((x for x in load_experiments(j) if x.id == self._exp and x.server == server), None)
        bases = workload_baselines(x) if x is not None else {}
        lines, out = [], []
        groups: dict[tuple, list] = {}  # (bench, workload) → its repeats: one line each, the median run
        for r in stored:
            groups.setdefault((r.bench, r.result.workload.key()), []).append(r)
        multi = {bench for bench, _ in groups if sum(1 for b, _ in groups if b == bench) > 1}
        for (bench, key), rs in groups.items():
            base_values, is_base = self._base_values(key, rs, bases)
            first = rs[0].result
            label = bench or "bench"
            if bench in multi:
                label += f" c={first.max_concurrency or first.workload.max_concurrency}"
            lines.append(result_line(label, [r.result for r in rs], base_values, is_base))
        for r in stored:
            key = r.result.workload.key()
            base = j.baseline_for(key)
            base_values, _ = self._base_values(key, [r], bases)
            out.append({"result_id": r.id, "bench": r.bench, "baseline_id": None if base is None else base.id,
                        "output_throughput_tok_s": r.result.output_throughput_tok_s,
                        "baseline_output_throughput_tok_s": None if base_values is None
                        else base_values.get("output_throughput_tok_s"),
                        "ttft_ms_median": r.result.ttft_ms.get("median")})
        verdict = self._verdict_line(server, x)
        return ("; ".join([*lines, *([verdict] if verdict else [])]) or "no results"), out, None if x is None else x.verdict

    def _base_values(self, key: str, rs: list, bases: dict) -> tuple[dict | None, bool]:
        """``(baseline medians, is the baseline)`` of workload ``key``: the experiment's
        comparison when it has one, else the journal's baseline result (pinned, else first)."""
        if key in bases:
            return bases[key]
        base = self._writer.journal.baseline_for(key)
        is_base = base is not None and any(base.id == r.id for r in rs)
        return (None if base is None else base_medians(base.result)), is_base

    def _verdict_line(self, server: str, x=None) -> str | None:
        """``"exp-0004: better +12.3% out tok/s (n=3 vs 3, ±0.8 % / ±1.1 %, p=0.10, vs exp-0001)"``
        for the experiment the run's restart opened (``x`` when loaded; None when it is not known)."""
        from optui.core.journal.experiments import verdict_evidence
        from optui.session.journal.export import load_experiments

        if x is None:
            x = next((x for x in load_experiments(self._writer.journal) if x.id == self._exp and x.server == server), None)
        if x is None:
            return None
        d = x.primary_delta
        rel = f" {d.rel_pct:+.1f}% {d.metric.label}" if d and d.rel_pct is not None and not x.is_baseline else ""
        evidence = verdict_evidence(x)
        return f"{x.id}: {x.verdict}{rel}" + (f" ({evidence})" if evidence else "")

