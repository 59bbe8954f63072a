"""Journal events: every transition of a session is one immutable event.

Shape: ``(seq, ts, actor, target, experiment, type, data)``. ``seq`` is assigned by the
store (monotonic per campaign DB), ``ts`` is Unix time in seconds, ``actor`` who caused it
("tui", "cli", "optui" for automatic transitions, "agent:<name>"), ``target`` the server /
host / todo id it concerns, ``data`` a JSON-able dict whose keys depend on ``type``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optui.core.bench.result import BenchResult


# Event types (``type`` column). Keep names stable: exports and agents rely on them.
SERVER_STATE = "server.state"
SERVER_PHASE = "server.phase"
FLAGS_CHANGED = "flags.changed"
RESTART_REQUESTED = "server.restart"
SERVER_STOPPED = "server.stopped"
SERVER_STARTING = "server.starting"
SERVER_READY = "server.ready"
SERVER_FAILED = "server.failed"
ROLLBACK = "rollback"
BENCH_STARTED = "bench.started"
BENCH_FINISHED = "bench.finished"
BENCH_IMPORTED = "bench.imported"
#: a stored result pinned as the baseline of its workload
BENCH_BASELINE = "bench.baseline"
TODO_CHANGED = "todo.changed"
NOTE = "note"
#: The most characters of a note's text (an agent's 5 MB text would grow every window's journal).
MAX_NOTE_CHARS = 16 * 1024

ALERT = "alert"
SESSION_STARTED = "session.started"
SESSION_ENDED = "session.ended"
ERROR = "error"
#: an experiment begins (one restart with new flags, or a server first benchmarked as found)
EXPERIMENT_STARTED = "experiment.started"
#: the operator's (or an agent's) decision on an experiment: keep | reject | inconclusive
VERDICT = "verdict"
#: the GPU inventory of a host (names, count, memory), recorded when first seen or changed
HOSTS_SEEN = "hosts.seen"
#: the config file was edited while optui ran: valid or not (applied at the next start only)
CONFIG_CHANGED = "config.changed"
#: a restart whose optui process ended (SIGKILL, a closed terminal) before its ready gate
#: did: journaled by the next optui process, so the experiment has an outcome
RESTART_INTERRUPTED = "server.restart.interrupted"
#: an agent's guarded action (``optui mcp``): its request, the decision on it, how it ended
#: (the fold and the data: :mod:`optui.core.agent.requests`)
AGENT_REQUEST = "agent.request"
AGENT_DECISION = "agent.decision"
AGENT_OUTCOME = "agent.outcome"

#: Named groups of event types for the journal view's type filter (``t`` cycles them).
TYPE_GROUPS: dict[str, frozenset[str]] = {
    "server": frozenset({SERVER_STATE, FLAGS_CHANGED, RESTART_REQUESTED, SERVER_STOPPED, SERVER_STARTING,
                         SERVER_READY, SERVER_FAILED, ROLLBACK, RESTART_INTERRUPTED}),
    "flags": frozenset({FLAGS_CHANGED, RESTART_REQUESTED, ROLLBACK}),
    "failures": frozenset({SERVER_FAILED, ALERT, ERROR, ROLLBACK}),
    "bench": frozenset({BENCH_STARTED, BENCH_FINISHED}),
    "todo": frozenset({TODO_CHANGED, "todo.run.started", "todo.run.step", "todo.run.finished"}),
    "notes": frozenset({NOTE, VERDICT}),
    "experiments": frozenset({EXPERIMENT_STARTED, VERDICT}),
    "agent": frozenset({AGENT_REQUEST, AGENT_DECISION, AGENT_OUTCOME}),
}


def _sweep_points(runs: list[dict]) -> str:
    """``"c=1 95.0 · c=2 181.0 · c=4 300.0"``: the median output tok/s per concurrency of a
    sweep's comparable runs (repeats folded: :func:`run_medians`); ``""`` when the runs are of one concurrency."""
    # here, not at the top: the journal panel's first frame imports this module, not the bench code
    from optui.core.bench.compare import run_medians
    from optui.core.bench.result import BenchResult

    by_conc: dict[object, list[BenchResult]] = {}
    for x in runs:
        conc = x.get("max_concurrency") if x.get("max_concurrency") is not None else (x.get("workload") or {}).get("max_concurrency")
        by_conc.setdefault(conc, []).append(BenchResult.from_json(x))
    if len(by_conc) < 2:
        return ""

    def median(point: list[BenchResult]) -> str:  # the bench table's figure of the point
        value = run_medians(point)[2]["output_throughput_tok_s"]
        return "-" if value is None else f"{value:.1f}"

    order = sorted(by_conc, key=lambda c: (not isinstance(c, int | float), c if isinstance(c, int | float) else 0))
    return " · ".join(f"c={c if c is not None else '?'} {median(by_conc[c])}" for c in order)


def _agent_action(action: str, diff: list) -> str:
    """``restart: ~ --max-running-requests: 4 → 8``, ``benchmark sweep x3``: what an agent's action does."""
    change = "; ".join(str(line) for line in diff)
    if action == "restart":
        return f"restart: {change or 'the same flags'}"
    if action == "experiment":
        return f"run an experiment: {change}"
    if action == "search":
        return f"run a flag search: {change}"
    return change or action


def _agent_summary(e: Event) -> str:
    """The journal line of an ``agent.*`` event: who asks for what and why; who decided;
    how it ended (state, experiment, verdict, unverified flags). The agent's name is in the
    line itself (a narrow journal panel hides the actor column)."""
    d = e.data
    if e.type == AGENT_REQUEST:
        why = f" — why: {d['why']}" if d.get("why") else ""
        return f"{e.actor} asks to {_agent_action(str(d.get('action', '?')), d.get('diff') or [])}{why}"
    agent = d.get("agent") or (e.actor if e.type == AGENT_OUTCOME else "an agent")
    request = f"{agent}'s request #{d.get('request', '?')}"
    if e.type == AGENT_DECISION:
        what = f" to {_agent_action(str(d['action']), d.get('diff') or [])}" if d.get("action") else ""
        decision = d.get("decision", "?")
        if decision == "timeout":
            return f"{request}{what} timed out: nobody answered"
        if decision == "withdrawn":
            return f"{request}{what} withdrawn: {str(d.get('policy') or 'its optui mcp ended').removeprefix('withdrawn: ')}"
        if d.get("policy"):
            return f"{decision} by the policy: {request}{what} ({d['policy']})"
        return f"{e.actor} {decision} {request}{what}"
    parts = [f"{d['state']}" + (f" ({d['crash_class']})" if d.get("crash_class") else "") if d.get("state") else "",
             e.experiment or "", f"verdict {d['verdict']}" if d.get("verdict") else "",
             f"unverified: {'; '.join(d['unverified'])}" if d.get("unverified") else "", str(d.get("error") or "")]
    detail = ", ".join(p for p in parts if p)
    return f"{request} ({d.get('action', '?')}) {d.get('outcome', '?')}" + (f": {detail}" if detail else "")


@dataclass(frozen=True, slots=True)
class Event:
    """One journal event (see module docstring for the fields)."""

    seq: int
    ts: float
    type: str
    target: str | None = None
    actor: str = "optui"
    experiment: str | None = None
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The event as one JSON object (JSONL export, ``journal tail --json``)."""
        return {
            "seq": self.seq,
            "ts": self.ts,
            "type": self.type,
            "target": self.target,
            "actor": self.actor,
            "experiment": self.experiment,
            "data": self.data,
        }

    def summary(self) -> str:
        """One human line for the timeline (without time and type)."""
        d = self.data
        t = self.type
        if t == SERVER_STATE:
            starting = d.get("new") in ("starting", "warming")  # a phase left over from before says nothing
            phase = f" ({d['phase']})" if d.get("phase") and starting else ""
            return f"{d.get('old', '?')} → {d.get('new', '?')}{phase}"
        if t == SERVER_PHASE:
            return f"phase {d.get('phase')} at {d.get('t', 0):.1f}s"
        if t == FLAGS_CHANGED:
            return "; ".join(d.get("diff", [])) or "flags unchanged"
        if t == RESTART_REQUESTED:
            return f"restart requested{': ' + d['reason'] if d.get('reason') else ''}"
        if t == RESTART_INTERRUPTED:
            return f"restart interrupted: {d.get('message', 'its optui process ended before the ready gate')}"
        if t == SERVER_STOPPED:
            return f"stopped ({d.get('how', 'exit')}, rc={d.get('returncode')})"
        if t == SERVER_STARTING:
            return f"starting pid={d.get('pid')}"
        if t == SERVER_READY:
            steps = [f"{p['phase']} {p['dur']:.1f}s" for p in d.get("phases") or []
                     if isinstance(p, dict) and p.get("dur") and p["dur"] >= 0.05]
            return f"ready in {d.get('ready_s', 0):.1f}s" + (f" ({', '.join(steps)})" if steps else "")
        if t == SERVER_FAILED:
            return f"failed: {d.get('class', 'unknown')} {d.get('message', '')}".rstrip()
        if t == ROLLBACK:
            return f"rollback to last good flags ({d.get('reason', '')})"
        if t == BENCH_STARTED:
            return f"bench {d.get('bench', '')} started" + (f" ({d['plan']})" if d.get("plan") else "")
        if t == BENCH_FINISHED:
            runs = [x for x in d.get("results") or () if isinstance(x, dict)]
            points = _sweep_points(runs)
            if points:  # a sweep: one figure per concurrency, never one run's as if for all
                return f"bench {d.get('bench', '')} {d.get('status', '')}, sweep {points} out tok/s"
            head = f"bench {d.get('bench', '')} {d.get('status', '')}"
            if runs:  # each figure the median of the runs', as the bench table's row (not one run's)
                from optui.core.bench.compare import run_medians, runs_label
                from optui.core.bench.result import BenchResult

                ok, n, medians = run_medians(BenchResult.from_json(x) for x in runs)
                head += f", {runs_label(ok, n)}"
                tput, ttft = medians["output_throughput_tok_s"], medians["ttft_ms.median"]
            else:
                r = d.get("result") or {}
                tput, ttft = r.get("output_throughput_tok_s"), (r.get("ttft_ms") or {}).get("median")
            parts = [head]
            if tput is not None:
                parts.append(f"{tput:.1f} out tok/s")
            if ttft is not None:
                parts.append(f"TTFT p50 {ttft:.1f} ms")
            return ", ".join(parts)
        if t == BENCH_IMPORTED:  # optui bench import: each result's tool, status and figure, not a dict
            rows = [x for x in d.get("results") or () if isinstance(x, dict)]
            shown = "; ".join(f"#{x.get('id')} {x.get('tool', '?')} {x.get('status', '?')}"
                              + (f" {x['output_throughput_tok_s']:.1f} out tok/s"
                                 if isinstance(x.get("output_throughput_tok_s"), int | float) else "")
                              for x in rows[:5]) + (f"; +{len(rows) - 5} more" if len(rows) > 5 else "")
            where = f"into {self.experiment}" if self.experiment else "in no experiment"
            name = str(d.get("file") or "?").replace("\\", "/").rsplit("/", 1)[-1]
            return f"imported {len(rows)} result{'s' if len(rows) != 1 else ''} from {name} ({where}): {shown}"
        if t == BENCH_BASELINE:
            conc = f" c={d['concurrency']}" if d.get("concurrency") is not None else ""
            tput = d.get("output_throughput_tok_s")
            n_runs = d.get("runs")
            of = f" (median of {n_runs} runs)" if isinstance(n_runs, int) and n_runs > 1 else ""
            return (f"baseline pinned: bench {d.get('bench') or '?'}{conc}"
                    + (f", {tput:.1f} out tok/s{of}" if isinstance(tput, int | float) else "") + f" (result #{d.get('result_id')})")
        if t == TODO_CHANGED:
            after = d.get("after") or {}
            before = d.get("before") or {}
            content = after.get("content") or before.get("content") or ""
            moves = [f"{k} {before[k]} → {after[k]}" for k in ("status", "priority")
                     if before.get(k) is not None and after.get(k) is not None and before[k] != after[k]]
            return f"{d.get('op', 'edit')}: {content}" + (f" ({', '.join(moves)})" if moves else "")
        if t == NOTE:
            return d.get("text", "")
        if t.startswith("todo.run.") and "message" in d:
            return str(d["message"])
        if t == ALERT:
            kind, message = d.get("kind", "alert"), d.get("message", "")
            return message if kind in message else f"{kind}: {message}"  # not "crashed: demo crashed (oom)"
        if t == EXPERIMENT_STARTED:
            # an autostart launches the configured flags, whatever ran last: not "same flags"
            change = "; ".join(d.get("diff") or []) or ("the configured flags" if d.get("reason") == "autostart"
                                                         else "same flags")
            return f"{self.experiment} on {self.target}: {change}" + (f" ({d['reason']})" if d.get("reason") else "")
        if t == VERDICT:
            return f"{self.experiment}: {d.get('decision', '?')}" + (f" — {d['reason']}" if d.get("reason") else "")
        if t == CONFIG_CHANGED:
            first = (d.get("error") or "").split("\n")[0]
            return f"config edited: {first}" if first else "config edited (valid; applied at the next start)"
        if t == HOSTS_SEEN:
            return ", ".join(f"{g.get('count')}× {g.get('name')}" for g in d.get("gpus_by_name") or []) or "no GPUs"
        if t in (AGENT_REQUEST, AGENT_DECISION, AGENT_OUTCOME):
            return _agent_summary(self)
        if t.startswith("search.") and isinstance(d.get("message"), str):  # a flag search's (session/search.py)
            return d["message"]
        return ", ".join(f"{k}={v}" for k, v in list(d.items())[:4])


def row_text(e: Event) -> str:
    """What the journal's rows show of ``e``, lower case, spaces collapsed, for a text filter
    that matches across columns (``todo:6 [tui] move`` as a row reads it): type, target,
    ``[actor]``, the summary, with and without the experiment id (narrow rows leave it out),
    one line each."""
    target, actor, summary = e.target or "", f"[{e.actor}]", e.summary()
    lines = (f"{e.type} {target} {actor} {summary}", f"{e.type} {target} {actor} {e.experiment or ''} {summary}")
    return "\n".join(" ".join(line.lower().split()) for line in lines)


def text_matches(needle: str, e: Event) -> bool:
    """``needle`` (spaces collapsed, any case) in :func:`row_text` of ``e``."""
    return " ".join(needle.lower().split()) in row_text(e)


@dataclass(frozen=True, slots=True)
class EventFilter:
    """What the journal view (and ``optui journal tail``) shows: every set field must match.

    ``types`` a set of event types (None = all), ``target`` a server/host/todo id,
    ``experiment`` an id like ``exp-0007``, ``text`` a case-insensitive substring of the
    type, target, actor or data (JSON) or of the row's text across its columns
    (:func:`row_text`: ``todo:6 [tui] move``), ``since_ts`` Unix seconds.
    """

    types: frozenset[str] | None = None
    type_label: str | None = None
    target: str | None = None
    experiment: str | None = None
    text: str | None = None
    since_ts: float | None = None

    @property
    def active(self) -> bool:
        """True when anything is filtered."""
        return any(v is not None for v in (self.types, self.target, self.experiment, self.text, self.since_ts))

    def matches(self, e: Event) -> bool:
        """True when ``e`` passes every set criterion (same rules as the SQL query)."""
        if self.types is not None and e.type not in self.types:
            return False
        if self.target is not None and e.target != self.target:
            return False
        if self.experiment is not None and e.experiment != self.experiment:
            return False
        if self.since_ts is not None and e.ts < self.since_ts:
            return False
        if self.text:
            # Journal.events(text=...)'s rule, the data as stored (compact, ASCII JSON), and
            # what the row shows (``ready in 6.7s``: the summary, which SQL cannot compute)
            needle = self.text.lower()
            data = json.dumps(e.data, default=str, separators=(",", ":")).lower()
            hay = " ".join((e.type, e.target or "", e.actor, e.experiment or "", data)).lower()
            if needle not in hay and json.dumps(needle)[1:-1] not in data and not text_matches(needle, e):
                return False
        return True

    def describe(self) -> str:
        """A short label of the active criteria, e.g. ``type:bench server:demo /tp 8/``."""
        parts = []
        if self.types is not None:
            parts.append(f"type:{self.type_label or ','.join(sorted(self.types))}")
        if self.target is not None:
            parts.append(f"server:{self.target}")
        if self.experiment is not None:
            parts.append(f"exp:{self.experiment}")
        if self.text:
            parts.append(f"/{self.text}/")
        if self.since_ts is not None:
            parts.append("since " + time.strftime("%Y-%m-%d %H:%M", time.localtime(self.since_ts)))
        return " ".join(parts)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: float | None = None) -> float:
    """``--since`` as Unix seconds: a duration back from ``now`` (``90m``, ``2h``, ``1d``,
    ``1w``), an ISO date or date-time in local time (``2026-05-03``, ``2026-05-03T14:00``,
    ``2026-05-03 14:00:30``), or Unix seconds (``1767225600``). Raises ValueError naming the
    accepted forms."""
    value = text.strip()
    now = time.time() if now is None else now
    m = _DURATION.match(value.lower())
    if m:
        return now - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        number = None
    if number is not None and number > 1e9:
        return number
    raise ValueError(f"--since {text!r}: expected a duration (90m, 2h, 1d), an ISO date/time "
                     "(2026-05-03, 2026-05-03T14:00) or Unix seconds")


def iso_time(ts: float) -> str:
    """Local ISO-8601 time with offset, to the second (``2026-05-03T14:22:07+02:00``)."""
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def note_text(text: str) -> str:
    """A note's ``text`` stripped; raises ``ValueError`` when it is empty or over
    :data:`MAX_NOTE_CHARS` characters (the message names the bound)."""
    text = text.strip()
    if not text:
        raise ValueError("empty note")
    if len(text) > MAX_NOTE_CHARS:
        raise ValueError(f"note: {len(text):,} characters is over the limit of {MAX_NOTE_CHARS:,}")
    return text
