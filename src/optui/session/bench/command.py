"""One run of an external benchmark command: stream it, then read its results — from the
tool's own result file when the argv asks for one (SGLang ``--output-file``, vLLM
``--save-result``), completed by and falling back to the parsed stdout/stderr.

The command runs through a :class:`~optui.adapters.shell.Shell`: this machine, or the SSH
host of the preset (``[benchmarks.X] host``) — same streaming, progress and parsing; the
result file is then read on that host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from optui.adapters import result_files
from optui.adapters.bench_runner import CommandRun
from optui.adapters.shell import LocalShell, Shell
from optui.core.bench.cmd import merge_results, result_file_spec, workload_args
from optui.core.bench.parse import parse_bench_output
from optui.core.bench.result import BenchResult
from optui.core.bench.stream import ResultCapture


@dataclass(frozen=True, slots=True)
class PointOutcome:
    """How one command run went: ``status`` "ok" | "failed" | "aborted" | "stalled",
    ``error`` (why, for anything but ok; for ok: how many requests failed, if any), ``returncode``, ``duration_s``, ``results``,
    ``notes`` (lines for the output log: which source the results came from)."""

    status: str
    error: str | None
    returncode: int | None
    duration_s: float
    results: tuple[BenchResult, ...]
    notes: tuple[str, ...] = ()


class CommandPoint:
    """Run ``argv`` once (see module doc). ``on_line(stream, line)`` gets every output
    line, or ``on_lines(stream, lines)`` each read's lines at once (give one);
    ``on_progress(line)`` every ``\\r`` progress redraw. :meth:`abort` from anywhere.
    ``shell``: where it runs (default: this machine)."""

    def __init__(self, argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str] | None, stall_s: float,
                 silent_s: float | None = None, server_healthy: Callable[[], bool], on_line: Callable[[str, str], None] | None = None,
                 on_progress: Callable[[str], None], tool: str = "auto", shell: Shell | None = None,
                 on_lines: Callable[[str, list[str]], None] | None = None) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.shell: Shell = shell or LocalShell()
        self.tool = tool
        self.capture = ResultCapture()
        self._on_line = on_line

        def lines(stream: str, texts: list[str]) -> None:
            self.capture.add_lines(texts)
            if on_lines is not None:
                on_lines(stream, texts)
            elif on_line is not None:
                for text in texts:
                    on_line(stream, text)

        self.command = CommandRun(self.argv, on_lines=lines, on_progress=on_progress, cwd=cwd, env=env,
                                  stall_s=stall_s, silent_s=silent_s, server_healthy=server_healthy, shell=self.shell)

    @property
    def pid(self) -> int | None:
        """The command's process group id once started."""
        return self.command.pid

    def abort(self, reason: str = "aborted by operator") -> None:
        """Kill the command's process group."""
        self.command.abort(reason)

    async def run(self) -> PointOutcome:
        """Start, stream, wait, read results. Raises OSError when the program cannot start."""
        spec = result_file_spec(self.argv, self.tool)
        before = await self._mark(spec) if spec else None
        outcome = await self.command.run()
        log_results = await asyncio.to_thread(parse_bench_output, self.capture.text())
        notes: list[str] = []
        results = log_results
        if spec is not None and outcome.status == "exited":
            read = await self._read_new(spec, before)
            if read.results:
                results = merge_results(read.results, log_results, workload_args(self.argv))
                notes.append(f"optui: {len(read.results)} result(s) read from {read.path}")
            else:
                notes.append(f"optui: result file not used ({read.error}); results parsed from the output")
        if outcome.status != "exited":
            status, error = outcome.status, outcome.reason
        elif any(r.status == "ok" for r in results):
            lost = sum(r.failed or 0 for r in results if r.status == "ok")
            total = lost + sum(r.completed or 0 for r in results if r.status == "ok")
            status, error = "ok", f"{lost} of {total} requests failed" if lost else None
        else:
            status = "failed"
            error = next((r.error for r in results if r.error), None) or f"no result block (exit code {outcome.returncode})"
        return PointOutcome(status, error, outcome.returncode, outcome.duration_s, tuple(results), tuple(notes))


    async def _mark(self, spec) -> result_files.FileMark:
        if self.shell.local:
            return await asyncio.to_thread(result_files.mark, spec, self.cwd)
        from optui.adapters.shell import ShellError

        try:
            return await result_files.mark_remote(self.shell, spec, self.cwd)
        except ShellError:
            return result_files.FileMark()

    async def _read_new(self, spec, before) -> result_files.FileRead:
        if self.shell.local:
            return await asyncio.to_thread(result_files.read_new, spec, self.cwd, before)
        return await result_files.read_new_remote(self.shell, spec, self.cwd, before)
