"""``optui status``: one snapshot of the campaign (hosts/GPUs, servers, todo, last results,
experiments) for scripts and agents; ``optui restart``: restart a server from the command
line. Both drive the same :class:`~optui.session.Session` as the TUI, so a running TUI
shows what they do within a second (shared journal) and a restart refuses to run while
another optui process restarts the same server (per-server lock).

Exit status of ``restart``: 0 the server is ready (or, with ``--no-wait``, started); 1 it
failed (the crash class is printed); 2 the restart could not begin (unknown server or
preset, bad flag, read-only, another optui process is restarting it).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import time

import click

from optui.cli.common import FiniteFloatRange, actor, echo, echo_json, fail, load_config_or_exit


def _result_json(r) -> dict:
    return {"id": r.id, "server": r.server, "bench": r.bench, "experiment": r.experiment, "ts": r.ts, "baseline": r.baseline,
            **r.result.to_json()}


async def _collect(loaded, wait_s: float) -> dict:
    from optui.session import Session
    from optui.session.export import load_experiments

    session = Session(loaded, actor=actor(), read_only=True, autostart=False, observer=True)
    await session.start()
    try:
        await asyncio.sleep(wait_s)  # one GPU tick and one health probe per server
        state = session.snapshot()
        experiments = load_experiments(session.journal)
        return {
            "config": str(loaded.path) if loaded.path else None,
            "journal": state.journal_path,
            "journal_error": state.journal_error,
            "hosts": [
                {"host": h.host, "status": h.status.value, "error": h.error, "source": h.source,
                 "gpus": [s.to_json(h.host) for s in h.samples]}
                for h in state.hosts
            ],
            "servers": [_server_json(session, s, experiments) for s in state.servers],
            "bench": None if state.bench is None else {"name": state.bench.name, "server": state.bench.server,
                                                       "status": state.bench.status},
            "todo": [t.to_json() for t in state.todos],
            "results": [_result_json(r) for r in state.results[:5]],
            "experiments": [{"id": x.id, "server": x.server, "outcome": x.outcome, "verdict": x.verdict,
                             "unverified": list(x.unverified),
                             "change_vs_baseline": list(x.diff_vs_baseline),
                             "delta_pct": x.primary_delta.rel_pct if x.primary_delta else None}
                            for x in experiments[-10:]],
        }
    finally:
        await session.close()


def _server_json(session, s, experiments) -> dict:
    from optui.core.flags import Flags

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
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--wait", "wait_s", type=FiniteFloatRange(0, 600), default=1.5, show_default=True, help="Seconds to observe before printing.")
@click.pass_context
def status(ctx: click.Context, as_json: bool, wait_s: float) -> None:
    """Hosts/GPUs, servers (state, phase, flags, load), todo, last results, experiments."""
    loaded = load_config_or_exit(ctx)
    data = asyncio.run(_collect(loaded, wait_s))
    if as_json:
        echo_json(data)
        return
    for h in data["hosts"]:
        echo(f"host {h['host']}: {h['status']}" + (f" ({h['error']})" if h["error"] else ""))
        for g in h["gpus"]:
            echo(f"  gpu {g['index']} {g['name']}: {_n(g['mem_used_mib'])}/{_n(g['mem_total_mib'])} MiB, "
                 f"util {_n(g['util_gpu_pct'])}%, {_n(g['power_w'])} W")
    for s in data["servers"]:
        echo(f"server {s['name']}: {s['state']}" + (f" [{s['phase']}]" if s["phase"] else "") + f"  {s['url']}"
             + (f"  {s['experiment']}" if s["experiment"] else "") + (f"  ({s['crash_class']})" if s["crash_class"] else ""))
        echo(f"  {shlex.join(s['argv'])}")
        for line in s["config_mismatch"]:
            echo(f"  UNVERIFIED {line}")
        load = s["load"]
        if load["running"] is not None or load["gen_tok_s"] is not None:
            echo(f"  load: running {_n(load['running'])}, waiting {_n(load['waiting'])}, "
                 f"KV {_n(load['kv_cache_pct'])}%, gen {_n(load['gen_tok_s'])} tok/s")
        elif load["hint"]:
            echo(f"  load: {load['hint']}")
    for t in data["todo"]:
        echo(f"todo {t['id']} [{t['status']}] ({t['priority']}) {t['content']}")
    for r in data["results"]:
        echo(f"result {r['id']} {r['bench']} on {r['server']} ({r['experiment'] or '-'}): {r['status']}, "
             f"{_n(r['output_throughput_tok_s'])} out tok/s, TTFT p50 {_n(r['ttft_ms']['median'])} ms")


def _n(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if isinstance(value, float) else str(value)


@click.command()
@click.argument("server")
@click.option("--set", "sets", multiple=True, metavar="FLAG=VALUE", help="Set a flag (repeatable).")
@click.option("--unset", "unsets", multiple=True, metavar="FLAG", help="Remove a flag (repeatable).")
@click.option("--preset", default=None, help="Apply a configured preset.")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until ready or failed (exit 0 only when ready); --no-wait returns once the new process started.")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(1, 7 * 86400), default=None, help="Ready timeout in s (default: the server's ready_timeout_s).")
@click.option("--reason", default="cli", show_default=True, help="Why (journaled with the experiment).")
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
@click.pass_context
def restart(ctx: click.Context, server: str, sets: tuple[str, ...], unsets: tuple[str, ...], preset: str | None,
            wait: bool, timeout_s: float | None, reason: str, as_json: bool) -> None:
    """Restart SERVER with changed flags and wait until it is ready.

    Exit code 0 only when the server is ready; otherwise 1 and the crash class; 2 when
    the restart cannot begin (e.g. another optui process is restarting SERVER)."""
    from optui.core.flags import FlagError, Flags, parse_assignment
    from optui.session import Session, SessionError

    loaded = load_config_or_exit(ctx)
    root = ctx.find_root().obj or {}
    if root.get("read_only") or loaded.config.read_only:
        fail("read-only mode: restarting a server is disabled", 2)
    if server not in loaded.config.servers:
        fail(f"unknown server {server!r} (known: {', '.join(loaded.config.servers) or 'none'})", 2)

    async def go() -> dict:
        session = Session(loaded, actor=actor(), autostart=False)
        await session.start()
        try:
            await asyncio.sleep(0.3)
            rt = session.servers[server]
            flags = Flags.parse(rt.status.argv)
            if preset:
                p = rt.cfg.presets.get(preset)
                if p is None:
                    raise SessionError(f"unknown preset {preset!r} (known: {', '.join(rt.cfg.presets) or 'none'})")
                flags = flags.apply(p.set, p.unset)
            for name in unsets:
                flags = flags.unset(name)
            for item in sets:
                name, value = parse_assignment(item)
                flags = flags.set(name, value)
            task = asyncio.create_task(session.restart_server(server, flags.to_argv(), reason=reason, ready_timeout_s=timeout_s))
            if not wait:
                await _until_started(rt, task)
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, SessionError):
                        await task
                elif task.exception() is not None:
                    raise task.exception()
            else:
                await task
            st = rt.status
            return {"server": server, "state": st.state.value, "experiment": session.current_experiment(server),
                    "crash_class": st.crash_class and str(st.crash_class), "message": st.message,
                    "lines": list(st.crash_lines), "argv": list(st.argv),
                    "ready_s": round(st.ready_at - st.started_at, 3) if st.ready_at and st.started_at else None,
                    "phases": [{"phase": p.phase, "t": p.t} for p in st.phases]}
        finally:
            await session.close()

    try:
        result = asyncio.run(go())
    except (SessionError, FlagError) as exc:
        fail(str(exc), 2)
    ok = result["state"] == "ready" or (not wait and result["state"] in ("starting", "warming", "ready"))
    if as_json:
        echo_json(result)
    else:
        echo(f"{server}: {result['state']}" + (f" ({result['crash_class']})" if result["crash_class"] else "")
             + (f" in {result['ready_s']:.1f}s" if result["ready_s"] else "")
             + (f"  {result['experiment']}" if result["experiment"] else ""))
        for line in result["lines"]:
            echo(f"  {line}")
    sys.exit(0 if ok else 1)


async def _until_started(rt, task: asyncio.Task, timeout_s: float = 120.0) -> None:
    """Wait until the restart has started the new process (or ended)."""
    deadline = time.monotonic() + timeout_s
    seen_stop = False
    while not task.done() and time.monotonic() < deadline:
        st = rt.status
        seen_stop = seen_stop or st.state.value in ("stopping", "down")
        if seen_stop and st.state.value in ("starting", "warming", "ready", "crashed") and st.pid is not None:
            return
        await asyncio.sleep(0.05)
