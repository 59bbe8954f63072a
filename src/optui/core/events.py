"""Journal events: every transition of a session is one immutable event.

Shape: ``(seq, ts, actor, target, experiment, type, data)``. ``seq`` is assigned by the
store (monotonic per campaign DB), ``ts`` is Unix time in seconds, ``actor`` who caused it
("tui", "cli", "optui" for automatic transitions, "agent:<name>"), ``target`` the server /
host / todo id it concerns, ``data`` a JSON-able dict whose keys depend on ``type``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
TODO_CHANGED = "todo.changed"
NOTE = "note"
ALERT = "alert"
SESSION_STARTED = "session.started"
SESSION_ENDED = "session.ended"
ERROR = "error"


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
            phase = f" ({d['phase']})" if d.get("phase") else ""
            return f"{d.get('old', '?')} → {d.get('new', '?')}{phase}"
        if t == SERVER_PHASE:
            return f"phase {d.get('phase')} at {d.get('t', 0):.1f}s"
        if t == FLAGS_CHANGED:
            return "; ".join(d.get("diff", [])) or "flags unchanged"
        if t == RESTART_REQUESTED:
            return f"restart requested{': ' + d['reason'] if d.get('reason') else ''}"
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
            return f"bench {d.get('bench', '')} started"
        if t == BENCH_FINISHED:
            r = d.get("result") or {}
            tput = r.get("output_throughput_tok_s")
            ttft = (r.get("ttft_ms") or {}).get("median")
            parts = [f"bench {d.get('bench', '')} {d.get('status', '')}"]
            if tput is not None:
                parts.append(f"{tput:.1f} out tok/s")
            if ttft is not None:
                parts.append(f"TTFT p50 {ttft:.1f} ms")
            return ", ".join(parts)
        if t == TODO_CHANGED:
            after = d.get("after") or {}
            before = d.get("before") or {}
            content = after.get("content") or before.get("content") or ""
            return f"{d.get('op', 'edit')}: {content[:60]}"
        if t == NOTE:
            return d.get("text", "")
        if t == ALERT:
            return f"{d.get('kind', 'alert')}: {d.get('message', '')}"
        return ", ".join(f"{k}={v}" for k, v in list(d.items())[:4])
