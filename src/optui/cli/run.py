"""``optui demo`` as a click command (the implementation is in :mod:`optui.cli.tui`)."""

from __future__ import annotations

import click

from optui.cli.common import FiniteFloatRange
from optui.cli.tui import run_demo


@click.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="Where the demo campaign lives (default: the user state dir).")
@click.option("--fresh", is_flag=True, help="Start from an empty journal.")
@click.option("--speed", type=FiniteFloatRange(0.01, 1000), default=1.0, show_default=True, help="Startup speed of the simulated server.")
@click.option("--fleet", "fleet", type=click.IntRange(1, 1024), default=None, metavar="N",
              help="Also a simulated fleet of N hosts x 8 GPUs (the [fleet] view; no Prometheus needed).")
@click.pass_context
def demo(ctx: click.Context, directory: str | None, fresh: bool, speed: float, fleet: int | None) -> None:
    """Run optui against a simulated rack and SGLang-style server (no GPU needed).

    Everything is real except the hardware: the server is a subprocess answering HTTP on
    127.0.0.1, benchmarks are real processes, the journal is a real SQLite file."""
    root = ctx.find_root().obj or {}
    run_demo(directory, fresh=fresh, speed=speed, theme=root.get("theme"), read_only=root.get("read_only", False),
             fleet=fleet)
