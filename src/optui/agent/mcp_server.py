"""``optui mcp``: optui as a stdio MCP server (the official ``mcp`` SDK's MCPServer).

Tools (each answer in the shape of the CLI's ``--json`` for the same question, see
:mod:`optui.agent.cockpit`): ``status``, ``gpus``, ``journal_tail``, ``journal_event``,
``experiments``, ``todo_list``, ``todo_add``, ``todo_set``, ``note``, ``verdict``; the guarded actions
``restart_server``, ``run_experiment`` (restart → ready → benchmark → comparison, one call),
``run_benchmark``, ``stop_server``, ``search_run`` / ``search_stop`` (a flag search: one request
for all its trials, run by the session's search runner in this process; ``search_status`` reads
any process's search as ``optui search status --json``): each a request the operator approves or denies in an optui
window, or the config's ``[agent]`` policy decides (:mod:`optui.session.agent_requests`),
journaled with the decision and the outcome, run once approved; one at a time per server (a
second request while one waits or runs is refused, naming the other agent's). Resources:
``optui://report`` (the Markdown findings report), ``optui://servers/{server}/flags`` (the
flag catalogue learned from the server's ``--help``, JSON), ``optui://servers/{server}/log``
(its last log lines).

Writes are journaled with actor ``agent:NAME``, NAME the client's ``clientInfo.name``
(``claude-code``, ``opencode``...). A bad argument is a tool error (``isError``) whose text
says what is wrong (unknown server, bad filter, value out of range), never a traceback; a bad
resource is an MCP invalid-params error.

The server runs one observer :class:`~optui.session.Session` on the campaign for its whole
life (GPU polling and health probes, as ``optui status`` for 1.5 s): status answers are
live, and the first one waits for the first GPU tick and probe (``FIRST_LOOK_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

from optui.agent.cockpit import AgentError, Cockpit, agent_actor

if TYPE_CHECKING:
    from optui.config import LoadedConfig

#: seconds from the session's start before a status answer: one GPU tick, one health probe
FIRST_LOOK_S = 1.5

INSTRUCTIONS = """optui: the operator's cockpit for tuning LLM inference servers (SGLang, vLLM, llama.cpp).
Read with status, gpus, journal_tail, journal_event, experiments, todo_list; the resources
optui://report, optui://servers/{server}/flags and optui://servers/{server}/log.
Units are in key names (_tok_s, _ms, _mib, _pct). An experiment's verdict comes with its
evidence (n, spread, baseline): 'untested' or 'noise' is not a win, and 'unverified' flags
mean the server does not run what the result is credited to.
Add and update todo items and notes; your writes are journaled as agent:<your client name>.
restart_server, run_experiment (flags + benchmark: restart, ready gate, benchmark, comparison in one call),
run_benchmark, stop_server, search_run (a flag search: every trial a restart and a benchmark; follow it
with search_status) and search_stop are requests: the operator approves or denies them in optui (or the config's
policy decides); say why. One request per server at a time: while another agent's waits or runs, yours is
refused with its name and request. Their answers carry the same checks as optui's own
restart and benchmark: crash class and log lines, config_mismatch, the verdict with its evidence."""


def _client_actor(ctx: Context) -> str:
    """``agent:NAME`` from the connected client's ``clientInfo``."""
    params = ctx.session.client_params
    return agent_actor(params.client_info.name if params is not None and params.client_info is not None else None)


@contextlib.contextmanager
def _as_tool_error() -> Iterator[None]:
    """An :class:`AgentError` becomes a ToolError: the agent reads the message, no traceback."""
    try:
        yield
    except AgentError as exc:
        raise ToolError(str(exc)) from None


def build_server(loaded: LoadedConfig, *, read_only: bool = False) -> MCPServer:
    """The MCP server on ``loaded``'s campaign; ``read_only`` refuses every write (todo
    items, notes). Run it with ``run_stdio_async()``."""

    cockpit: Cockpit | None = None
    started = 0.0

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[None]:
        nonlocal cockpit, started
        from optui.session import Session

        session = Session(loaded, actor="agent", read_only=True, autostart=False, observer=True)
        await session.start()
        started = time.monotonic()
        cockpit = Cockpit(loaded, session, read_only=read_only)
        try:
            yield None
        finally:
            await cockpit.close_search()
            cockpit.close()
            await session.close()

    def here() -> Cockpit:
        assert cockpit is not None, "tools run inside the server's lifespan"
        return cockpit

    async def first_look() -> None:
        if (wait := FIRST_LOOK_S - (time.monotonic() - started)) > 0:
            await asyncio.sleep(wait)

    # WARNING: the SDK's INFO logs every tool error and, through the root logger, every probe
    mcp = MCPServer("optui", instructions=INSTRUCTIONS, lifespan=lifespan, log_level="WARNING")

    @mcp.tool()
    async def status() -> dict[str, Any]:
        """The campaign now, as `optui status --json`: hosts with GPU readings, servers (state, phase, argv and
        flags, load: running/waiting requests, KV cache %, gen tok/s; crash class, config_mismatch, current
        experiment), the running benchmark, todo items, the newest results and experiments."""
        await first_look()
        return here().status()

    @mcp.tool()
    async def gpus(host: str | None = None) -> list[dict[str, Any]]:
        """GPU readings per host (memory MiB, util %, power W, temperature °C; null = not available), all hosts
        or the one named."""
        await first_look()
        with _as_tool_error():
            return here().gpus(host)

    @mcp.tool()
    def journal_tail(limit: int = 20, types: list[str] | None = None, server: str | None = None,
                     experiment: str | None = None, grep: str | None = None,
                     since: str | None = None) -> list[dict[str, Any]]:
        """The newest journal events matching every filter given, oldest first (as `optui journal tail --json`).
        types: event types (server.ready, note...) or groups (server, flags, failures, bench, todo, notes,
        experiments, agent: requests, decisions and outcomes of agents' actions); server: the event's target; experiment: exp-0007; grep: text in the event;
        since: 90m, 2h, 1d or an ISO time. limit 1..500."""
        with _as_tool_error():
            return here().journal_tail(limit=limit, types=types, server=server, experiment=experiment, grep=grep,
                                       since=since)

    @mcp.tool()
    def journal_event(seq: int) -> dict[str, Any]:
        """One journal event by its number (as `optui journal show SEQ --json`): flag diff, phases, crash class
        and log lines, bench metrics."""
        with _as_tool_error():
            return here().journal_event(seq)

    @mcp.tool()
    def experiments(server: str | None = None, sort: str = "id") -> list[dict[str, Any]]:
        """One row per experiment (as `optui journal experiments --json`): outcome, crash class, ready_s, change vs
        baseline, workloads with metrics and delta_pct vs the baseline, verdict (better/worse/noise/untested)
        with its evidence, unverified flags, the operator's decision. sort: id, server, ready, throughput, delta,
        ttft, ttft_delta, verdict, outcome, change."""
        with _as_tool_error():
            return here().experiments(server=server, sort=sort)

    @mcp.tool()
    def todo_list(open_only: bool = False) -> list[dict[str, Any]]:
        """The campaign's todo items in display order (as `optui todo list --json`)."""
        return here().todo_list(open_only=open_only)

    @mcp.tool()
    def todo_add(text: str, ctx: Context, priority: str = "medium", server: str | None = None,
                 set_flags: dict[str, str | None] | None = None, unset_flags: list[str] | None = None,
                 benchmarks: list[str] | None = None) -> dict[str, Any]:
        """Add a todo item; with server/set_flags/unset_flags/benchmarks it carries an experiment the operator can
        run (a proposed experiment). set_flags maps a flag to its value ({"--max-running-requests": "64"}; null
        for a boolean flag). priority: high, medium, low."""
        with _as_tool_error():
            return here().todo_add(text, actor=_client_actor(ctx), priority=priority, server=server, sets=set_flags,
                                   unsets=unset_flags, benches=benchmarks)

    @mcp.tool()
    def todo_set(todo_id: int, ctx: Context, status: str | None = None, priority: str | None = None,
                 content: str | None = None, note: str | None = None) -> dict[str, Any]:
        """Change a todo item's status (pending, in_progress, completed, cancelled), priority, text or note (an
        empty note removes it)."""
        with _as_tool_error():
            return here().todo_set(todo_id, actor=_client_actor(ctx), status=status, priority=priority,
                                   content=content, note=note)

    @mcp.tool()
    def note(text: str, ctx: Context, server: str | None = None) -> dict[str, Any]:
        """A note in the journal, linked to the server's current experiment (else the newest experiment)."""
        with _as_tool_error():
            return here().note(text, actor=_client_actor(ctx), server=server)

    @mcp.tool()
    def verdict(experiment: str, decision: str, ctx: Context, reason: str = "") -> dict[str, Any]:
        """Record your decision on an experiment: keep, reject or inconclusive, with the reason (shown in the
        report beside the measured verdict)."""
        with _as_tool_error():
            return here().verdict(experiment, decision, actor=_client_actor(ctx), reason=reason)

    @mcp.tool()
    async def restart_server(server: str, why: str, ctx: Context, set_flags: dict[str, str | None] | None = None,
                             unset_flags: list[str] | None = None, wait_s: float = 300.0) -> dict[str, Any]:
        """Ask the operator to restart a server with changed flags; waits (up to wait_s seconds) for the
        operator's approve/deny in optui, then runs it through the same checks as optui's own restart. set_flags
        maps a flag to its value ({"--max-running-requests": "64"}; null for a boolean flag). Returns outcome
        (ran, denied, timeout, refused), the request's decision and who made it, the flag diff, catalogue
        warnings, and once ran the restart as `optui restart --json`: state, crash_class and log lines when it
        failed, config_mismatch (flags the server does not really run), rolled_back."""
        with _as_tool_error():
            return await here().restart(server, actor=_client_actor(ctx), why=why, sets=set_flags,
                                        unsets=unset_flags, wait_s=wait_s)

    @mcp.tool()
    async def run_experiment(benchmark: str, why: str, ctx: Context, set_flags: dict[str, str | None] | None = None,
                             unset_flags: list[str] | None = None, repeat: int | None = None,
                             server: str | None = None, wait_s: float = 300.0) -> dict[str, Any]:
        """One experiment in one call: restart the benchmark's server with its running flags changed
        (set_flags {"--max-running-requests": "64"}, null for a boolean flag; unset_flags), then run the benchmark
        `repeat` times (default: the config's; verdicts need >= 3) and compare with the baseline. One request the
        operator approves in optui (the config's policy may allow it: flags inside allowed_flags and
        benchmarks_without_approval); optui's own experiment runner does the rest (a todo item records it).
        Returns outcome (ran, denied, timeout, refused), the request, the flag diff, experiment (exp-NNNN), run
        (status ok/failed, step, summary, crash_class, lines), restart (state, crash_class and log lines,
        config_mismatch), unverified (flags the server does not run), results (each with vs_baseline deltas) and
        experiment_summary (verdict with its evidence: n, spread, baseline)."""
        with _as_tool_error():
            return await here().run_experiment(benchmark, actor=_client_actor(ctx), why=why, server=server,
                                               sets=set_flags, unsets=unset_flags, repeat=repeat, wait_s=wait_s)

    @mcp.tool()
    async def run_benchmark(benchmark: str, why: str, ctx: Context, repeat: int | None = None,
                            wait_s: float = 300.0) -> dict[str, Any]:
        """Ask to run a configured benchmark against its server (which must be ready), each point `repeat` times
        (default: the config's; verdicts need >= 3). A request the operator approves in optui, unless the config
        allows benchmarks without approval. Results are stored under the server's current experiment; the answer
        has each result with its deltas vs the baseline and the experiment's verdict with its evidence
        (as `optui bench run --json`): one run alone is 'untested noise', never better or worse."""
        with _as_tool_error():
            return await here().run_benchmark(benchmark, actor=_client_actor(ctx), why=why, repeat=repeat,
                                              wait_s=wait_s)

    @mcp.tool()
    async def stop_server(server: str, why: str, ctx: Context, wait_s: float = 300.0) -> dict[str, Any]:
        """Ask the operator to stop a server; returns the outcome and the server's state."""
        with _as_tool_error():
            return await here().stop(server, actor=_client_actor(ctx), why=why, wait_s=wait_s)

    @mcp.tool()
    def search_status(name: str | None = None) -> dict[str, Any]:
        """The newest flag search (of name), as `optui search status --json`, whichever process runs it (this one,
        `optui search run`, the TUI): status (running, done, stopped, failed, interrupted), planned trials, eta_s,
        trials (flags as point, score, status ok/failed, crash_class of an infeasible one, violated constraints,
        experiment), best (flags, score, trials and bench_runs, vs: the winner against the runner-up and the first
        configuration with its evidence n/spread/p), infeasible, message."""
        with _as_tool_error():
            return here().search_status(name)

    @mcp.tool()
    async def search_run(spec: str, why: str, ctx: Context, fresh: bool = False, server: str | None = None,
                         bench: str | None = None, wait_s: float = 300.0) -> dict[str, Any]:
        """Ask to run a flag search: spec is a [search.NAME] of optui.toml or a spec file (server/bench for a vLLM
        --serve-params or SGLang tuner file). Every trial restarts the server and benchmarks it, so it is a request
        the operator approves in optui (waits up to wait_s seconds), holding the server while the search runs.
        Returns once decided: outcome (started, denied, timeout, refused), the request, the search's diff lines,
        progress (search_id, planned trials). The search runs on in this optui mcp (a stopped one of the same spec
        resumes unless fresh): follow it with search_status, end it with search_stop."""
        with _as_tool_error():
            return await here().search_run(spec, actor=_client_actor(ctx), why=why, fresh=fresh, server=server,
                                           bench=bench, wait_s=wait_s)

    @mcp.tool()
    async def search_stop(why: str, ctx: Context, name: str | None = None, wait_s: float = 300.0) -> dict[str, Any]:
        """Ask the operator to stop the running flag search (of name; any process's). Once approved it waits for
        the search's end: the trial in progress cut, no benchmark left running, the server ready or crashed (a
        restart in flight finishes). Returns outcome, the request, search (its search_status) and the server's
        state."""
        with _as_tool_error():
            return await here().search_stop(actor=_client_actor(ctx), why=why, name=name, wait_s=wait_s)

    @mcp.resource("optui://report", name="report", mime_type="text/markdown")
    def report() -> str:
        """The findings report (Markdown, as `optui journal export --format md`)."""
        return here().report()

    @mcp.resource("optui://servers/{server}/flags", name="flag-catalogue", mime_type="application/json")
    async def flag_catalogue(server: str) -> str:
        """The server's flag catalogue, learned from its --help (names, types, choices, defaults, help)."""
        try:
            return json.dumps(await here().flag_catalog(server))
        except AgentError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    @mcp.resource("optui://servers/{server}/log", name="server-log", mime_type="text/plain")
    async def server_log(server: str) -> str:
        """The server's last log lines (up to 200) this optui read."""
        await first_look()  # the log follower starts once the server is attached
        try:
            return "\n".join(here().log_lines(server))
        except AgentError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    return mcp
