"""What is on screen: the value types of the session's snapshot (:class:`~optui.session.state.SessionState`)
that summarise its services, frozen, beside ``state.py`` and importing none of the services.

- :class:`Alert`: one alert (:mod:`optui.session.alerts` derives them from snapshots);
- :class:`BenchView`: the current or last benchmark run (:mod:`optui.session.bench.run`);
- :class:`SearchProgress`: a flag search (:mod:`optui.session.search`);
- :class:`TodoRunOutcome`: how a todo run ended (:mod:`optui.session.todo.runs`);
- :class:`FollowStatus`: one followed agent list (:mod:`optui.session.todo.sync`);
- :class:`RestartResult` (:class:`RestartEnd`): what one restart did (:mod:`optui.session.server.restart_checks`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from optui.core.bench.result import BenchResult
from optui.core.bench.stream import StreamProgress

if TYPE_CHECKING:
    from optui.core.server.state import ServerStatus


def _duration(seconds: float) -> str:
    """``54 s``, ``3 min``, ``1 h 05 min``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert: ``kind`` (see module doc), ``target`` (server / host:gpu / bench),
    ``message`` for the operator, ``severity`` "error" or "warning", Unix ``ts``."""

    kind: str
    target: str
    message: str
    severity: str = "error"
    ts: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class BenchView:
    """What the UI shows of the current (or last) run.

    ``status``: running | ok | failed | aborted | stalled. ``point`` is the label of the
    point being measured (``"c=8 run 2/3"``), ``points_done``/``points_total`` count runs
    of the plan, ``plan`` describes it ("sweep concurrency 1,2,4", "repeat x3", "").
    """

    name: str
    server: str
    status: str
    started_at: float
    finished_at: float | None = None
    progress: StreamProgress = field(default_factory=StreamProgress)
    results: tuple[BenchResult, ...] = ()
    error: str | None = None
    run_id: str = ""
    plan: str = ""
    point: str = ""
    points_done: int = 0
    points_total: int = 1


@dataclass(frozen=True, slots=True)
class SearchProgress:
    """A search as the UI and ``optui search status`` show it: its name and id, ``trial``
    (1-based: the trial in progress while ``in_trial``, else how many ended) of
    ``planned`` (:func:`~optui.core.search.strategies.planned_now`: the budget's exploring
    trials and the re-runs still to come), that trial's phase and flags (``point``), the
    todo run's step now ("restart", "bench tiny run 2/3" ...), the best feasible score so
    far, its flags and ``best_n`` (its benchmark runs, else trials), how many trials failed
    or broke a constraint, ``eta_s`` (s: the trials left times the mean trial of this
    process so far; None before one ended), ``status`` running | done | stopped | failed,
    the ``message`` it ended with, ``note`` (what a budget leaves out of the space, "" when
    nothing) and ``pid`` (the optui process running it when that is another one; else None)."""

    name: str
    search_id: str
    strategy: str
    objective: str
    trial: int
    planned: int
    phase: str
    point: str
    step: str
    best_score: float | None
    best_point: str | None
    infeasible: int
    eta_s: float | None
    started_at: float
    status: str = "running"
    message: str = ""
    in_trial: bool = False
    trial_started_at: float | None = None
    best_n: int = 0
    note: str = ""
    pid: int | None = None

    def line(self, width: int | None = None) -> str:
        """One line for the todo panel, what matters first, in at most ``width`` characters
        (None: all of it): ``search batch.1 trial 3/6 (bench tiny run 2/3)
        --max-running-requests 16 · best 812.4 n=3 (--max-running-requests 8) · ETA 40 s ·
        1 infeasible · S stops``, then the budget's note and, for another process's search,
        ``in optui process PID``. Too wide, it sheds in a fixed order: the note, the process
        (to ``pid N``), the flags abbreviated (``--mrr 16``), ``S stops``, ``search``, the
        flags, the best's n; the trial, its step, the best and the ETA stay longest (60
        columns: ``batch.1 trial 3/6 (run 2/3) · best 812.4 n=3 · ETA 40 s``)."""
        from optui.core.flags.abbrev import abbreviate

        def abbr(text: str, level: int) -> str:  # flag names shortened, values kept (``!--x``: off)
            return " ".join("!" + abbreviate(w[1:], level) if w.startswith("!-") else abbreviate(w, level)
                            for w in text.split(" "))

        n = f"{self.trial}/{self.planned}"
        step = self.step
        short_step = step.split(" ", 2)[-1] if step.startswith("bench ") and " run " in step else step
        point = self.point + (" (re-run)" if self.phase == "confirm" and self.point else "")
        # (name, forms: the first is the whole one, None drops it, sep before it)
        seg: dict[str, list[str | None]] = {
            "head": [f"search {self.search_id} trial {n}", f"{self.search_id} trial {n}", f"{self.search_id} {n}"]
            if self.in_trial else [f"search {self.search_id} {n} trials done", f"{self.search_id} {n} done"],
            "step": [f"({step})", f"({short_step})", None] if self.in_trial and step else [None],
            "flags": [point, abbr(point, 1), abbr(point, 2), None] if self.in_trial and point else [None],
            "best": ([f"best {self.best_score:.4g}" + (f" n={self.best_n}" if self.best_n else ""),
                      f"best {self.best_score:.4g}", None] if self.best_score is not None else ["no best yet", None]),
            "best_flags": ([f"({self.best_point})", f"({abbr(self.best_point, 1)})", f"({abbr(self.best_point, 2)})", None]
                           if self.best_score is not None and self.best_point else [None]),
            "eta": ([f"ETA {_duration(self.eta_s)}", None] if self.eta_s is not None
                    else ["ETA after a trial", None] if self.status == "running" else [None]),
            "infeasible": [f"{self.infeasible} infeasible", f"{self.infeasible} inf.", None] if self.infeasible else [None],
            "note": [self.note, self.note.split(" (")[0], None] if self.note else [None],
            "stops": ["S stops", None] if self.status == "running" else [None],
            "pid": [f"in optui process {self.pid}", f"pid {self.pid}", None] if self.pid is not None else [None],
        }
        order = ["head", "step", "flags", "best", "best_flags", "eta", "infeasible", "note", "stops", "pid"]
        joined = {"step", "flags", "best_flags"}  # after the one before with a space, not " · "
        at = dict.fromkeys(order, 0)

        def text() -> str:
            out = ""
            for name in order:
                form = seg[name][min(at[name], len(seg[name]) - 1)]
                if form:
                    out += (" " if name in joined else " · ") + form if out else form
            return out

        # the shedding order: each entry moves a part to its next form
        ladder = ["note", "pid", "best_flags", "best_flags", "flags", "pid", "best_flags", "infeasible", "stops", "note",
                  "flags", "head", "step", "infeasible", "flags", "best", "head", "eta", "best", "step"]
        line = text()
        for name in ladder:
            if width is None or len(line) <= width:
                break
            at[name] += 1
            line = text()
        if width is not None and len(line) > width:
            line = line[: max(0, width - 1)] + "…"
        return line

    def to_json(self) -> dict:
        """For ``optui search status --json``."""
        from dataclasses import asdict

        return asdict(self)


@dataclass(frozen=True, slots=True)
class TodoRunOutcome:
    """How a todo run ended: status ok | failed | aborted | skipped, the step it ended in, the
    summary (note text), crash class and log excerpt of a failed restart, results as
    ``BenchResult.to_json()`` dicts. ``rollback_offer``: the server whose failed restart
    left it down with nothing queued for it, under ``rollback = "offer"``: the rollback is
    offered, as after a failed ``r`` (``"auto"`` already rolled back; the summary says so)."""

    todo_id: int
    run_id: str | None
    status: str
    step: str
    summary: str
    crash_class: str | None = None
    lines: tuple[str, ...] = ()
    results: tuple[dict, ...] = field(default_factory=tuple)
    rollback_offer: str | None = None

    def to_json(self) -> dict:
        """For ``optui todo run --json``."""
        return {**asdict(self), "lines": list(self.lines), "results": list(self.results)}


@dataclass(frozen=True, slots=True)
class FollowStatus:
    """One followed source as the UI shows it: the entry, its origin once read, state
    ("starting", "ok", "waiting" for a missing file, "error"), the last error, Unix time
    of the last applied snapshot and its ``+a ~c -r`` summary."""

    spec: str
    origin: str | None = None
    state: str = "starting"
    error: str | None = None
    last_sync: float | None = None
    last_summary: str | None = None


class RestartEnd(StrEnum):
    """How a restart ended (:class:`RestartResult`)."""

    READY = "ready"  # ready with the flags it was given (running configuration verified or unchecked)
    UNVERIFIED = "unverified"  # ready, but the server reports a configuration other than those flags
    FAILED = "failed"  # crashed or never became ready: the failed status says how (crash class, lines)
    ROLLED_BACK = "rolled_back"  # failed, then rollback = "auto" restarted it with its last good flags
    SKIPPED = "skipped"  # only_if_down (autostart): a launch was found by then, nothing was started


@dataclass(frozen=True, slots=True)
class RestartResult:
    """What one restart of ``server`` did, as the restart knows it (no journal read back):
    ``end``; ``status`` the server's status after it (after the rollback when rolled back);
    ``failed`` the status the failed start ended in (crash class, log lines), kept through an
    automatic rollback; ``argv`` the flags it was asked to start with; ``reason`` as journaled."""

    server: str
    end: RestartEnd
    status: ServerStatus
    argv: tuple[str, ...]
    reason: str = ""
    failed: ServerStatus | None = None

    @property
    def crash_class(self) -> str:
        """The failed start's crash class (``"unknown"`` when it has none; empty when nothing failed)."""
        if self.failed is None:
            return ""
        return str(self.failed.crash_class or "unknown")
