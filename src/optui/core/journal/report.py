"""Exports of a campaign: the Markdown findings report, JSONL events, CSV experiments.

Pure: everything comes in as a :class:`ReportInput` (events, stored results, todo items,
configured servers) and goes out as text; reading the journal and writing files is the
caller's job (``optui journal export``, the TUI's "Export findings report").

The Markdown report is what an engineer would write by hand after a day of tuning: setup
(hosts and GPUs from ``hosts.seen`` events, servers, model, server version), the baseline,
every experiment with its flag diff, outcome, numbers and deltas, failures with their
class, the best configuration as a ready-to-paste launch command (one line: the environment that
decides results, :func:`decisive_env`, then ``shlex.join`` of the argv), and the
open todo items, and the results stored with ``optui bench import`` that no experiment of
the campaign ran (with their workload). Every verdict is shown with its evidence (runs per side, spreads, p, the
baseline) and the statistic is named (:data:`~optui.core.bench.compare.STATISTIC`); runs
with too many failed requests are listed with their ok/total counts and never compared.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from optui.core.bench.compare import STATISTIC, sample
from optui.core.bench.result import comparable, request_counts, requests_text
from optui.core.journal import events as ev
from optui.core.journal.events import Event, iso_time
from optui.core.journal.experiments import (
    KEY_METRICS,
    PRIMARY,
    Experiment,
    StoredResult,
    best_by_workload,
    best_experiment,
    build_experiments,
    crash_summary,
    fold_repeats,
    runner_up,
    runs_text,
    starts_text,
    verdict_evidence,
    workload_label,
    workload_point,
)
from optui.core.server.log import phase_durations
from optui.core.server.state import PhaseMark
from optui.core.text.safe_text import csv_cell, markdown_block_line, markdown_code, markdown_inline, safe_json
from optui.core.todo.items import TodoItem, TodoStatus

FORMATS = ("md", "jsonl", "csv")


#: environment variables whose values decide a benchmark's result (which GPUs, the kernels,
#: the collectives, the threads): their values go into the report's launch command
DECISIVE_ENV_PREFIXES = ("CUDA_", "NCCL_", "NVIDIA_", "SGLANG_", "VLLM_", "PYTORCH_", "TORCH_", "HIP_", "ROCR_",
                         "HSA_", "OMP_", "MKL_", "TRITON_", "FLASHINFER_", "LLAMA_", "GGML_")
#: ...unless the name says it holds a secret (``VLLM_API_KEY``): names only, never values
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def decisive_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``(name, value)`` pairs of ``env`` (a server's configured environment) that decide
    its results (:data:`DECISIVE_ENV_PREFIXES`) and are no secret, sorted by name."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(DECISIVE_ENV_PREFIXES)
                        and not any(w in k.upper() for w in _SECRET_WORDS)))


def launch_line(argv: Sequence[str], env: Sequence[tuple[str, str]] = ()) -> str:
    """One pasteable shell line: ``NAME=value ... program args`` (each word quoted for sh)."""
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env), shlex.join(argv)])


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """A configured server as the report's setup section shows it (``env_names``: every
    name of its environment; ``env``: the values of those that decide results and are no
    secret, :func:`decisive_env`)."""

    name: str
    kind: str = ""
    host: str = ""
    url: str = ""
    control: str = ""
    env_names: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ReportInput:
    """Everything an export needs. ``events`` must include every experiment-related event
    (baselines may predate ``since_ts``); ``since_ts``/``server`` restrict what is listed."""

    title: str
    events: Sequence[Event]
    results: Sequence[StoredResult] = ()
    todos: Sequence[TodoItem] = ()
    servers: Sequence[ServerInfo] = ()
    since_ts: float | None = None
    server: str | None = None
    generated_ts: float = 0.0
    source: str = ""
    experiments: Sequence[Experiment] | None = field(default=None)

    def all_experiments(self) -> list[Experiment]:
        """Every experiment (built from events and results unless given)."""
        if self.experiments is not None:
            return list(self.experiments)
        return build_experiments(self.events, self.results)

    def listed(self, experiments: Sequence[Experiment]) -> list[Experiment]:
        """The experiments within ``since_ts`` and ``server``."""
        return [x for x in experiments if (self.server is None or x.server == self.server)
                and (self.since_ts is None or x.started_ts >= self.since_ts)]

    def listed_events(self) -> list[Event]:
        """The events within ``since_ts`` and ``server`` (target or experiment of it)."""
        exps = None
        if self.server is not None:
            exps = {x.id for x in self.all_experiments() if x.server == self.server}
        return [e for e in sorted(self.events, key=lambda e: e.seq)
                if (self.since_ts is None or e.ts >= self.since_ts)
                and (exps is None or e.target == self.server or e.experiment in exps)]


#: ``optui bench import``'s event (``optui.session.bench.service.BENCH_IMPORTED``; core cannot
#: import session): ``{"file", "bench", "result_ids": [...]}``.
BENCH_IMPORTED = "bench.imported"


@dataclass(frozen=True, slots=True)
class ImportedRun:
    """A result stored by ``optui bench import`` from ``file`` that no experiment of the
    campaign ran (no server of it, or none current at the result's time)."""

    stored: StoredResult
    file: str

    @property
    def label(self) -> str:
        """Its workload, as experiments label theirs (``random 256/96 x64 c16``)."""
        return workload_label(self.stored.result.workload)


def imported_runs(events: Sequence[Event], results: Sequence[StoredResult], experiments: Sequence[Experiment], *,
                  server: str | None = None, since_ts: float | None = None) -> list[ImportedRun]:
    """The imported results (named by ``bench.imported`` events) that are in no
    experiment's runs, oldest first; ``server``/``since_ts`` restrict them like the
    experiments listed."""
    files: dict[int, str] = {}
    for e in events:
        if e.type == BENCH_IMPORTED:
            for rid in e.data.get("result_ids") or ():
                files[rid] = str(e.data.get("file") or "")
    if not files:
        return []
    in_experiment = {r.id for x in experiments for w in x.workloads for r in w.runs}
    return [ImportedRun(r, files[r.id]) for r in sorted(results, key=lambda r: r.id)
            if r.id in files and r.id not in in_experiment
            and (server is None or r.server == server) and (since_ts is None or r.ts >= since_ts)]


# ------------------------------------------------------------------ JSONL / CSV
def render_jsonl(inp: ReportInput) -> str:
    """One JSON object per event (oldest first): :meth:`Event.to_json` plus ``time``
    (local ISO-8601); control and bidi characters as ``\\uXXXX`` escapes (same values)."""
    lines = []
    for e in inp.listed_events():
        obj = e.to_json()
        obj["time"] = iso_time(e.ts)
        lines.append(safe_json(json.dumps(obj, default=str, allow_nan=False, ensure_ascii=False)))
    return "\n".join(lines) + ("\n" if lines else "")


CSV_COLUMNS = (
    "experiment", "server", "started", "actor", "reason", "change_vs_baseline", "outcome", "crash_class",
    "ready_s", "workload", "bench", "runs_ok", *(m.key for m in KEY_METRICS),
    *(f"{m.key}_delta_pct" for m in KEY_METRICS), "verdict", "decision", "baseline", "argv",
    "runs", "requests_ok", "requests_total", "n", "baseline_n", "spread_pct", "baseline_spread_pct", "p",
    "restart_spread_pct", "threshold_pct", "evidence", "unverified", "same_config_as",
)


def render_csv(inp: ReportInput) -> str:
    """One row per experiment (columns :data:`CSV_COLUMNS`; metrics of its primary
    workload, medians over repeats; deltas in % vs the baseline; the verdict's evidence:
    runs, ok/total requests, n per side, spreads in %, p, restart spread; ``same_config_as``: the
    first experiment of its configuration when it ran those flags again). Text cells go through
    :func:`~optui.core.text.safe_text.csv_cell`: one line, no control characters, no formula."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for x in inp.listed(inp.all_experiments()):
        w = x.primary
        values = [w.values.get(m.key) if w else None for m in KEY_METRICS]
        deltas = [_round(d.rel_pct, 2) if (d := x.metric(m.key)) is not None else None for m in KEY_METRICS]
        writer.writerow([csv_cell(v) for v in (
            x.id, x.server, iso_time(x.started_ts), x.actor, x.reason, "; ".join(x.diff_vs_baseline), x.outcome,
            x.crash_class or "", _blank(x.ready_s), w.label if w else "", (w.bench or "") if w else "",
            w.n_ok if w else 0, *(_blank(_round(v, 3)) for v in values), *(_blank(d) for d in deltas),
            x.verdict, x.decision or "", x.baseline_id or "", shlex.join(x.argv),
            len(w.runs) if w else 0, *(_blank(v) for v in (w.requests if w and w.requests else (None, None))),
            *(_blank(_round(v, 4) if isinstance(v, float) else v) for v in _evidence_cells(w)),
            verdict_evidence(x), "; ".join(x.unverified), x.same_config_as or "",
        )])
    return buf.getvalue()


def _evidence_cells(w) -> tuple:
    """n, baseline n, spreads, p, restart spread, threshold (%) of a workload's judgement (Nones without); spreads
    ± half the range in % (:data:`~optui.core.bench.compare.SPREAD_NOTATION`), as the text and JSON."""
    j = w.judgement if w is not None else None
    if j is None:
        return (None,) * 7
    return (j.n, j.base_n, j.spread_pct, j.base_spread_pct, j.p, j.restart_half_pct, j.threshold_pct)


def _round(value, digits):
    return None if value is None else round(value, digits)


def _blank(value):
    return "" if value is None else value


# ------------------------------------------------------------------ Markdown
def render_markdown(inp: ReportInput) -> str:
    """The findings report (see module doc) as GitHub-flavoured Markdown. Every text from
    the journal is escaped for where it lands (:mod:`optui.core.text.safe_text`): inline text and
    table cells, code spans, code blocks; no control character is written raw."""
    experiments = inp.all_experiments()
    listed = inp.listed(experiments)
    servers = sorted({x.server for x in listed} | ({inp.server} if inp.server else set())) or \
        sorted({x.server for x in experiments})
    out: list[str] = [f"# Findings: {markdown_inline(inp.title)}", ""]
    period = _period(inp.listed_events())
    out.append(f"_Generated {_when(inp.generated_ts or time.time())} by optui from `{markdown_code(inp.source or 'the journal')}`."
               + (f" Period: {period}." if period else "")
               + (f" Listing experiments since {_when(inp.since_ts)}." if inp.since_ts else "")
               + (f" Server: {markdown_inline(inp.server)}." if inp.server else "") + "_")
    out.append("")
    rows, folded = fold_repeats(listed)  # one row per configuration: its later starts counted with it
    folded_into = {r: exp_id for exp_id, ids in folded.items() for r in ids}
    by_id = {x.id: x for x in listed}
    out += _summary(listed, rows, experiments, servers)
    out += _setup(inp, experiments, servers)
    out += _baselines(experiments, servers, inp.servers)
    out += _experiment_table(rows, {exp_id: [by_id[r] for r in ids] for exp_id, ids in folded.items()})
    for x in listed:
        out += _experiment_section(x, by_id[folded_into[x.id]] if x.id in folded_into else None)
    out += _failures(listed)
    out += _best(experiments, servers, inp.servers)
    out += _searches(inp.listed_events(), experiments, inp.servers)
    out += _imported(imported_runs(inp.events, inp.results, experiments, server=inp.server, since_ts=inp.since_ts))
    out += _todos(inp.todos)
    out += _loose_notes(inp)
    return "\n".join(out).rstrip() + "\n"


def _summary(listed: list[Experiment], rows: list[Experiment], experiments: list[Experiment],
             servers: list[str]) -> list[str]:
    """The verdicts counted once per row of the experiments table (``rows``: a
    configuration's later starts folded into it, :func:`fold_repeats`), the starts beside."""
    out = ["## Summary", ""]
    if not listed:
        return out + ["No experiments in this period: restart a server with new flags (or run a benchmark) to start one.", ""]
    counts: dict[str, int] = {}
    for x in rows:
        counts[x.verdict] = counts.get(x.verdict, 0) + 1
    order = ("baseline", "better", "mixed", "same", "worse", "untested noise", "failed", "untested", "incomplete")
    starts = (f" ({len(listed)} starts: a configuration started again is counted with its first experiment)"
              if len(listed) != len(rows) else "")
    out.append(f"- {len(rows)} experiment{'s' if len(rows) != 1 else ''} on {markdown_inline(', '.join(servers))}{starts}: "
               + ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)) + ".")
    for server in servers:
        best = best_experiment(experiments, server)
        if best is not None and not best.is_baseline:
            out.append(f"- Best configuration of **{markdown_inline(server)}**: {best.id}, {_gain_text(best)}: "
                       f"{_changes(best.diff_vs_baseline)}.")
        elif best is not None:
            mixed = [x.id for x in rows if x.server == server and x.verdict == "mixed"]
            out.append(f"- **{markdown_inline(server)}**: nothing beat the baseline {best.id} outside the noise yet"
                       + (f" (mixed, better at one workload and worse at another: {', '.join(mixed)})"
                                         if mixed else "") + ".")
        out += [f"- {line}" for line in _winners_lines(experiments, server)]
    failed = [x for x in rows if x.verdict == "failed"]
    if failed:
        out.append("- Failed: " + ", ".join(f"{x.id} ({markdown_inline(x.crash_class or 'unknown')}: {_changes(x.diff_vs_baseline)})"
                                            for x in failed) + ".")
    out.append(f"- Verdicts: {markdown_inline(STATISTIC)}.")
    return out + [""]


def _gain_text(x: Experiment) -> str:
    """How a better configuration beat the baseline: its out tok/s change and evidence on its
    one compared workload (``+12.0% out tok/s vs baseline exp-0001 (random 32/12 x8 c4; n=3
    vs 3, ...)``), or each workload's verdict where it was compared on several
    (:func:`~optui.core.journal.experiments.verdict_evidence`)."""
    d, primary = x.primary_delta, x.primary
    evidence = markdown_inline(verdict_evidence(x))
    if len([w for w in x.workloads if w.judgement is not None and w.n_ok]) > 1 or d is None or primary is None:
        return f"{x.verdict} vs baseline {x.baseline_id}: {evidence}"
    return f"{_pct(d.rel_pct)} {d.metric.label} vs baseline {x.baseline_id} ({markdown_inline(primary.label)}; {evidence})"


def _won_on(x: Experiment):
    """The workload where ``x`` beat the baseline by the most (judged ``better``), or None."""
    won = [(j.delta_pct or 0.0, w) for w in x.workloads if (j := w.judgement) is not None and j.verdict == "better"
           and w.n_ok]
    return max(won, key=lambda dw: dw[0] * PRIMARY.direction, default=(0.0, None))[1]


def _winners_lines(experiments: list[Experiment], server: str) -> list[str]:
    """``["best at c=1: exp-0001 (the baseline)", "best at c=16: exp-0003 (+250.0 %, vs
    runner-up exp-0002: better ...)"]`` when the per-workload winners of ``server`` differ
    (:func:`~optui.core.journal.experiments.best_by_workload`), else ``[]``."""
    winners = best_by_workload(experiments, server)
    if len({x.id for x, _ in winners.values()}) < 2:
        return []
    lines = []
    def order(item):  # by concurrency (c=2 before c=16), then label
        w = item[1][1]
        r = w.runs[0].result
        conc = r.max_concurrency if r.max_concurrency is not None else r.workload.max_concurrency
        return (conc if conc is not None else -1, w.label, item[0])

    for _, (x, w) in sorted(winners.items(), key=order):
        j = w.judgement
        what = "the baseline" if x.is_baseline else (f"{_pct(j.delta_pct)} {PRIMARY.label}" if j is not None else "")
        vs = runner_up(experiments, x, w.key)
        lines.append(f"best at {markdown_inline(workload_point(w))}: {x.id} ({what}"
                     + (f"; {markdown_inline(vs.text())}" if vs is not None else "") + ")")
    return lines


def _setup(inp: ReportInput, experiments: list[Experiment], servers: list[str]) -> list[str]:
    out = ["## Setup", ""]
    hosts: dict[str, dict] = {}
    for e in inp.events:
        if e.type == ev.HOSTS_SEEN and e.target:
            hosts[e.target] = e.data
    if hosts:
        out += ["| host | GPUs | driver |", "| --- | --- | --- |"]
        for host, data in sorted(hosts.items()):
            gpus = ", ".join(f"{g.get('count')}× {g.get('name')}" + (f" ({g['mem_total_mib'] / 1024:.0f} GiB)"
                                                                      if g.get("mem_total_mib") else "")
                             for g in data.get("gpus_by_name") or [])
            out.append(f"| {_cell(host)} | {_cell(gpus or 'none')} | {_cell(data.get('driver_version') or '-')} |")
    else:
        out.append("GPU inventory not recorded (no live GPU reading was journaled).")
    out.append("")
    info = {s.name: s for s in inp.servers}
    out += ["| server | host | kind | model | server version | control | url |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in servers:
        mine = [x for x in experiments if x.server == name]
        model = next((x.model for x in reversed(mine) if x.model), None)
        version = next((x.server_version for x in reversed(mine) if x.server_version), None)
        s = info.get(name, ServerInfo(name))
        out.append(f"| {_cell(name)} | {_cell(s.host or '-')} | {_cell(s.kind or '-')} | {_cell(model or '-')} | "
                   f"{_cell(version or '-')} | {_cell(s.control or '-')} | {_cell(s.url or '-')} |")
    return out + [""]


def _baselines(experiments: list[Experiment], servers: list[str], infos: Sequence[ServerInfo]) -> list[str]:
    out = ["## Baseline", ""]
    env = {s.name: s.env for s in infos}
    for server in servers:
        base = next((x for x in experiments if x.server == server and x.is_baseline), None)
        if base is None:
            out += [f"**{markdown_inline(server)}**: no baseline yet (no experiment became ready).", ""]
            continue
        ready = f"ready in {base.ready_s:.1f} s" if base.ready_s is not None else base.outcome
        out += [f"**{markdown_inline(server)}: {base.id}** ({markdown_inline(base.reason or 'start')}, {ready})", "",
                "```bash", *_block(launch_line(base.argv, env.get(server, ()))), "```", ""]
        if base.workloads:
            out += _metrics_table(base, with_delta=False)
        else:
            out += ["No benchmark on the baseline yet.", ""]
    return out


def _experiment_table(rows: list[Experiment], repeats: Mapping[str, Sequence[Experiment]]) -> list[str]:
    """One row per configuration (``rows``): the later starts of it (``repeats``, by row)
    counted in its outcome (``ready · 3 starts: 2 ok, 1 failed``); their runs are judged
    with its own already (``n=6 vs 3``)."""
    if not rows:
        return []
    out = ["## Experiments", "",
           "| experiment | server | change vs baseline | outcome | ready s | runs | out tok/s | Δ | TTFT p50 ms | Δ | verdict | evidence |",
           "| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for x in rows:
        tput, ttft = x.metric("output_throughput_tok_s"), x.metric("ttft_ms.median")
        outcome = x.outcome if x.outcome != "failed" else f"failed ({x.crash_class or 'unknown'})"
        outcome += ", unverified" if x.unverified else ""
        if repeats.get(x.id):
            outcome += f" · {starts_text(x, repeats[x.id])} ({', '.join(r.id for r in repeats[x.id])})"
        verdict = x.verdict + (f" / {markdown_inline(x.decision)}" if x.decision else "")
        change = _changes(x.diff_vs_baseline, baseline=x.is_baseline, cell=True)
        if x.same_config_as:  # a configuration again that keeps its row (the baseline's, compared one by one)
            change = f"same flags as {x.same_config_as}" if change == "same flags" else f"{change} (same flags as {x.same_config_as})"
        out.append(f"| {x.id} | {_cell(x.server)} | {change} | "
                   f"{_cell(outcome)} | {_num(x.ready_s, 1)} | {_cell(runs_text(x.primary))} | "
                   f"{_num(tput.value if tput else None, 1)} | "
                   f"{_pct(tput.rel_pct if tput and not x.is_baseline else None)} | {_num(ttft.value if ttft else None, 1)} | "
                   f"{_pct(ttft.rel_pct if ttft and not x.is_baseline else None)} | {verdict} | {_cell(verdict_evidence(x) or '-')} |")
    return out + [""]


def _experiment_section(x: Experiment, folded_into: Experiment | None = None) -> list[str]:
    """An experiment's story: start, outcome, verdict, failed runs, notes, numbers, log.
    ``folded_into``: the table's row (an earlier experiment of the same configuration) that
    counts this start: the verdict and numbers are that configuration's, said once there."""
    title = "baseline" if x.is_baseline else _changes(x.diff_vs_baseline)
    if x.same_config_as:
        title = f"same flags as {x.same_config_as}" if title == "same flags" else f"{title} (same flags as {x.same_config_as})"
    out = [f"### {x.id} ({markdown_inline(x.server)}): {title}", ""]  # _changes: already escaped
    out.append(f"- Started {_when(x.started_ts)} by {markdown_inline(x.actor)}"
               + (f" ({markdown_inline(x.reason)})" if x.reason else "") + ".")
    if x.diff_prev and list(x.diff_prev) != list(x.diff_vs_baseline):
        out.append(f"- Change vs the previous configuration: {_changes(x.diff_prev)}.")
    if x.outcome == "ready":
        marks = [PhaseMark(p, t) for p, t in x.phases]  # start offsets → how long each lasted
        phases = ", ".join(f"{d['phase']} {d['dur']:.1f} s" for d in phase_durations(marks, x.ready_s) if d["dur"] is not None)
        out.append("- Outcome: ready" + (f" in {x.ready_s:.1f} s" if x.ready_s is not None else "")
                   + (f" (phases: {phases})" if phases else "") + ".")
    elif x.outcome == "failed":
        why = crash_summary(x.crash_lines, x.crash_message)
        out.append(f"- Outcome: **failed, {markdown_inline(x.crash_class or 'unknown')}**" + (f": {_md_inline(why)}" if why else "") + ".")
    else:
        out.append(f"- Outcome: {x.outcome}.")
    if x.unverified:
        out.append("- **Unverified**: the server does not run the flags credited here: "
                   + "; ".join(_md_inline(line) for line in x.unverified) + ".")
    if x.rolled_back:
        out.append("- Rolled back to the last good flags.")
    if folded_into is not None:  # counted in that row; its runs (if any) judged with the configuration's
        runs = sum(r.experiment == x.id for w in x.workloads for r in w.runs)  # its own, of the pooled runs
        mine = f"its {runs} run{'s' if runs != 1 else ''} judged with that configuration's" if runs else "no benchmark of its own"
        out.append(f"- Counted with {folded_into.id} (same flags; {mine}): verdict **{folded_into.verdict}**, "
                   f"numbers in {folded_into.id}.")
    out += _verdict_and_notes(x, with_verdict=folded_into is None)
    if x.workloads and not x.is_baseline and folded_into is None:
        out += _metrics_table(x, with_delta=True)
    if x.crash_lines:
        out += ["```text", *[markdown_block_line(line) for line in x.crash_lines[-12:]], "```", ""]
    return out


def _verdict_and_notes(x: Experiment, *, with_verdict: bool) -> list[str]:
    """The verdict line (with its evidence and the operator's decision), failed runs and notes."""
    out = []
    verdict = f"- Verdict: **{x.verdict}**"
    d = x.primary_delta
    if d is not None and d.rel_pct is not None and not x.is_baseline:
        evidence = verdict_evidence(x)
        verdict += f" ({_pct(d.rel_pct)} {d.metric.label}" + (f"; {markdown_inline(evidence)})" if evidence else f" vs {x.baseline_id})")
    if x.decision:
        verdict += f"; decision: **{markdown_inline(x.decision)}**" + (f" ({_md_inline(x.decision_reason)})" if x.decision_reason else "")
    if with_verdict:
        out.append(verdict + ".")
    elif x.decision:
        out.append(f"- Decision: **{markdown_inline(x.decision)}**" + (f" ({_md_inline(x.decision_reason)})" if x.decision_reason else "") + ".")
    failed_runs = [r for r in x.bench_runs if r.status != "ok"]
    for r in failed_runs:
        out.append(f"- Benchmark {markdown_inline(r.bench)} {markdown_inline(r.status)}" + (f": {_md_inline(r.error)}" if r.error else "") + ".")
    for _, text in x.notes:
        out.append(f"- Note: {_md_inline(text)}")
    out.append("")
    return out


def _metrics_table(x: Experiment, *, with_delta: bool) -> list[str]:
    out = []
    for w in x.workloads:
        runs = f"{w.n_ok}/{len(w.runs)} comparable run{'s' if len(w.runs) != 1 else ''}"
        requests = f", requests {requests_text(w.requests)}" if w.requests is not None else ""
        # the spread the TUI and the CLI show (half the range of the runs' out tok/s): 'CV' was
        # neither explained nor the same number (the larger of two coefficients of variation)
        spread = sample(r.result.metric(PRIMARY.key) for r in w.runs if comparable(r.result)).spread_pct
        out.append(f"Workload {_md_inline(w.label)}" + (f" (bench {markdown_inline(w.bench)})" if w.bench else "") + f", {runs}"
                   + requests + (f", {PRIMARY.label} ±{spread:.1f} % over its runs" if spread is not None else "") + ":")
        out.append("")
        for r in w.runs:
            if not comparable(r.result):
                why = r.result.error or r.result.status
                out += [f"- Run #{r.id}: {markdown_inline(r.result.status if r.result.status != 'ok' else 'degraded')}, "
                        f"{requests_text(request_counts(r.result))} ({_md_inline(why)}): never compared.", ""]
        if with_delta:
            out += [f"| metric | baseline ({w.base_experiment or '-'}) | {x.id} | Δ |", "| --- | ---: | ---: | ---: |"]
            for d in w.deltas:
                out.append(f"| {_metric_title(d.metric)} | {_num(d.base, 2)} | {_num(d.value, 2)} | {_pct(d.rel_pct)} |")
        else:
            out += ["| metric | value |", "| --- | ---: |"]
            for d in w.deltas:
                out.append(f"| {_metric_title(d.metric)} | {_num(d.value, 2)} |")
        out.append("")
    return out


def _metric_title(metric) -> str:
    """``"TTFT p50 (ms)"``; a label that says its unit once: ``"out tok/s"``, not ``"out tok/s (tok/s)"``."""
    return metric.label if metric.label.endswith(metric.unit) else f"{metric.label} ({metric.unit})"


def _failures(listed: list[Experiment]) -> list[str]:
    failed = [x for x in listed if x.outcome == "failed"]
    if not failed:
        return []
    out = ["## Failures", "", "| experiment | server | class | change vs baseline | message |", "| --- | --- | --- | --- | --- |"]
    for x in failed:
        message = crash_summary(x.crash_lines, x.crash_message)
        out.append(f"| {x.id} | {_cell(x.server)} | {_cell(x.crash_class or 'unknown')} | "
                   f"{_changes(x.diff_vs_baseline, cell=True)} | {_cell(message)} |")
    return out + [""]


def _best(experiments: list[Experiment], servers: list[str], infos: Sequence[ServerInfo]) -> list[str]:
    out = ["## Best configuration", ""]
    info = {s.name: s for s in infos}
    for server in servers:
        best = best_experiment(experiments, server)
        if best is None:
            last_ready = next((x for x in reversed(experiments) if x.server == server and x.outcome == "ready"), None)
            if last_ready is None:
                out += [f"**{markdown_inline(server)}**: no configuration became ready.", ""]
                continue
            out += [f"**{markdown_inline(server)}**: nothing compared yet; the last configuration that became ready is "
                    f"{last_ready.id}:", ""]
            best = last_ready
        else:
            d, primary = best.primary_delta, best.primary
            assert primary is not None  # best_experiment picks among compared experiments
            if best.is_baseline:
                gain = "the baseline itself: nothing beat it outside the noise at every workload"
            else:
                assert d is not None
                gain = _gain_text(best)
            other = [f"{m.metric.label} {_pct(m.rel_pct)}" for m in primary.deltas[1:] if m.rel_pct is not None and not best.is_baseline]
            out += [f"**{markdown_inline(server)}: {best.id}** ({gain}" + (f"; {', '.join(other)}" if other else "")
                    + f"; workload {_md_inline(primary.label)}):", ""]
            won = _won_on(best) or primary  # where it beat the baseline most: there the runner-up matters
            vs = runner_up(experiments, best, won.key)
            if vs is not None:
                out += [f"Tested against the runner-up on {_md_inline(won.label)}: {markdown_inline(vs.text())}.", ""]
        s = info.get(server, ServerInfo(server))
        out += ["```bash", *_block(launch_line(best.argv, s.env)), "```"]
        winners = best_by_workload(experiments, server)
        if len({x.id for x, _ in winners.values()}) > 1:  # no configuration wins everywhere: each point's
            out += ["", "The per-workload winners differ: " + "; ".join(_winners_lines(experiments, server)) + "."]
            for x in sorted({x.id: x for x, _ in winners.values()}.values(), key=lambda x: x.id):
                if x.id == best.id:
                    continue
                out += ["", f"{x.id} ({_changes(x.diff_vs_baseline) if not x.is_baseline else 'the baseline'}):", "",
                        "```bash", *_block(launch_line(x.argv, s.env)), "```"]
        if best.unverified:  # its numbers belong to what the server ran, not to this argv
            out.append("**Unverified**: the server did not run these flags as given: "
                       + "; ".join(_md_inline(line) for line in best.unverified) + ".")
        hidden = [name for name in s.env_names if name not in dict(s.env)]
        if hidden:  # values that do not decide the result, or secrets: named, never shown
            out.append(f"The server's environment in optui.toml also sets: {markdown_inline(', '.join(hidden))}.")
        out.append("")
    return out


def _searches(events: Sequence[Event], experiments: Sequence[Experiment], infos: Sequence[ServerInfo]) -> list[str]:
    """One section per flag search (``search.*`` events, ``optui.session.search``): every
    configuration tried with its median score, the infeasible ones with their crash class or
    the constraints they broke, the winner's launch command (only when it beat the others
    outside the noise: :func:`~optui.core.search.strategies.won`), and which flags the
    server was left on at the search's end."""
    from optui.core.search.spec import SearchSpec, point_text
    from optui.core.search.strategies import (
        Trial,
        breaks_text,
        none_feasible_text,
        standings,
        winner_comparisons,
        winner_text,
        won,
    )

    runs: dict[str, dict] = {}
    for e in events:
        sid = e.data.get("search_id")
        if not e.type.startswith("search.") or not isinstance(sid, str):
            continue
        run = runs.setdefault(sid, {"start": None, "trials": [], "end": None})
        if e.type == "search.started" and run["start"] is None:
            run["start"] = e
        elif e.type == "search.trial":
            run["trials"].append(Trial.from_json(e.data))
        elif e.type == "search.finished":
            run["end"] = e
    by_id = {x.id: x for x in experiments}
    info = {s.name: s for s in infos}
    out: list[str] = []
    for sid, run in runs.items():
        start = run["start"]
        if start is None:
            continue
        try:
            spec = SearchSpec.model_validate(start.data.get("spec") or {})
        except ValueError:
            continue  # a spec this version cannot read
        end = run["end"]
        status = end.data.get("status", "done") if end is not None else "running or interrupted"
        rules = ", ".join(spec.constraints) or "none"
        out += [f"## Flag search {markdown_inline(sid)}", "",
                f"{markdown_inline(spec.strategy)} search of {markdown_inline(spec.server)} with "
                f"{markdown_inline(spec.bench)}: {markdown_inline(spec.objective)}, constraints {markdown_inline(rules)}; "
                f"{len(run['trials'])} trials, {markdown_inline(status)}.", "",
                f"| configuration | {_cell(spec.goal.metric)} (median) | trials (runs) | feasible | why not | experiments |",
                "| --- | --- | --- | --- | --- | --- |"]
        table = standings(spec, run["trials"])
        numbers = {t.number: t.experiment for t in run["trials"]}
        for s in table:
            why = s.crash_class or breaks_text(s.violated, s.values)
            exps = ", ".join(e for e in (numbers.get(n) for n in s.trials) if e)
            score = "" if s.score is None else f"{s.score:.4g}"
            out.append(f"| {_cell(point_text(s.point) or '(fixed flags)')} | {score} | {s.runs}{f' ({s.bench_runs})' if s.bench_runs else ''} | "
                       f"{'yes' if s.feasible else 'no'} | {_cell(why)} | {_cell(exps)} |")
        out.append("")
        best = table[0] if table and table[0].feasible else None
        if best is None:
            why_none = none_feasible_text(spec, run["trials"])
            out += [f"{_md_inline(why_none[:1].upper() + why_none[1:])}.", ""]
            running = (end.data.get("running") or {}) if end is not None else {}
            if running.get("text"):
                out += [f"At its end: {_md_inline(str(running['text']))}.", ""]
            continue
        comparisons = winner_comparisons(spec, run["trials"])
        x = next((by_id[e] for e in (numbers.get(n) for n in reversed(best.trials)) if e in by_id), None)
        if won(comparisons):
            out += [f"Winner: {_md_inline(point_text(best.point))} ({spec.goal.metric} {best.score:.4g}, {best.count_text})"
                    + (":" if x is not None else "."), ""]
            if x is not None:
                s_info = info.get(spec.server, ServerInfo(spec.server))
                out += ["```bash", *_block(launch_line(x.argv, s_info.env)), "```", ""]
        else:  # its own evidence: nothing beat the runner-up outside the noise, so no launch command
            out += [f"No winner: the best, {_md_inline(point_text(best.point))} ({spec.goal.metric} {best.score:.4g}, "
                    f"{best.count_text}), did not beat the others outside the noise.", ""]
        # its evidence, as a verdict's: beat the runner-up / first trial outside the noise, or not
        out += [f"Evidence: {_md_inline(winner_text(spec, best, comparisons))}.", ""]
        running = (end.data.get("running") or {}) if end is not None else {}
        if running.get("text"):
            out += [f"At its end: {_md_inline(str(running['text']))}.", ""]
    return out


def _imported(runs: list[ImportedRun]) -> list[str]:
    """The imported results no experiment ran: one row each, with its workload."""
    if not runs:
        return []
    out = ["## Imported results", "",
           "Stored with `optui bench import`; no experiment of this campaign ran them, so they are not compared.", "",
           "| result | file | bench | server | tool | status | workload | out tok/s | TTFT p50 ms | requests |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        st, r = run.stored, run.stored.result
        out.append(f"| #{st.id} | {_cell(run.file.rsplit('/', 1)[-1])} | {_cell(st.bench or '-')} | {_cell(st.server or '-')} "
                   f"| {_cell(r.tool)} | {_cell(r.status)} | {_cell(run.label)} | {_num(r.output_throughput_tok_s, 1)} "
                   f"| {_num(r.metric('ttft_ms.median'), 1)} | {_cell(requests_text(request_counts(r)))} |")
    return out + [""]


def _todos(todos: Sequence[TodoItem]) -> list[str]:
    open_items = [t for t in todos if t.status in (TodoStatus.PENDING, TodoStatus.IN_PROGRESS)]
    out = ["## Open todo items", ""]
    if not open_items:
        return out + ["None.", ""]
    for t in open_items:
        state = " (in progress)" if t.status is TodoStatus.IN_PROGRESS else ""
        out.append(f"- [ ] **{t.priority}** {_md_inline(t.content)}{state}")
    return out + [""]


def _loose_notes(inp: ReportInput) -> list[str]:
    notes = [e for e in inp.listed_events() if e.type == ev.NOTE and not e.experiment]
    if not notes:
        return []
    out = ["## Notes", ""]
    out += [f"- {_when(e.ts)}: {_md_inline(str(e.data.get('text', '')))}" for e in notes]
    return out + [""]


# ------------------------------------------------------------------ formatting
def _changes(lines: Sequence[str], *, baseline: bool = False, cell: bool = False) -> str:
    """Flag diff lines as code spans (``cell``: inside a table, where a pipe ends the cell
    even in a code span unless escaped)."""
    if baseline:
        return "baseline"
    spans = (markdown_code(line) for line in lines)
    return "; ".join(f"`{span.replace('|', chr(92) + '|') if cell else span}`" for span in spans) or "same flags"


def _cell(text) -> str:
    """A Markdown table cell: literal text on one line (pipes escaped)."""
    return markdown_inline(str(text).replace("\n", " "))


def _md_inline(text) -> str:
    return markdown_inline(str(text).replace("\n", " "))


def _block(text: str) -> list[str]:
    """``text`` as the lines of a fenced code block (none of them can close it)."""
    return [markdown_block_line(line) for line in text.split("\n")]


def _num(value, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _period(events: list[Event]) -> str:
    if not events:
        return ""
    return f"{_when(events[0].ts)} to {_when(events[-1].ts)}"
