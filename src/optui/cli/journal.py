"""``optui journal``: the campaign journal from the command line (scripts and agents).

- ``tail [-n N] [-f] [--json]`` the newest events; ``-f`` follows new ones (polls the DB).
- ``show SEQ [--json]`` one event's details (flag diff, phases, crash, metrics vs baseline).
- ``experiments [--json]`` one row per experiment with its verdict.
- ``export --format md|jsonl|csv [--since ...] [--server ...] [-o FILE]`` findings report,
  events or the experiments table (written atomically with ``-o``); ``export --mlflow URI``
  one MLflow run per experiment (:mod:`optui.adapters.mlflow_export`).
- ``note TEXT`` and ``verdict EXP keep|reject|inconclusive`` add to the journal.

Exit status: 0 ok, 1 nothing found (``show``), 2 bad input or no journal.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Container, Sequence
from pathlib import Path

import click

from optui.cli.common import COUNT, ID, actor, echo, echo_json, fail, load_config_or_exit, read_only_open
from optui.core.journal import events as ev
from optui.core.journal.events import Event, EventFilter, parse_since
from optui.core.text.safe_text import safe_json, safe_line
from optui.session.cli_mcp_shared import event_json, event_types, experiment_json, imported_json


def _open(ctx: click.Context, *, must_exist: bool = True, reading: bool = True):
    """The campaign's Journal (exit 2 with the path when it is missing or unreadable);
    ``reading`` commands open it read-only under ``--read-only`` or on a read-only filesystem."""
    from optui.adapters.journal import Journal, JournalError

    loaded = load_config_or_exit(ctx)
    path = loaded.journal_path
    if must_exist and not Path(path).exists():
        fail(f"{path}: no journal yet (start optui or `optui demo` on this campaign first)", 2)
    try:
        journal = Journal(path, read_only=reading and read_only_open(ctx, path))
    except JournalError as exc:
        fail(str(exc), 2)
    return loaded, journal


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_since(text)
    except ValueError as exc:
        fail(str(exc), 2)


def event_line(e: Event) -> str:
    """One human line: ``14:22:07 #118 server.ready demo [cli] exp-0003 ready in 2.1s``."""
    when = time.strftime("%H:%M:%S", time.localtime(e.ts))
    return (f"{when} #{e.seq} {e.type} {safe_line(e.target or '-')} [{safe_line(e.actor)}] {e.experiment or '-'} "
            f"{safe_line(e.summary())}")  # one row per event: a newline in a note must not forge a row


def _event_json(e: Event) -> str:
    return safe_json(json.dumps(event_json(e), default=str, allow_nan=False, ensure_ascii=False))


@click.group()
def journal() -> None:
    """The campaign journal: tail, show, experiments, export, notes, verdicts."""


@journal.command()
@click.option("-n", "--lines", "count", type=COUNT, default=20, show_default=True, help="How many recent events.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events (Ctrl-C stops).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (JSONL).")
@click.option("--type", "types", multiple=True, help="Event type or group (server, flags, failures, bench, todo, notes, experiments).")
@click.option("--server", default=None, help="Only events of this server (target).")
@click.option("--experiment", default=None, help="Only events of this experiment (exp-0007).")
@click.option("--grep", "text", default=None, help="Only events whose type, target, actor or data contain TEXT.")
@click.option("--since", default=None, help="Only events since: 90m, 2h, 1d, 2026-05-03T14:00.")
@click.option("--interval", type=click.FloatRange(0.05, 10), default=0.2, show_default=True, help="Follow: poll period (s).")
@click.pass_context
def tail(ctx, count, follow, as_json, types, server, experiment, text, since, interval) -> None:
    """Print the newest events (oldest first); with -f, follow new ones."""
    _, j = _open(ctx)
    flt = EventFilter(types=event_types(types), target=server, experiment=experiment, text=text, since_ts=_since(since))
    emit = _event_json if as_json else event_line
    try:
        events = list(reversed(j.query(flt, limit=count))) if count else []
        last = j.last_seq()
        for e in events:
            echo(emit(e))
        while follow:
            time.sleep(interval)
            if not j.changed():
                continue
            for e in reversed(j.query(flt, since_seq=last, limit=None)):
                echo(emit(e))
            last = j.last_seq()
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `optui journal tail | head`
        sys.stderr.close()
    finally:
        j.close()


@journal.command()
@click.argument("seq", type=ID)
@click.option("--json", "as_json", is_flag=True, help="The raw event as JSON.")
@click.pass_context
def show(ctx, seq: int, as_json: bool) -> None:
    """Details of event SEQ: flag diff, phase timings, crash class and log, metrics vs baseline."""
    from optui.core.journal.event_details import bench_results_of, event_sections, render_text

    _, j = _open(ctx)
    found = j.events(since_seq=seq - 1, limit=1)
    if not found or found[0].seq != seq:
        fail(f"no event #{seq} (last is #{j.last_seq()})", 1)
    e = found[0]
    if as_json:
        echo_json(e.to_json())
        return
    baselines = {}
    for r in bench_results_of(e):
        base = j.baseline_for(r.workload.key())
        if base is not None:
            baselines[r.workload.key()] = base.result
    echo(render_text(event_sections(e, baselines)), nl=False)


@journal.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one object per experiment).")
@click.option("--server", default=None, help="Only this server's experiments.")
@click.option("--sort", "sort_key", type=click.Choice(["id", "ready", "throughput", "delta", "ttft"]), default="id",
              show_default=True, help="Sort column (delta: Δ out tok/s vs baseline).")
@click.pass_context
def experiments(ctx, as_json: bool, server: str | None, sort_key: str) -> None:
    """One row per experiment: change vs baseline, ready time, out tok/s and Δ, verdict."""
    from optui.core.bench.compare import STATISTIC
    from optui.core.journal.experiments import change_text, fold_repeats, runs_text, sort_experiments, verdict_evidence
    from optui.session.journal.export import load_experiments, load_imported

    _, j = _open(ctx)
    every = load_experiments(j)
    imported = load_imported(j, every, server=server)  # results no experiment ran: listed after them
    rows = [x for x in every if server is None or x.server == server]
    rows = sort_experiments(rows, sort_key)
    if as_json:
        echo_json([experiment_json(x) for x in rows] + [imported_json(run) for run in imported])
        return
    if not rows and not imported:
        echo("no experiments yet")
        return
    if not rows:
        _imported_lines(imported)
        return
    rows, repeats = fold_repeats(rows)  # rollbacks / unchanged restarts: one row per configuration
    by_id = {x.id: x for x in every}
    table = [("experiment", "server", "outcome", "ready s", "out tok/s", "Δ", "runs", "verdict", "evidence",
              "change vs baseline")]
    unverified: dict[int, tuple[str, ...]] = {}
    for x in rows:
        d = x.primary_delta
        outcome = x.outcome if x.outcome != "failed" else f"failed:{x.crash_class or '?'}"
        verdict = x.verdict + (f"/{x.decision}" if x.decision else "")
        tput = f"{d.value:,.1f}" if d and d.value is not None else "-"
        rel = f"{d.rel_pct:+.1f}%" if d and d.rel_pct is not None and not x.is_baseline else "-"
        ready = f"{x.ready_s:.1f}" if x.ready_s is not None else "-"
        change = change_text(x)  # a configuration again that keeps its row (the baseline's) names its first
        if x.id in repeats:  # a folded start that failed still says so
            failed = [r for r in repeats[x.id] if by_id[r].outcome == "failed"]
            change += f" (also started with these flags: {', '.join(repeats[x.id])}"
            change += f"; {len(failed)} failed: {', '.join(failed)})" if failed else ")"
        evidence = verdict_evidence(x) or "-"
        table.append((x.id, x.server, outcome, ready, tput, rel, runs_text(x.primary), verdict, evidence, change))
        unverified[len(table) - 1] = x.unverified
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for n, line in enumerate(aligned_lines(table, right={3, 4, 5})):
        echo(line)
        for flag in unverified.get(n, ()):  # the server does not run the flags this row is credited to
            echo(f"{'':<{widths[0] + 2}}UNVERIFIED {flag}")
    _imported_lines(imported)
    echo(f"verdicts: {STATISTIC}")


def aligned_lines(table: Sequence[Sequence[str]], right: Container[int] = ()) -> list[str]:
    """``table`` (a header row, then rows of the same length) as lines of columns two spaces
    apart, each as wide as its widest cell: left-aligned, right-aligned at the indexes in
    ``right``; the last column is not padded (it may be long)."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    last = len(widths) - 1
    return ["  ".join(c if i == last else c.rjust(widths[i]) if i in right else c.ljust(widths[i])
                      for i, c in enumerate(row)).rstrip() for row in table]


def _imported_lines(imported) -> None:
    """The ``optui bench import`` results no experiment ran, one line each with its workload."""
    if not imported:
        return
    echo("imported results (optui bench import; no experiment ran them, not compared):")
    for run in imported:
        st, r = run.stored, run.stored.result
        tput = f"{r.output_throughput_tok_s:,.1f}" if r.output_throughput_tok_s is not None else "-"
        echo(f"  #{st.id:<5} {st.server or '-':<10} {r.tool} {r.status:<8} out {tput} tok/s  workload {run.label}"
             f" ({st.bench or '-'}, {run.file.rsplit('/', 1)[-1]})")


@journal.command()
@click.option("--format", "fmt", type=click.Choice(["md", "jsonl", "csv"]), default="md", show_default=True,
              help="md: findings report; jsonl: events; csv: one row per experiment.")
@click.option("--since", default=None, help="From: 90m, 2h, 1d, 2026-05-03, 2026-05-03T14:00 (baselines are still used).")
@click.option("--server", default=None, help="Only this server.")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="Write to FILE (atomically: temp file + rename) instead of stdout.")
@click.option("--mlflow", "mlflow_uri", default=None, metavar="URI",
              help="Log each experiment as an MLflow run to the tracking server URI (again: updates, never duplicates).")
@click.pass_context
def export(ctx, fmt: str, since: str | None, server: str | None, output: str | None, mlflow_uri: str | None) -> None:
    """Export the journal: a Markdown findings report, JSONL events or CSV experiments; or,
    with --mlflow URI, one MLflow run per experiment (needs pip install 'optui[mlflow]')."""
    from optui.session.journal.export import render, report_input, write_atomic

    loaded, j = _open(ctx)
    if server is not None and server not in loaded.config.servers and server not in j.experiment_servers():
        fail(f"unknown server {server!r} (known: {', '.join(loaded.config.servers) or 'none'})", 2)
    if mlflow_uri is not None:
        if output is not None or since is not None:
            fail("--mlflow logs every experiment (of --server): -o and --since do not apply", 2)
        _export_mlflow(loaded, j, mlflow_uri, server)
        return
    text = render(fmt, report_input(j, loaded, fmt, since_ts=_since(since), server=server))
    if output is None:
        echo(text, nl=False)
        return
    try:
        path = write_atomic(output, text)
    except OSError as exc:
        fail(f"{output}: {exc.strerror or exc}", 2)
    echo(f"wrote {path}", err=True)


def _export_mlflow(loaded, j, uri: str, server: str | None) -> None:
    """``journal export --mlflow URI``: one line per experiment sent, then the totals."""
    from optui.adapters.mlflow_export import TrackingError, export_runs, mlflow_experiment_name
    from optui.session.journal.export import campaign_name, tracked_runs

    runs = tracked_runs(j, loaded, server=server)
    campaign = campaign_name(loaded)
    try:
        done = export_runs(uri, campaign, runs)
    except TrackingError as exc:
        fail(f"MLflow export: {exc}", 2)
    for line in done.clashes:
        echo(f"optui: warning: {line} (MLflow never changes a param; kept)", err=True)
    echo(f"MLflow {uri}: experiment {mlflow_experiment_name(campaign)!r} (id {done.experiment_id}): "
         f"{len(done.created)} runs created, {len(done.updated)} updated, {len(done.unchanged)} unchanged"
         + (f"; findings report refreshed on {len(done.refreshed)}" if done.refreshed else ""))


@journal.command()
@click.argument("text")
@click.option("--server", default=None, help="Link to this server's current experiment (default: the newest experiment).")
@click.pass_context
def note(ctx, text: str, server: str | None) -> None:
    """Add a free-text note, linked to the current experiment."""
    from optui.adapters.journal import JournalError

    try:
        text = ev.note_text(text)
    except ValueError as exc:
        fail(str(exc), 2)
    _, j = _open(ctx, must_exist=False, reading=False)
    exp = j.current_experiment(server) if server else j.latest_experiment()
    try:
        e = j.append(ev.NOTE, server, {"text": text}, actor=actor(), experiment=exp)
    except JournalError as exc:
        fail(str(exc), 2)
    echo(f"#{e.seq} note" + (f" ({exp})" if exp else ""))


@journal.command()
@click.argument("experiment")
@click.argument("decision", type=click.Choice(["keep", "reject", "inconclusive"]))
@click.option("--reason", default="", help="Why (shown in the report).")
@click.pass_context
def verdict(ctx, experiment: str, decision: str, reason: str) -> None:
    """Record a decision on EXPERIMENT: keep, reject or inconclusive."""
    from optui.adapters.journal import JournalError

    _, j = _open(ctx, reading=False)
    server = j.experiment_server(experiment)
    if server is None:
        fail(f"unknown experiment {experiment!r}", 2)
    try:
        e = j.append(ev.VERDICT, server, {"decision": decision, "reason": reason}, actor=actor(), experiment=experiment)
    except JournalError as exc:
        fail(str(exc), 2)
    echo(f"#{e.seq} {experiment}: {decision}")
