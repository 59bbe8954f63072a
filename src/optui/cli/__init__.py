"""optui's command line. ``optui`` alone starts the TUI; subcommands are one-shot
JSON-friendly tools for scripts and agents (click group in :mod:`optui.cli.group`, each
command in its own module, imported lazily)."""

from __future__ import annotations

__all__ = ["cli", "main"]


def main() -> None:
    """Console-script entry point. ``optui`` and ``optui demo`` (with their options) start
    without importing click (the first frame comes sooner); everything else — ``--help``,
    subcommands, malformed options — goes through click."""
    import sys

    from optui.cli.tui import parse_fast, run_fast

    parsed = parse_fast(sys.argv[1:])
    if parsed is not None:
        run_fast(parsed)
        return
    from optui.cli.group import cli

    cli(prog_name="optui")


def __getattr__(name: str):
    if name == "cli":
        from optui.cli.group import cli

        return cli
    raise AttributeError(name)
