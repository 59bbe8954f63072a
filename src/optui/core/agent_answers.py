"""Answers sized for an agent's context: one row per workload and the overall verdict.

A ``run_benchmark`` answer with every result dict (repeat 3, a 4-point preset) was 39-40 KB,
``status`` grew to 22 KB as results piled up: an agent's context is not a log file. These
pure functions turn an :class:`~optui.core.journal_experiments.Experiment` into the summary
a person would read first (``STYLE.md``: "an answer sized for its reader"); the full results
stay one argument (``detail=true``) or one ``journal_event`` away.

The verdicts are the experiments' own: each row's is
:func:`~optui.core.journal_experiments.shown_workload_verdict`, the overall one the
experiment's (:func:`~optui.core.journal_experiments.experiment_verdict`, the one rule of
"Conclusions per workload", :func:`~optui.core.bench.compare.overall_verdict`); nothing here
judges anything a second time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from optui.core.journal_experiments import shown_workload_verdict

if TYPE_CHECKING:
    from optui.core.journal_experiments import Experiment, WorkloadOutcome

#: the latency deltas each row carries: metric key → row key (% vs the baseline's median)
LATENCY_DELTAS = {"ttft_ms.median": "ttft_p50_delta_pct", "ttft_ms.p99": "ttft_p99_delta_pct",
                  "itl_ms.median": "itl_p50_delta_pct"}


def _num(value: float | None, digits: int = 1) -> float | None:
    """``value`` rounded for an agent (None for a missing or non-finite one)."""
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return round(float(value), digits)


def workload_row(x: Experiment, w: WorkloadOutcome) -> dict[str, Any]:
    """One workload in a line: ``{workload, concurrency, request_rate, out_tok_s,
    delta_pct, ttft_p50_delta_pct, ttft_p99_delta_pct, itl_p50_delta_pct, n, base_n, p,
    verdict}`` (tok/s, %; ``request_rate`` req/s); a key whose value is unknown (no
    baseline, an unlimited rate) is left out, except ``n`` and ``verdict``."""
    wl = w.runs[0].result.workload if w.runs else None
    rate = wl.request_rate if wl is not None else None
    deltas = {d.metric.key: d.rel_pct for d in w.deltas}
    j = w.judgement
    row = {"workload": w.label, "concurrency": wl.max_concurrency if wl is not None else None,
            "request_rate": rate if rate is not None and math.isfinite(rate) else None,
            "out_tok_s": _num(w.values.get("output_throughput_tok_s")),
            "delta_pct": _num(deltas.get("output_throughput_tok_s")),
            **{key: _num(deltas.get(metric)) for metric, key in LATENCY_DELTAS.items()},
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


def _point(w: WorkloadOutcome) -> tuple:
    """Rows in the order of their points: concurrency, then request rate, then label."""
    wl = w.runs[0].result.workload if w.runs else None
    c = wl.max_concurrency if wl is not None and wl.max_concurrency is not None else math.inf
    r = wl.request_rate if wl is not None and wl.request_rate is not None else math.inf
    return (c, r, w.label)


def compact_results(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a run's result dicts say in one line: runs, ok, failed (the rows carry the
    numbers; ``detail=true`` the dicts)."""
    ok = sum(1 for r in results if r.get("status", "ok") == "ok")
    return {"runs": len(results), "ok": ok, "failed": len(results) - ok,
            "result_ids": [r["result_id"] for r in results if r.get("result_id") is not None]}
