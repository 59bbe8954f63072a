"""Server lifecycle states and the immutable status the session publishes per server.

State machine (see ``docs/architecture.md``)::

    down → starting(phase) → warming → ready ⇄ degraded → hung | crashed
                     ↘ crashed                        any → stopping → down

- starting: the process runs, HTTP not answering yet (SGLang/vLLM refuse connections while
  loading weights / capturing CUDA graphs); ``phase`` comes from the log.
- warming: HTTP answers but ``/health`` is not 200 yet (SGLang warmup 503, llama.cpp
  "Loading model" 503).
- ready: ``/health`` 200 (and the optional 1-token probe passed).
- degraded: was ready, health failing (SGLang 503s under long prefills are normal); the
  status ``message`` says why (timeout, HTTP 503, refused).
- hung: requests running/waiting while the generated-token counter does not move, or
  degraded for longer than ``hung_after_s`` while the process lives (``core.server.fsm``).
- crashed: the process exited (or health failed N times); ``crash_class`` says why.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optui.core.fleet.readings import FleetServer


class ServerState(enum.StrEnum):
    """Lifecycle state of one inference server."""

    DOWN = "down"
    STARTING = "starting"
    WARMING = "warming"
    READY = "ready"
    DEGRADED = "degraded"
    HUNG = "hung"
    CRASHED = "crashed"
    STOPPING = "stopping"

    @property
    def is_up(self) -> bool:
        """True when the server answers requests (ready or degraded)."""
        return self in (ServerState.READY, ServerState.DEGRADED)

    @property
    def is_transitional(self) -> bool:
        """True while a start or stop is in progress."""
        return self in (ServerState.STARTING, ServerState.WARMING, ServerState.STOPPING)


class CrashClass(enum.StrEnum):
    """Why a server start or run failed (from exit status + log tail)."""

    OOM = "oom"
    BAD_FLAG = "bad_flag"
    PORT_IN_USE = "port_in_use"
    LOAD_FAILED = "load_failed"
    NCCL = "nccl"
    KILLED = "killed"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class PhaseMark:
    """A startup phase seen at ``t`` seconds after the start (log or probe derived)."""

    phase: str
    t: float


@dataclass(frozen=True, slots=True)
class LoadView:
    """Live load of a server, canonical across SGLang / vLLM / llama.cpp.

    Requests are counts; ``kv_cache_pct`` and ``prefix_hit_pct`` are 0..100 %;
    throughputs in tok/s (rates between two ``/metrics`` scrapes); ``source`` is
    "metrics", "log" or "" when nothing is known; ``hint`` explains a missing source
    (e.g. "add --enable-metrics"); ``stale``: the server did not answer the last read, so
    these are the numbers of the last read that it answered.
    """

    running: float | None = None
    waiting: float | None = None
    kv_cache_pct: float | None = None
    gen_tok_s: float | None = None
    prompt_tok_s: float | None = None
    prefix_hit_pct: float | None = None
    accept_length: float | None = None
    generated_total: float | None = None
    source: str = ""
    hint: str | None = None
    stale: bool = False


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """Everything the UI shows about one server (immutable snapshot).

    Times are Unix seconds; ``argv`` is the current launch argv; ``phases`` the startup
    phases of the current start with their offsets; ``log_tail`` the last log lines.
    """

    name: str
    kind: str
    url: str
    host: str = "local"
    state: ServerState = ServerState.DOWN
    phase: str | None = None
    model: str | None = None
    pid: int | None = None
    started_at: float | None = None
    ready_at: float | None = None
    state_since: float | None = None
    argv: tuple[str, ...] = ()
    crash_class: CrashClass | None = None
    crash_lines: tuple[str, ...] = ()
    message: str | None = None
    phases: tuple[PhaseMark, ...] = ()
    load: LoadView = field(default_factory=LoadView)
    busy: str | None = None  # "restarting", "stopping": an action is running
    version: str | None = None
    managed: bool = False  # optui started this process (vs. observed only)
    last_good_argv: tuple[str, ...] | None = None
    #: the argv of the launch before the current one (ready or not; None until optui starts one):
    #: a ready row leads with the flag this start changed (issue 34's walk)
    prev_argv: tuple[str, ...] | None = None
    host_problem: str | None = None  # the host's connection problem (SSH lost, untrusted...)
    #: why the last start/run failed in one line (the cause line, "killed by SIGKILL (rc=-9)")
    crash_cause: str | None = None
    #: the flags the server does not run as credited ("--max-running-requests 8: server runs 32"),
    #: from the ready gate's check of what it reports (:mod:`optui.core.server.effective_config`)
    config_mismatch: tuple[str, ...] = ()
    #: the launch argv optui.toml configures: the reference the panel lists changed flags against
    configured_argv: tuple[str, ...] = ()
    #: [fleet]: this server's series in Prometheus (its instance is the url's host:port), or None
    fleet: FleetServer | None = None
