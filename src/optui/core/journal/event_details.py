"""What the details view of one journal event says, as plain lines with a tone.

Pure: the TUI colours the lines (tone → theme variable), ``optui journal show`` prints
them. One function per event type; unknown types fall back to their data's keys.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from optui.core.bench.result import BenchResult, comparable, request_counts, requests_text
from optui.core.flags.argv import Flags
from optui.core.journal import events as ev
from optui.core.journal.events import Event
from optui.core.journal.experiments import Experiment, result_deltas, runs_text, starts_text, verdict_evidence, workload_label
from optui.core.server.effective_config import mismatch_lines

#: line tones: "" plain, "good", "bad", "warn", "dim", "head" (a column header)
Line = tuple[str, str]


@dataclass(slots=True)
class Section:
    """A titled block of lines."""

    title: str
    lines: list[Line] = field(default_factory=list)

    def add(self, text: str, tone: str = "") -> None:
        """Append one line."""
        self.lines.append((text, tone))


def event_sections(e: Event, baselines: Mapping[str, BenchResult] | None = None) -> list[Section]:
    """The details of ``e``: a header section then type-specific ones. ``baselines`` maps a
    workload key to the baseline result of that workload (for bench events)."""
    head = Section("event")
    head.add(f"#{e.seq}  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(e.ts))}  {e.type}")
    head.add(f"target {e.target or '-'}   actor {e.actor}   experiment {e.experiment or '-'}", "dim")
    head.add(e.summary())
    body = _BUILDERS.get(e.type, _generic)(e, baselines or {})
    return [head, *body]


def render_text(sections: list[Section]) -> str:
    """Plain text of ``sections`` (CLI)."""
    out = []
    for s in sections:
        out.append(f"== {s.title}")
        out.extend(f"  {text}" for text, _ in s.lines)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def diff_lines(old: list[str] | tuple[str, ...], new: list[str] | tuple[str, ...]) -> list[Line]:
    """The flag diff of two argvs, one toned line per change ("+" good, "-" bad, "~" warn)."""
    changes = Flags.parse(old).diff(Flags.parse(new))
    if not changes:
        return [("(no flag changes)", "dim")]
    tone = {"added": "good", "removed": "bad", "changed": "warn"}
    return [(c.describe(), tone[c.kind]) for c in changes]


def _argv_section(title: str, argv) -> Section:
    s = Section(title)
    s.add(shlex.join(argv) if argv else "(unknown)")
    return s


def _flags(e: Event, _b) -> list[Section]:
    d = e.data
    diff = Section("flag diff")
    if d.get("old_argv") is not None and d.get("new_argv") is not None:
        diff.lines.extend(diff_lines(d["old_argv"], d["new_argv"]))
    else:
        diff.lines.extend((line, "warn") for line in d.get("diff") or [])
    out = [diff]
    if d.get("old_argv") is not None:
        out.append(_argv_section("old command", d["old_argv"]))
    if d.get("new_argv") is not None:
        out.append(_argv_section("new command", d["new_argv"]))
    return out


def _experiment(e: Event, _b) -> list[Section]:
    d = e.data
    s = Section("experiment")
    s.add(f"{e.experiment} on {e.target}" + (f" — {d['reason']}" if d.get("reason") else ""))
    if d.get("observed"):
        s.add("opened for a server optui found running (flags as it runs now)", "dim")
    if d.get("todo_id") is not None:
        s.add(f"todo item {d['todo_id']}")
    out = [s]
    if d.get("prev_argv") is not None and d.get("argv") is not None:
        diff = Section("flag diff vs the previous configuration")
        diff.lines.extend(diff_lines(d["prev_argv"], d["argv"]))
        out.append(diff)
    out.append(_argv_section("command", d.get("argv")))
    return out


def _restart(e: Event, _b) -> list[Section]:
    d = e.data
    s = Section("restart")
    s.add(f"reason: {d.get('reason') or '-'}")
    out = [s]
    if d.get("old_argv") is not None and d.get("new_argv") is not None:
        diff = Section("flag diff")
        diff.lines.extend(diff_lines(d["old_argv"], d["new_argv"]))
        out += [diff, _argv_section("new command", d["new_argv"])]
    return out


def _phases(phases: list[dict], end: float | None) -> Section:
    """Phase timings: when each began (s since start) and how long it lasted."""
    s = Section("phase timings")
    if not phases:
        s.add("(no phases recognised in the log)", "dim")
        return s
    s.add(f"{'phase':<24}{'at s':>9}{'took s':>9}", "head")
    for i, p in enumerate(phases):
        t = p.get("t") or 0.0
        nxt = phases[i + 1].get("t") if i + 1 < len(phases) else end
        took = f"{nxt - t:9.2f}" if nxt is not None else f"{'':>9}"
        s.add(f"{p.get('phase', '?'):<24}{t:9.2f}{took}")
    return s


def _ready(e: Event, _b) -> list[Section]:
    d = e.data
    s = Section("ready")
    s.add(f"ready in {d.get('ready_s', 0):.2f} s", "good")
    if d.get("model"):
        s.add(f"model {d['model']}")
    if d.get("server_version"):
        s.add(f"server version {d['server_version']}")
    check = d.get("config_check") if isinstance(d.get("config_check"), dict) else None
    if check is not None:  # what the server reported running, against the argv
        mismatch = mismatch_lines(check)
        for line in mismatch:
            s.add(f"UNVERIFIED {line}", "bad")
        if not mismatch:
            checked = ", ".join(map(str, check.get("checked") or ()))
            s.add(f"configuration {check.get('status')}" + (f": {checked}" if checked else "")
                  + (f" ({check['reason']})" if check.get("reason") else "") + (f" from {check['source']}" if check.get("source") else ""),
                  "good" if check.get("status") == "verified" else "dim")
    return [s, _phases(list(d.get("phases") or []), d.get("ready_s")), _argv_section("command", d.get("argv"))]


def _failed(e: Event, _b) -> list[Section]:
    d = e.data
    s = Section("failure")
    s.add(f"crash class: {d.get('class', 'unknown')}", "bad")
    if d.get("message"):
        s.add(d["message"])
    if d.get("returncode") is not None:
        s.add(f"exit code {d['returncode']}")
    if d.get("phase"):
        s.add(f"last phase: {d['phase']}")
    log = Section("log excerpt")
    lines = list(d.get("lines") or [])
    log.lines.extend((line, "") for line in lines[-30:])
    if not lines:
        log.add("(no log lines)", "dim")
    return [s, log, _argv_section("command", d.get("argv"))]


def _rollback(e: Event, _b) -> list[Section]:
    d = e.data
    s = Section("rollback")
    s.add(f"reason: {d.get('reason') or '-'}")
    diff = Section("flag diff (failed → last good)")
    diff.lines.extend(diff_lines(d.get("from_argv") or [], d.get("to_argv") or []))
    return [s, diff, _argv_section("last good command", d.get("to_argv"))]


def bench_sections(results: list[BenchResult], baselines: Mapping[str, BenchResult]) -> list[Section]:
    """One section per result: its workload and the key metrics against the baseline."""
    out = []
    for r in results:
        base = baselines.get(r.workload.key())
        s = Section(f"result: {workload_label(r.workload)} ({r.status})")
        if r.error:
            s.add(r.error, "bad")
        is_base = base is not None and base == r
        if base is None:
            s.add("no baseline for this workload yet", "dim")
        elif is_base:
            s.add("this result is the baseline of its workload", "dim")
        s.add(f"{'metric':<12}{'value':>12}{'baseline':>12}{'Δ':>10}", "head")
        for d in result_deltas(r, None if is_base else base):
            rel = d.rel_pct
            tone = "" if d.good is None else ("good" if d.good else "bad")
            s.add(f"{d.metric.label:<12}{_num(d.value):>12}{_num(d.base):>12}{(f'{rel:+.1f}%' if rel is not None else '-'):>10}", tone)
        if r.completed is not None or r.failed:
            s.add(f"completed {r.completed}  failed {r.failed or 0}  duration {_num(r.duration_s)} s", "dim")
        out.append(s)
    return out


def bench_results_of(e: Event) -> list[BenchResult]:
    """The results carried by a ``bench.finished`` event."""
    raw = [e.data["result"]] if e.data.get("result") else list(e.data.get("results") or [])
    return [BenchResult.from_json(r) for r in raw if isinstance(r, dict)]


def _bench_finished(e: Event, baselines) -> list[Section]:
    d = e.data
    s = Section("benchmark")
    tone = "good" if d.get("status") == "ok" else "bad"
    s.add(f"{d.get('bench', '?')}: {d.get('status', '?')} in {_num(d.get('duration_s'))} s", tone)
    if d.get("error"):
        s.add(d["error"], "bad")
    out = [s, *bench_sections(bench_results_of(e), baselines)]
    if d.get("server_argv"):
        out.append(_argv_section("server command", d["server_argv"]))
    return out


def _bench_started(e: Event, _b) -> list[Section]:
    d = e.data
    s = Section("benchmark")
    s.add(f"{d.get('bench', '?')} started")
    out = [s]
    if d.get("argv"):
        out.append(_argv_section("bench command", d["argv"]))
    if d.get("builtin"):
        b = Section("built-in load generator")
        b.lines.extend((f"{k} = {v}", "") for k, v in d["builtin"].items())
        out.append(b)
    return out


def _todo(e: Event, _b) -> list[Section]:
    d = e.data
    before, after = d.get("before") or {}, d.get("after") or {}
    s = Section(f"todo change: {d.get('op', 'edit')}")
    s.add(f"{'field':<12}{'before':<34}after", "head")
    for key in ("content", "status", "priority", "order", "note", "experiment"):
        b, a = before.get(key), after.get(key)
        if b is None and a is None:
            continue
        tone = "warn" if before and after and a != b else ""
        s.add(f"{key:<12}{_short(b):<34}{_short(a)}", tone)
    out = [s]
    if d.get("conflict"):
        c = Section("concurrent edit (another window changed these meanwhile)")
        for key, v in d["conflict"].items():
            c.add(f"{key}: they had {v.get('theirs')!r}, this window saw {v.get('seen')!r}", "warn")
        out.append(c)
    return out


def _note(e: Event, _b) -> list[Section]:
    s = Section("note")
    s.lines.extend((line, "") for line in str(e.data.get("text", "")).splitlines() or [""])
    return [s]


def _verdict(e: Event, _b) -> list[Section]:
    s = Section("verdict")
    s.add(f"{e.experiment}: {e.data.get('decision', '?')}", "good" if e.data.get("decision") == "keep" else "")
    if e.data.get("reason"):
        s.add(e.data["reason"])
    return [s]


def _state(e: Event, _b) -> list[Section]:
    d = e.data
    s = Section("state change")
    s.add(f"{d.get('old', '?')} → {d.get('new', '?')}")
    if d.get("phase"):
        s.add(f"phase {d['phase']}")
    return [s]


def _generic(e: Event, _b) -> list[Section]:
    s = Section("data")
    for key, value in e.data.items():
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value) and key.endswith("argv"):
            value = shlex.join(value)
        s.add(f"{key}: {value}")
    if not e.data:
        s.add("(no data)", "dim")
    return [s]


def experiment_sections(x: Experiment, repeats: Sequence[Experiment] = ()) -> list[Section]:
    """The details of one experiment: outcome, flag diffs, phases, numbers vs baseline,
    benchmark runs, notes; ``repeats``: the later starts of its configuration a listing
    folds into its row (:func:`~optui.core.journal.experiments.fold_repeats`), one line each
    (when, why, how it ended, its own runs among the pooled ones)."""
    head = Section(f"{x.id} on {x.server}: {x.verdict}" + (f" (decision: {x.decision})" if x.decision else ""))
    evidence = verdict_evidence(x)
    if evidence:  # a verdict never comes without what it rests on
        head.add(f"evidence: {evidence}")
    head.add(f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(x.started_ts))} by {x.actor}"
             + (f" — {x.reason}" if x.reason else ""))
    if x.outcome == "ready":
        head.add(f"ready in {_num(x.ready_s)} s" + (f", model {x.model}" if x.model else ""), "good")
    elif x.outcome == "failed":
        head.add(f"failed: {x.crash_class or 'unknown'}" + (f" — {x.crash_message}" if x.crash_message else ""), "bad")
    else:
        head.add(x.outcome, "dim")
    for line in x.unverified:
        head.add(f"UNVERIFIED {line}", "bad")
    if x.rolled_back:
        head.add("rolled back to the last good flags", "warn")
    if x.decision_reason:
        head.add(f"decision reason: {x.decision_reason}")
    out = [head]
    if repeats:
        again = Section(f"other starts of these flags ({starts_text(x, repeats)}); runs judged together")
        for start in repeats:
            own = sum(run.experiment == start.id for w in start.workloads for run in w.runs)
            ended = (f"ready in {_num(start.ready_s)} s" if start.outcome == "ready" else
                     f"failed: {start.crash_class or 'unknown'}" if start.outcome == "failed" else start.outcome)
            again.add(f"{start.id} {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(start.started_ts))} by {start.actor}"
                      + (f" — {start.reason}" if start.reason else "") + f": {ended}, {own} run{'s' if own != 1 else ''}",
                      "bad" if start.outcome == "failed" else "")
        out.append(again)
    vs_base = Section(f"flags vs baseline {x.baseline_id or '-'}")
    if x.is_baseline:
        vs_base.add("(this is the baseline)", "dim")
    else:
        tone_of = {"+": "good", "-": "bad", "~": "warn"}
        vs_base.lines.extend((line, tone_of.get(line[:1], "")) for line in x.diff_vs_baseline or ["(same flags)"])
    out.append(vs_base)
    if x.diff_prev:
        prev = Section("flags vs the previous configuration")
        prev.lines.extend((line, "warn") for line in x.diff_prev)
        out.append(prev)
    if x.phases:
        out.append(_phases([{"phase": p, "t": t} for p, t in x.phases], x.ready_s))
    if x.crash_lines:
        log = Section("log excerpt")
        log.lines.extend((line, "") for line in x.crash_lines[-20:])
        out.append(log)
    for w in x.workloads:
        s = Section(f"{w.label}: {runs_text(w)}" + (f", bench {w.bench}" if w.bench else "")
                    + (f", CV {w.cv_pct:.1f}%" if w.cv_pct is not None else ""))
        for r in w.runs:
            if not comparable(r.result):  # degraded / failed: its counts, never compared
                s.add(f"run #{r.id} {r.result.status if r.result.status != 'ok' else 'degraded'}, "
                      f"{requests_text(request_counts(r.result))}: never compared", "bad")
        s.add(f"{'metric':<12}{'this':>12}{'baseline':>12}{'Δ':>10}", "head")
        for d in w.deltas:
            rel = d.rel_pct
            tone = "" if d.good is None else ("good" if d.good else "bad")
            s.add(f"{d.metric.label:<12}{_num(d.value):>12}{_num(d.base):>12}{(f'{rel:+.1f}%' if rel is not None else '-'):>10}", tone)
        out.append(s)
    every_run = [(start.id, run) for start in (x, *repeats) for run in start.bench_runs]  # a folded start's runs are pooled here
    if every_run:
        runs = Section("benchmark runs")
        for exp_id, run in sorted(every_run, key=lambda pair: pair[1].seq):
            runs.add(f"#{run.seq} {run.bench}: {run.status} ({_num(run.duration_s)} s)" + (f" — {run.error}" if run.error else "")
                     + (f" (in {exp_id})" if exp_id != x.id else ""), "" if run.status == "ok" else "bad")
        out.append(runs)
    if x.notes:
        notes = Section("notes")
        notes.lines.extend((f"{time.strftime('%H:%M', time.localtime(ts))} {text}", "") for ts, text in x.notes)
        out.append(notes)
    out.append(_argv_section("command", x.argv))
    return out


_BUILDERS: dict[str, Callable[[Event, Mapping], list[Section]]] = {
    ev.FLAGS_CHANGED: _flags,
    ev.EXPERIMENT_STARTED: _experiment,
    ev.RESTART_REQUESTED: _restart,
    ev.SERVER_READY: _ready,
    ev.SERVER_FAILED: _failed,
    ev.ROLLBACK: _rollback,
    ev.BENCH_STARTED: _bench_started,
    ev.BENCH_FINISHED: _bench_finished,
    ev.TODO_CHANGED: _todo,
    ev.NOTE: _note,
    ev.VERDICT: _verdict,
    ev.SERVER_STATE: _state,
}


def _num(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def _short(value, width: int = 32) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"
