"""What the CLI's verbs and the MCP cockpit's tools (``optui mcp``, :mod:`optui.agent.cockpit`)
share, so that neither imports the other: the JSON shapes of their answers (``optui status
--json``, ``restart --json``, ``journal tail/experiments --json``, ``bench run --json``) and
the steps both take (wait for a server to be READY, read a search spec, expand ``--type``
groups). Each shape is documented where it is built; the CLI prints it, the cockpit returns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from optui.adapters.aio import wait_set
from optui.config_file import ConfigError
from optui.core.journal import events as ev
from optui.core.journal.events import Event, iso_time

if TYPE_CHECKING:
    from optui.core.search.spec import SearchSpec


def _result_json(r) -> dict:
    return {"id": r.id, "server": r.server, "bench": r.bench, "experiment": r.experiment, "ts": r.ts, "baseline": r.baseline,
            **r.result.to_json()}


def hosts_json(state) -> list[dict]:
    """The hosts of a :class:`~optui.session.state.SessionState` as ``status --json`` prints
    them: ``[{"host", "status", "error", "source", "gpus": [GpuSample.to_json(host)...]}]``."""
    return [{"host": h.host, "status": h.status.value, "error": h.error, "source": h.source,
             "gpus": [s.to_json(h.host) for s in h.samples]} for h in state.hosts]


def status_json(loaded, session, experiments: Sequence | None = None) -> dict:
    """``optui status --json`` of a started ``session`` now (shared with ``optui mcp``'s
    status tool): hosts/GPUs, the fleet (``[fleet]``: every GPU Prometheus knows; null
    without), servers (state, phase, flags, load, current experiment),
    bench, todo, the 5 newest results, the 10 newest experiments. ``experiments``: the
    journal's, when the caller read them already (None: read here)."""
    from optui.session.gpu.fleet import fleet_json
    from optui.session.journal.export import load_experiments

    state = session.snapshot()
    if experiments is None:
        experiments = load_experiments(session.journal)
    return {
        "config": str(loaded.path) if loaded.path else None,
        "journal": state.journal_path,
        "journal_error": state.journal_error,
        "hosts": hosts_json(state),
        "fleet": None if state.fleet is None else fleet_json(loaded.config.fleet, state.fleet,
                                                             {s.name: s.url for s in state.servers}),
        "servers": [_server_json(session, s, experiments) for s in state.servers],
        "bench": None if state.bench is None else {"name": state.bench.name, "server": state.bench.server,
                                                   "status": state.bench.status},
        "todo": [t.to_json() for t in state.todos],
        "results": [_result_json(r) for r in state.results[:5]],
        "experiments": _experiments_json(experiments),
    }


def _experiments_json(experiments) -> list[dict]:
    """The 10 newest configurations as the ``E`` view and ``journal experiments`` list them
    (issue 29): starts of a configuration already listed (the same flags in any order or
    spelling: :func:`~optui.core.journal.experiments.config_key`) folded into its row
    (:func:`~optui.core.journal.experiments.fold_repeats`), which says how many starts it had
    (``starts``) and which (``folded``)."""
    from optui.core.journal.experiments import fold_repeats, starts_brief, workload_summaries

    rows, folded = fold_repeats(experiments)
    by_id = {x.id: x for x in experiments}
    return [{"id": x.id, "server": x.server, "outcome": x.outcome, "verdict": x.verdict,
             "unverified": list(x.unverified),
             "change_vs_baseline": list(x.diff_vs_baseline),
             "delta_pct": x.primary_delta.rel_pct if x.primary_delta else None,
             "same_config_as": x.same_config_as, "starts": 1 + len(folded.get(x.id, ())),
             "folded": list(folded.get(x.id, ())), "starts_text": starts_brief(x, [by_id[i] for i in folded.get(x.id, ())]),
             # each workload's verdict: the experiment's is the rule over them
             "workloads": [{k: w[k] for k in ("point", "concurrency", "request_rate", "verdict", "delta_pct")}
                           for w in workload_summaries(x)]}
            for x in rows[-10:]]


def _server_json(session, s, experiments) -> dict:
    from optui.core.flags.argv import Flags

    current = session.current_experiment(s.name)
    base = next((x for x in experiments if x.server == s.name and x.is_baseline), None)
    return {
        "name": s.name, "host": s.host, "kind": s.kind, "state": s.state.value, "phase": s.phase, "url": s.url,
        "model": s.model, "pid": s.pid, "busy": s.busy, "started_at": s.started_at, "ready_at": s.ready_at,
        "argv": list(s.argv), "flags": {k: list(v) for k, v in Flags.parse(s.argv).as_mapping().items()},
        "last_good_argv": list(s.last_good_argv) if s.last_good_argv else None,
        "crash_class": s.crash_class and str(s.crash_class), "message": s.message, "crash_cause": s.crash_cause,
        "config_mismatch": list(s.config_mismatch),
        "experiment": current, "baseline_experiment": base.id if base else None,
        "load": {k: getattr(s.load, k) for k in ("running", "waiting", "kv_cache_pct", "gen_tok_s", "prompt_tok_s",
                                                 "prefix_hit_pct", "source", "hint")},
        "fleet": s.fleet.to_json() if s.fleet is not None else None,  # [fleet]: its series in Prometheus
    }


def restart_json(session, server: str, plan, outcome) -> dict:
    """``optui restart --json`` (shared with ``optui mcp``): ``server``'s status after a
    restart of ``plan`` (None: a rollback) that ended in ``outcome`` (None: not waited for):
    state, crash class and log lines, argv vs requested_argv, ready_s, phases, catalogue
    warnings, ``config_mismatch`` (flags the server does not run), rolled back or not."""
    st = session.servers[server].status
    rolled_back = bool(outcome is not None and plan is not None and outcome.rolled_back)
    offer = outcome.offer if outcome is not None and plan is not None else None
    return {"server": server, "state": st.state.value, "experiment": session.current_experiment(server),
            "crash_class": st.crash_class and str(st.crash_class), "message": st.message,
            "lines": list(st.crash_lines), "argv": list(st.argv),
            "requested_argv": list(plan.argv) if plan else list(st.argv),
            "base": plan.base_from if plan else "last good",
            "ready_s": _ready_s(session, server),
            "phases": [{"phase": p.phase, "t": p.t} for p in st.phases],
            "warnings": [str(i) for i in plan.warnings] if plan else [],
            "config_mismatch": list(st.config_mismatch),
            "rolled_back": rolled_back, "failed": outcome.result.crash_class if rolled_back else None,
            "rollback_command": _rollback_command(session.loaded.path, server) if offer else None}


def _ready_s(session, server: str) -> float | None:
    """Seconds from the current launch's start to ready (issue 29): the ``ready_s`` of its
    ``server.ready`` event (the ready gate's, from the new process's start), else the status's
    ``ready_at - started_at`` when this launch became ready (a start not waited for); None
    when it did not. Never negative: a ready time from before the start is not this start's."""
    st = session.servers[server].status
    if not st.started_at:
        return None
    with contextlib.suppress(Exception):  # an unreadable journal: the status's own numbers
        found = session.journal.events(target=server, types=["server.ready"], limit=1, newest_first=True)
        if found and found[0].ts >= st.started_at and list(found[0].data.get("argv") or st.argv) == list(st.argv):
            value = found[0].data.get("ready_s")
            if isinstance(value, (int, float)) and value >= 0:
                return float(value)
    if st.ready_at and st.ready_at >= st.started_at:
        return round(st.ready_at - st.started_at, 3)
    return None


def _rollback_command(config_path, server: str) -> str:
    """The command line that restarts ``server`` with its last good flags."""
    return shlex.join(["optui", *(["-c", str(config_path)] if config_path else []), "restart", server, "--rollback"])


def event_types(values: Sequence[str]) -> frozenset[str] | None:
    """``--type`` values: event types or group names (server, flags, failures, bench...)."""
    out: set[str] = set()
    for v in values:
        out |= ev.TYPE_GROUPS.get(v, {v})
    return frozenset(out) if out else None


def event_json(e: Event) -> dict:
    """An event as ``journal tail --json`` prints it (and ``optui mcp`` returns it):
    :meth:`Event.to_json` plus its ISO ``time``."""
    return {**e.to_json(), "time": iso_time(e.ts)}


def imported_json(run) -> dict:
    """An imported result no experiment ran, as a row of ``journal experiments --json``
    (``"kind": "imported"``; experiments' rows have ``"kind": "experiment"``)."""
    st, r = run.stored, run.stored.result
    return {"kind": "imported", "id": f"import-{st.id}", "result_id": st.id, "server": st.server, "bench": st.bench,
            "file": run.file, "started": iso_time(st.ts), "outcome": "imported", "verdict": "untested",
            "workloads": [{"workload": run.label, "key": r.workload.key(), "bench": st.bench, "runs": 1,
                           "run_status": [r.status],
                           "metrics": {"output_throughput_tok_s": {"value": r.output_throughput_tok_s}}}]}


def experiment_json(x) -> dict:
    """An experiment as JSON for scripts (``optui journal experiments --json``); each of its
    ``workloads`` with its own verdict (``point``, ``concurrency``, ``request_rate``,
    ``verdict``, ``delta_pct``, ``evidence_text``: :func:`~optui.core.journal.experiments.workload_summaries`),
    ``verdict`` the rule over them."""
    from optui.core.journal.experiments import workload_summaries

    w = x.primary
    verdicts = {s["key"]: s for s in workload_summaries(x)}
    return {
        "kind": "experiment", "id": x.id, "server": x.server, "started": iso_time(x.started_ts), "actor": x.actor, "reason": x.reason,
        "outcome": x.outcome, "crash_class": x.crash_class, "ready_s": x.ready_s, "verdict": x.verdict,
        "unverified": list(x.unverified),
        "decision": x.decision, "baseline": x.baseline_id, "is_baseline": x.is_baseline,
        "same_config_as": x.same_config_as,
        "change_vs_baseline": list(x.diff_vs_baseline), "change_vs_previous": list(x.diff_prev), "argv": list(x.argv),
        "evidence": w.judgement.to_json() if w and w.judgement else None,
        "workloads": [{"workload": o.label, "key": o.key, "bench": o.bench, "runs": len(o.runs), "ok": o.n_ok,
                       "requests_ok": o.requests[0] if o.requests else None,
                       "requests_total": o.requests[1] if o.requests else None,
                       "run_status": [r.result.status for r in o.runs],
                       "evidence": o.judgement.to_json() if o.judgement else None,
                       # this workload's verdict vs the baseline; the experiment's is the rule over them
                       "point": verdicts[o.key]["point"], "concurrency": verdicts[o.key]["concurrency"],
                       "request_rate": verdicts[o.key]["request_rate"], "verdict": verdicts[o.key]["verdict"],
                       "delta_pct": verdicts[o.key]["delta_pct"], "evidence_text": verdicts[o.key]["evidence_text"],
                       "cv_pct": o.cv_pct, "baseline_experiment": o.base_experiment,
                       "metrics": {d.metric.key: {"value": d.value, "baseline": d.base, "delta_pct": d.rel_pct}
                                   for d in o.deltas}} for o in x.workloads] if w else [],
        "notes": [text for _, text in x.notes],
    }


READY = "ready"


async def wait_ready(rt, timeout_s: float, *, settle: bool = False) -> str:
    """Poll the runtime's state until READY or ``timeout_s``; the last state. ``settle``
    (no ``--wait``): once the first health probe is classified, give up at once unless the
    server is READY or on its way there (starting, warming): a down or crashed server is
    refused in one probe, not after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    if settle:
        await wait_set(rt.polled, max(0.0, deadline - time.monotonic()))
    while time.monotonic() < deadline:
        if rt.status.state.value == READY and rt.status.busy is None:
            break
        if settle and rt.polled.is_set() and not rt.status.state.is_transitional and rt.status.busy is None:
            break
        await asyncio.sleep(0.1)
    return rt.status.state.value if rt.status.busy is None else str(rt.status.busy)


def result_json(session, result) -> dict:
    """A stored bench result with its deltas vs the baseline (``bench run --json``'s ``results``);
    ``baseline_is_this_run`` True when the result is its workload's baseline (its first run,
    any of that run's repeats)."""
    from optui.core.journal.experiments import result_deltas

    base = session.benches.baseline_for(result)
    return {**result.to_json(),
            "vs_baseline": {d.metric.key: {"baseline": d.base, "delta_pct": d.rel_pct}
                            for d in result_deltas(result, base.result if base else None)},
            "baseline_result_id": base.id if base else None,
            # the workload's first run is its own baseline, its repeats too: compared with
            # themselves, nothing to say (a new user read '+0.3%' for a run's second repeat)
            "baseline_is_this_run": base is not None and (
                base.result.to_json() == result.to_json()
                or bool(result.extra.get("run_id")) and base.result.extra.get("run_id") == result.extra.get("run_id"))}


def against_medians(judged, summary: dict | None) -> None:
    """Each printed result of ``judged`` (``(result_json dict, BenchResult)`` pairs) with its
    ``vs_baseline`` deltas against the baseline's *medians* of its workload, the numbers the
    summary's verdict compares (``summary["workloads"][i]["baseline_values"]``): one delta per
    run (``--repeat 1`` printed +149.2 % against one baseline run and +148.5 % against their
    median for the same run). Results of a workload without baseline medians keep theirs."""
    from optui.core.journal.experiments import delta_pct

    bases = {w["key"]: w["baseline_values"] for w in (summary or {}).get("workloads") or () if w.get("baseline_values")}
    for shown, result in judged:
        base = bases.get(result.workload.key())
        if base is None or shown.get("baseline_is_this_run"):
            continue
        shown["vs_baseline"] = {k: {"baseline": base.get(k), "delta_pct": delta_pct(result.metric(k), base.get(k))}
                                for k in shown["vs_baseline"]}


def summary_json(session, exp_id: str | None, keys: Collection[str] | None = None) -> dict | None:
    """Experiment ``exp_id``'s verdict with its evidence (``bench run --json``'s
    ``experiment_summary``), of the workloads ``keys`` (:meth:`Workload.key`: the run just
    made; None: all the experiment measured): ``verdict`` the one overall rule over them
    (:func:`~optui.core.journal.experiments.experiment_verdict`: better | worse | mixed |
    same | untested noise | untested | baseline | failed), ``workloads`` one entry per workload
    (:func:`~optui.core.journal.experiments.workload_summaries`), and the first workload's
    figures as before (``workload``, ``output_throughput_tok_s``, ``delta_pct`` %, ``cv_pct``,
    ``runs``, ``evidence_text``, ``evidence``). None when the journal has no such experiment."""
    from optui.session.journal.export import load_experiments

    x = next((x for x in load_experiments(session.journal) if x.id == exp_id), None)
    return None if x is None else experiment_summary_json(x, keys)


def experiment_summary_json(x, keys: Collection[str] | None = None) -> dict:
    """:func:`summary_json` of experiment ``x`` already read (one journal read for a caller
    that has it)."""
    from optui.core.journal.experiments import experiment_verdict, workload_summaries

    keys = set(keys) if keys is not None else None
    mine = [w for w in x.workloads if keys is None or w.key in keys]
    ws = [s for s in workload_summaries(x) if keys is None or s["key"] in keys]
    w, first = (mine[0], ws[0]) if mine else (None, None)
    return {"verdict": experiment_verdict(x, keys), "baseline": x.baseline_id,
            "workload": w.label if w else None,
            "output_throughput_tok_s": w.primary.value if w else None,
            "delta_pct": first["delta_pct"] if first else None,
            "cv_pct": w.cv_pct if w else None, "runs": first["runs"] if first else "-",
            "evidence_text": first["evidence_text"] if first else "",
            "evidence": first["evidence"] if first else None, "workloads": ws}


class SpecNotFound(ConfigError):
    """SPEC names no search of the config and no file (or another tool's file without the
    server and preset it runs): the message says which searches there are."""


def read_spec(loaded, spec: str, server: str | None = None, bench: str | None = None,
              base: Path | None = None) -> tuple[str, SearchSpec, list[str]]:
    """``(name, SearchSpec, notes)`` of ``spec``: a [search.NAME] of the config, else a spec
    file (TOML; its name its one [search.NAME] table's, else the file's stem), a vLLM --serve-params JSON or an SGLang tuner
    config (JSON/YAML: ``server`` and ``bench`` say where it runs; ``notes``: what of it was
    not taken). A relative path is looked up from the working directory, then from
    ``base``. :class:`SpecNotFound` when ``spec`` names none, ConfigError (``FILE:LINE:
    FIELD``) for a spec that cannot be read."""
    from optui.config_file import read_config_text
    from optui.core.search.imports import parse_foreign
    from optui.core.search.spec import parse_search_text, spec_file_name

    if spec in loaded.config.search:
        path = Path(loaded.path)
        return spec, parse_search_text(read_config_text(path), str(path), spec), []
    path = Path(spec)
    if not path.is_file() and base is not None and not path.is_absolute() and (base / path).is_file():
        path = base / path
    if not path.is_file():
        known = ", ".join(loaded.config.search) or "none in the config"
        raise SpecNotFound(f"{spec}: neither a [search.NAME] of {loaded.path} (searches there: {known}) nor a file")
    if path.suffix in (".json", ".yaml", ".yml"):
        if not server or not bench:
            raise SpecNotFound(f"{spec}: another tool's file: --server and --bench say which server and preset it runs")
        parsed, notes = parse_foreign(read_config_text(path), str(path), server=server, bench=bench)
        return path.stem, parsed, [f"{path.name}: {note}" for note in notes]
    text = read_config_text(path)
    return spec_file_name(text, path.stem), parse_search_text(text, str(path)), []
