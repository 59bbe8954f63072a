"""Reading a server's log as it streams: startup phase, readiness line, crash class.

Formats (SGLang 0.5.2 / 0.5.23, vLLM 0.33 and 2025, llama.cpp ``llama-server``) and the
exact strings are in ``../shared/reference/servers_and_bench.md`` section 4 and
``../shared/reference/llamacpp_peer.md``. Every pattern is matched by regex anywhere in the
line (never by position), so rank prefixes (``[... TP0]``, ``(EngineCore_DP0 pid=1)``) and
timestamps don't matter.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from datetime import datetime

from optui.core.server_state import CrashClass, PhaseMark

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
    "ready",
)

_P = re.compile
# (phase, pattern, kinds) — kinds None = every kind.
_PHASE_PATTERNS: list[tuple[str, re.Pattern[str], frozenset[str] | None]] = [
    ("launching", _P(r"server_args=|non-default args:|args: Namespace\(|vLLM (API )?server version|build: \d+|llama_server: initializing"), None),
    ("init_dist", _P(r"Init torch distributed begin|Init parallel begin|Initializing a V1 LLM engine|Waiting for \d+ local"), None),
    ("loading_weights", _P(r"Load weight begin|Loading safetensors checkpoint shards|Starting to load model|loading model|llama_model_loader"), None),
    ("compile", _P(r"Dynamo bytecode transform|Compiling a graph|torch\.compile t"), None),
    ("kv_cache", _P(r"KV Cache is allocated|Memory pool end|Available KV cache memory|GPU KV cache size|# GPU blocks|llama_kv_cache|llama_context: |load_model: initializing, n_slots"), None),
    ("cuda_graph", _P(r"(?i)capture cuda graph begin|Capturing batches|Capturing CUDA graphs|CUDA graph begin"), None),
    ("http_up", _P(r"Uvicorn running on|Started server process|Starting vLLM (API )?server|Available routes are|HTTP server is listening|server is listening on"), None),
    ("warmup", _P(r"\"(GET /(get_)?model_info|POST /generate) HTTP"), frozenset({"sglang"})),
]
# The line that means "ready" per server kind (None: any kind).
_READY_PATTERNS: list[tuple[re.Pattern[str], frozenset[str] | None]] = [
    (_P(r"The server is fired up and ready to roll!"), frozenset({"sglang", "openai"})),
    (_P(r"Application startup complete\."), frozenset({"vllm"})),
    # llama.cpp: "llama_server: listening on http://..." (0.3.36 vendored build, see
    # tests/peers/NOTES.md); older builds: "server is listening on ... starting the main loop"
    (_P(r"llama_server: listening on http|server is listening on .*starting the main loop|all slots are idle"), frozenset({"llamacpp"})),
]
# Crash signatures, most specific class first.
_CRASH_PATTERNS: list[tuple[CrashClass, re.Pattern[str]]] = [
    (
        CrashClass.BAD_FLAG,
        _P(
            r"error: unrecognized arguments|error: ambiguous option|error: argument [^:]+: "
            r"|ignored explicit argument|error: invalid argument|error: unknown argument"
            r"|error: the following arguments are required|invalid value for argument"
            r"|should be provided as the first positional argument"
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
            r"|std::bad_alloc|failed to allocate .* buffer|KV cache (is )?too small"
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
        CrashClass.LOAD_FAILED,
        _P(
            r"Initialization failed|EngineCore failed to start|Engine core initialization failed"
            r"|(?i:failed to load model)|error loading model|exiting due to model loading error|FileNotFoundError|does not appear to have a file"
            r"|Repository Not Found|gguf_init_from_file|Scheduler hit an exception|WorkerProc failed to start"
            r"|scheduler died during initialization|scheduler is dead"
        ),
    ),
]
_TRACEBACK_END = _P(r"^\s*\w[\w.]*(Error|Exception|Interrupt)\b.*")
_SGLANG_TS = _P(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)")
_VLLM_TS = _P(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


def line_timestamp(line: str) -> float | None:
    """Seconds (Unix-like, year-less for vLLM) of a log line's own timestamp, or None."""
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


@dataclass(frozen=True, slots=True)
class CrashHint:
    """A log line that points at a crash class."""

    crash_class: CrashClass
    line: str


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
        self.ready = False
        self.hints: list[CrashHint] = []
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self._first_ts: float | None = None
        self._traceback: list[str] = []
        self._in_traceback = False

    @property
    def phase(self) -> str | None:
        """The latest phase seen, or None before any."""
        return self.phases[-1].phase if self.phases else None

    def feed(self, line: str, t: float | None = None) -> str | None:
        """Read one line; return the new phase name when this line starts one
        ("ready" for the readiness line), else None."""
        self.tail.append(line)
        if t is None:
            ts = line_timestamp(line)
            if ts is not None:
                if self._first_ts is None:
                    self._first_ts = ts
                t = ts - self._first_ts
        self._track_traceback(line)
        for crash_class, pattern in _CRASH_PATTERNS:
            if pattern.search(line):
                self.hints.append(CrashHint(crash_class, line.strip()))
                break
        if not self.ready:
            for pattern, kinds in _READY_PATTERNS:
                if _applies(kinds, self.kind) and pattern.search(line):
                    self.ready = True
                    return self._mark("ready", t)
        for phase, pattern, kinds in _PHASE_PATTERNS:
            if _applies(kinds, self.kind) and pattern.search(line):
                if self.phase == phase:
                    return None
                # phases never go backwards (a late tqdm line must not reopen loading)
                if self.phase is not None and PHASES.index(phase) < PHASES.index(self.phase):
                    return None
                return self._mark(phase, t)
        return None

    def _mark(self, phase: str, t: float | None) -> str:
        self.phases.append(PhaseMark(phase, t if t is not None else float("nan")))
        return phase

    def _track_traceback(self, line: str) -> None:
        if "Traceback (most recent call last)" in line:
            self._in_traceback = True
            self._traceback = [line]
            return
        if self._in_traceback:
            self._traceback.append(line)
            if _TRACEBACK_END.match(line) and not line.startswith((" ", "\t")):
                self._in_traceback = False

    def crash_class(self, returncode: int | None) -> CrashClass:
        """Classify a failed start/run from the exit status and the lines seen.

        argparse exits with 2 → ``bad_flag``; a log signature wins next; -9/137 without
        one → ``killed`` (e.g. the OOM killer or ``kill -9``); else ``unknown``.
        """
        if returncode == 2 and any(h.crash_class is CrashClass.BAD_FLAG for h in self.hints):
            return CrashClass.BAD_FLAG
        order = [CrashClass.BAD_FLAG, CrashClass.PORT_IN_USE, CrashClass.OOM, CrashClass.NCCL, CrashClass.LOAD_FAILED]
        seen = {h.crash_class for h in self.hints}
        for crash_class in order:
            if crash_class in seen:
                return crash_class
        if returncode == 2:
            return CrashClass.BAD_FLAG
        if returncode in (-9, 137, 9):
            return CrashClass.KILLED
        return CrashClass.UNKNOWN

    def relevant_lines(self, limit: int = 12) -> list[str]:
        """The log lines that explain a failure: the matching signatures and the last
        traceback's final lines, else the last lines of the log."""
        lines = [h.line for h in self.hints[-limit:]]
        if self._traceback:
            for line in self._traceback[-4:]:
                if line.strip() and line.strip() not in lines:
                    lines.append(line.strip())
        if not lines:
            lines = [line.strip() for line in list(self.tail)[-limit:] if line.strip()]
        return lines[-limit:]


def classify_log(text: str, kind: str = "sglang", returncode: int | None = None) -> dict:
    """Classify a saved server log: ``{"final": "ready"|"crashed"|"starting",
    "class": None|crash class, "phases": [{"phase", "t"}...], "lines": [...]}``.

    "crashed" when a crash signature was seen (or ``returncode`` is non-zero), "ready"
    when the readiness line was seen without a later crash, else "starting". ``t`` is in
    seconds from the first timestamped line, None when the log has no timestamps.
    """
    classifier = LogClassifier(kind)
    crash_after_ready = False
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        n_hints = len(classifier.hints)
        classifier.feed(line)
        if classifier.ready and len(classifier.hints) > n_hints:
            crash_after_ready = True
    crashed = (bool(classifier.hints) and (not classifier.ready or crash_after_ready)) or (
        returncode is not None and returncode != 0
    )
    final = "crashed" if crashed else ("ready" if classifier.ready else "starting")
    phases = [
        {"phase": p.phase, "t": None if p.t != p.t else round(p.t, 3)}  # NaN → None
        for p in classifier.phases
    ]
    return {
        "final": final,
        "class": str(classifier.crash_class(returncode)) if crashed else None,
        "phases": phases,
        "lines": classifier.relevant_lines() if crashed else [],
    }
