"""``optui status``: one snapshot of the campaign (hosts/GPUs, servers, todo, last results,
experiments) for scripts and agents; ``optui restart``: restart a server from the command
line. Both drive the same :class:`~optui.session.Session` as the TUI, so a running TUI
shows what they do within a second (shared journal) and a restart refuses to run while
another optui process restarts the same server (per-server lock).

``restart`` goes through :meth:`~optui.session.Session.restart_checked`, like the TUI's flag
editor: base flags (the running argv, or the last good flags when the server is down or
crashed), the flag catalogue's checks before anything stops, the rollback policy.

Exit status of ``restart``: 0 the server is ready with the new flags (or, with
``--no-wait``, started); 1 it failed (the crash class is printed; also when ``rollback =
"auto"`` brought the last good flags back, and with ``"offer"`` the command that rolls back
is printed); 2 the restart could not begin and nothing was stopped (unknown server or
preset, a flag the catalogue does not know or a value it refuses — unless ``--force`` —,
read-only, another optui process is restarting it). With no catalogue (``--help`` never
learned or failing) names and values are not checked: a warning says so and it restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import sys
import time

import click

from optui.cli.common import (
    FiniteFloatRange,
    actor,
    echo,
    echo_json,
    echo_line,
    fail,
    load_config_or_exit,
    read_only_open,
)
from optui.session.cli_mcp_shared import restart_json, status_json


async def _collect(loaded, wait_s: float) -> dict:
    from optui.session import Session

    session = Session(loaded, actor=actor(), read_only=True, autostart=False, observer=True)
    await session.start()
    try:
        await asyncio.sleep(wait_s)  # one GPU tick and one health probe per server
        # a rate needs two /metrics scrapes a poll apart (llama.cpp's tok/s is its counter's
        # rate: poll_interval_s 2 s > the 1.5 s wait, and the H200 run read no gen tok/s at
        # all); wait for a second scrape where a server is up and its rate unknown, bounded
        # (not with a short --wait: the caller asked for speed)
        extra = min(5.0, max((rt.cfg.poll_interval_s for rt in session.servers.values()), default=0) + 0.5)
        deadline = time.monotonic() + (extra if wait_s >= 1.0 else 0.0)
        while time.monotonic() < deadline and any(
                rt.status.state.is_up and rt.status.load.source == "metrics" and rt.status.load.gen_tok_s is None
                for rt in session.servers.values()):
            await asyncio.sleep(0.1)
        if session.fleet is not None and not session.fleet.readings:  # its first query is bounded by timeout_s
            deadline = time.monotonic() + loaded.config.fleet.timeout_s + 1
            while not session.fleet.readings and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        return status_json(loaded, session)
    finally:
        await session.close()


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--wait", "wait_s", type=FiniteFloatRange(0, 600), default=1.5, show_default=True, help="Seconds to observe before printing.")
@click.pass_context
def status(ctx: click.Context, as_json: bool, wait_s: float) -> None:
    """Hosts/GPUs, servers (state, phase, flags, load), todo, last results, experiments."""
    from optui.core.journal.experiments import workloads_brief
    from optui.core.text.safe_text import headline

    loaded = load_config_or_exit(ctx)
    path = loaded.journal_path
    if path.is_file() and path.stat().st_size and not read_only_open(ctx, path):  # a journal, not one being made
        from optui.adapters.journal import Journal

        Journal(path).close()  # a JournalError: the CLI's one message (cli/group.py)
    data = asyncio.run(_collect(loaded, wait_s))
    if as_json:
        echo_json(data)
        return
    for h in data["hosts"]:
        echo_line(f"host {h['host']}: {h['status']}" + (f" ({h['error']})" if h["error"] else ""))
        for g in h["gpus"]:
            echo_line(f"  gpu {g['index']} {g['name']}: {_n(g['mem_used_mib'])}/{_n(g['mem_total_mib'])} MiB, "
                 f"util {_n(g['util_gpu_pct'])}%, {_n(g['power_w'])} W")
    if data["fleet"] is not None:
        fleet = data["fleet"]
        hosts = {g["host"] for g in fleet["gpus"]}
        stale = sum(g["stale"] for g in fleet["gpus"])
        echo_line(f"fleet {fleet['prometheus']}: {len(fleet['gpus'])} GPUs on {len(hosts)} hosts"
             + (f", {stale} stale" if stale else "") + (f" ({fleet['error']})" if fleet["error"] else ""))
    for s in data["servers"]:
        echo_line(f"server {s['name']}: {s['state']}" + (f" [{s['phase']}]" if s["phase"] else "") + f"  {s['url']}"
             + (f"  {s['experiment']}" if s["experiment"] else "") + (f"  ({s['crash_class']})" if s["crash_class"] else ""))
        echo_line(f"  {shlex.join(s['argv'])}")
        cause = s["crash_cause"] or s["message"]
        if s["state"] == "crashed" and s["crash_class"] and cause:  # why, not only its class
            echo_line(f"  {s['crash_class']}: {headline(cause, limit=200)}")
        for line in s["config_mismatch"]:
            echo_line(f"  UNVERIFIED {line}")
        load = s["load"]
        if load["running"] is not None or load["gen_tok_s"] is not None:
            echo_line(f"  load: running {_n(load['running'])}, waiting {_n(load['waiting'])}, "
                 f"KV {_n(load['kv_cache_pct'])}%, gen {_n(load['gen_tok_s'])} tok/s")
        elif load["hint"]:
            echo_line(f"  load: {load['hint']}")
    for t in data["todo"]:
        echo_line(f"todo {t['id']} [{t['status']}] ({t['priority']}) {t['content']}")
    for r in data["results"]:
        echo_line(f"result {r['id']} {r['bench']} on {r['server']} ({r['experiment'] or '-'}): {r['status']}, "
             f"{_n(r['output_throughput_tok_s'])} out tok/s, TTFT p50 {_n(r['ttft_ms']['median'])} ms")
    for x in data["experiments"]:  # the 10 newest; `optui journal experiments` lists them all with their evidence
        per_workload = workloads_brief(x["workloads"])  # several workloads: each one's verdict, not c=1's delta
        delta = (f" ({per_workload})" if per_workload else
                 f" {x['delta_pct']:+.1f}%" if x["delta_pct"] is not None and x["verdict"] != "baseline" else "")
        change = "; ".join(x["change_vs_baseline"]) or "-"
        echo_line(f"experiment {x['id']} on {x['server']}: {x['outcome']}, {x['verdict']}{delta}"
                  + (" UNVERIFIED" if x["unverified"] else "") + f"  {change}"
                  + (f"  ({x['starts_text']})" if x["starts_text"] else "")
                  + (f"  same flags as {x['same_config_as']}" if x["same_config_as"] else ""))


def _n(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if isinstance(value, float) else str(value)


@click.command()
@click.argument("server")
@click.option("--set", "sets", multiple=True, metavar="FLAG=VALUE", help="Set a flag (repeatable).")
@click.option("--unset", "unsets", multiple=True, metavar="FLAG", help="Remove a flag (repeatable).")
@click.option("--preset", default=None, help="Apply a configured preset.")
@click.option("--rollback", "to_last_good", is_flag=True, help="Restart with the last good flags (the last that became ready).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until ready or failed (exit 0 only when ready); --no-wait returns once the new process started.")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(1, 7 * 86400), default=None, help="Ready timeout in s (default: the server's ready_timeout_s).")
@click.option("--reason", default="cli", show_default=True, help="Why (journaled with the experiment).")
@click.option("--force", is_flag=True,
              help="Restart even with flags the server's --help does not know or values it refuses (they are passed "
                   "as given, shown as warnings).")
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
@click.pass_context
def restart(ctx: click.Context, server: str, sets: tuple[str, ...], unsets: tuple[str, ...], preset: str | None,
            to_last_good: bool, wait: bool, timeout_s: float | None, reason: str, force: bool, as_json: bool) -> None:
    """Restart SERVER with changed flags and wait until it is ready.

    The changes apply to the flags the server runs, or to its last good flags when it is
    down or crashed; they are checked against the server's flag catalogue (its --help)
    before anything stops. A failed restart is rolled back (rollback = "auto") or the way
    back is printed (rollback = "offer").

    Exit code 0 only when the server is ready with the new flags; otherwise 1 and the crash
    class (also when it was rolled back); 2 when the restart cannot begin (a flag the --help
    does not know or a bad value, unless --force; another optui process is restarting
    SERVER...): nothing was stopped. A server whose --help could not be read is not checked
    (a warning says so)."""
    from optui.core.flags.argv import FlagError
    from optui.core.flags.catalog import UNKNOWN_FLAG
    from optui.session import Session, SessionError
    from optui.session.server.restart_checks import RestartRefused

    loaded = load_config_or_exit(ctx)
    root = ctx.find_root().obj or {}
    if root.get("read_only") or loaded.config.read_only:
        fail("read-only mode: restarting a server is disabled", 2)
    if server not in loaded.config.servers:
        fail(f"unknown server {server!r} (known: {', '.join(loaded.config.servers) or 'none'})", 2)
    if to_last_good and (sets or unsets or preset):
        fail("--rollback restarts with the last good flags: it takes no --set/--unset/--preset", 2)

    signalled: list[signal.Signals] = []

    async def go() -> dict | None:
        _cancel_on(asyncio.current_task(), signalled)
        session = Session(loaded, actor=actor(), autostart=False)
        try:
            await session.start()
            rt = session.servers[server]
            if to_last_good:
                await rt.attached.wait()
                task = asyncio.create_task(session.rollback(server, reason=f"cli ({reason})"))
                plan = None
            else:
                plan = await session.plan_restart(server, sets=sets, unsets=unsets, preset=preset, refuse_unknown=True,
                                                  force=force)
                for issue in plan.warnings:
                    echo(f"warning: {issue}", err=True)
                if plan.unchecked:
                    echo(f"warning: {plan.unchecked}", err=True)
                if plan.base_from == "last good":
                    echo(f"{server} is not running: the changes apply to its last good flags", err=True)
                task = asyncio.create_task(session.restart_checked(server, plan=plan, reason=reason,
                                                                   ready_timeout_s=timeout_s))
            outcome = None
            if not wait:
                await _until_started(rt, task)
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, SessionError):
                        await task
                elif (failure := task.exception()) is not None:
                    raise failure
            else:
                outcome = await task
            return restart_json(session, server, plan, outcome)
        except asyncio.CancelledError:
            if not signalled:
                raise
            _journal_own_interruption(session, server, signalled[0])
            return None
        finally:
            await session.close()

    try:
        result = asyncio.run(go())
    except RestartRefused as exc:
        fail(str(exc) + ("; --force restarts with it anyway" if any(i.code == UNKNOWN_FLAG for i in exc.issues) else ""), 2)
    except (SessionError, FlagError) as exc:
        fail(str(exc), 2)
    except asyncio.CancelledError:  # a signal while the session closed
        if not signalled:
            raise
    if signalled or result is None:
        signum = signalled[0] if signalled else signal.SIGTERM
        fail(f"{server}: restart interrupted by {signum.name}", 128 + signum)
    requested = result["argv"] == result["requested_argv"]
    ok = requested and (result["state"] == "ready" or (not wait and result["state"] in ("starting", "warming", "ready")))
    if as_json:
        echo_json(result)
    elif result["rolled_back"]:
        echo(f"{server}: failed ({result['failed'] or 'unknown'}); rolled back to the last good flags: {result['state']}"
             + (f"  {result['experiment']}" if result["experiment"] else ""))
    else:
        echo(f"{server}: {result['state']}" + (f" ({result['crash_class']})" if result["crash_class"] else "")
             + (f" in {result['ready_s']:.1f}s" if result["ready_s"] else "")
             + (f"  {result['experiment']}" if result["experiment"] else ""))
        for line in result["lines"]:
            echo(f"  {line}")
        for line in result["config_mismatch"]:
            echo(f"  UNVERIFIED {line}")
        if result["rollback_command"]:
            echo(f"  roll back to the last good flags: {result['rollback_command']}")
    sys.exit(0 if ok else 1)


def _cancel_on(task: asyncio.Task | None, signalled: list[signal.Signals]) -> None:
    """SIGTERM and SIGHUP (a closed terminal) end ``optui restart`` as a clean cancel of
    ``task`` (the restart), the signal kept in ``signalled``, instead of a death that leaves
    the restart open for the next optui process to close (issue 30)."""
    loop = asyncio.get_running_loop()

    def on_signal(signum: signal.Signals) -> None:
        if not signalled and task is not None:
            signalled.append(signum)
            task.cancel()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, on_signal, signum)


def _journal_own_interruption(session, server: str, signum: signal.Signals) -> None:
    """Journal this process's restart of ``server`` as interrupted by ``signum``, where it
    asked for one that has not ended; a journal that cannot be written is left to the next
    optui process (:func:`optui.session.server.interrupted.close_interrupted`)."""
    from optui.adapters.journal import JournalError
    from optui.session.server.interrupted import close_own_restart

    with contextlib.suppress(JournalError):
        close_own_restart(session.journal, server, actor=actor(), why=f"was ended by {signum.name}")


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
