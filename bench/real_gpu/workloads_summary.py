#!/usr/bin/env python3
"""The figures of a ``bench/real_gpu/workloads.sh`` campaign, as JSON (stdlib only).

    workloads_summary.py STEPS_DIR        # the campaign's steps/NN-NAME.txt outputs -> JSON
    workloads_summary.py --md STEPS_DIR   # the per-workload table, as bench/RESULTS.md shows it

For each ``bench run --json`` step (bench-np1, bench-np4, bench-stopped): per workload
(concurrency), each run's status, optui's out tok/s and the server's own figures from
llama.cpp's streamed ``timings`` (``extra.server_output_tok_s``: Σ predicted_n / Σ (prompt_ms +
predicted_ms), the throughput of one request at a time as the server timed it;
``extra.server_decode_tok_s``: Σ predicted_n / Σ predicted_ms; both tok/s), the client's mean
concurrency (``extra.concurrency``: Σ E2E / wall time, queueing included) and the server-timed
aggregate out tok/s ``server_output_tok_s`` × min(c, slots): the server decodes at most ``slots``
(``-np``) requests at once, so with one slot its own timings add up end to end, and with c
slots they overlap (an estimate that ignores the run's tail, where fewer run); the median and the spread (± half the range, % of the median) over the
ok runs; then ``experiment_summary`` (overall verdict, ``workloads``: verdict, delta_pct,
evidence). Also: the SIGSTOP step's lines, the search's last line and the server's ``-np``
and slots after it. A step that did not run or printed no JSON gives ``null``.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path


def _json(text: str):
    """The first JSON object in ``text`` (a step's output, maybe with lines before it), else None."""
    i = text.find("{")
    while i >= 0:
        try:
            return json.JSONDecoder().raw_decode(text[i:])[0]
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
    return None


def _step(steps: Path, name: str) -> str | None:
    """The output of step ``NN-name`` (the last such), or None."""
    files = sorted(f for f in steps.glob(f"*-{name}.txt") if re.fullmatch(rf"\d+-{re.escape(name)}\.txt", f.name))
    return files[-1].read_text(errors="replace") if files else None


def _spread(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0, "median": None, "spread_pct": None}
    med = statistics.median(xs)
    return {"n": len(xs), "median": round(med, 1),
            "spread_pct": round(50.0 * (max(xs) - min(xs)) / med, 1) if med else None}


def bench(text: str | None, slots: int) -> dict | None:
    """One ``bench run --json`` output on a server with ``slots`` (-np): per concurrency its
    runs and medians, and the summary."""
    data = _json(text) if text else None
    if not isinstance(data, dict):
        return None
    points: dict[str, dict] = {}
    for run in data.get("runs", []):
        for r in run.get("results", []):
            cc = r.get("workload", {}).get("max_concurrency") or 1
            c = f"c={cc}"
            extra = r.get("extra") or {}
            mine = r.get("output_throughput_tok_s")
            srv = extra.get("server_output_tok_s")
            conc = extra.get("concurrency")
            points.setdefault(c, {"runs": []})["runs"].append({
                "status": r.get("status"), "error": r.get("error"),
                "out_tok_s": round(mine, 1) if mine else mine, "concurrency": round(conc, 2) if conc else conc,
                "server_output_tok_s": round(srv, 1) if srv else srv,
                "server_decode_tok_s": round(extra.get("server_decode_tok_s") or 0, 1) or None,
                "server_tpot_ms": round(extra.get("server_tpot_ms") or 0, 2) or None,
                "server_aggregate_tok_s": round(srv * min(cc, slots), 1) if srv else None,
                "tokens": [r.get("total_output_tokens"), extra.get("server_predicted_tokens")],
            })
    for p in points.values():
        ok = [x for x in p["runs"] if x["status"] == "ok"]
        p["optui_out_tok_s"] = _spread([x["out_tok_s"] for x in ok if x["out_tok_s"]])
        p["server_aggregate_tok_s"] = _spread([x["server_aggregate_tok_s"] for x in ok if x["server_aggregate_tok_s"]])
        p["server_output_tok_s"] = _spread([x["server_output_tok_s"] for x in ok if x["server_output_tok_s"]])
    s = data.get("experiment_summary") or {}
    return {"experiment": data.get("experiment"), "error": data.get("error"), "points": points,
            "verdict": s.get("verdict"), "baseline": s.get("baseline"),
            "workloads": [{k: w.get(k) for k in ("workload", "concurrency", "verdict", "delta_pct", "evidence_text")}
                          for w in s.get("workloads") or []]}


def summary(steps: Path) -> dict:
    """The campaign's figures (see the module doc)."""
    search = _step(steps, "search") or ""
    lines = [ln for ln in search.splitlines() if ln.strip()]
    status = _json(_step(steps, "status-after-search") or "")
    search_status = _json(_step(steps, "search-status") or "")
    argv = None
    if isinstance(status, dict):
        for s in status.get("servers", []) if isinstance(status.get("servers"), list) else []:
            if s.get("name") == "llama":
                argv = s.get("argv")
    return {
        "bench_np1": bench(_step(steps, "bench-np1"), 1),
        "bench_np4": bench(_step(steps, "bench-np4"), 4),
        "props_np4": _json(_step(steps, "props-np4") or ""),
        "sigstop": (_step(steps, "sigstop") or "").strip().splitlines(),
        "bench_stopped": bench(_step(steps, "bench-stopped"), 4),
        "search_last_line": lines[-1] if lines else None,
        "search": {k: search_status.get(k) for k in ("status", "won", "message", "running")}
        if isinstance(search_status, dict) else None,
        "argv_after_search": argv,
        "props_after_search": _json(_step(steps, "props-after-search") or ""),
        "headline_vs_workloads": [ln for ln in (_step(steps, "headline-vs-workloads") or "").splitlines()
                                  if "disagree" in ln],
    }


def _fig(d: dict | None) -> str:
    if not d or not d.get("n"):
        return "-"
    return f"{d['median']:,.1f} (n={d['n']}, ±{d['spread_pct']} %)"


def markdown(s: dict) -> str:
    """The per-workload table of :func:`summary`'s output (bench/RESULTS.md's shape)."""
    rows = ["| configuration | workload | optui out tok/s (median, n, ± half range) | server-timed out tok/s "
            "(timings) | server decode tok/s per request | verdict vs -np 1 | server-timed Δ |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    base = (s.get("bench_np1") or {}).get("points") or {}
    for key, name in (("bench_np1", "-np 1"), ("bench_np4", "-np 4")):
        b = s.get(key) or {}
        verdicts = {f"c={w['concurrency']}": w for w in b.get("workloads", [])}
        for c, p in (b.get("points") or {}).items():
            w = verdicts.get(c, {})
            dec = [r["server_decode_tok_s"] for r in p["runs"] if r["status"] == "ok" and r["server_decode_tok_s"]]
            v = w.get("verdict") or "-"
            b0 = (base.get(c) or {}).get("server_aggregate_tok_s") or {}
            srv = p["server_aggregate_tok_s"]
            sd = (f"{100 * (srv['median'] / b0['median'] - 1):+.1f} %" if key != "bench_np1" and srv.get("median")
                  and b0.get("median") else "-")
            if w.get("delta_pct") is not None:
                v += f" {w['delta_pct']:+.1f} % ({w.get('evidence_text')})"
            rows.append(f"| {name} | {c} | {_fig(p['optui_out_tok_s'])} | {_fig(p['server_aggregate_tok_s'])} | "
                        f"{statistics.median(dec):,.1f} | {v} | {sd} |" if dec else
                        f"| {name} | {c} | {_fig(p['optui_out_tok_s'])} | - | - | {v} | {sd} |")
        if b:
            rows.append(f"| {name} | overall | | | | {b.get('verdict')} | |")
    return "\n".join(rows)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--md"]
    if len(args) != 1:
        sys.exit("usage: workloads_summary.py [--md] STEPS_DIR")
    out = summary(Path(args[0]))
    print(markdown(out) if "--md" in sys.argv else json.dumps(out, indent=1))
