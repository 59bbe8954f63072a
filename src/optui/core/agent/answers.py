"""Answers sized for an agent's context: one row per workload and the overall verdict.

A ``run_benchmark`` answer with every result dict (repeat 3, a 4-point preset) was 39-40 KB,
``status`` grew to 22 KB as results piled up: an agent's context is not a log file. These
pure functions turn an :class:`~optui.core.journal.experiments.Experiment` into the summary
a person would read first (``STYLE.md``: "an answer sized for its reader"); the full results
stay one argument (``detail=true``) or one ``journal_event`` away.

The verdicts are the experiments' own: each row's is
:func:`~optui.core.journal.experiments.shown_workload_verdict`, the overall one the
experiment's (:func:`~optui.core.journal.experiments.experiment_verdict`, the one rule of
"Conclusions per workload", :func:`~optui.core.bench.compare.overall_verdict`); nothing here
judges anything a second time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from optui.core.journal.experiments import delta_pct, shown_workload_verdict, workload_limits

if TYPE_CHECKING:
    from optui.core.journal.experiments import Experiment, WorkloadOutcome

#: the latency deltas each row carries: metric key → row key (% vs the baseline's median;
#: ITL p99 is one of :data:`~optui.core.journal.experiments.SIDE_METRICS`, kept on both sides)
LATENCY_DELTAS = {"ttft_ms.median": "ttft_p50_delta_pct", "ttft_ms.p99": "ttft_p99_delta_pct",
                  "itl_ms.median": "itl_p50_delta_pct", "itl_ms.p99": "itl_p99_delta_pct"}


def _num(value: float | None, digits: int = 1) -> float | None:
    """``value`` rounded for an agent (None for a missing or non-finite one)."""
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return round(float(value), digits)


def workload_row(x: Experiment, w: WorkloadOutcome) -> dict[str, Any]:
    """One workload in a line: ``{workload, concurrency, request_rate, out_tok_s,
    delta_pct, ttft_p50_delta_pct, ttft_p99_delta_pct, itl_p50_delta_pct,
    itl_p99_delta_pct, n, base_n, p, verdict}`` (tok/s, %; ``request_rate`` req/s); a key
    whose value is unknown (no baseline, an unlimited rate, a client that reports no ITL
    p99 on either side) is left out, except ``n`` and ``verdict``."""
    conc, rate = workload_limits(w)
    base = w.base_values or {}
    deltas = {d.metric.key: d.rel_pct for d in w.deltas}  # the same delta_pct of the medians
    j = w.judgement
    row = {"workload": w.label, "concurrency": conc, "request_rate": rate,
            "out_tok_s": _num(w.values.get("output_throughput_tok_s")),
            "delta_pct": _num(deltas.get("output_throughput_tok_s")),
            **{key: _num(delta_pct(w.values.get(metric), base.get(metric))) for metric, key in LATENCY_DELTAS.items()},
            "n": j.n if j is not None else w.n_ok, "base_n": j.base_n if j is not None else None,
            "p": _num(j.p, 3) if j is not None else None, "verdict": shown_workload_verdict(x, w)}
    return {k: v for k, v in row.items() if v is not None or k in ("n", "verdict")}


def experiment_brief(x: Experiment) -> dict[str, Any]:
    """An experiment for an agent: ``{id, server, outcome, change, baseline,
    verdict (overall), workloads: [workload_row...], crash_class, unverified}``."""
    rows = [workload_row(x, w) for w in sorted(x.workloads, key=_point)]
    verdict = x.verdict  # the one rule (journal_experiments.experiment_verdict), never a second one here
    return {"id": x.id, "server": x.server, "outcome": x.outcome,
            "change": list(x.diff_vs_baseline), "baseline": x.baseline_id, "verdict": verdict,
            "workloads": rows, "crash_class": x.crash_class, "unverified": list(x.unverified)}


def points_text(rows: Sequence[dict[str, Any]]) -> str:
    """``c=1 same -1.1%, c=8 better +73.8% (p=0.057)``: each :func:`workload_row` in a few
    words (its point, verdict, out tok/s Δ and p; a baseline's own runs without their Δ of 0)."""
    parts = []
    for w in rows:
        point = f"c={w['concurrency']}" if w.get("concurrency") is not None else (
            f"{w['request_rate']:g} req/s" if w.get("request_rate") is not None else w["workload"])
        delta = f" {w['delta_pct']:+.1f}%" if w.get("delta_pct") is not None and w["verdict"] != "baseline" else ""
        p = f" (p={w['p']:.2g})" if w.get("p") is not None else ""
        parts.append(f"{point} {w['verdict']}{delta}{p}")
    return ", ".join(parts)


def experiment_line(x: Experiment) -> dict[str, Any]:
    """An experiment as the compact ``status`` lists it: ``{id, server, outcome, verdict
    (overall), change, baseline, workloads (the row count), points (:func:`points_text`)}``,
    with ``crash_class`` and ``unverified`` only when there are some; the rows themselves are
    :func:`experiment_brief` (``experiments``, ``status(detail=true)``)."""
    brief = experiment_brief(x)
    line = {k: brief[k] for k in ("id", "server", "outcome", "verdict", "change", "baseline")}
    line.update(workloads=len(brief["workloads"]), points=points_text(brief["workloads"]))
    return {**line, **{k: brief[k] for k in ("crash_class", "unverified") if brief[k]}}


def host_line(host: dict[str, Any]) -> dict[str, Any]:
    """One host of ``status --json`` (``hosts_json``) in a line: ``{host, status, gpus (the
    count), mem_used_mib, mem_free_mib, mem_total_mib (summed over its GPUs that report
    them), busiest: {index, util_gpu_pct, mem_used_mib}}`` (the GPU with the highest
    utilisation, then the most memory used; None without GPUs), ``error`` when it has one;
    every GPU's readings are the ``gpus`` tool's and ``status(detail=true)``'s."""
    gpus = list(host.get("gpus") or ())
    used = [g["mem_used_mib"] for g in gpus if g.get("mem_used_mib") is not None]
    known = [g for g in gpus if g.get("mem_used_mib") is not None and g.get("mem_total_mib") is not None]
    total = [g["mem_total_mib"] for g in gpus if g.get("mem_total_mib") is not None]

    def load(g: dict[str, Any]) -> tuple[float, float]:
        return (g["util_gpu_pct"] if g.get("util_gpu_pct") is not None else -1.0,
                g["mem_used_mib"] if g.get("mem_used_mib") is not None else -1.0)

    top = max(gpus, key=load) if gpus else None
    line = {"host": host.get("host"), "status": host.get("status"), "gpus": len(gpus),
            "mem_used_mib": round(sum(used)) if used else None,
            "mem_free_mib": round(sum(g["mem_total_mib"] - g["mem_used_mib"] for g in known)) if known else None,
            "mem_total_mib": round(sum(total)) if total else None,
            "busiest": None if top is None else {"index": top.get("index"), "util_gpu_pct": top.get("util_gpu_pct"),
                                                 "mem_used_mib": _num(top.get("mem_used_mib"), 0)}}
    return {**line, **({"error": host["error"]} if host.get("error") else {})}


def _point(w: WorkloadOutcome) -> tuple:
    """Rows in the order of their points: concurrency, then request rate (unlimited last),
    then label."""
    conc, rate = workload_limits(w)
    return (math.inf if conc is None else conc, math.inf if rate is None else rate, w.label)


def compact_results(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a run's result dicts say in one line: runs, ok, failed (the rows carry the
    numbers; ``detail=true`` the dicts)."""
    ok = sum(1 for r in results if r.get("status", "ok") == "ok")
    return {"runs": len(results), "ok": ok, "failed": len(results) - ok,
            "result_ids": [r["result_id"] for r in results if r.get("result_id") is not None]}
