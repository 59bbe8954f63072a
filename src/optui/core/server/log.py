"""Reading a server's log as it streams: startup phase, readiness line, crash class.

Formats (SGLang 0.5.2 / 0.5.23, vLLM 0.33 and 2025, llama.cpp ``llama-server``) and the
exact strings are in ``../shared/reference/servers_and_bench.md`` section 4 and
``../shared/reference/llamacpp_peer.md``. Every pattern is matched by regex anywhere in the
line (never by position), so rank prefixes (``[... TP0]``, ``(EngineCore_DP0 pid=1)``) and
timestamps don't matter.
"""

from __future__ import annotations

import re
import signal
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from optui.core.server.state import CrashClass, PhaseMark

# Canonical phases, in startup order.
PHASES = (
    "launching",
    "init_dist",
    "loading_weights",
    "compile",
    "kv_cache",
    "cuda_graph",
    "http_up",
    "warmup",
    "probe",
    "ready",
)

_P = re.compile
# (phase, pattern, kinds) — kinds None = every kind.
_PHASE_PATTERNS: list[tuple[str, re.Pattern[str], frozenset[str] | None]] = [
    ("launching", _P(r"server_args=|non-default args:|args: Namespace\(|vLLM (API )?server version|build: \d+|llama_server: initializing"), None),
    ("init_dist", _P(r"Init torch distributed begin|Init parallel begin|Initializing a V1 LLM engine|Waiting for \d+ local"), None),
    ("loading_weights", _P(r"Load weight begin|Loading safetensors checkpoint shards|Starting to load model|loading model|llama_model_loader"), None),
    # vLLM 0.32 CPU: "Warming up model for the compilation..." (compile warm-up), "saved AOT
    # compiled function" / "Directly load AOT compiled function" (the compile cache)
    ("compile", _P(r"Dynamo bytecode transform|Compiling a graph|torch\.compile t|Warming up model for the compilation"
                   r"|AOT compiled function"), None),
    # vLLM 0.32 CPU: "CPU KV cache size: 29,120 tokens" (GPU: "GPU KV cache size: ...")
    ("kv_cache", _P(r"KV Cache is allocated|Memory pool end|Available KV cache memory|[GC]PU KV cache size|# GPU blocks|llama_kv_cache|llama_context: |load_model: initializing, n_slots"), None),
    ("cuda_graph", _P(r"(?i)capture cuda graph begin|Capturing batches|Capturing CUDA graphs|CUDA graph begin"), None),
    ("http_up", _P(r"Uvicorn running on|Started server process|Starting vLLM (API )?server|Available routes are|HTTP server is listening|server is listening on|\"msg\":\s?\"HTTP server listening"), None),
    ("warmup", _P(r"\"(GET /(get_)?model_info|POST /generate) HTTP"), frozenset({"sglang"})),
]
# The line that means "ready" per server kind (None: any kind).
_READY_PATTERNS: list[tuple[re.Pattern[str], frozenset[str] | None]] = [
    (_P(r"The server is fired up and ready to roll!"), frozenset({"sglang", "openai"})),
    (_P(r"Application startup complete\."), frozenset({"vllm"})),
    # llama.cpp: "llama_server: listening on http://..." (0.3.36 vendored build, see
    # tests/peers/NOTES.md); older builds: "main: server is listening on ... - starting the
    # main loop" (late 2024: "main: HTTP server is listening, hostname: ..." comes before the
    # model loads, so it is not ready); 2024 JSON-lines builds: "msg":"all slots are idle"
    (_P(r"llama_server: listening on http|^main: server is listening on |server is listening on .*starting the main loop"
        r"|all slots are idle"), frozenset({"llamacpp"})),
]
# Crash signatures, most specific class first.
_CRASH_PATTERNS: list[tuple[CrashClass, re.Pattern[str]]] = [
    (
        CrashClass.BAD_FLAG,
        _P(
            r"error: unrecognized arguments|error: ambiguous option|error: argument [^:]+: "
            r"|ignored explicit argument|error: invalid argument|error: unknown argument"
            r"|error: the following arguments are required|invalid value for argument"
            r"|should be provided as the first positional argument|error while handling argument"
            r"|No common block size for"
        ),
    ),
    (
        CrashClass.PORT_IN_USE,
        _P(r"(?i)address already in use|port \d+ is used by process|couldn't bind HTTP server socket|Errno 98"),
    ),
    (
        CrashClass.OOM,
        _P(
            r"(?i)CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|Not enough memory\. "
            r"|No available memory for the cache blocks|larger than the available KV cache memory"
            r"|Failed to load model - not enough GPU memory|(Prefill|Decode) out of memory"
            r"|std::bad_alloc|failed to allocate .* buffer|KV cache (is )?too small|cudaMalloc failed: out of memory"
            r"|Result=oom-kill|less than requested memory for kv"
        ),
    ),
    (
        CrashClass.NCCL,
        _P(
            r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|NCCL WARN"
            r"|Watchdog caught collective operation timeout|ProcessGroupNCCL"
        ),
    ),
    (
        CrashClass.KILLED,
        _P(r"\(exit code:? -9\)|exit code -9\b|^\s*Killed\s*$|Result=signal"),
    ),
    (
        CrashClass.TIMEOUT,
        _P(r"(?i)watchdog timeout \(self\.watchdog_timeout"),
    ),
    (
        CrashClass.LOAD_FAILED,
        _P(
            r"Initialization failed"
            r"|(?i:failed to load model)|error loading model|exiting due to model loading error|FileNotFoundError|does not appear to have a file"
            r"|Repository Not Found|gguf_init_from_file"
            r"|scheduler died during initialization|scheduler is dead"
            r"|invalid magic characters|failed to read magic|failed to open GGUF file"
        ),
    ),
    # Wrappers: vLLM's and SGLang's "a startup/worker failed, the exception follows" lines
    # (vllm/v1/engine/core.py, v1/engine/utils.py, v1/executor/multiproc_executor.py;
    # sglang managers/scheduler.py). They say that it failed, not why: the exception printed
    # below them decides the class (:meth:`LogClassifier.crash_class`), alone they are unknown.
    (
        CrashClass.UNKNOWN,
        _P(
            r"EngineCore failed to start|Engine core initialization failed|EngineCore encountered (a fatal error|an issue)"
            r"|WorkerProc failed to start|WorkerProc hit an exception|(Scheduler|TokenizerManager|DetokenizerManager) hit an exception"
            r"|Received sigquit from a child process|Triggering SIGQUIT for cleanup"
            # multiprocessing's own line before the traceback of a child that raised
            # (BaseProcess._bootstrap): vLLM's engine core died, whatever it logged before
            r"|(?:^|\) )Process EngineCore\w*:\s*$"
        ),
    ),
]
# A stop by SIGTERM, not a crash (the lines after it are the shutdown's, never a crash's):
# SGLang 0.5.23's parent when its process group got SIGTERM (optui's stop): "Subprocess
# scheduler_0 (pid=12) crashed with exit code -15. Triggering SIGQUIT for cleanup..."; its
# parent alone: "SIGTERM received. signum=None frame=None. Draining requests and shutting down...".
_SIGTERM_STOP = _P(r"crashed with exit code -15\b|\bSIGTERM received\b")
# A vLLM log record whose message is an exception line: "ERROR 05-20 10:00:00 [core.py:710]
# RuntimeError: CUDA error: ..." (the last line of a logged traceback, pasted without the rest).
_VLLM_ERROR_EXCEPTION = _P(r"\bERROR \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \[[\w./-]+:\d+\] "
                           r"((?:[A-Za-z_][\w.]*)?(?:Error|Exception)\b.*)")
# Python 3.11+ error-position marker lines under a traceback's code line: "    ^^^^^^^^".
# Searched, so a log prefix before it ("(EngineCore pid=9) ERROR ... [core.py:1000] ") is allowed.
_CARET_LINE = _P(r"(?:^|[\])] )[\s^~]*\^[\s^~]*$")
# SGLang's parent kills its own process tree (SIGKILL: rc -9, a shell prints "Killed") after a
# child failed (sglang entrypoints/engine.py, utils/watchdog.py): then "killed" is not the cause.
_SELF_KILL = _P(r"Received sigquit from a child process|Triggering SIGQUIT for cleanup")
_BARE_KILLED = _P(r"^\s*Killed\s*$")
# The class of a traceback's final exception when no signature in its message decided it,
# by the exception's (unqualified) name: vLLM's argument and config checks raise ValueError
# (pydantic ValidationError in the config classes), argparse ArgumentError/ArgumentTypeError.
_EXCEPTION_CLASSES: dict[str, CrashClass] = {
    "OutOfMemoryError": CrashClass.OOM,
    "MemoryError": CrashClass.OOM,
    "ValueError": CrashClass.BAD_FLAG,
    "ValidationError": CrashClass.BAD_FLAG,
    "ArgumentError": CrashClass.BAD_FLAG,
    "ArgumentTypeError": CrashClass.BAD_FLAG,
    "FileNotFoundError": CrashClass.LOAD_FAILED,
    "RepositoryNotFoundError": CrashClass.LOAD_FAILED,
    "GatedRepoError": CrashClass.LOAD_FAILED,
    "RevisionNotFoundError": CrashClass.LOAD_FAILED,
    "EntryNotFoundError": CrashClass.LOAD_FAILED,
    "LocalEntryNotFoundError": CrashClass.LOAD_FAILED,
    "HFValidationError": CrashClass.LOAD_FAILED,
    "SafetensorError": CrashClass.LOAD_FAILED,
    "DistBackendError": CrashClass.NCCL,
}
_EXCEPTION_NAME = _P(r"([A-Za-z_][\w.]*)")
# Lines that say *why* a load failed, not only that it did (llama.cpp prints "failed to load
# model" four times after the one line naming the cause; tests/fixtures/llamacpp_*.log).
_CAUSE_PATTERNS = [
    _P(r"invalid magic characters|failed to read magic|failed to open GGUF file|does not appear to have a file"
       r"|Repository Not Found|No such file or directory"),
]


class _CaseFolded:
    """A ``(?i)`` pattern searched as lowercase text in lowercased lines: Python's regex
    engine gives up its literal fast scan under IGNORECASE (the OOM signature cost 21 µs a
    line, the whole classifier 61 µs: a 100 MB log flood froze the window). Same matches."""

    __slots__ = ("pattern", "_rx")

    def __init__(self, pattern: re.Pattern[str]) -> None:
        text = pattern.pattern[4:]
        assert not re.search(r"\\[A-Z]", text), f"an uppercase escape does not survive lowercasing: {text}"
        self.pattern = pattern.pattern
        self._rx = re.compile(text.lower())

    def search(self, line: str) -> re.Match[str] | None:
        return self._rx.search(line.lower())


def _fast(pattern: re.Pattern[str]):
    return _CaseFolded(pattern) if pattern.pattern.startswith("(?i)") else pattern


_CRASH_PATTERNS = [(crash_class, _fast(pattern)) for crash_class, pattern in _CRASH_PATTERNS]
_PHASE_PATTERNS = [(phase, _fast(pattern), kinds) for phase, pattern, kinds in _PHASE_PATTERNS]
_TRACEBACK_END = _P(r"^\s*\w[\w.]*(Error|Exception|Interrupt)\b.*")
_TRACEBACK_START = "Traceback (most recent call last)"
_SGLANG_TS = _P(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)")
_VLLM_TS = _P(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
# llama.cpp: minutes.seconds.milliseconds.microseconds since process start (tests/peers/NOTES.md)
_LLAMA_TS = _P(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) [IWED] ")


#: Endpoints that monitors poll (optui's own probe among them): health, metrics, slots,
#: server info. Their access lines are most of a long-running server's log.
PROBE_PATHS = frozenset({
    "/health", "/health_generate", "/v1/health", "/ping", "/metrics", "/slots", "/props", "/server_info",
    "/get_server_info", "/version", "/load", "/v1/loads",
})
# uvicorn (SGLang, vLLM): `INFO:     127.0.0.1:50000 - "GET /health HTTP/1.1" 200 OK`;
# llama-server: `srv  log_server_r: request: GET /health 127.0.0.1 200` (`done request:` since 2025)
_ACCESS_LINE = _P(r'"(?:GET|HEAD) (/[^ ?"]*)[^ "]* HTTP/[\d.]+" \d{3}|\brequest: (?:GET|HEAD) (/[^ ?]*)\S* \S+ \d{3}\b')


def is_probe_line(line: str) -> bool:
    """True for an HTTP access line of a monitoring request (a GET of one of
    :data:`PROBE_PATHS`, any status) in uvicorn's or llama-server's format; the server log
    view can hide them."""
    m = _ACCESS_LINE.search(line)
    return m is not None and (m.group(1) or m.group(2)) in PROBE_PATHS


def line_timestamp(line: str) -> float | None:
    """Seconds of a log line's own timestamp, or None: Unix time for SGLang, year-less for
    vLLM, seconds since process start for llama.cpp (all only compared with each other)."""
    relative = process_relative_time(line)
    if relative is not None:
        return relative
    m = _SGLANG_TS.match(line)
    try:
        if m:
            text = m.group(1)
            fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
            return datetime.strptime(text, fmt).timestamp()
        m = _VLLM_TS.search(line)
        if m:
            return datetime.strptime("2000-" + m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        return None
    return None


def process_relative_time(line: str) -> float | None:
    """Seconds since process start printed by llama.cpp (µs resolution), else None: the
    ready gate uses it as the phase time, since llama.cpp's log trails its HTTP state."""
    m = _LLAMA_TS.match(line)
    if not m:
        return None
    minutes, sec, ms, us = (int(g) for g in m.groups())
    return minutes * 60 + sec + ms / 1e3 + us / 1e6


@dataclass(frozen=True, slots=True)
class CrashHint:
    """A log line that points at a crash class."""

    crash_class: CrashClass
    line: str
    n: int = 0  # line number in this start's log (0-based)


def _applies(kinds: frozenset[str] | None, kind: str) -> bool:
    return kinds is None or kind in kinds


class LogClassifier:
    """Stateful reader of one server start's log lines.

    Feed lines in order with :meth:`feed`; ``t`` is seconds since the start (the caller's
    clock for live logs); when omitted, the line's own timestamp relative to the first
    timestamped line is used (``optui log classify``), else None.
    """

    def __init__(self, kind: str = "sglang", tail_lines: int = 200) -> None:
        self.kind = kind
        self.phases: list[PhaseMark] = []
        self.ready = False  # ready seen (the log's line, or marked by the ready gate)
        self.log_ready = False  # the log's own readiness line seen
        self.hints: list[CrashHint] = []
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self._first_ts: float | None = None
        self._traceback: list[tuple[int, str]] = []
        self._in_traceback = False
        self._tb_prefix = ""  # the log prefix every line of a logged traceback repeats (vLLM)
        self._tb_end_phases = -1  # len(self.phases) when the last traceback finished
        self.exception: tuple[int, str] | None = None  # (line number, text) of the last cause exception
        self.self_killed = False  # SGLang's parent killed its tree after a child failed
        self._exception_after_ready = False
        self._n = -1
        self._external = False  # a phase was marked from outside the log
        self.stopped = False  # the log shows a stop by SIGTERM (:data:`_SIGTERM_STOP`): no crash after it

    @property
    def phase(self) -> str | None:
        """The latest phase seen, or None before any."""
        return self.phases[-1].phase if self.phases else None

    def feed(self, line: str, t: float | None = None) -> str | None:
        """Read one line; return the phase name when this line starts one ("ready" for the
        readiness line), else None."""
        self.tail.append(line)
        self._n += 1
        if t is None:
            ts = line_timestamp(line)
            if ts is not None:
                if self._first_ts is None:
                    self._first_ts = ts
                t = ts - self._first_ts
        if not self.stopped and _SIGTERM_STOP.search(line):
            self.stopped = True
        if not self.stopped:
            self._track_traceback(line)
        for crash_class, pattern in _CRASH_PATTERNS if not self.stopped else ():
            if pattern.search(line):
                self.hints.append(CrashHint(crash_class, line.strip(), self._n))
                if crash_class is CrashClass.UNKNOWN and "SIGQUIT" in line.upper() and _SELF_KILL.search(line):
                    self.self_killed = True
                break
        if not self.log_ready:
            for pattern, kinds in _READY_PATTERNS:
                if _applies(kinds, self.kind) and pattern.search(line):
                    self.log_ready = True
                    if self.ready:
                        return None  # the ready gate saw it first
                    self.ready = True
                    return self._mark("ready", t)
        for phase, pattern, kinds in _PHASE_PATTERNS:
            if _applies(kinds, self.kind) and pattern.search(line):
                if any(p.phase == phase for p in self.phases):
                    return None
                # phases never go backwards (a late tqdm line must not reopen loading) ...
                if self.phase is not None and PHASES.index(phase) < PHASES.index(self.phase) and not self._listens_first(phase):
                    # ... except a log that trails HTTP (llama.cpp logs from a thread): a
                    # phase the log shows after /health said ready is put in its place
                    if self._external and t is not None:
                        return self._insert(phase, t)
                    return None
                return self._mark(phase, t)
        return None

    def _listens_first(self, phase: str) -> bool:
        """A server whose HTTP listener comes up before its model loads (llama.cpp late 2024:
        ``main: HTTP server is listening`` then ``main: loading model``): a loading / compile /
        KV-cache phase right after ``http_up`` opens as usual, after it."""
        return self.phase == "http_up" and not self._external and PHASES.index(phase) >= PHASES.index("loading_weights")

    def mark(self, phase: str, t: float) -> None:
        """Record a phase seen outside the log (the ready gate's 1-token "probe", "ready"
        when ``/health`` answered 200 before the log's line); no-op when already marked."""
        if phase == "ready":
            self.ready = True
        if all(p.phase != phase for p in self.phases):
            self._external = True
            self._mark(phase, t)

    def _insert(self, phase: str, t: float) -> str:
        at = next((i for i, p in enumerate(self.phases) if p.t == p.t and p.t > t), len(self.phases))
        at = min(at, next((i for i, p in enumerate(self.phases) if p.phase in ("probe", "ready")), at))
        self.phases.insert(at, PhaseMark(phase, t))
        return phase

    def _mark(self, phase: str, t: float | None) -> str:
        self.phases.append(PhaseMark(phase, t if t is not None else float("nan")))
        return phase

    @property
    def ended_in_traceback(self) -> bool:
        """The log's last event is a finished Python traceback: one ended (its exception
        line seen) and no startup phase came after it, before the readiness line. A process
        that exited there died of it (an uncaught exception, or a fatal one logged)."""
        return not self.ready and self._tb_end_phases == len(self.phases) and not self._in_traceback

    def _track_traceback(self, line: str) -> None:
        if not self._in_traceback and "ERROR" in line:
            logged = _VLLM_ERROR_EXCEPTION.search(line)
            if logged is not None and not _is_wrapper(logged.group(1)):
                # a logged exception line without its traceback (pasted alone): the cause
                self.exception = (self._n, logged.group(1).strip())
                self._exception_after_ready = self.ready
                self._tb_end_phases = len(self.phases)
                return
        at = line.find(_TRACEBACK_START)
        if at >= 0:
            self._in_traceback = True
            self._traceback = [(self._n, line)]
            # vLLM repeats the record's prefix on every line of a logged traceback
            # ("(EngineCore_DP0 pid=1) ERROR 09-01 12:00:00 [core.py:708] "); a message
            # before it (SGLang "Scheduler hit an exception: ") is not repeated.
            self._tb_prefix = line[:at]
            return
        if self._in_traceback:
            self._traceback.append((self._n, line))
            body = line[len(self._tb_prefix):] if self._tb_prefix and line.startswith(self._tb_prefix) else line
            if _TRACEBACK_END.match(body) and not body.startswith((" ", "\t")):
                self._in_traceback = False
                self._tb_end_phases = len(self.phases)
                body = body.strip()
                if not _is_wrapper(body):  # "RuntimeError: Engine core initialization failed. See root cause above."
                    self.exception = (self._n, body)
                    self._exception_after_ready = self.ready

    def _exception_class(self) -> CrashClass:
        """The class the last cause exception names: a signature in its message, else its
        type (:data:`_EXCEPTION_CLASSES`), else unknown (also when there is none)."""
        if self.exception is None:
            return CrashClass.UNKNOWN
        text = self.exception[1]
        for crash_class, pattern in _CRASH_PATTERNS:
            if pattern.search(text):
                return crash_class
        name = _EXCEPTION_NAME.match(text)
        found = _EXCEPTION_CLASSES.get(name.group(1).rpartition(".")[2], CrashClass.UNKNOWN) if name else CrashClass.UNKNOWN
        if found is CrashClass.BAD_FLAG and self._exception_after_ready:
            return CrashClass.UNKNOWN  # a served request's ValueError is no flag of the start
        return found

    def crash_class(self, returncode: int | None) -> CrashClass:
        """Classify a failed start/run from the exit status and the lines seen.

        A specific log signature wins (argparse/llama.cpp flag errors, port, OOM, NCCL);
        then exit status -9/137 → ``killed`` (``kill -9``, the OOM killer: no text is
        printed when optui spawns the process directly) unless SGLang killed itself after
        a child failed (``Received sigquit from a child process``: then neither the status
        nor the shell's ``Killed`` line counts); then the last traceback's exception
        (:meth:`_exception_class`: ``ValueError`` → ``bad_flag``, ``OutOfMemoryError`` →
        ``oom``...); then the weaker signatures (``killed``/``timeout``/``load_failed``
        lines); exit status 2 without a line → ``bad_flag`` (argparse); else ``unknown``
        (a wrapper such as vLLM's bare ``EngineCore failed to start.`` included).
        """
        return self._verdict(returncode)[0]

    def _verdict(self, returncode: int | None) -> tuple[CrashClass, str | None]:
        """``(crash class, the line that decided it or None)``, see :meth:`crash_class`."""
        hints = self.hints
        if self.self_killed:
            hints = [h for h in hints if not (h.crash_class is CrashClass.KILLED and _BARE_KILLED.search(h.line))]
        seen = {h.crash_class for h in hints}

        def first(crash_class: CrashClass) -> tuple[CrashClass, str | None]:
            return crash_class, next((h.line for h in hints if h.crash_class is crash_class), None)

        for crash_class in (CrashClass.BAD_FLAG, CrashClass.PORT_IN_USE, CrashClass.OOM, CrashClass.NCCL):
            if crash_class in seen:
                return first(crash_class)
        if returncode in (-9, 137) and not self.self_killed:
            return CrashClass.KILLED, None
        from_exception = self._exception_class()
        if from_exception is not CrashClass.UNKNOWN and self.exception is not None:
            return from_exception, self.exception[1]
        for crash_class in (CrashClass.KILLED, CrashClass.TIMEOUT, CrashClass.LOAD_FAILED):
            if crash_class in seen:
                return first(crash_class)
        if returncode == 2:
            return CrashClass.BAD_FLAG, None
        # unknown: the cause exception (an AssertionError in CUDA-graph capture), else a wrapper line
        return CrashClass.UNKNOWN, self.exception[1] if self.exception else first(CrashClass.UNKNOWN)[1]

    def cause(self, returncode: int | None) -> str | None:
        """The one line that names why the start/run failed: a cause line (a bad GGUF
        magic, a missing file: the first one seen), else the first line of the winning
        crash class's signature; None when no line explains it (a bare ``kill -9``)."""
        hints = self.hints
        for pattern in _CAUSE_PATTERNS:
            found = next((h.line for h in hints if pattern.search(h.line)), None)
            if found is not None:
                return found
        return self._verdict(returncode)[1]

    def relevant_lines(self, limit: int = 12) -> list[str]:
        """The log lines that explain a failure, in log order: the matching signatures and
        the last traceback's final lines, else the last lines of the log."""
        picked: dict[int, str] = {h.n: h.line for h in self.hints[-limit:]}
        shown = [(n, line) for n, line in self._traceback if line.strip() and not _CARET_LINE.search(line)]
        for n, line in shown[-4:]:
            picked.setdefault(n, line.strip())
        if self.exception is not None:
            picked.setdefault(*self.exception)
        lines = [picked[n] for n in sorted(picked)]
        if not lines:
            lines = [line.strip() for line in list(self.tail)[-limit:] if line.strip() and not _CARET_LINE.search(line)]
        return lines[-limit:]


def line_of_class(lines: Sequence[str], crash_class: CrashClass | None) -> str:
    """The last of ``lines`` (a crash's relevant log lines, oldest first) that shows
    ``crash_class`` (its signature: the cudaMalloc / OutOfMemoryError line of an oom), else
    the last line, else "". A crash's one-line summary quotes it: SGLang's parent ends its log
    with "Received sigquit from a child process", which says nothing of the cause."""
    if crash_class is not None:
        patterns = [pattern for cls, pattern in _CRASH_PATTERNS if cls is crash_class]
        for line in reversed(lines):
            if any(pattern.search(line) for pattern in patterns):
                return line
    return lines[-1] if lines else ""


_FLAG_IN_CAUSE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)")


def flag_named_in(cause: str | None) -> str | None:
    """The flag a ``bad_flag`` cause line names (argparse's ``error: unrecognized arguments:
    --no-such-flag 1``, ``error: argument --tp-size: invalid int value: 'x'``, llama-server's
    ``error: invalid argument: --ctx``): the first ``-x`` / ``--name`` after its ``error:``
    (else in the line), or None."""
    if not cause:
        return None
    tail = cause[cause.find("error:") + 6:] if "error:" in cause else cause
    found = _FLAG_IN_CAUSE.search(tail)
    return found.group(1) if found else None


def _is_wrapper(exception_line: str) -> bool:
    """``exception_line`` only says that a startup failed elsewhere (see the wrappers of
    :data:`_CRASH_PATTERNS`)."""
    return any(crash_class is CrashClass.UNKNOWN and pattern.search(exception_line) for crash_class, pattern in _CRASH_PATTERNS)


def exit_description(returncode: int | None) -> str:
    """How a process ended, for a person: ``exited rc=1``, ``killed by SIGKILL (rc=-9)``
    (a negative status is the signal; 128+N from a shell or container is reported as that
    signal too), ``exit status unknown`` for None."""
    if returncode is None:
        return "exit status unknown"
    signum = -returncode if returncode < 0 else (returncode - 128 if 128 < returncode < 128 + 65 else None)
    if signum is not None:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return f"killed by {name} (rc={returncode})"
    return f"exited rc={returncode}"


_KIND_SIGNS: list[tuple[str, re.Pattern[str]]] = [
    # llama.cpp: timestamped lines (2025 builds), "main: ..."/"srv  load_model: ..." lines
    # (late-2024 builds), JSON lines {"tid":"...","timestamp":...,"level":...} (2024 builds,
    # nlohmann ordered_json in server utils.hpp), the loader's own lines
    ("llamacpp", _P(r"(?m)^\d+\.\d{2}\.\d{3}\.\d{3} [IWED] |llama_server: |^error: invalid argument: "
                    r"|^main: (?:HTTP )?server is listening|^main: loading model|^llama_model_loader: "
                    r"|^\{\"tid\":\"\d+\",\"timestamp\":\d+,")),
    ("vllm", _P(r"(?m)\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorkerProcess) pid=\d+\)|^(?:INFO|WARNING|ERROR|DEBUG) \d{2}-\d{2} "
                r"|vllm serve: error|Starting vLLM (?:API )?server|vLLM API server version|^Process EngineCore")),
    ("sglang", _P(r"(?m)^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}|launch_server\.py: error|sglang")),
]


def detect_kind(text: str) -> str:
    """The server kind whose log format ``text`` shows ("sglang" when unsure)."""
    head = text[:200_000]
    for kind, pattern in _KIND_SIGNS:
        if pattern.search(head):
            return kind
    return "sglang"


def phase_durations(phases: Sequence[PhaseMark], end_t: float | None = None) -> list[dict]:
    """``[{"phase", "t", "dur"}...]`` in seconds: each phase lasts until the next one starts;
    the last one until ``end_t`` (None when open), except a final "ready", which has no
    duration. NaN → None."""
    out = []
    marks = list(phases)
    for i, mark in enumerate(marks):
        t = None if mark.t != mark.t else round(mark.t, 3)
        nxt = marks[i + 1].t if i + 1 < len(marks) else end_t
        dur = None
        final_ready = mark.phase == "ready" and i == len(marks) - 1
        if not final_ready and t is not None and nxt is not None and nxt == nxt:
            dur = round(max(0.0, nxt - mark.t), 3)
        out.append({"phase": mark.phase, "t": t, "dur": dur})
    return out


def classify_log(text: str, kind: str | None = None, returncode: int | None = None) -> dict:
    """Classify a saved server log: ``{"final": "ready"|"crashed"|"starting"|"stopped",
    "class": None|crash class, "phases": [{"phase", "t"}...], "lines": [...], "kind"}``.

    ``kind`` None: detected from the log format. "crashed" when a crash signature was seen
    (or ``returncode`` is non-zero), "stopped" when the log shows a stop by SIGTERM
    (:data:`_SIGTERM_STOP`; lines after it are the shutdown's), "ready" when the readiness
    line was seen without a later crash, else "starting". ``t`` is in seconds from the first timestamped line, None
    when the log has no timestamps.
    """
    kind = kind or detect_kind(text)
    classifier = LogClassifier(kind)
    crash_after_ready = False
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        n_hints = len(classifier.hints)
        classifier.feed(line)
        if classifier.ready and len(classifier.hints) > n_hints:
            crash_after_ready = True
    crashed = (
        (bool(classifier.hints) and (not classifier.ready or crash_after_ready))
        or (returncode is not None and returncode != 0)
        or classifier.ended_in_traceback  # a saved log ends where its process died
    )
    if classifier.stopped and (returncode is None or returncode <= 0 or returncode in (130, 137, 143)):
        # stopped by SIGTERM: a signal's exit status is the stop's (SGLang 0.5.23 ends its own
        # tree with SIGKILL after it: rc -9), no status too; an error exit (1) still crashed
        crashed = bool(classifier.hints) and (not classifier.ready or crash_after_ready)
    final = "crashed" if crashed else ("stopped" if classifier.stopped else "ready" if classifier.ready else "starting")
    phases = [
        {"phase": p.phase, "t": None if p.t != p.t else round(p.t, 3)}  # NaN → None
        for p in classifier.phases
    ]
    return {
        "final": final,
        "class": str(classifier.crash_class(returncode)) if crashed else None,
        "phases": phases,
        "lines": classifier.relevant_lines() if crashed else [],
        "kind": kind,
    }
