#!/usr/bin/env python3
"""The figures of a ``bench/real_gpu/workloads.sh`` campaign, as JSON (stdlib only).

    workloads_summary.py STEPS_DIR      # the campaign's steps/NN-NAME.txt outputs

For each ``bench run --json`` step (bench-np1, bench-np4, bench-stopped): per workload
(concurrency), each run's status, optui's out tok/s and the server's own figures from
llama.cpp's streamed ``timings`` (``extra.server_output_tok_s``: Σ predicted_n / Σ (prompt_ms +
predicted_ms), the throughput of one request at a time as the server timed it;
``extra.server_decode_tok_s``: Σ predicted_n / Σ predicted_ms; both tok/s), the measured
mean concurrency (``concurrency``: Σ E2E / wall time) and their product, the server-timed
aggregate out tok/s; the median and the spread (± half the range, % of the median) over the
ok runs; then ``experiment_summary`` (overall verdict, ``workloads``: verdict, delta_pct,
evidence). Also: the SIGSTOP step's lines, the search's last line and the server's ``-np``
and slots after it. A step that did not run or printed no JSON gives ``null``.
"""

from __future__ import annotations

import json
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
    files = sorted(steps.glob(f"*-{name}.txt"))
    return files[-1].read_text(errors="replace") if files else None


def _spread(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0, "median": None, "spread_pct": None}
    med = statistics.median(xs)
    return {"n": len(xs), "median": round(med, 1),
            "spread_pct": round(50.0 * (max(xs) - min(xs)) / med, 1) if med else None}


def bench(text: str | None) -> dict | None:
    """One ``bench run --json`` output: per concurrency its runs and medians, and the summary."""
    data = _json(text) if text else None
    if not isinstance(data, dict):
        return None
    points: dict[str, dict] = {}
    for run in data.get("runs", []):
        for r in run.get("results", []):
            c = str(r.get("workload", {}).get("concurrency"))
            extra = r.get("extra") or {}
            mine = r.get("output_throughput_tok_s")
            srv = extra.get("server_output_tok_s")
            conc = r.get("concurrency")
            points.setdefault(c, {"runs": []})["runs"].append({
                "status": r.get("status"), "error": r.get("error"),
                "out_tok_s": mine, "concurrency": conc,
                "server_output_tok_s": srv, "server_decode_tok_s": extra.get("server_decode_tok_s"),
                "server_tpot_ms": extra.get("server_tpot_ms"),
                "server_aggregate_tok_s": round(srv * conc, 1) if srv and conc else None,
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
    argv = None
    if isinstance(status, dict):
        for s in status.get("servers", []) if isinstance(status.get("servers"), list) else []:
            if s.get("name") == "llama":
                argv = s.get("argv")
    return {
        "bench_np1": bench(_step(steps, "bench-np1")),
        "bench_np4": bench(_step(steps, "bench-np4")),
        "props_np4": _json(_step(steps, "props-np4") or ""),
        "sigstop": (_step(steps, "sigstop") or "").strip().splitlines(),
        "bench_stopped": bench(_step(steps, "bench-stopped")),
        "search_last_line": lines[-1] if lines else None,
        "search_finished": (_json(_step(steps, "search-status") or "") or {}).get("finished")
        if isinstance(_json(_step(steps, "search-status") or ""), dict) else None,
        "argv_after_search": argv,
        "props_after_search": _json(_step(steps, "props-after-search") or ""),
        "headline_vs_workloads": [ln for ln in (_step(steps, "headline-vs-workloads") or "").splitlines()
                                  if "disagree" in ln],
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: workloads_summary.py STEPS_DIR")
    print(json.dumps(summary(Path(sys.argv[1])), indent=1))
