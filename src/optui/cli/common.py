"""Helpers shared by CLI commands: config loading with clean errors, the printers.

Every line a command prints goes through :func:`echo` or :func:`echo_json` (checked by
``tests/process/test_safe_output.py``): untrusted text (todo items, notes, server responses, log
lines) reaches the terminal with its escape sequences written visibly, never raw."""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, NoReturn

import click

from optui.core.text.safe_text import safe_line, safe_text

if TYPE_CHECKING:
    from optui.config import LoadedConfig


#: SQLite integers are 64-bit: a larger id or count reaches it as an OverflowError.
SQLITE_INT_MAX = 2**63 - 1
#: An event seq or todo id on the command line (``journal show 118``, ``todo set 3``).
ID = click.IntRange(1, SQLITE_INT_MAX)
#: Exit status of a command whose input file was read but is not in a format it reads (a
#: malformed result file): not 2, which is the usage-error status (bad option, bad config).
EXIT_UNPARSEABLE = 4
#: A count of rows (``journal tail -n``): as many as SQLite can count.
COUNT = click.IntRange(0, SQLITE_INT_MAX)


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and ``inf`` (``--wait inf`` or
    ``--timeout nan`` would wait forever: nan passes every range comparison)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class JsonErrors:
    """What a ``--json`` command said on stderr and whether it printed on stdout, kept while
    :func:`optui.cli.group.LazyGroup.main` runs it: on a failure that printed nothing on stdout,
    the top-level error path prints ``{"error": <stderr text>, "exit_code": N}`` there."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.stdout_used = False

    def error_text(self) -> str:
        """The error lines said, ``optui: error:`` / ``Error:`` prefixes dropped, joined by newlines."""
        lines = [line for text in self.errors for line in text.splitlines() if line.strip()]
        return "\n".join(_strip_prefix(line) for line in lines)


def _strip_prefix(line: str) -> str:
    for prefix in ("optui: error: ", "Error: "):
        if line.startswith(prefix):
            return line[len(prefix):]
    return line


#: set while a ``--json`` command runs (one command per process)
json_errors: JsonErrors | None = None


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` to stderr (prefixed ``optui: error:``) and exit with ``code``."""
    echo(f"optui: error: {message}", err=True)
    sys.exit(code)


def load_config_or_exit(ctx: click.Context | None = None) -> LoadedConfig:
    """Load the config named by ``--config`` (or found), exiting 2 with the
    ``FILE:LINE: FIELD: problem`` message on a bad file."""
    # imported here: commands that read no config (``optui gpus``) skip pydantic (~100 ms)
    from optui.config import ConfigError, load_config

    path = None
    if ctx is not None:
        root = ctx.find_root()
        path = (root.obj or {}).get("config_path")
    try:
        return load_config(path)
    except ConfigError as exc:
        echo(str(exc), err=True)
        sys.exit(2)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``message`` (``str()`` of it) to stdout, or stderr with ``err``, through
    :func:`~optui.core.text.safe_text.safe_text`: control characters and bidi overrides shown as
    ``\\x1b`` / ``\\u202e``, lines kept."""
    if json_errors is not None:
        if err:
            json_errors.errors.append(str(message))
        else:
            json_errors.stdout_used = True
    click.echo(safe_text(str(message)), err=err, nl=nl)


def echo_line(message: object = "", *, err: bool = False) -> None:
    """Print ``message`` as exactly one line (:func:`~optui.core.text.safe_text.safe_line`: a
    newline inside it shows as ``⏎``), for a line that carries untrusted text (a todo item, a
    server's message): an agent's list cannot forge a line such as ``server qwen: ready``.
    Printed through :func:`echo` (its ``--json`` bookkeeping; ``safe_text`` leaves a
    ``safe_line`` as it is)."""
    echo(safe_line(str(message)), err=err)


def close_left_open(journal, actor_name: str | None = None) -> None:
    """Journal the runs and restarts an optui process left open when it died (SIGKILL, a
    SIGTERM or SIGHUP it did not survive), as every session start does: every CLI command run
    on the campaign does it too, so the next optui process of any kind records them (issue 30:
    only a TUI did); the CLI group runs it before the command (:func:`close_before_command`).
    A journal that cannot be written is left alone."""
    from optui.adapters.journal import JournalError
    from optui.session.server.interrupted import close_interrupted
    from optui.session.server.locks import ServerLock

    if journal.read_only:
        return
    state_dir = journal.path.parent
    try:
        close_interrupted(journal, actor=actor_name or actor(),
                          restart_locked=lambda server: ServerLock(state_dir, server).held_by_other())
    except JournalError:
        pass  # locked or full: the next process closes them


#: The commands that open the campaign's journal writable: ``NAME`` (each of its subcommands)
#: or ``NAME SUB``. The group's entry (:func:`close_before_command`) closes what a dead optui left
#: open before any of them runs. ``optui`` alone and ``demo`` run a Session, whose start does the same.
OPENS_JOURNAL = frozenset({"status", "restart", "todo", "journal", "search", "mcp", "bench run", "bench import"})
#: The commands that never open the journal themselves (they read GPUs, a capture, a saved log
#: or result file): run on a campaign (a config file found: ``-c``, ``$OPTUI_CONFIG``,
#: ``./optui.toml``) whose journal exists, they close what a dead optui left open too, as the
#: next optui process of any kind (issue 30); without a config, or when the journal cannot be
#: written or read, they run as before and never create one.
CLOSES_ON_A_CAMPAIGN = frozenset({"gpus", "log classify", "bench parse"})
#: How long such a command waits for another process's write lock before it leaves the closing
#: to the next process (s): a look at the GPUs does not wait the journal's 5 s.
CLOSE_BUSY_S = 0.5


def _command_names(args: list[str]) -> tuple[str, str] | None:
    """``(NAME, "NAME SUB")`` of the command line ``args`` (the command's name first), None
    for none or ``--help``."""
    words = args[: args.index("--")] if "--" in args else args
    if not words or "--help" in words or "-h" in words:
        return None
    sub = next((word for word in words[1:] if not word.startswith("-")), None)
    return words[0], f"{words[0]} {sub}"


def opens_journal(args: list[str]) -> bool:
    """Whether the command line ``args`` (the command's name first) runs a command of
    :data:`OPENS_JOURNAL` (``--help`` runs none)."""
    names = _command_names(args)
    return names is not None and bool(set(names) & OPENS_JOURNAL)


def closes_on_a_campaign(args: list[str]) -> bool:
    """Whether the command line ``args`` runs a command of :data:`CLOSES_ON_A_CAMPAIGN`."""
    names = _command_names(args)
    return names is not None and bool(set(names) & CLOSES_ON_A_CAMPAIGN)


def close_before_command(ctx: click.Context, args: list[str]) -> None:
    """The CLI group's one place for issue 30's "every interrupted action is journaled by the
    next optui process of any kind": before a command that opens the campaign's journal
    writable (:func:`opens_journal`) runs, :func:`close_left_open` on it. A config or journal
    that cannot be read is left to the command, which says why in its own words; a journal not
    made yet, ``--read-only`` or a read-only filesystem: nothing. A command of
    :data:`CLOSES_ON_A_CAMPAIGN` does the same when a config file is found (read without
    validation: :func:`~optui.config_file.peek_journal`) and its journal exists and may be
    written, waiting :data:`CLOSE_BUSY_S` at most for a lock; nothing that goes wrong there
    changes what the command does or prints."""
    from optui.adapters.journal import Journal

    config_path = (ctx.find_root().obj or {}).get("config_path")
    if opens_journal(args):
        from optui.config import load_config

        try:
            path = load_config(config_path).journal_path
            if not (path.is_file() and path.stat().st_size) or read_only_open(ctx, path):
                return
            journal = Journal(path)
        except Exception:  # noqa: BLE001 - the command itself reports a bad config or journal
            return
        try:
            close_left_open(journal)
        finally:
            journal.close()
    elif closes_on_a_campaign(args):
        from optui.config_file import peek_journal

        try:
            found = peek_journal(config_path)
            if found is None or found[1] or not (found[0].is_file() and found[0].stat().st_size):
                return
            if read_only_open(ctx, found[0]):
                return
            journal = Journal(found[0], busy_timeout_s=CLOSE_BUSY_S)
        except Exception:  # noqa: BLE001 - a command that never needed the journal runs as before
            return
        try:
            close_left_open(journal)
        except Exception:  # noqa: BLE001 - idem: the next optui process closes them
            pass
        finally:
            journal.close()


def read_only_open(ctx: click.Context | None, path) -> bool:
    """Whether a command that only reads opens the journal read-only: ``--read-only`` was
    given or the journal lies on a read-only filesystem (a snapshot or ro mount can be read)."""
    from optui.adapters.journal import on_read_only_fs

    root = (ctx.find_root().obj or {}) if ctx is not None else {}
    return bool(root.get("read_only")) or on_read_only_fs(path)


def echo_json(data) -> None:
    """Print ``data`` as indented strict JSON (inf → "inf"). ASCII-only (``ensure_ascii``):
    every control or bidi character is a ``\\uXXXX`` escape, so nothing reaches the
    terminal raw and the value stays exact."""
    if json_errors is not None:
        json_errors.stdout_used = True
    click.echo(json.dumps(data, indent=2, allow_nan=False, default=str, ensure_ascii=True))


def actor() -> str:
    """Who a CLI write is journaled as: ``$OPTUI_ACTOR`` (e.g. ``agent:claude``) or ``cli``."""
    import os

    return os.environ.get("OPTUI_ACTOR") or "cli"
