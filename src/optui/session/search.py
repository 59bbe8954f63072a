"""Flag searches (``session.search``, ``optui search run``): a search spec
(:mod:`optui.core.search.spec`) run trial by trial through optui's own experiment loop.

Every trial is a todo run (:class:`~optui.session.todo.runs.TodoRunQueue`, the same queue
``x`` and ``optui todo run`` use): a todo item ``search NAME #N: FLAGS`` carrying the
trial's experiment (the spec's fixed flags plus the point, on the server's configured
argv, the spec's benchmark) is queued and run: restart → ready gate → benchmark →
compare, each step journaled as for a hand-made experiment, its restart opening the
trial's ``exp-NNNN``. The item ends completed (measured) or cancelled (the trial failed:
its crash class stays in the item's run and in the trial), so a search leaves no open items.
The sla strategy measures one configuration at several loads instead: one restart (the
session's checked restart, when the server does not run those flags), then the preset at
each load the bisection asks for, as a sweep point of that one experiment.

The search's own events (target ``search:NAME``, data ``search_id`` ``NAME.<n>``):
``search.started`` (the spec, the trials planned, the budget's note), ``search.trial.started``
(a trial begins: its number and flags, for another process's view), ``search.trial`` (one per trial:
:meth:`~optui.core.search.strategies.Trial.to_json`, the todo item; ``experiment`` column:
the trial's exp-NNNN) and ``search.finished`` (status done | stopped | failed, the winner
and its launch flags, how many trials, the infeasible ones). The strategy decides each next
trial from the trials so far (:func:`~optui.core.search.strategies.next_step`).

Stopping (:meth:`SearchRunner.stop`; the todo queue's stop, ``S``, ends the search too)
ends the search after the trial in progress is cut short the way the todo queue's stop does it: a benchmark is aborted (its process group
killed), a restart is left to finish (the server ends ready or crashed, never half
started). The cut trial measured nothing and is not recorded as one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from optui.adapters.aio import task_end, within
from optui.config import BenchmarkConfig, Config
from optui.core.bench.result import comparable
from optui.core.bench.sweep import SweepSpec
from optui.core.gpu.samples import HostSnapshot
from optui.core.search.spec import Point, SearchSpec, Workload, measurements, point_text, trial_values
from optui.core.search.strategies import (
    Step,
    Trial,
    best_load,
    breaks_text,
    budget_note,
    explore_budget,
    explored,
    failed,
    judge,
    next_step,
    none_feasible_text,
    planned_now,
    planned_trials,
    standings,
    winner,
    winner_comparisons,
    winner_text,
    won,
)
from optui.core.todo.experiment import ExperimentSpec
from optui.core.todo.items import TodoStatus
from optui.session.bench.service import BenchService
from optui.session.errors import SessionError
from optui.session.journal.writer import JournalWriter
from optui.session.server.locks import ServerLock
from optui.session.snapshot_types import SearchProgress
from optui.session.todo.runs import TodoRunQueue
from optui.session.todo.service import TodoService

if TYPE_CHECKING:
    from optui.adapters.journal import Journal
    from optui.session.bench.run import BenchRun
    from optui.session.server.runtime import ServerRuntime

SEARCH_STARTED = "search.started"
SEARCH_TRIAL = "search.trial"
SEARCH_FINISHED = "search.finished"
#: a trial begins (data: search_id, number, phase, point, flags, load, todo_id, result_id0: the
#: journal's last result id then, started_at): another process shows it (:func:`search_status`'s ``current``)
SEARCH_TRIAL_STARTED = "search.trial.started"
#: another process (``optui search stop``) asks the running search to stop (data: search_id)
SEARCH_STOP = "search.stop"
STOP_POLL_S = 0.5  # how often a running search reads the journal for a search.stop


class SpecError(SessionError):
    """A spec that cannot run here (:meth:`SearchRunner.check`): ``field`` names the spec's
    field at fault (``server``, ``bench``), so a caller holding its file adds ``FILE:LINE``."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class SearchLock(ServerLock):
    """One search per campaign across processes: an exclusive ``flock`` on
    ``STATE_DIR/search.lock`` held while a search runs (the kernel drops it when its
    process dies), its content naming the holder's pid."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir, "search")
        self.path = Path(state_dir) / "search.lock"

    def holder_pid(self) -> int | None:
        """The pid the lock file names (None: none, or unreadable)."""
        try:
            text = self.path.read_text().strip()
            return int(text[4:]) if text.startswith("pid ") else None
        except (OSError, ValueError):
            return None


def refusal_text(running: dict | None, pid: int | None) -> str:
    """Why a second search is refused: the first's id, process and start time
    (``running``: :func:`search_status` of it; ``pid``: the lock's holder)."""
    if running is not None and running.get("status") == "running":
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(running.get("started_at") or 0)))
        return (f"search {running['search_id']} runs (optui process {running.get('pid') or pid}, started {when}): "
                f"one search per campaign; `optui search stop` ends it")
    return f"a search runs (optui process {pid or '?'}): one search per campaign; `optui search stop` ends it"


def preset_workloads(bench: BenchmarkConfig) -> tuple[Workload, ...] | None:
    """The workloads a preset measures in one experiment run, as ``@`` names them: the
    built-in generator's concurrency points (``c=N``) at its rate; None for a command
    (``argv``: its points are its own, known once it ran)."""
    if bench.builtin is None:
        return None
    return tuple(Workload("concurrency", float(c)) for c in bench.builtin.concurrency)


def check_workloads(spec: SearchSpec, bench: BenchmarkConfig) -> None:
    """:class:`SpecError` (field ``objective`` or ``constraints``) when the objective of a
    search on a multi-point preset names no workload, or a workload the preset does not
    measure (the message says how to name one); the sla strategy sets the load itself."""
    points = preset_workloads(bench)
    if spec.strategy == "sla" or points is None:
        return
    goal = spec.goal
    names = ", ".join(str(w) for w in points)
    example = f'objective = "{goal.goal} {goal.metric} @ {points[-1]}"'
    rate = bench.builtin.request_rate if bench.builtin is not None else None

    def known(w: Workload) -> bool:
        return w in points or (w.kind == "request_rate" and len(points) == 1 and rate is not None and w.value == rate)

    if goal.workload is None and len(points) > 1:
        raise SpecError(f"search: benchmark {spec.bench!r} measures {len(points)} workloads ({names}): a score never "
                        f"pools them; name the one the objective is measured on, e.g. {example}", "objective")
    if goal.workload is not None and not known(goal.workload):
        raise SpecError(f"search: benchmark {spec.bench!r} does not measure {goal.workload} (its workloads: {names}); "
                        f"e.g. {example}", "objective")
    for rule in spec.rules:
        if rule.workload is not None and not known(rule.workload):
            raise SpecError(f"search: constraint {str(rule)!r}: benchmark {spec.bench!r} does not measure "
                            f"{rule.workload} (its workloads: {names})", "constraints")


class SearchBusy(SessionError):
    """Another search runs on this campaign (in this or another optui process): the message
    names it (id, process, start time)."""


class SearchRunner:
    """The session's flag search, one at a time (see module doc).

    ``writer``: the session's journal; ``config``: the campaign's (servers, presets);
    ``server(name)``: a server's runtime; ``benches`` and ``restart(server, *, argv, reason)``
    (the session's checked restart): the sla strategy's one restart and its load points; ``todos`` / ``todo_runs``: the session's todo list and its runner (each trial is one
    of its runs); ``gpu_snapshot(host)``: the newest GPU reading of a host (None when
    unknown), for the ``gpu_mem_mib`` metric; ``state_dir``: the campaign's directory (the
    optuna strategy's study); ``on_change()``: progress changed."""

    def __init__(self, writer: JournalWriter, config: Config, *, server: Callable[[str], ServerRuntime],
                 todos: TodoService, todo_runs: TodoRunQueue, benches: BenchService, restart: Callable[..., Awaitable],
                 gpu_snapshot: Callable[[str], HostSnapshot | None], state_dir: Path,
                 on_change: Callable[[], None]) -> None:
        self._writer = writer
        self._benches = benches
        self._restart = restart
        self._state_dir = state_dir
        self._server = server
        self._config = config
        self._todos = todos
        self._todo_runs = todo_runs
        self._gpu_snapshot = gpu_snapshot
        self._on_change = on_change
        self.spec: SearchSpec | None = None
        self.trials: list[Trial] = []
        self._value: SearchProgress | None = None
        self._task: asyncio.Task | None = None
        self._stop = False
        self._todo_id: int | None = None  # the todo item of the trial in progress
        self._resumed = 0  # trials a resumed search had before this process took it up
        self._load_run: BenchRun | None = None  # the sla strategy's benchmark in progress
        self._stop_reason: str | None = None  # who stopped it when not the operator nor a search.stop (an agent's disconnect)
        self._handed_over = False  # stopped to resume in another process: the server is left to it
        self._lock: SearchLock | None = None  # one search per campaign, across processes

    @property
    def running(self) -> bool:
        """A search is in progress."""
        return self._task is not None and not self._task.done()

    # ------------------------------------------------------------ control
    def check(self, spec: SearchSpec) -> None:
        """SessionError when ``spec`` cannot run here: read-only; :class:`SpecError` (naming
        its field) for an unknown server or preset, a preset of another server, a server
        optui cannot restart."""
        self._writer.check_writable("running a flag search")
        server = self._config.servers.get(spec.server)
        if server is None:
            raise SpecError(f"search: unknown server {spec.server!r} (known: {', '.join(self._config.servers) or 'none'})",
                            "server")
        if server.control == "none":
            raise SpecError(f"search: {spec.server} has control = 'none' (optui cannot restart it)", "server")
        bench = self._config.benchmarks.get(spec.bench)
        if bench is None:
            raise SpecError(f"search: unknown benchmark {spec.bench!r} (known: {', '.join(self._config.benchmarks) or 'none'})",
                            "bench")
        if bench.server != spec.server:
            raise SpecError(f"search: benchmark {spec.bench!r} runs against {bench.server}, not {spec.server}", "bench")
        check_workloads(spec, bench)

    async def start(self, spec: SearchSpec, name: str, *, fresh: bool = False) -> SearchProgress:
        """Start search ``name`` in the background (SessionError as :meth:`check`, or when
        a search runs already). The newest search of ``name``, stopped or cut short by an
        optui that exited, is resumed when its spec is the same (its trials kept, the
        optuna study reopened) unless ``fresh``. Returns its first progress."""
        self.check(spec)
        if self.running:
            raise SearchBusy(f"search {self._value.search_id if self._value else ''} is still running in this process "
                             "(stop it first)")
        j = self._writer.journal
        lock = SearchLock(self._state_dir)
        if not lock.acquire():
            other = await self._writer.call(lambda: search_status(j))
            raise SearchBusy(refusal_text(other, lock.holder_pid()))
        try:
            return await self._start(spec, name, fresh, lock)
        except BaseException:
            lock.release()
            raise

    async def _start(self, spec: SearchSpec, name: str, fresh: bool, lock: SearchLock) -> SearchProgress:
        j = self._writer.journal
        prev, runs = await self._writer.call(lambda: (
            search_status(j, name), len({e.data.get("search_id") for e in j.events(target=f"search:{name}", types=[SEARCH_STARTED])})))
        resume = (not fresh and prev is not None and prev["status"] in ("interrupted", "stopped")
                  and prev["spec"] == spec.model_dump(mode="json"))
        search_id = prev["search_id"] if resume and prev else f"{name}.{runs + 1}"
        trials = [Trial.from_json(t) for t in prev["trials"]] if resume and prev else []
        self.spec, self.trials, self._stop, self._resumed = spec, trials, False, len(trials)
        self._stop_reason, self._lock, self._handed_over = None, lock, False
        self._value = SearchProgress(name, search_id, spec.strategy, spec.objective, len(trials),
                                     planned_now(spec, trials), "", "", "starting", None, None,
                                     sum(1 for t in trials if not t.feasible), None, time.time(), note=budget_note(spec))
        self._task = asyncio.create_task(self._run(spec, name, search_id, resumed=resume), name=f"search-{name}")
        self._on_change()
        return self._value

    @property
    def progress(self) -> SearchProgress | None:
        """The search in progress or the last one (None: none ran in this session), with
        the todo run's step now."""
        value, current, bench = self._value, self._todo_runs.current, self._benches.current
        if value is None or value.status != "running" or not value.in_trial:
            return value
        step = value.step
        if self._load_run is not None:
            step = f"bench {self._load_run.view.name}"
        elif current is not None and current.todo_id == self._todo_id:
            step = current.step
        else:
            return value
        if step.startswith("bench") and bench is not None and self._benches.running and bench.view.points_total > 1:
            view = bench.view
            step += f" run {min(view.points_done + 1, view.points_total)}/{view.points_total}"
        return replace(value, step=step)

    def stop(self, reason: str | None = None, *, hand_over: bool = False) -> bool:
        """End the search (see module doc); False when none runs. ``reason``: who stopped it,
        when neither this process's operator nor a journaled ``search.stop`` (``"agent:NAME's
        disconnect (its MCP session closed)"``): the search.finished message says so.
        ``hand_over``: another process resumes it (``optui search run SPEC --wait``): the
        server is left to that one instead of put on the search's stated configuration."""
        if not self.running:
            return False
        if reason and self._stop_reason is None:
            self._stop_reason = reason
        self._handed_over = self._handed_over or hand_over
        self._stop = True
        current = self._todo_runs.current
        if current is not None and current.todo_id == self._todo_id:
            self._todo_runs.stop()
        if self._load_run is not None and self._benches.current is self._load_run:
            self._benches.abort()
        self._on_change()
        return True

    async def wait(self) -> SearchProgress | None:
        """Wait for the search to end; its last progress."""
        if self._task is not None:
            await task_end(self._task)
        return self.progress

    async def close(self) -> None:
        """Session closing: stop, then wait for the trial in progress to end and the server
        to be put on the search's stated configuration (its restart's ready and stop
        timeouts, plus 15 s)."""
        if self.stop() and self._task is not None:
            spec = self.spec
            cfg = self._config.servers.get(spec.server) if spec is not None else None
            wait_s = 15.0 + (2 * (cfg.ready_timeout_s + cfg.stop_timeout_s) if cfg is not None else 0.0)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await within(asyncio.shield(self._task), wait_s)
            self._task.cancel()

    # ------------------------------------------------------------ the loop
    def _record(self, type: str, name: str, data: dict, experiment: str | None = None) -> None:
        self._writer.record(type, f"search:{name}", data, experiment=experiment)

    async def _run(self, spec: SearchSpec, name: str, search_id: str, *, resumed: bool) -> None:
        try:
            await self._run_locked(spec, name, search_id, resumed=resumed)
        finally:
            try:
                with contextlib.suppress(Exception):  # search.finished landed before the lock goes: the next
                    await self._writer.call(lambda: None)  # search (a resuming process) reads it
            finally:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None

    async def _run_locked(self, spec: SearchSpec, name: str, search_id: str, *, resumed: bool) -> None:
        started = time.time()
        seq0 = await self._writer.call(self._writer.journal.last_seq)
        rt0 = self._server(spec.server).status
        # the flags the search started from: where it ends when nothing won (resumed: its first start's, not
        # the flags of the trial an exited process left running)
        start_argv = list(rt0.argv) if rt0.state.value == "ready" and rt0.argv else list(self._server(spec.server).cfg.argv)
        if resumed:
            j = self._writer.journal
            starts = await self._writer.call(lambda: j.events(target=f"search:{name}", types=[SEARCH_STARTED]))
            first = next((e for e in starts if e.data.get("search_id") == search_id and e.data.get("start_argv")), None)
            if first is not None:
                start_argv = [str(a) for a in first.data["start_argv"]]
        what = f"{spec.strategy} over {', '.join(spec.flags) or 'one configuration'} ({spec.objective})"
        self._record(SEARCH_STARTED, name, {
            "search_id": search_id, "name": name, "spec": spec.model_dump(mode="json"), "planned": planned_trials(spec),
            "pid": os.getpid(), "resumed": resumed, "note": budget_note(spec), "start_argv": start_argv,
            "message": (f"search {search_id} resumed after {len(self.trials)} trials: {what}" if resumed
                        else f"search {search_id}: {what}") + (f"; {budget_note(spec)}" if budget_note(spec) else "")})
        status, message = "done", ""
        watcher = asyncio.create_task(self._watch_stop(name, search_id, seq0), name=f"search-{name}-stop")
        study = None
        try:
            if resumed:
                await self._cancel_left_items(search_id)
            if spec.strategy == "optuna":
                from optui.adapters.optuna_study import OptunaStudy

                study = await asyncio.to_thread(OptunaStudy, self._state_dir, spec, search_id)
            while not self._stop and (step := await self._next(spec, study)) is not None:
                self._progress(step=step, todo_step="queued")
                r0 = await self._writer.call(self._writer.journal.last_result_id)
                self._record(SEARCH_TRIAL_STARTED, name, {
                    "search_id": search_id, "number": len(self.trials) + 1, "phase": step.phase,
                    "point": [list(p) for p in step.point], "flags": point_text(step.point), "load": step.load,
                    "result_id0": r0, "started_at": time.time(), "bench": spec.bench,
                    "message": f"trial {len(self.trials) + 1}{' (re-run)' if step.phase == 'confirm' else ''}: "
                               f"{point_text(step.point) or '(fixed flags)'}"})
                if step.load is not None:
                    trial = await self._load_trial(spec, search_id, step)
                else:
                    trial = await self._trial(spec, name, search_id, step)
                if trial is None:  # stopped mid-trial: it measured nothing
                    break
                self.trials.append(trial)
                if study is not None and step.phase == "explore":
                    await asyncio.to_thread(study.tell, trial)
                self._record(SEARCH_TRIAL, name, {"search_id": search_id, **trial.to_json(), "todo_id": self._todo_id,
                                                  "trial_message": trial.message, "message": self._trial_line(trial)},
                             experiment=trial.experiment)
                self._progress(step=None, todo_step="")
            if self._stop:
                status, message = "stopped", f"stopped by {self._stop_reason or await self._stopper(name, search_id, seq0)}"
        except SessionError as exc:
            status, message = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - a search never dies silently: its end is journaled
            status, message = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self._todo_id = None
            watcher.cancel()
        best = winner(spec, self.trials)
        table = standings(spec, self.trials)
        comparisons = winner_comparisons(spec, self.trials)
        has_won = best is not None and won(comparisons)
        end_point = best.point if has_won and best is not None else None
        if spec.strategy == "sla":  # one configuration: it won when a load met the SLA
            has_won = best_load(spec, self.trials) is not None
            end_point = spec.point_at(0) if has_won else None
        if self._handed_over and status == "stopped":
            final: dict = {"why": "handed_over", "flags": None, "argv": None, "restarted": False, "error": None,
                     "state": self._server(spec.server).status.state.value,
                     "text": f"{spec.server} is left to the process that resumes the search: it ends there on the "
                             "winner's flags or the flags it started from"}
        else:
            final = await self._end_on(spec, search_id, end_point, start_argv)
        data: dict = {"search_id": search_id, "name": name, "status": status, "trials": len(self.trials),
                      "won": has_won, "running": final,
                "duration_s": round(time.time() - started, 3),
                "infeasible": [{"point": [list(p) for p in s.point], "crash_class": s.crash_class,
                                "violated": list(s.violated)} for s in table if not s.feasible],
                "winner": None if best is None else {"point": [list(p) for p in best.point], "score": best.score,
                                                     "trials": best.runs, "bench_runs": best.bench_runs,
                                                     "flags": point_text(best.point),
                                                     "vs": [c.to_json() for c in comparisons]}}
        # the winner carries its evidence: beat the runner-up / the first trial outside the noise, or not
        summary = winner_text(spec, best, comparisons) if best is not None else none_feasible_text(spec, self.trials)
        text = f"search {search_id} {status}: " + (message or summary)
        if message and status == "stopped":
            text += f"; so far {summary}" if self.trials else " before any trial finished"
        text += "; " + str(final["text"])
        data["message"] = text
        self._record(SEARCH_FINISHED, name, data)
        self._progress(step=None, todo_step="", status=status, message=text)

    async def _end_on(self, spec: SearchSpec, search_id: str, best: Point | None, start_argv: list[str]) -> dict:
        """Put the server on the search's stated configuration: the winner's flags (``best``:
        the winner's point, it won: :func:`~optui.core.search.strategies.won`; the sla
        strategy's one configuration when a load met the SLA), else the flags it started from,
        through the session's checked restart (the door and rollback policy of every
        restart); no restart when it runs them already. Returns the search.finished's
        ``running``: ``{"why": "winner" | "start", "flags", "argv", "state", "restarted",
        "error", "text"}`` (``text``: the last line's part saying which flags run now)."""
        rt = self._server(spec.server)
        if best is not None:
            sets, unset = spec.change(best)
            argv = ExperimentSpec(spec.server, sets, tuple(unset)).apply(rt.cfg.argv)
            why, flags = "winner", point_text(best) or "(fixed flags)"
            what = f"the winner's flags ({flags})"
        else:
            argv, why = list(start_argv), "start"
            flags = " ".join(argv[next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv)):]) or "(no flags)"
            what = f"the flags it started from ({flags})"
        out: dict = {"why": why, "flags": flags, "argv": argv, "restarted": False, "error": None}
        if list(rt.status.argv) != argv or rt.status.state.value != "ready":
            try:
                restarted = await self._restart(spec.server, argv=argv, reason=f"search {search_id} ends on {what}")
                out["restarted"] = True
                if restarted.status.state.value != "ready" or list(restarted.status.argv) != argv:
                    out["error"] = f"the restart ended {restarted.status.state.value}" + (
                        f" ({restarted.status.crash_class})" if restarted.status.crash_class else "")
            except Exception as exc:  # noqa: BLE001 - refused (read-only, a lock, a bad value): said, not raised
                out["error"] = f"not restarted: {exc}"
        st = rt.status
        out["state"] = st.state.value
        running = list(st.argv) == argv and st.state.value == "ready"
        if running:
            out["text"] = f"{spec.server} runs {what}" if best is not None else f"nothing won: {spec.server} runs {what}"
        else:
            out["text"] = (f"{spec.server} should run {what}, but {out['error'] or 'it is ' + st.state.value}; "
                           f"it runs {' '.join(st.argv) or 'nothing'} ({st.state.value})")
        return out

    async def _next(self, spec: SearchSpec, study) -> Step | None:
        """The strategy's next trial; the optuna study's proposal while it explores."""
        if study is not None and explored(self.trials) < explore_budget(spec):
            tried = {t.point: t for t in self.trials}
            point = await asyncio.to_thread(study.ask, tried)
            if point is not None:
                return Step("explore", point)
        return next_step(spec, self.trials)

    async def _cancel_left_items(self, search_id: str) -> None:
        """A resumed search: the todo item of the trial the exited optui was running is cancelled."""
        prefix = f"search {search_id} #"
        left = [t for t in self._todos.items if t.content.startswith(prefix) and not t.done]
        for item in left:
            await self._close_item(item.id, "its search's optui exited during this trial")

    async def _watch_stop(self, name: str, search_id: str, since_seq: int) -> None:
        """Stop when another process journals a search.stop for this search."""
        j = self._writer.journal
        while not self._stop:
            await asyncio.sleep(STOP_POLL_S)
            asks = await self._writer.call(lambda: j.events(since_seq=since_seq, target=f"search:{name}", types=[SEARCH_STOP]))
            if any(e.data.get("search_id") in (search_id, None) for e in asks):
                self.stop()

    async def _stopper(self, name: str, search_id: str, since_seq: int) -> str:
        """Who stopped the search: the actor of its newest ``search.stop`` (``optui search
        stop``, another TUI's ``S``, an agent's request, with ``approved_by`` when one
        approved it), else "the operator" (this process's ``S``, Ctrl-C)."""
        j = self._writer.journal
        asks = await self._writer.call(lambda: j.events(since_seq=since_seq, target=f"search:{name}", types=[SEARCH_STOP]))
        ask = next((e for e in reversed(asks) if e.data.get("search_id") in (search_id, None)), None)
        if ask is None:
            return "the operator"
        approved = ask.data.get("approved_by")
        return ask.actor + (f" (approved by {approved})" if approved else "")

    async def _trial(self, spec: SearchSpec, name: str, search_id: str, step: Step) -> Trial | None:
        """Run one trial as a todo run; None when the search was stopped during it."""
        w, j = self._writer, self._writer.journal
        number = len(self.trials) + 1
        sets, unset = spec.change(step.point)
        experiment = {"server": spec.server, "set": sets, "unset": unset, "bench": [spec.bench]}
        flags = point_text(step.point) or "(fixed flags only)"
        content = f"search {search_id} #{number}{' (re-run)' if step.phase == 'confirm' else ''}: {flags}"
        item = await w.call(lambda: self._todos.add(content, "low", experiment))
        self._todo_id = item.id
        runs = self._todo_runs
        runs.enqueue([item])
        self._on_change()
        await runs.wait()  # the queue's task: this trial (after whatever the operator queued first)
        outcome = next((o for o in reversed(runs.outcomes) if o.todo_id == item.id), None)
        if outcome is None:
            raise SessionError(f"search: the todo run of #{item.id} ended without an outcome")
        exp = await w.call(lambda: self._experiment_of(item.id))
        if outcome.status == "aborted" or (self._stop and outcome.status != "ok"):
            self._stop = True  # the todo queue's own stop (S) ends the search too
            await self._until_idle(spec.server)
            await self._close_item(item.id, "search stopped during this trial")
            return None
        if outcome.status == "skipped":
            raise SessionError(f"search: trial #{number}: {outcome.summary}")
        if outcome.status != "ok":
            crash = outcome.crash_class or ("bench_failed" if outcome.step.startswith("bench") else "failed")
            await self._close_item(item.id, outcome.summary)
            return failed(step.point, crash, outcome.summary.splitlines()[0], number=number, phase=step.phase,
                          load=step.load, experiment=exp)
        ids = {r["result_id"] for r in outcome.results}
        stored = await w.call(lambda: [r for r in j.results(server=spec.server, limit=200) if r.id in ids])
        if not stored:
            return failed(step.point, "no_result", "the benchmark stored no result", number=number, phase=step.phase,
                          load=step.load, experiment=exp)
        valid = [r.result for r in stored if comparable(r.result)]  # an invalid or degraded run is never scored
        if not valid:
            why = next((r.result.error for r in stored if r.result.error), "no comparable result")
            return failed(step.point, "bench_failed", f"no valid run: {why}", number=number, phase=step.phase,
                          load=step.load, experiment=exp)
        measured = trial_values(spec.goal, valid)  # the objective's workload only: never a pool
        values = dict(measured.values)
        mem = self._gpu_mem_mib(spec.server)
        if mem is not None:
            values["gpu_mem_mib"] = mem
        if measured.error:
            return replace(failed(step.point, "no_workload", measured.error, number=number, phase=step.phase,
                                  load=step.load, experiment=exp), values=values)
        trial = judge(spec, step.point, values, number=number, phase=step.phase, load=step.load, experiment=exp)
        return replace(trial, run_scores=measured.run_scores)

    async def _until_idle(self, server: str) -> None:
        """A stop cut the trial during its restart: the todo run left the restart to finish on
        its own; the search ends once it has (ready or crashed), never over a half-started server."""
        rt = self._server(server)
        deadline = time.monotonic() + rt.cfg.ready_timeout_s + rt.cfg.stop_timeout_s
        while rt.status.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    async def _load_trial(self, spec: SearchSpec, search_id: str, step: Step) -> Trial | None:
        """One load of the sla strategy: the configuration's server restarted once (when it
        does not run those flags, through the session's checked restart: one experiment for
        every load, as ``serve_sla`` keeps one server), then the preset at ``step.load``
        (one sweep point); None when stopped during it."""
        sla = spec.sla
        assert sla is not None and step.load is not None
        number = len(self.trials) + 1
        rt = self._server(spec.server)
        sets, unset = spec.change(step.point)
        argv = ExperimentSpec(spec.server, sets, tuple(unset)).apply(rt.cfg.argv)
        if list(rt.status.argv) != argv or rt.status.state.value != "ready":
            try:
                restarted = await self._restart(spec.server, argv=argv, reason=f"search {search_id}")
            except SessionError as exc:  # refused before anything stopped (a bad value)
                return failed(step.point, "bad_flag", str(exc), number=number, load=step.load)
            status = restarted.status
            if status.state.value != "ready" or list(status.argv) != argv:
                return failed(step.point, str(status.crash_class or "failed"),
                              f"{spec.server} ended {status.state.value}", number=number, load=step.load)
        if self._stop:
            return None
        exp = await self._writer.call(lambda: self._writer.journal.current_experiment(spec.server))
        sweep = SweepSpec(sla.kind, (int(step.load) if sla.kind == "concurrency" else step.load,))
        self._load_run = run = self._benches.run(spec.bench, sweep=sweep, repeats=self._config.repeat_of(spec.bench))
        self._on_change()
        try:
            await self._benches.wait()
        finally:
            self._load_run = None
        if self._stop or run.view.status == "aborted":
            self._stop = True
            return None
        per_run = [measurements(r) for r in run.view.results if comparable(r)]  # invalid / degraded runs: never scored
        if run.view.status != "ok" or not per_run:
            return failed(step.point, "bench_failed", f"benchmark {spec.bench} {run.view.status}: {run.view.error or 'no result'}",
                          number=number, load=step.load, experiment=exp)
        values = {k: statistics.median([v[k] for v in per_run if k in v]) for k in {k for v in per_run for k in v}}
        mem = self._gpu_mem_mib(spec.server)
        if mem is not None:
            values["gpu_mem_mib"] = mem
        return judge(spec, step.point, values, number=number, load=step.load, experiment=exp)

    def _experiment_of(self, todo_id: int) -> str | None:
        """The exp-NNNN the todo run of ``todo_id`` opened (its todo.run.finished carries it)."""
        events = self._writer.journal.events(target=f"todo:{todo_id}", types=["todo.run.finished"])
        return events[-1].experiment if events else None

    async def _close_item(self, todo_id: int, note: str) -> None:
        """A failed or cut trial's item leaves the open list (cancelled; its run keeps why)."""
        w = self._writer
        with contextlib.suppress(SessionError, ValueError):
            item = await w.call(lambda: w.journal.todo(todo_id))
            if item is not None:
                await w.call(lambda: self._todos.update(item, op="search.trial", status=TodoStatus.CANCELLED, note=note))

    def _gpu_mem_mib(self, server: str) -> float | None:
        """The most memory in use on one GPU of the server's host now (MiB), None unknown."""
        snap = self._gpu_snapshot(self._config.servers[server].host)
        values = [s.mem_used_mib for s in (snap.samples if snap else ()) if s.mem_used_mib is not None]
        return max(values) if values else None

    def _trial_line(self, trial: Trial) -> str:
        spec = self.spec
        assert spec is not None
        head = f"trial {trial.number}{' (re-run)' if trial.phase == 'confirm' else ''}: {point_text(trial.point) or '(fixed flags)'}"
        if trial.status == "failed":
            return f"{head} → infeasible ({trial.crash_class}): {trial.message}"
        text = f"{head} → {spec.goal.metric} {trial.score:.4g}"
        return text + (f", breaks {breaks_text(trial.violated, trial.values)}" if trial.violated else "")

    def _progress(self, *, step: Step | None, todo_step: str, status: str = "running", message: str = "") -> None:
        p, spec = self._value, self.spec
        if p is None or spec is None:
            return
        best = winner(spec, self.trials)
        now = time.time()
        elapsed = now - p.started_at
        done = len(self.trials)
        planned = planned_now(spec, self.trials) if status == "running" else done
        planned = max(planned, done + (1 if step is not None else 0))
        here = done - self._resumed  # trials this process ran (the elapsed time is theirs)
        eta = elapsed / here * (planned - done) if here > 0 and status == "running" else None
        self._value = replace(
            p, trial=done + (1 if step is not None else 0), planned=planned, in_trial=step is not None,
            trial_started_at=now if step is not None else None,
            phase=step.phase if step is not None else p.phase, point=point_text(step.point) if step is not None else p.point,
            step=todo_step, best_score=None if best is None else best.score,
            best_point=None if best is None else point_text(best.point),
            best_n=0 if best is None else best.bench_runs or best.runs,
            infeasible=sum(1 for t in self.trials if not t.feasible), eta_s=None if eta is None else round(eta, 1),
            status=status, message=message)
        self._on_change()


def running_elsewhere(journal: Journal, own_pid: int) -> SearchProgress | None:
    """The search another optui process runs on this campaign (``optui search run`` beside
    the TUI), as its events tell it (:func:`search_status`): the trial in progress, its
    flags and step, the best so far and its n, the ETA, the infeasible ones, the budget's
    note and the process; None when none runs or it is ``own_pid``'s. Reads the journal
    (its thread in the TUI)."""
    data = search_status(journal)
    if data is None or data["status"] != "running" or data.get("pid") == own_pid:
        return None
    best, trials, cur = data.get("best") or {}, data["trials"], data.get("current")
    return SearchProgress(name=data["name"], search_id=data["search_id"], strategy=str(data.get("strategy") or ""),
                          objective=str(data.get("objective") or ""),
                          trial=cur["number"] if cur else len(trials), planned=int(data.get("planned") or 0),
                          phase=cur["phase"] if cur else "", point=cur["flags"] if cur else "",
                          step=cur["step"] if cur else "", best_score=best.get("score"),
                          best_point=best.get("flags"), infeasible=int(data.get("infeasible") or 0),
                          eta_s=data.get("eta_s"), started_at=float(data.get("started_at") or 0.0),
                          in_trial=cur is not None, trial_started_at=cur["started_at"] if cur else None,
                          best_n=int(best.get("bench_runs") or best.get("trials") or 0), note=str(data.get("note") or ""),
                          pid=data.get("pid") if isinstance(data.get("pid"), int) else None)


def ask_to_stop(journal: Journal, progress: SearchProgress, actor: str) -> None:
    """Journal ``search.stop`` for ``progress``'s search: its process reads it within a
    second and stops as ``optui search stop`` makes it (the trial cut, nothing left running)."""
    journal.append(SEARCH_STOP, f"search:{progress.name}", {"search_id": progress.search_id,
                                                             "message": f"stop search {progress.search_id}"}, actor=actor)


def search_status(journal: Journal, name: str | None = None, search_id: str | None = None) -> dict | None:
    """The newest search (of ``name``, else any) as its events tell it, for ``optui search
    status`` in any process: name, search_id, status (running | done | stopped | failed |
    interrupted: its process is gone without a search.finished), strategy, objective,
    planned, eta_s (s left while running, once a trial of its process ended; else None),
    trials (:meth:`Trial.to_json`), best (flags, score, runs, vs: the winner's evidence) or
    None, infeasible (how many trials), pid, spec (as journaled), started_at / finished_at (Unix s; of the
    newest start when resumed), won (the best beat every configuration it was compared with;
    None while running), running (which flags the server was left on: search.finished's,
    None while running), message. ``search_id``: that search (a process reads its own, never
    another's newer one). None: no search."""
    from optui.adapters import proc

    starts = [e for e in journal.events(types=[SEARCH_STARTED]) if (name is None or e.data.get("name") == name)
              and (search_id is None or e.data.get("search_id") == search_id)]
    if not starts:
        return None
    start = starts[-1]
    sid, sname = start.data.get("search_id"), start.data.get("name")
    mine = [e for e in journal.events(target=f"search:{sname}") if e.data.get("search_id") == sid]  # resumed: every start
    trials = [Trial.from_json(e.data) for e in mine if e.type == SEARCH_TRIAL]
    here = sum(1 for e in mine if e.type == SEARCH_TRIAL and e.seq > start.seq)  # the trials of this start's process
    fin = next((e for e in reversed(mine) if e.type == SEARCH_FINISHED and e.seq > start.seq), None)
    pid = start.data.get("pid")
    if fin is not None:
        status = fin.data.get("status", "done")
    else:
        status = "running" if isinstance(pid, int) and proc.pid_alive(pid) else "interrupted"
    planned = start.data.get("planned")
    best, spec = None, None
    try:
        spec = SearchSpec.model_validate(start.data.get("spec") or {})
        planned = planned_now(spec, trials) if status == "running" else max(len(trials), planned or 0)
        top = winner(spec, trials)
        if top is not None:
            comparisons = winner_comparisons(spec, trials)
            best = {"flags": point_text(top.point), "point": [list(p) for p in top.point], "score": top.score,
                    "trials": top.runs, "bench_runs": top.bench_runs, "count_text": top.count_text,
                    "vs": [c.to_json() for c in comparisons], "text": winner_text(spec, top, comparisons)}
    except ValueError:  # a spec this version cannot read: the trials still show, without a best
        pass
    eta, eta_note = None, ""  # as SearchProgress.eta_s: the trials left times the mean trial of this process so far
    if status == "running" and here and isinstance(planned, int):
        eta = round((time.time() - start.ts) / here * max(0, planned - len(trials)), 1)
        left = max(0, planned - len(trials))
        eta_note = f"an estimate: {left} trial{'s' if left != 1 else ''} left at this run's mean trial time"
    elif status == "running":
        eta_note = "no estimate until a trial of this run has ended (each trial restarts the server: no prior time)"
    current = None
    begun = next((e for e in reversed(mine) if e.type == SEARCH_TRIAL_STARTED and e.seq > start.seq), None)
    if status == "running" and begun is not None and int(begun.data.get("number") or 0) > len(trials):
        current = {"number": begun.data.get("number"), "phase": begun.data.get("phase"),
                   "flags": begun.data.get("flags") or "", "point": begun.data.get("point") or [],
                   "load": begun.data.get("load"), "step": _step_of(journal, begun), "started_at": begun.data.get("started_at")}
    return {"name": sname, "search_id": sid, "status": status, "strategy": start.data.get("spec", {}).get("strategy"),
            "objective": start.data.get("spec", {}).get("objective"), "planned": planned, "eta_s": eta,
            "trials": [t.to_json() for t in trials], "best": best, "infeasible": sum(1 for t in trials if not t.feasible),
            "pid": pid, "spec": start.data.get("spec"), "started_at": start.ts, "finished_at": fin.ts if fin else None,
            "current": current, "eta_note": eta_note, "note": start.data.get("note") or "",
            "won": fin.data.get("won") if fin else None, "running": fin.data.get("running") if fin else None,
            "message": (fin.data.get("message") if fin else start.data.get("message")) or ""}


def _step_of(journal: Journal, begun) -> str:
    """The step of the trial ``begun`` (its search.trial.started event) now, from the
    journal: its todo run's newest step ("restart", "ready", "bench tiny run 2/3": the
    results stored since it began, of the preset's repeats), "queued" before any."""
    from optui.core.todo.experiment import TODO_RUN_STEP

    steps = journal.events(since_seq=begun.seq, types=[TODO_RUN_STEP])
    if not steps:
        return "queued"
    last = steps[-1].data
    step = str(last.get("step") or "")
    if step != "bench":
        return step
    name, repeats = str(last.get("bench") or begun.data.get("bench") or ""), int(last.get("repeats") or 1)
    if repeats <= 1:
        return f"bench {name}"
    r0 = int(begun.data.get("result_id0") or 0)
    stored = len(journal.results(limit=repeats, since_id=r0))
    return f"bench {name} run {min(stored + 1, repeats)}/{repeats}"
