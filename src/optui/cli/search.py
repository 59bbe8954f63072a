"""``optui search run SPEC`` / ``status`` / ``stop``: flag searches from the command line
(issue 22), through the same session and journal as the TUI.

``SPEC`` is a search of optui.toml (``[search.NAME]``), a TOML file holding one spec (its
name: its ``[search.NAME]`` table's, else the file's stem), or another tool's file (``--server``/``--bench`` say where it
runs): a vLLM ``--serve-params`` JSON or an SGLang tuner config (JSON/YAML;
:mod:`optui.core.search.imports`). ``run`` runs it in this process (each trial a todo run:
restart → ready → benchmark → compare), printing a line per trial; Ctrl-C or SIGTERM stop
it the way ``optui search stop`` does (the trial in progress is cut, a restart in flight
ends first). ``status`` reads the newest search from the journal, from any process;
``stop`` journals a ``search.stop`` that the running search reads within a second; a
stopped search, or one whose optui was killed, resumes on the next ``run`` of the same spec
(``--fresh`` starts anew); the optuna strategy's study is kept in ``.optui/search-optuna.db``.

Exit status: ``run``: 0 done with a winner, 1 no configuration met the constraints or the
search failed, 2 bad input (spec errors name FILE:LINE: FIELD), 130 stopped. ``status``: 0,
1 when no search ran. ``stop``: 0 asked, 1 nothing running.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from optui.cli.common import actor, echo, echo_json, fail, load_config_or_exit
from optui.config_file import ConfigError
from optui.session.cli_mcp_shared import SpecNotFound, read_spec


@click.group()
def search() -> None:
    """Flag searches: the best launch flags under an SLA, every trial an experiment."""


def _load_spec(loaded, spec: str, server: str | None = None, bench: str | None = None):
    """(name, SearchSpec) of SPEC (:func:`read_spec`); a bad one exits 2 with its message."""
    try:
        name, parsed, notes = read_spec(loaded, spec, server, bench)
    except SpecNotFound as exc:
        fail(str(exc), 2)
    except ConfigError as exc:  # the file's own errors, FILE:LINE: FIELD as a config's
        echo(str(exc), err=True)
        sys.exit(2)
    for note in notes:
        echo(f"optui: {note}", err=True)
    return name, parsed


def _field_place(loaded, spec: str, name: str, field: str) -> str:
    """``"optui.toml:41: search.batch.bench"``: where SPEC's ``field`` is written (a
    [search.NAME] of the config or a TOML spec file); ``""`` for another tool's file."""
    from optui.config_file import find_line, index_toml_lines, read_config_text

    loc: tuple[str, ...]
    if spec in loaded.config.search:
        path, loc = Path(loaded.path), ("search", name, field)
    else:
        path = Path(spec)
        if path.suffix != ".toml" or not path.is_file():
            return ""
        loc = (field,)
    try:
        index = index_toml_lines(read_config_text(path))
    except ConfigError:
        return ""
    if loc not in index and ("search", name, field) in index:  # a spec file holding its one [search.NAME]
        loc = ("search", name, field)
    return f"{path}:{find_line(index, loc)}: {'.'.join(loc)}"


def _trial_text(t: dict) -> str:
    from optui.core.search.spec import point_from_json, point_text
    from optui.core.search.strategies import breaks_text

    head = f"trial {t['number']}{' (re-run)' if t['phase'] == 'confirm' else ''}: {point_text(point_from_json(t['point'])) or '(fixed flags)'}"
    if t["status"] == "failed":
        return f"{head} → infeasible ({t['crash_class']}): {t['message']}"
    text = f"{head} → {t['score']:.4g}" + (f" [{t['experiment']}]" if t.get("experiment") else "")
    return text + (f", breaks {breaks_text(t['violated'], t.get('values') or {})}" if t["violated"] else "")


@search.command("run")
@click.argument("spec")
@click.option("--json", "as_json", is_flag=True, help="Print the search's final status as JSON.")
@click.option("--server", default=None, help="For a vLLM --serve-params or SGLang tuner file: the server to search.")
@click.option("--bench", default=None, help="For a vLLM --serve-params or SGLang tuner file: the benchmark preset.")
@click.option("--wait", "wait_s", type=click.FloatRange(0, 3600), default=0.0, show_default=True,
              help="Seconds to wait for another process's search on this campaign to end before refusing "
              "(one search per campaign).")
@click.option("--fresh", is_flag=True, help="Start anew even when the last search of SPEC stopped or was cut short "
              "with the same spec (by default it resumes).")
@click.pass_context
def run(ctx: click.Context, spec: str, as_json: bool, server: str | None, bench: str | None, wait_s: float,
        fresh: bool) -> None:
    """Run search SPEC (a [search.NAME] of optui.toml or a spec file) until it names a
    winner, is stopped, or fails. A search of SPEC that was stopped, or cut short by an
    optui that exited, resumes where it was when its spec is the same. One search runs
    per campaign: another process's is named (id, pid, start) and this one refused (exit
    2), unless it ends within ``--wait`` seconds. Whatever the end, the server is left on
    the winner's flags (nothing won: the flags the search started from) and the last line
    says which."""
    import asyncio
    import signal

    from optui.session import Session, SessionError
    from optui.session.search import SearchBusy, SpecError, check_workloads, search_status

    loaded = load_config_or_exit(ctx)
    if (ctx.find_root().obj or {}).get("read_only") or loaded.config.read_only:
        fail("read-only mode: a flag search restarts servers", 2)
    name, parsed = _load_spec(loaded, spec, server, bench)
    preset = loaded.config.benchmarks.get(parsed.bench)
    try:
        if preset is not None and preset.server == parsed.server:  # before any server starts
            check_workloads(parsed, preset)
    except SpecError as exc:
        place = _field_place(loaded, spec, name, exc.field)
        fail(f"{place}: {str(exc).removeprefix('search: ')}" if place else str(exc), 2)

    async def go() -> dict | None:
        session = Session(loaded, actor=actor())
        await session.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, session.search.stop)
        try:
            await asyncio.sleep(0.3)  # monitors re-attach to running servers
            session.search.check(parsed)
            deadline = loop.time() + wait_s
            while True:
                try:
                    first = await session.search.start(parsed, name, fresh=fresh)
                    break
                except SearchBusy:
                    if loop.time() >= deadline:
                        raise
                    await asyncio.sleep(0.5)
            if first.trial and not as_json:
                echo(f"resuming search {first.search_id} after {first.trial} trials")
            if first.note and not as_json:  # a budget smaller than the space: said before anything runs
                echo(f"search {first.search_id}: {first.note}")
            shown = first.trial
            while session.search.running:
                await session.wait_changed(session.version, 1.0)
                if not as_json:
                    for t in session.search.trials[shown:]:
                        echo(_trial_text(t.to_json()))
                    shown = len(session.search.trials)
            await session.search.wait()
            if not as_json:
                for t in session.search.trials[shown:]:
                    echo(_trial_text(t.to_json()))
            return search_status(session.journal, name, first.search_id)  # its own: never another process's
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await session.close()

    try:
        status = asyncio.run(go())
    except SpecError as exc:  # FILE:LINE: FIELD as the spec's other errors
        place = _field_place(loaded, spec, name, exc.field)
        fail(f"{place}: {str(exc).removeprefix('search: ')}" if place else str(exc), 2)
    except SessionError as exc:
        fail(str(exc), 2)
    assert status is not None
    if as_json:
        echo_json(status)
    else:
        echo(status["message"])
    if status["status"] == "stopped":
        sys.exit(130)
    sys.exit(0 if status["status"] == "done" and status["best"] else 1)


def _journal(ctx: click.Context, *, reading: bool):
    from optui.adapters.journal import Journal, JournalError
    from optui.cli.common import read_only_open

    loaded = load_config_or_exit(ctx)
    path = loaded.journal_path
    if not Path(path).exists():
        fail(f"{path}: no journal yet (no search ran on this campaign)", 1)
    try:
        journal = Journal(path, read_only=reading and read_only_open(ctx, path))
    except JournalError as exc:
        fail(str(exc), 2)
    return journal


@search.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON (every trial).")
@click.pass_context
def status(ctx: click.Context, name: str | None, as_json: bool) -> None:
    """The newest search (of NAME): its status, trials, best so far."""
    from optui.session.search import search_status

    journal = _journal(ctx, reading=True)
    try:
        data = search_status(journal, name)
    finally:
        journal.close()
    if data is None:
        fail(f"no search{' ' + name if name else ''} has run on this campaign", 1)
    if as_json:
        echo_json(data)
        return
    planned = f"/{data['planned']}" if data.get("planned") else ""
    echo(f"{data['search_id']} {data['status']}: {data['strategy']}, {data['objective']}, "
         f"{len(data['trials'])}{planned} trials, {data['infeasible']} infeasible")
    if data.get("note"):
        echo(data["note"])
    for t in data["trials"]:
        echo("  " + _trial_text(t))
    cur = data.get("current")
    if cur:
        echo(f"  trial {cur['number']}{' (re-run)' if cur['phase'] == 'confirm' else ''}: "
             f"{cur['flags'] or '(fixed flags)'} … {cur['step']}")
    if data["status"] == "running":
        echo(f"ETA {data['eta_s']:.0f} s ({data['eta_note']})" if data.get("eta_s") is not None
             else f"ETA: {data.get('eta_note') or 'unknown'}")
    best = data["best"]
    echo(best["text"] if best else "best: none feasible yet")
    if data["status"] != "running" and data["message"]:
        echo(data["message"])


@search.command("stop")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print what was asked as JSON.")
@click.pass_context
def stop(ctx: click.Context, name: str | None, as_json: bool) -> None:
    """Ask the running search (of NAME) to stop: the trial in progress is cut (a restart
    in flight ends first), no benchmark is left running."""
    from optui.session.search import SEARCH_STOP, search_status

    journal = _journal(ctx, reading=False)
    try:
        data = search_status(journal, name)
        if data is None or data["status"] != "running":
            fail(f"no search{' ' + name if name else ''} is running"
                 + (f" ({data['search_id']} is {data['status']})" if data else ""), 1)
        journal.append(SEARCH_STOP, f"search:{data['name']}", {"search_id": data["search_id"],
                                                               "message": f"stop search {data['search_id']}"},
                       actor=actor())
    finally:
        journal.close()
    if as_json:
        echo_json({"search_id": data["search_id"], "name": data["name"], "asked": True, "pid": data["pid"]})
    else:
        echo(f"asked search {data['search_id']} (pid {data['pid']}) to stop")
