"""``optui status``: one snapshot of the campaign (hosts/GPUs, servers, todo, last results)
for scripts and agents; ``optui restart``: restart a server from the command line."""

from __future__ import annotations

import asyncio
import shlex
import sys

import click

from optui.cli.common import echo_json, fail, load_config_or_exit


async def _collect(loaded, wait_s: float) -> dict:
    from optui.session import Session

    session = Session(loaded, actor="cli", read_only=True)
    await session.start()
    try:
        await asyncio.sleep(wait_s)  # one GPU tick and one health probe per server
        state = session.snapshot()
        return {
            "config": str(loaded.path) if loaded.path else None,
            "journal": state.journal_path,
            "hosts": [
                {"host": h.host, "status": h.status.value, "error": h.error,
                 "gpus": [s.to_json(h.host) for s in h.samples]}
                for h in state.hosts
            ],
            "servers": [
                {"name": s.name, "state": s.state.value, "phase": s.phase, "url": s.url, "model": s.model,
                 "pid": s.pid, "argv": list(s.argv), "crash_class": s.crash_class and str(s.crash_class),
                 "load": {k: getattr(s.load, k) for k in ("running", "waiting", "kv_cache_pct", "gen_tok_s", "hint")}}
                for s in state.servers
            ],
            "todo": [t.to_json() for t in state.todos],
            "results": [{"id": r.id, "server": r.server, "bench": r.bench, "ts": r.ts, **r.result.to_json()} for r in state.results[:5]],
        }
    finally:
        await session.close()


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--wait", "wait_s", type=float, default=1.5, show_default=True, help="Seconds to observe before printing.")
@click.pass_context
def status(ctx: click.Context, as_json: bool, wait_s: float) -> None:
    """Hosts/GPUs, servers (state, phase, flags, load), todo and last results."""
    loaded = load_config_or_exit(ctx)
    data = asyncio.run(_collect(loaded, wait_s))
    if as_json:
        echo_json(data)
        return
    for h in data["hosts"]:
        click.echo(f"host {h['host']}: {h['status']}" + (f" ({h['error']})" if h["error"] else ""))
        for g in h["gpus"]:
            click.echo(f"  gpu {g['index']} {g['name']}: {g['mem_used_mib']}/{g['mem_total_mib']} MiB, util {g['util_gpu_pct']}%")
    for s in data["servers"]:
        click.echo(f"server {s['name']}: {s['state']}" + (f" [{s['phase']}]" if s["phase"] else "") + f"  {s['url']}")
        click.echo(f"  {shlex.join(s['argv'])}")
    for t in data["todo"]:
        click.echo(f"todo {t['id']} [{t['status']}] ({t['priority']}) {t['content']}")


@click.command()
@click.argument("server")
@click.option("--set", "sets", multiple=True, metavar="FLAG=VALUE", help="Set a flag (repeatable).")
@click.option("--unset", "unsets", multiple=True, metavar="FLAG", help="Remove a flag (repeatable).")
@click.option("--preset", default=None, help="Apply a configured preset.")
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
@click.pass_context
def restart(ctx: click.Context, server: str, sets: tuple[str, ...], unsets: tuple[str, ...], preset: str | None, as_json: bool) -> None:
    """Restart SERVER with changed flags and wait until it is ready.

    Exit code 0 only when the server is ready; otherwise 1 and the crash class."""
    from optui.core.flags import FlagError, Flags, parse_assignment
    from optui.session import Session, SessionError

    loaded = load_config_or_exit(ctx)
    root = ctx.find_root().obj or {}
    if root.get("read_only") or loaded.config.read_only:
        fail("read-only mode: restarting a server is disabled", 2)
    if server not in loaded.config.servers:
        fail(f"unknown server {server!r} (known: {', '.join(loaded.config.servers) or 'none'})", 2)

    async def go() -> dict:
        session = Session(loaded, actor="cli")
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
            st = await session.restart_server(server, flags.to_argv(), reason="cli")
            return {"server": server, "state": st.state.value, "crash_class": st.crash_class and str(st.crash_class),
                    "lines": list(st.crash_lines), "argv": list(st.argv), "phases": [{"phase": p.phase, "t": p.t} for p in st.phases]}
        finally:
            await session.close()

    try:
        result = asyncio.run(go())
    except (SessionError, FlagError) as exc:
        fail(str(exc), 2)
    if as_json:
        echo_json(result)
    else:
        click.echo(f"{server}: {result['state']}" + (f" ({result['crash_class']})" if result["crash_class"] else ""))
        for line in result["lines"]:
            click.echo(f"  {line}")
    sys.exit(0 if result["state"] == "ready" else 1)
