"""optui's command line (click). ``optui`` alone starts the TUI; subcommands are one-shot
JSON-friendly tools for scripts and agents. Each command group lives in its own module
and is imported lazily, so ``optui --help`` stays fast."""

from __future__ import annotations

import errno
import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from optui.cli import common
from optui.core.text.safe_text import safe_text

# name -> "module:attribute" of a click command or group
_COMMANDS = {
    "demo": "optui.cli.run:demo",
    "gpus": "optui.cli.gpus:gpus",
    "bench": "optui.cli.bench:bench",
    "log": "optui.cli.log:log",
    "todo": "optui.cli.todo:todo",
    "status": "optui.cli.status:status",
    "restart": "optui.cli.status:restart",
    "journal": "optui.cli.journal:journal",
    "mcp": "optui.cli.mcp:mcp",
    "search": "optui.cli.search:search",
}


@contextmanager
def _visible_usage_errors() -> Iterator[None]:
    """click's usage errors quote the argument they refuse (``Invalid value for
    '--status': '\\x1b]2;…'``) and print it raw: escape the message first."""
    try:
        yield
    except click.ClickException as exc:
        exc.message = safe_text(exc.message)  # type: ignore[misc]  # Final in click's types; escaped in place on purpose
        if common.json_errors is not None:
            common.json_errors.errors.append(exc.format_message())
        raise


def _wants_json(args: list[str]) -> bool:
    """Whether ``--json`` is among the options (before a ``--`` that ends them)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _exit_status(code: object) -> int:
    """A :class:`SystemExit` code as the process's exit status (``None`` 0, a message 1)."""
    return code if isinstance(code, int) else (0 if code is None else 1)


#: exit status of a command whose stdout was closed before it finished (``optui gpus | head -2``):
#: 128 + SIGPIPE, what a shell reports for a C program the signal ended
EXIT_BROKEN_PIPE = 141


@contextmanager
def _quiet_on_closed_stdout() -> Iterator[None]:
    """The reader of stdout went away (``| head``): exit :data:`EXIT_BROKEN_PIPE` without a
    word, the Unix way. stdout is pointed at /dev/null first, so the interpreter's last flush
    of what is still buffered cannot fail again at exit."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # no real descriptor (a test runner's capture)
            pass
        sys.exit(EXIT_BROKEN_PIPE)


#: exit status of a command that met a bug (an exception no command handled)
EXIT_INTERNAL = 70  # EX_SOFTWARE (sysexits.h)


@contextmanager
def _no_traceback() -> Iterator[None]:
    """The CLI's one place for errors no command caught (issue 30: ``optui status`` over a
    corrupt journal ended in a traceback): a journal, config or input error is its message
    (exit 1; a config file's exit 2), anything else ``optui: internal error: TYPE: message``
    (exit :data:`EXIT_INTERNAL`; ``OPTUI_DEBUG=1`` shows the traceback). click's own
    exceptions, ``SystemExit`` and a closed stdout (EPIPE) pass through."""
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        _fail_cleanly(exc)
    except Exception as exc:  # noqa: BLE001 - the last line before a user would see a traceback
        _fail_cleanly(exc)


def _fail_cleanly(exc: Exception) -> None:
    from optui.adapters.bounded_read import InputTooLarge
    from optui.adapters.journal import JournalError
    from optui.cli.common import echo
    from optui.config_file import ConfigError

    if os.environ.get("OPTUI_DEBUG"):
        raise exc
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:  # a task group's (mcp's) one failure
        exc = exc.exceptions[0]
    if isinstance(exc, ConfigError):
        echo(str(exc), err=True)
        sys.exit(2)
    if isinstance(exc, JournalError | InputTooLarge):
        echo(f"optui: error: {exc}", err=True)
        sys.exit(1)
    if isinstance(exc, OSError):
        echo(f"optui: error: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}", err=True)
        sys.exit(1)
    echo(f"optui: internal error: {exc.__class__.__name__}: {str(exc)[:500]} (OPTUI_DEBUG=1 shows the traceback)",
         err=True)
    sys.exit(EXIT_INTERNAL)


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's ``main``; with ``--json`` a failure that printed nothing on stdout prints
        one JSON object there, ``{"error": "<what stderr says>", "exit_code": N}``, so a
        script reading stdout always gets JSON (the message stays on stderr too)."""
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode or not _wants_json(argv):
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        common.json_errors = capture = common.JsonErrors()
        try:
            super().main(argv, prog_name, complete_var, standalone_mode, **extra)
            code = 0
        except SystemExit as exc:
            code = _exit_status(exc.code)
        finally:
            common.json_errors = None
        if code not in (0, EXIT_BROKEN_PIPE) and not capture.stdout_used:
            with _quiet_on_closed_stdout():
                common.echo_json({"error": capture.error_text() or f"exit status {code}", "exit_code": code})
        sys.exit(code)

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        with _quiet_on_closed_stdout(), _visible_usage_errors():  # --help, --version print here
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context):
        with _quiet_on_closed_stdout(), _visible_usage_errors(), _no_traceback():
            return super().invoke(ctx)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """click's; keeps the command line from the command's name on (``ctx.meta``), for the
        group's callback to close what a dead optui left open before the command runs."""
        ctx.meta["optui.command_args"] = list(args)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = _COMMANDS.get(name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        return getattr(module, attr)


@click.group(cls=LazyGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False), default=None,
              help="optui.toml to use (default: $OPTUI_CONFIG, else ./optui.toml).")
@click.option("--theme", default=None, help="Theme name (overrides the config).")
@click.option("--read-only", is_flag=True, default=False, help="Hide and refuse every action that changes a server.")
@click.version_option(package_name="optui")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, theme: str | None, read_only: bool) -> None:
    """optui: one screen for tuning LLM inference servers (GPUs, servers, todo, bench, journal).

    Without a subcommand, starts the TUI on the configured campaign."""
    ctx.ensure_object(dict)
    ctx.obj.update(config_path=config_path, theme=theme, read_only=read_only)
    if ctx.invoked_subcommand is not None:  # issue 30: what a killed optui left open, journaled first
        common.close_before_command(ctx, ctx.meta.get("optui.command_args", []))
    if ctx.invoked_subcommand is None:
        from optui.cli.tui import run_tui

        run_tui(config_path, theme=theme, read_only=read_only)
