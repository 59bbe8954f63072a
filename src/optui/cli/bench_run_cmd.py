"""``optui bench run SERVER PRESET [--repeat N] [--restarts N] [--wait] [--json]``: run a configured
benchmark from the command line, through the same session as the TUI (results stored
under the server's current experiment, ``bench.*`` events journaled, a running TUI shows
them within a second).

The benchmark runs in this process and is killed with it (Ctrl-C aborts it). ``--wait``
first waits for the server to become READY (e.g. right after ``optui restart --no-wait``);
a server that is not READY (DEGRADED included: the error says why) is refused unless
``--force``, which runs anyway and says so (stderr, the bench log, ``bench.started``).
``--restarts N`` restarts the server with the same flags and benches again, N runs in all:
the restart-to-restart spread every later verdict must beat. Exit status: 0 every run ok, 1 a run
failed or the server is not ready, 2 bad input (unknown server/preset, read-only).
"""

from __future__ import annotations

import asyncio
import sys
import time

import click

from optui.cli.common import FiniteFloatRange, actor, echo, echo_json, fail, load_config_or_exit
from optui.session.cli_mcp_shared import READY, against_medians, result_json, summary_json, wait_ready


@click.command("run")
@click.argument("server")
@click.argument("preset")
@click.option("--repeat", type=click.IntRange(1, 50), default=None,
              help="Runs per point (default: the preset's repeat, else the top-level repeat, 3). One run gives "
                   "'untested noise', never better/worse.")
@click.option("--restarts", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Measure the restart-to-restart spread: restart the server with the same flags and bench again, "
                   "N runs in all (each restart is an experiment of its own).")
@click.option("--wait", is_flag=True, help="Wait for the server to become ready first (up to --timeout).")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(1, 7 * 86400), default=900.0, show_default=True,
              help="--wait: how long to wait for ready (s).")
@click.option("--force", is_flag=True, help="Benchmark the server even when it is not READY (e.g. DEGRADED).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def run(ctx: click.Context, server: str, preset: str, repeat: int | None, restarts: int, wait: bool, timeout_s: float,
        force: bool, as_json: bool) -> None:
    """Run benchmark PRESET against SERVER (each point N times) and compare with the baseline."""
    from optui.session import Session, SessionError

    loaded = load_config_or_exit(ctx)
    config = loaded.config
    if (ctx.find_root().obj or {}).get("read_only") or config.read_only:
        fail("read-only mode: running a benchmark is disabled", 2)
    if server not in config.servers:
        fail(f"unknown server {server!r} (known: {', '.join(config.servers) or 'none'})", 2)
    cfg = config.benchmarks.get(preset)
    if cfg is None:
        fail(f"unknown benchmark {preset!r} (known: {', '.join(config.benchmarks) or 'none configured'})", 2)
    if cfg.server != server:
        fail(f"benchmark {preset!r} targets server {cfg.server!r}, not {server!r} (benchmarks.{preset}.server)", 2)

    async def go() -> dict:
        session = Session(loaded, actor=actor(), autostart=False)
        await session.start()
        try:
            rt = session.server(server)
            state = await wait_ready(rt, timeout_s) if wait else await wait_ready(rt, 3.0, settle=True)
            why = f" ({rt.status.message})" if rt.status.message and state != READY else ""
            if state != READY and not force:
                hint = (" (--force benchmarks it anyway)" if wait else
                        " (pass --wait to wait for it); --force benchmarks it anyway")
                return {"server": server, "bench": preset, "error": f"{server} is {state}{why}{hint}", "runs": []}
            if state != READY:
                echo(f"optui: warning: {server} is {state}{why}: benchmarking it anyway (--force)", err=True)
            repeats = repeat if repeat is not None else config.repeat_of(preset)
            runs: list[dict] = []
            measured: dict[str | None, set[str]] = {}  # experiment -> the workload keys this command measured on it
            judged: list[tuple[dict, object]] = []  # (a result as printed, the result)
            for i in range(restarts):
                if i:  # the same flags again: levels can shift between restarts (vllm#39903)
                    status = await session.restart_server(server, list(rt.status.argv),
                                                          reason=f"restart-to-restart spread {i + 1}/{restarts}")
                    if status.state.value != READY:
                        return {"server": server, "bench": preset, "runs": runs,
                                "error": f"{server} is {status.state.value} after restart {i + 1}/{restarts}"}
                bench_run = session.benches.run(preset, repeats=repeats)  # one run: its repeats group as one
                await session.benches.wait()
                view = bench_run.view
                session.benches.forget_baselines()
                measured.setdefault(session.current_experiment(server), set()).update(
                    r.workload.key() for r in view.results)
                shown = [result_json(session, r) for r in view.results]
                judged.extend(zip(shown, view.results, strict=True))
                runs.append({"status": view.status, "error": view.error, "repeats": repeats,
                             "experiment": session.current_experiment(server),
                             "duration_s": round((view.finished_at or time.time()) - view.started_at, 3),
                             "results": shown})
            exp_id = session.current_experiment(server)
            keys = measured.get(exp_id, set())  # this run's workloads (never another preset's)
            summary = summary_json(session, exp_id, keys)
            against_medians(judged, summary)
            return {"server": server, "bench": preset, "experiment": exp_id, "runs": runs,
                    "experiment_summary": summary}
        finally:
            await session.close()

    try:
        data = asyncio.run(go())
    except SessionError as exc:
        fail(str(exc), 2)
    ok = not data.get("error") and all(r["status"] == "ok" for r in data["runs"])
    if as_json:
        echo_json(data)
    else:
        _print(data)
    sys.exit(0 if ok else 1)


def _print(data: dict) -> None:
    from optui.cli.bench_text import format_result
    from optui.core.bench.result import BenchResult

    if data.get("error"):
        echo(f"optui: error: {data['error']}", err=True)
        if not data.get("runs"):
            return
    from optui.core.bench.compare import STATISTIC, run_medians, runs_label
    from optui.core.bench.result import request_counts, requests_text

    for i, r in enumerate(data["runs"], start=1):  # one a restart (--restarts), each of its benchmark runs below
        head = f"restart {i}/{len(data['runs'])}: " if len(data["runs"]) > 1 else ""
        echo(f"{head}{data['bench']} on {data['server']} ({r.get('experiment') or '-'}): {r['status']}, {len(r['results'])} "
             f"run{'s' if len(r['results']) != 1 else ''} ({r['duration_s']:.1f} s)" + (f" — {r['error']}" if r["error"] else ""))
        results = [BenchResult.from_json(res) for res in r["results"]]
        for k, (res, result) in enumerate(zip(r["results"], results, strict=True), start=1):
            echo(format_result(result, f"  run {k}/{len(results)}: "))
            echo(f"  requests {requests_text(request_counts(result))}" + ("" if result.status == "ok" else
                                                                         f" — {result.status}, never compared"))
            delta = res["vs_baseline"]["output_throughput_tok_s"]["delta_pct"]
            if res.get("baseline_is_this_run"):
                echo("  out tok/s vs baseline: no baseline for this workload yet (this run is its first)")
            elif delta is not None and result.status == "ok":
                echo(f"  out tok/s vs baseline: {delta:+.1f}% (this run alone: no verdict)")
        if len(results) > 1 and len({x.workload.key() for x in results}) == 1:  # repeats (not a sweep's points):
            # the figures the bench table and the journal show for them
            ok, n, medians = run_medians(results)
            tput, ttft = medians["output_throughput_tok_s"], medians["ttft_ms.median"]
            echo(f"  {runs_label(ok, n)}: " + (f"{tput:.1f} out tok/s" if tput is not None else "no out tok/s")
                 + (f", TTFT p50 {ttft:.1f} ms" if ttft is not None else ""))
    s = data.get("experiment_summary")
    if s:
        evidence = f" ({s['evidence_text']})" if s.get("evidence_text") else f" vs {s['baseline']}"
        rel = f" {s['delta_pct']:+.1f}% out tok/s" if s["delta_pct"] is not None and s["verdict"] != "baseline" else ""
        evidence = evidence if rel else (f" ({s['evidence_text']})" if s.get("evidence_text") else "")
        ws = s.get("workloads") or []
        if len(ws) > 1:  # one verdict per workload, the overall one by the rule over them
            echo(f"{data['experiment']}: {s['verdict']} (over {len(ws)} workloads)")
            for w in ws:
                d = f" {w['delta_pct']:+.1f}% out tok/s" if w["delta_pct"] is not None else ""
                ev = f" ({w['evidence_text']})" if w.get("evidence_text") else ""
                echo(f"  {w['point']}: {w['verdict']}{d}{ev}; {w['runs']}")
        else:
            on = f" on {s['workload']}" if s.get("workload") else ""
            echo(f"{data['experiment']}{on}: {s['verdict']}{rel}{evidence}; {s['runs']}")
        echo(f"verdict: {STATISTIC}")
