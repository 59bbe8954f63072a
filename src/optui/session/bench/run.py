"""One benchmark run as the session sees it: a plan of points (a plain run, a sweep, or
repeats), its output buffer, live progress and results.

An external command (``argv`` preset) runs once per point through
:class:`~optui.session.bench.command.CommandPoint` (``--max-concurrency`` /
``--request-rate`` set per point); the built-in load generator runs one point per
concurrency or rate. Output lines go to a bounded buffer with a running counter, so the UI
fetches "lines since N" in batches; display lines are cut at :data:`DISPLAY_MAX_CHARS`
(the parser still sees up to 64 KiB per line). Every result carries ``extra["run_id"]``
(one id per run: its points and repeats group by it), ``extra["point"]`` and
``extra["repeat"]``.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from optui.adapters.bench_runner import StallWatch
from optui.adapters.shell import LocalShell, Shell
from optui.config import BenchmarkConfig, BuiltinBench
from optui.core.bench.cmd import point_argv, with_run_seed
from optui.core.bench.result import DEFAULT_MAX_FAILED_PCT, BenchResult, apply_failure_threshold
from optui.core.bench.stream import ProgressTracker, is_exit_noise
from optui.core.bench.sweep import Point, SweepSpec, plan_points
from optui.core.bench.validity import StateTimeline, invalid_reason, mark_invalid, max_token_gap_ms
from optui.session.bench.command import CommandPoint
from optui.session.command_log import hide_value
from optui.session.snapshot_types import BenchView

#: Output lines longer than this are cut for display (the log panel never shows more).
DISPLAY_MAX_CHARS = 2000


class BenchRun:
    """A run of benchmark preset ``name`` against ``server`` (see module doc).

    ``sweep`` overrides one knob per point; ``repeats`` runs each point that many times;
    ``shell`` is where an argv command runs (the preset's ``host``); a result whose failed
    requests exceed ``max_failed_pct`` % is "degraded" (never compared) and its point counts
    as failed. ``states``: the server's states during the run (monotonic clock); a result
    measured while it was HUNG or DEGRADED, or whose largest token gap exceeded ``stall_s``,
    is "invalid" with its reason (:mod:`optui.core.bench.validity`) and its point counts as
    failed too.
    """

    def __init__(self, name: str, cfg: BenchmarkConfig, *, base_url: str, max_lines: int,
                 on_change: Callable[[], None], server_healthy: Callable[[], bool], api_key: str | None = None,
                 sweep: SweepSpec | None = None, repeats: int = 1, shell: Shell | None = None,
                 max_failed_pct: float = DEFAULT_MAX_FAILED_PCT, states: StateTimeline | None = None) -> None:
        self.name = name
        self.states = states
        self.max_failed_pct = max_failed_pct  # a result with more failed requests (%) is degraded
        self.shell: Shell = shell or LocalShell(cfg.host)  # where an argv command runs
        self.cfg = cfg
        self.base_url = base_url
        self.on_change = on_change
        #: ``on_command(argv, returncode, duration_s)`` after each external command (command log)
        self.on_command: Callable[[list[str], int | None, float], None] | None = None
        #: the argv of each external command as run (with the ``--seed`` optui added), in order
        self.commands: list[list[str]] = []
        self.server_healthy = server_healthy
        self.api_key = api_key
        self.sweep = sweep
        self.points = self._plan(sweep, repeats)
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.total_lines = 0
        self.tracker = ProgressTracker()
        run_id = f"{int(time.time()):x}-{secrets.token_hex(3)}"
        plan = f"sweep {sweep.describe()}" if sweep else (f"repeat x{repeats}" if repeats > 1 else "")
        self.view = BenchView(name, cfg.server, "running", time.time(), run_id=run_id, plan=plan,
                              points_total=len(self.points))
        self._command: CommandPoint | None = None
        self._aborted = False

    def _plan(self, sweep: SweepSpec | None, repeats: int) -> list[Point]:
        builtin = self.cfg.builtin
        if builtin is None or sweep is not None:
            return plan_points(sweep, repeats)
        # the load generator's own concurrency list is its default sweep
        return [Point(i, r, repeats, concurrency=c) for i, c in enumerate(builtin.concurrency) for r in range(repeats)]

    # -------------------------------------------------------------- output
    def add_line(self, line: str) -> None:
        """Append an output line (counted, bounded, cut for display; the API key hidden)."""
        self.add_lines([line])

    @property
    def pid(self) -> int | None:
        """Process group of the running command (None for the built-in generator)."""
        return self._command.pid if self._command is not None else None

    def mark_finished(self, status: str, error: str | None) -> None:
        """End the run with ``status`` (used when its task is cancelled)."""
        self._update(status=status, error=error, finished_at=time.time())

    def _update(self, **changes) -> None:
        self.view = replace(self.view, **changes)
        self.on_change()

    def add_lines(self, lines: list[str]) -> None:
        """Append output lines (counted, bounded, cut for display; the API key hidden),
        with one ``on_change`` for all of them. ``total_lines`` counts every line ever added;
        ``lines`` keeps the last ``max_lines`` of them (the session's snapshot copies them only
        when ``total_lines`` changed)."""
        key = self.api_key
        for line in lines:
            if key and key in line:
                line = hide_value(line, key)
            if len(line) > DISPLAY_MAX_CHARS:
                line = f"{line[:DISPLAY_MAX_CHARS]} …[{len(line) - DISPLAY_MAX_CHARS} more characters]"
            self.lines.append(line)
        self.total_lines += len(lines)
        self.on_change()

    def _on_output(self, stream: str, lines: list[str]) -> None:
        """A read's output lines (``stream``: "stdout" / "stderr"): kept, and the progress
        they tell (one ``on_change`` for the batch: the UI pulls the lines per frame)."""
        kept = [line for line in lines if not is_exit_noise(line)]
        if kept:
            self.add_lines(kept)
        if self.tracker.lines(lines, time.monotonic()):
            self._update(progress=self.tracker.state)

    def _on_progress(self, text: str) -> None:
        if self.tracker.progress(text, time.monotonic()):
            self._update(progress=self.tracker.state)

    # ----------------------------------------------------------------- run
    def abort(self) -> None:
        """Stop the run; a running command's process group is killed."""
        self._aborted = True
        if self._command is not None:
            self._command.abort()

    async def run(self) -> BenchView:
        """Execute the plan; returns the final view (status + results). A run with some
        failed points is "ok" when others produced numbers (``error`` says what failed);
        an abort or a stall ends it at once."""
        results: list[BenchResult] = []
        failures: list[str] = []
        partial: list[str] = []
        status = error = None
        for done, point in enumerate(self.points):
            if self._aborted:
                break
            self._update(point=point.label(), points_done=done)
            began = time.monotonic()
            try:
                if self.cfg.builtin is not None:
                    point_status, point_error, got = await self._watched_builtin(point, self.cfg.builtin)
                else:
                    point_status, point_error, got = await self._run_command(point)
            except OSError as exc:
                self.add_line(f"optui: cannot start benchmark: {exc}")
                point_status, point_error, got = "failed", str(exc), ()
            bad = self.states.bad_seconds(began, time.monotonic()) if self.states is not None else {}
            for result in got:
                result.extra.update(run_id=self.view.run_id, point=point.label() or None, repeat=point.repeat)
                apply_failure_threshold(result, self.max_failed_pct)
                why = invalid_reason(bad, max_gap_ms=max_token_gap_ms(result), stall_s=self.cfg.stall_s)
                if why is not None and result.status == "ok":
                    mark_invalid(result, why)
                    self.add_line(f"optui: {point.label() or 'run'} invalid: {why} — never compared")
            if point_status == "ok" and got and any(r.status == "invalid" for r in got) and not any(
                    r.status == "ok" for r in got):
                point_status, point_error = "failed", next((r.error for r in got if r.error), point_error)
            elif point_status == "ok" and got and not any(r.status == "ok" for r in got):
                # numbers, but too many requests failed: the point failed (e.g. the server was killed mid-run)
                point_status, point_error = "failed", next((r.error for r in got if r.error), point_error)
                self.add_line(f"optui: {point.label() or 'run'} degraded: {point_error} — never compared")
            results.extend(got)
            self._update(results=tuple(results), points_done=done + 1)
            if point_status in ("aborted", "stalled"):
                status, error = point_status, point_error
                break
            if point_status != "ok":
                failures.append(point_error or "failed")
            elif point_error:  # numbers, but some requests failed (e.g. the server died mid-run)
                partial.append(f"{point.label() or 'run'}: {point_error}" if len(self.points) > 1 else point_error)
        if status is None:
            if self._aborted:
                status, error = "aborted", "aborted by operator"
            elif any(r.status == "ok" for r in results):
                status = "ok"
                error = f"{len(failures)} of {len(self.points)} runs failed: {failures[0]}" if failures else None
                if partial:
                    error = "; ".join(filter(None, [error, *partial]))
            else:
                status, error = "failed", failures[0] if failures else "no result"
        self._update(status=status, error=error, finished_at=time.time())
        return self.view

    async def _run_command(self, point: Point) -> tuple[str, str | None, tuple[BenchResult, ...]]:
        argv = point_argv(self.cfg.argv or [], concurrency=point.concurrency, request_rate=point.request_rate)
        # fresh prompts for every run, sweep point and repeat (a client's default seed sends the
        # same prompts each time, and the server's prefix cache then serves the benchmark)
        from optui.adapters.loadgen import new_seed  # httpx: not at the TUI's first frame

        argv, seed = with_run_seed(argv, new_seed())
        self.commands.append(list(argv))
        self.add_line(("$ " if self.shell.local else f"{self.shell.host}$ ") + " ".join(argv))
        self.tracker = ProgressTracker()
        self._update(progress=self.tracker.state)
        self._command = CommandPoint(argv, cwd=self.cfg.cwd, env=self.cfg.env, stall_s=self.cfg.stall_s,
                                     silent_s=self.cfg.silent_s, server_healthy=self.server_healthy, on_lines=self._on_output,
                                     on_progress=self._on_progress, tool=self.cfg.tool, shell=self.shell)
        if self._aborted:
            self._command.abort()
        outcome = await self._command.run()
        if seed is not None:  # recorded with the result: `--seed N` in the preset's argv reproduces it
            for result in outcome.results:
                if result.workload.seed is None:
                    result.workload = replace(result.workload, seed=seed)
        if self.on_command is not None:
            self.on_command(argv, outcome.returncode, outcome.duration_s)
        for note in outcome.notes:
            self.add_line(note)
        why = f": {outcome.error}" if outcome.status in ("stalled", "aborted") and outcome.error else ""
        self.add_line(f"optui: benchmark {outcome.status}{why} (exit code {outcome.returncode}, {outcome.duration_s:.1f}s)")
        return outcome.status, outcome.error, outcome.results

    async def _watched_builtin(self, point: Point, b: BuiltinBench) -> tuple[str, str | None, tuple[BenchResult, ...]]:
        """:meth:`_run_builtin` (``b`` is the preset's ``builtin``) under the stall watchdog external clients have
        (:class:`~optui.adapters.bench_runner.StallWatch`, the preset's ``stall_s`` /
        ``silent_s``): every streamed token is progress; a point without any for that long
        is cancelled (its requests with it) and ends "stalled"."""
        from optui.adapters.loadgen import ON_TOKEN

        watch = StallWatch(self.cfg.stall_s, self.cfg.silent_s, self.server_healthy, what="token streamed")
        hook = ON_TOKEN.set(watch.poke)
        try:
            load = asyncio.ensure_future(self._run_builtin(point, b))  # the task copies the hook with its context
        finally:
            ON_TOKEN.reset(hook)
        dog = asyncio.ensure_future(watch.wait_stalled())
        try:
            await asyncio.wait({load, dog}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not load.done():
                load.cancel()  # cancelled from outside (abort), or stalled: no request outlives the run
            dog.cancel()
            await asyncio.gather(load, dog, return_exceptions=True)
        if not load.cancelled() and load.exception() is None:
            return load.result()
        if load.cancelled() and dog.done() and not dog.cancelled():
            reason = dog.result()
            self.add_line(f"optui: benchmark stalled: {reason}; its requests were cancelled")
            return "stalled", reason, ()
        return load.result()  # re-raises what the load raised

    async def _run_builtin(self, point: Point, b: BuiltinBench) -> tuple[str, str | None, tuple[BenchResult, ...]]:
        from optui.adapters.loadgen import describe_server_side, run_builtin
        from optui.core.bench.format import format_sglang_block

        conc = point.concurrency if point.concurrency is not None else b.concurrency[0]
        rate = point.request_rate if point.request_rate is not None else b.request_rate
        rate = rate if rate else math.inf
        rate_text = "" if math.isinf(rate) else f", {rate:g} req/s"
        self.add_line(f"optui load generator: {b.prompts} prompts, {b.input_len} in / {b.output_len} out tokens, "
                      f"concurrency {conc}{rate_text} {point.label()}".rstrip())
        self.tracker = ProgressTracker()
        label = point.label() or f"c={conc}"

        def progress(done: int, total: int) -> None:
            self.tracker.set_counts(done, total, time.monotonic(), label)
            self._update(progress=self.tracker.state)

        result = await run_builtin(self.base_url, b, concurrency=conc, request_rate=rate, api_key=self.api_key,
                                   run_index=point.index * point.repeats + point.repeat, on_progress=progress)
        for line in format_sglang_block(result, backend="optui-loadgen").splitlines() + describe_server_side(result):
            self.add_line(line)
        return ("ok" if result.status == "ok" else "failed"), result.error, (result,)
