"""``optui todo``: the campaign's todo list from the command line, for agents and scripts.

The commands write the same journal DB as the TUI (``.optui/optui.db`` beside the config),
so an open optui window shows their changes within a second; every change is a
``todo.changed`` event with actor ``cli`` (``--actor agent:NAME`` to say who). Exit codes:
0 done, 1 the action failed (bad file, unknown item, failed experiment), 2 bad usage or
config.
"""

from __future__ import annotations

import sys

import click

from optui.cli.common import ID, echo, echo_json, fail, load_config_or_exit, read_only_open
from optui.core.text.safe_text import safe_line
from optui.core.todo.items import Priority, TodoItem, TodoStatus

STATUSES = [s.value for s in TodoStatus]
PRIORITIES = [p.value for p in Priority]


def _actor_option(fn):
    return click.option("--actor", default="cli", show_default=True,
                        help="Who makes the change, as journaled (e.g. agent:claude).")(fn)


def _journal(ctx: click.Context, *, reading: bool = False):
    """The config and the campaign's Journal (exit 1 when it cannot be opened); ``reading``
    commands open it read-only under ``--read-only`` or on a read-only filesystem."""
    from optui.adapters.journal import Journal, JournalError

    loaded = load_config_or_exit(ctx)
    try:
        journal = Journal(loaded.journal_path, read_only=reading and read_only_open(ctx, loaded.journal_path))
    except JournalError as exc:
        fail(str(exc))
    return loaded, journal


def _item(journal, todo_id: int) -> TodoItem:
    item = journal.todo(todo_id)
    if item is None or todo_id in journal.deleted_todo_ids():
        fail(f"no todo item #{todo_id} (optui todo list shows the ids)")
    return item


def _line(t: TodoItem, deps: str | None = None) -> str:
    """One ``todo list`` line; ``deps`` is the item's ``blocked by #3`` (dependency_labels)."""
    marks = [deps] if deps else []
    if t.raw_status:
        marks.append(f"!{t.raw_status}")
    if t.conflict:
        marks.append("⚠ conflict")
    if t.agent_mark:
        marks.append(f"agent {t.agent_mark}")
    if t.experiment:
        run = t.run or {}
        marks.append("⚗" + (f" {run['status']}" if run.get("status") else ""))
    tail = f"  [{', '.join(marks)}]" if marks else ""
    # one row per item: a newline in the text must not print a forged row below it
    return f"#{t.id:<4} {t.status.value:<11} {t.priority.value:<6} {safe_line(t.content)}{tail}"


def _write(fn):
    """Run a journal write; a JournalError or ValueError becomes a clean exit 1."""
    from optui.adapters.journal import JournalError

    try:
        return fn()
    except (JournalError, ValueError, KeyError) as exc:
        fail(str(exc).strip("'\""))


@click.group()
def todo() -> None:
    """The campaign's todo list (shared live with every optui window)."""


@todo.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one object per item).")
@click.option("--open", "open_only", is_flag=True, help="Only pending and in-progress items.")
@click.pass_context
def list_(ctx: click.Context, as_json: bool, open_only: bool) -> None:
    """List the items in display order."""
    _, journal = _journal(ctx, reading=True)
    from optui.core.todo.formats import dependency_labels

    every = journal.todos()
    deps = dependency_labels(every)  # over every item: a hidden open blocker still blocks
    items = [t for t in every if not (open_only and t.done)]
    if as_json:
        echo_json([{**t.to_json(), "meta": t.meta, **({"blocked": deps[t.id]} if t.id in deps else {})}
                   for t in items])
    else:
        for t in items:
            echo(_line(t, deps.get(t.id)))


@todo.command()
@click.argument("text")
@click.option("--priority", "-p", type=click.Choice(PRIORITIES), default="medium", show_default=True)
@click.option("--server", default=None, help="Attach an experiment on this server.")
@click.option("--set", "sets", multiple=True, metavar="FLAG=VALUE", help="Experiment: set a flag (repeatable; FLAG alone = boolean).")
@click.option("--unset", "unsets", multiple=True, metavar="FLAG", help="Experiment: remove a flag (repeatable).")
@click.option("--bench", "benches", multiple=True, metavar="NAME", help="Experiment: benchmark preset(s) to run (repeatable).")
@click.option("--preset", default=None, help="Experiment: start from the server's flag preset.")
@click.option("--base", type=click.Choice(["config", "current", "last_good"]), default="config", show_default=True,
              help="Experiment: the argv the flag change applies to.")
@click.option("--json", "as_json", is_flag=True, help="Print the new item as JSON.")
@_actor_option
@click.pass_context
def add(ctx: click.Context, text: str, priority: str, server: str | None, sets: tuple[str, ...], unsets: tuple[str, ...],
        benches: tuple[str, ...], preset: str | None, base: str, as_json: bool, actor: str) -> None:
    """Add an item (with an experiment when --server/--set/--unset/--bench/--preset is given)."""
    loaded, journal = _journal(ctx)
    experiment = None
    if server or sets or unsets or benches or preset:
        from optui.core.flags.argv import FlagError, parse_assignment
        from optui.core.todo.experiment import build_experiment

        try:
            set_map = dict(parse_assignment(s) for s in sets)
            experiment = build_experiment(loaded.config, server, set_map, list(unsets), list(benches), preset, base)
        except (ValueError, FlagError) as exc:
            fail(f"experiment: {exc}", 2)
    if not text.strip():
        fail("todo text must not be empty", 2)
    item = _write(lambda: journal.add_todo(text, priority=priority, experiment=experiment, actor=actor))
    if as_json:
        echo_json(item.to_json())
    else:
        echo(f"added #{item.id}: {safe_line(item.content)}")


@todo.command("set")
@click.argument("todo_id", type=ID)
@click.option("--status", "-s", type=click.Choice(STATUSES), default=None)
@click.option("--priority", "-p", type=click.Choice(PRIORITIES), default=None)
@click.option("--content", default=None, help="New text.")
@click.option("--note", default=None, help="Attach a note (empty string removes it).")
@click.option("--json", "as_json", is_flag=True, help="Print the changed item as JSON.")
@_actor_option
@click.pass_context
def set_(ctx: click.Context, todo_id: int, status: str | None, priority: str | None, content: str | None,
         note: str | None, as_json: bool, actor: str) -> None:
    """Change an item's status, priority, text or note."""
    changes: dict = {}
    if status is not None:
        changes.update(status=status, raw_status=None)
    if priority is not None:
        changes["priority"] = priority
    if content is not None:
        changes["content"] = content
    if note is not None:
        changes["note"] = note or None
    if not changes:
        fail("nothing to change: give --status, --priority, --content or --note", 2)
    _, journal = _journal(ctx)
    item = _item(journal, todo_id)
    op = "edit" if content is not None else "status" if status else "priority" if priority else "note"
    after = _write(lambda: journal.update_todo(todo_id, actor=actor, expected=item, op=op, **changes))
    if as_json:
        echo_json(after.to_json())
    else:
        echo(_line(after))


@todo.command("import")
@click.argument("source")
@click.option("--format", "kind", type=click.Choice(["auto", "claude", "opencode", "todowrite"]), default="auto",
              show_default=True, help="How to read SOURCE (auto: from the path).")
@click.option("--dry-run", is_flag=True, help="Only print what would be imported.")
@click.option("--json", "as_json", is_flag=True, help="Print the normalised items as JSON.")
@_actor_option
@click.pass_context
def import_(ctx: click.Context, source: str, kind: str, dry_run: bool, as_json: bool, actor: str) -> None:
    """Import an agent's todo list: a todowrite / Claude Code / opencode JSON file, an
    opencode DB (PATH.db#SESSION), or - for stdin. Re-importing the same source diffs
    against what is there (items matched by content), it never duplicates."""
    from optui.adapters.todo_follow import FollowError, read_snapshot
    from optui.core.todo.formats import (
        MAX_CHARS,
        FollowSpec,
        TodoFormatError,
        guess_kind,
        origin_of,
        parse_follow_spec,
        parse_todo_json,
    )

    try:
        if source == "-":
            kind = "todowrite" if kind == "auto" else kind
            # one character past the limit is enough to refuse it (never all of an endless stdin)
            origin, items = origin_of(kind, "stdin"), parse_todo_json(sys.stdin.read(MAX_CHARS + 1), "<stdin>")
        else:
            spec = parse_follow_spec(source)
            if kind != "auto":
                spec = FollowSpec(kind, spec.path, spec.session, source)
            elif spec.kind == "auto":
                spec = FollowSpec(guess_kind(spec.path), spec.path, spec.session, source)
            origin, items = read_snapshot(spec)
    except (TodoFormatError, FollowError) as exc:
        fail(f"{exc} (nothing imported)")
    except ValueError as exc:
        fail(str(exc), 2)
    plan = None
    if not dry_run or not as_json:
        from optui.session.todo.sync import apply_snapshot

        _, journal = _journal(ctx)
        plan = _write(lambda: apply_snapshot(journal, origin, items, actor=actor, dry_run=dry_run))
    if as_json:  # the warnings too, so a script sees what a person reads on stderr
        echo_json([{**t.to_json(origin), **({"warnings": t.warnings} if t.warnings else {})} for t in items])
    else:
        for t in items:
            echo(f"{t.status.value:<11} {t.priority.value:<6} {safe_line(t.content)}" + (f"  [!{t.raw_status}]" if t.raw_status else ""))
    for t in items:
        for warning in t.warnings:
            echo(f"warning: {t.content[:60]}: {warning}", err=True)
    if plan is not None:
        verb = "would change" if dry_run else "imported"
        echo(f"{verb}: {len(plan.adds)} new, {len(plan.updates)} changed, {len(plan.removes)} dropped by the agent,"
             f" {plan.unchanged} unchanged ({origin})", err=True)


@todo.command()
@click.option("--format", "fmt", type=click.Choice(["todowrite", "markdown"]), default="markdown", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write to a file instead of stdout.")
@click.option("--open", "open_only", is_flag=True, help="Only pending and in-progress items.")
@click.pass_context
def export(ctx: click.Context, fmt: str, output: str | None, open_only: bool) -> None:
    """Export the list as todowrite JSON ({"todos": [...]}) or a Markdown checklist."""
    import json

    from optui.core.text.safe_text import safe_json, safe_text
    from optui.core.todo.formats import to_markdown, to_todowrite

    loaded, journal = _journal(ctx, reading=True)
    items = [t for t in journal.todos() if not (open_only and t.done)]
    if fmt == "todowrite":
        text = safe_json(json.dumps(to_todowrite(items), indent=2, ensure_ascii=False)) + "\n"
    else:
        name = loaded.path.resolve().parent.name if loaded.path else "optui"
        # the checklist's items are raw text: escape sequences made visible for the file too
        text = safe_text(to_markdown(items, f"Todo — {name}"))
    if output:
        from optui.session.journal.export import write_atomic

        try:  # like journal export: a full disk keeps the previous file, a symlink is replaced, not followed
            write_atomic(output, text)
        except OSError as exc:
            fail(f"{output}: cannot write: {exc.strerror or exc}")
        echo(f"wrote {len(items)} item{'s' if len(items) != 1 else ''} to {output}", err=True)
    else:
        echo(text, nl=False)


@todo.command()
@click.argument("todo_id", type=ID)
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@click.pass_context
def history(ctx: click.Context, todo_id: int, as_json: bool) -> None:
    """Every change of an item (who, when, before → after, flagged conflicts)."""
    import time as _time

    _, journal = _journal(ctx, reading=True)
    if journal.todo(todo_id) is None:
        fail(f"no todo item #{todo_id}")
    events = journal.events(target=f"todo:{todo_id}")
    if as_json:
        echo_json([e.to_json() for e in events])
        return
    for e in events:
        when = _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(e.ts))
        flag = "  ⚠ conflict: " + ", ".join(e.data["conflict"]) if e.data.get("conflict") else ""
        echo(f"{when}  {e.actor:<14} {e.type:<20} {safe_line(e.summary())}{flag}")


@todo.command()
@click.argument("todo_ids", type=ID, nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the todo runs' outcomes as JSON.")
@_actor_option
@click.pass_context
def run(ctx: click.Context, todo_ids: tuple[int, ...], as_json: bool, actor: str) -> None:
    """Todo runs: run each item's experiment, one after another (restart → ready →
    benchmark → compare), journaled as todo.run.* events with run ids todo-ID.N. Exit 0
    only when every todo run succeeded."""
    import asyncio

    from optui.session import Session, SessionError

    loaded = load_config_or_exit(ctx)
    if (ctx.find_root().obj or {}).get("read_only") or loaded.config.read_only:
        fail("read-only mode: running experiments is disabled", 2)

    async def go() -> list:
        session = Session(loaded, actor=actor)
        await session.start()
        try:
            await asyncio.sleep(0.3)  # monitors re-attach to running servers
            items = []
            for todo_id in todo_ids:
                item = session.journal.todo(todo_id)
                if item is None:
                    raise SessionError(f"no todo item #{todo_id}")
                session.todo_runs.check(item)
                items.append(item)
            return [await session.todo_runs.run_one(t.id) for t in items]
        finally:
            await session.close()

    try:
        outcomes = asyncio.run(go())
    except SessionError as exc:
        fail(str(exc))
    if as_json:
        echo_json([o.to_json() for o in outcomes])
    else:
        for o in outcomes:  # the summary's first line, then the rest indented (a server's log lines were one ⏎-joined line)
            first, *rest = o.summary.strip().splitlines() or [""]
            echo(f"#{o.todo_id} {o.run_id or ''} {o.status}: {safe_line(first)}")
            for line in rest[-6:]:
                echo(f"    {safe_line(line)}")
            if o.rollback_offer:  # rollback = "offer": the CLI cannot ask; it says how
                echo(f"  {o.rollback_offer} is down; back to its last good flags: optui restart {o.rollback_offer} --rollback")
    sys.exit(0 if all(o.status == "ok" for o in outcomes) else 1)
