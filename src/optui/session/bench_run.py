"""One benchmark run as the session sees it: output buffer, progress, parsed results.

An external command (``argv`` preset) streams through
:class:`~optui.adapters.bench_runner.CommandRun` and its output is parsed when it ends; the
built-in load generator runs one point per concurrency. Output lines go to a bounded
buffer with a running counter, so the UI can fetch "lines since N" in batches.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from optui.adapters.bench_runner import CommandRun
from optui.config import BenchmarkConfig
from optui.core.bench_result import BenchResult


@dataclass(frozen=True, slots=True)
class BenchProgress:
    """Progress of the running point: ``done``/``total`` requests, rate (req/s), ETA (s)."""

    done: int = 0
    total: int | None = None
    rate: float | None = None
    eta_s: float | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class BenchView:
    """What the UI shows of the current (or last) run."""

    name: str
    server: str
    status: str  # running | ok | failed | aborted | stalled
    started_at: float
    finished_at: float | None = None
    progress: BenchProgress = field(default_factory=BenchProgress)
    results: tuple[BenchResult, ...] = ()
    error: str | None = None


class BenchRun:
    """A run of benchmark preset ``name`` against ``server`` (see module doc)."""

    def __init__(self, name: str, cfg: BenchmarkConfig, *, base_url: str, max_lines: int,
                 on_change: Callable[[], None], server_healthy: Callable[[], bool], api_key: str | None = None) -> None:
        self.name = name
        self.cfg = cfg
        self.base_url = base_url
        self.on_change = on_change
        self.server_healthy = server_healthy
        self.api_key = api_key
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.total_lines = 0
        self._parse_lines: list[str] = []
        self._parse_cap = 200_000
        self.view = BenchView(name, cfg.server, "running", time.time())
        self._command: CommandRun | None = None
        self._aborted = False

    # -------------------------------------------------------------- output
    def add_line(self, line: str) -> None:
        """Append an output line (counted, bounded)."""
        self.lines.append(line)
        self.total_lines += 1
        if len(self._parse_lines) < self._parse_cap:
            self._parse_lines.append(line)
        self.on_change()  # cheap: the UI pulls lines in batches via lines_since()

    def lines_since(self, seen: int) -> tuple[list[str], int]:
        """Lines added after the first ``seen`` ones (those still buffered) and the new
        total. A caller that fell behind the buffer gets the buffered tail."""
        new = self.total_lines - seen
        if new <= 0:
            return [], self.total_lines
        new = min(new, len(self.lines))
        return list(self.lines)[-new:], self.total_lines

    @property
    def pid(self) -> int | None:
        """Process group of the running command (None for the built-in generator)."""
        return self._command.pid if self._command is not None else None

    def mark_finished(self, status: str, error: str | None) -> None:
        """End the run with ``status`` (used when its task is cancelled)."""
        self._update(status=status, error=error, finished_at=time.time())

    def _update(self, **changes) -> None:
        from dataclasses import replace

        self.view = replace(self.view, **changes)
        self.on_change()

    def _on_progress(self, text: str) -> None:
        from optui.core.bench_parse import parse_progress

        p = parse_progress(text)
        if p is not None:
            self._update(progress=BenchProgress(p.done, p.total, p.rate, p.eta_s, text))
        else:
            self._update(progress=BenchProgress(self.view.progress.done, self.view.progress.total, text=text))

    # ----------------------------------------------------------------- run
    def abort(self) -> None:
        """Stop the run; its process group is killed."""
        self._aborted = True
        if self._command is not None:
            self._command.abort()

    async def run(self) -> BenchView:
        """Execute the preset; returns the final view (status + results)."""
        try:
            if self.cfg.builtin is not None:
                await self._run_builtin()
            else:
                await self._run_command()
        except OSError as exc:
            self.add_line(f"optui: cannot start benchmark: {exc}")
            self._update(status="failed", error=str(exc), finished_at=time.time())
        return self.view

    async def _run_command(self) -> None:
        from optui.core.bench_parse import parse_bench_output

        self.add_line("$ " + " ".join(self.cfg.argv or []))
        self._command = CommandRun(
            self.cfg.argv or [],
            on_line=lambda _stream, line: self.add_line(line),
            on_progress=self._on_progress,
            cwd=self.cfg.cwd,
            env=self.cfg.env,
            stall_s=self.cfg.stall_s,
            server_healthy=self.server_healthy,
        )
        if self._aborted:
            self._command.abort()
        outcome = await self._command.run()
        results = parse_bench_output("\n".join(self._parse_lines))
        if outcome.status != "exited":
            status, error = outcome.status, outcome.reason
        elif any(r.status == "ok" for r in results):
            status, error = "ok", None
        else:
            status = "failed"
            error = next((r.error for r in results if r.error), None) or f"no result block (exit code {outcome.returncode})"
        self.add_line(f"optui: benchmark {status} (exit code {outcome.returncode}, {outcome.duration_s:.1f}s)")
        self._update(status=status, error=error, results=tuple(results), finished_at=time.time())

    async def _run_builtin(self) -> None:
        from optui.adapters.loadgen import run_load
        from optui.core.bench_format import format_sglang_block

        b = self.cfg.builtin
        results: list[BenchResult] = []
        for conc in b.concurrency:
            if self._aborted:
                break
            self.add_line(f"optui load generator: {b.prompts} prompts, {b.input_len} in / {b.output_len} out tokens, concurrency {conc}")
            self._update(progress=BenchProgress(0, b.prompts, text=f"concurrency {conc}"))
            t0 = time.monotonic()

            def progress(done: int, total: int, conc=conc, t0=t0) -> None:
                elapsed = time.monotonic() - t0
                rate = done / elapsed if elapsed > 0 else None
                eta = (total - done) / rate if rate else None
                self._update(progress=BenchProgress(done, total, rate, eta, f"c={conc} {done}/{total}"))

            result = await run_load(
                self.base_url, endpoint=b.endpoint, model=b.model, input_len=b.input_len, output_len=b.output_len,
                num_prompts=b.prompts, concurrency=conc, request_rate=b.request_rate if b.request_rate else math.inf,
                ignore_eos=b.ignore_eos, warmup=b.warmup, random_lengths=b.random_lengths, api_key=self.api_key,
                on_progress=progress,
            )
            results.append(result)
            for line in format_sglang_block(result, backend="optui-loadgen").splitlines():
                self.add_line(line)
            self._update(results=tuple(results))
        ok = any(r.status == "ok" for r in results)
        status = "aborted" if self._aborted else ("ok" if ok else "failed")
        error = None if ok else next((r.error for r in results if r.error), "no result")
        self._update(status=status, error=error, finished_at=time.time())
