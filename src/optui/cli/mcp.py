"""``optui mcp``: optui as an MCP server on stdio, for coding agents (Claude Code, opencode,
Codex): ``claude mcp add optui -- optui -c /path/optui.toml mcp``. The tools and resources
are described in :mod:`optui.agent.mcp_server`; ``--read-only`` (the group's option, or
``read_only = true`` in the config) refuses every write.

stdout is the protocol: nothing else may be printed there (logs go to stderr)."""

from __future__ import annotations

import click

from optui.cli.common import load_config_or_exit


@click.command()
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve the campaign to an agent over MCP (stdio): status, GPUs, journal, experiments,
    todo items, notes; the findings report, flag catalogues and server logs as resources."""
    import anyio

    from optui.agent.mcp_server import build_server

    loaded = load_config_or_exit(ctx)
    read_only = bool((ctx.find_root().obj or {}).get("read_only"))
    anyio.run(build_server(loaded, read_only=read_only).run_stdio_async)
