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
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from optui import __version__
from optui.agent.cockpit import (
    DEFAULT_DECISION_WAIT_S,
    MAX_DECISION_WAIT_S,
    MAX_ID,
    MAX_NAME,
    MAX_TEXT,
    MAX_WHY,
    AgentError,
    Cockpit,
    agent_actor,
)

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


#: tool calls one client may have in flight at once; more are refused at once (1,000 pipelined
#: calls took the process to 3.2 GB and left a ping waiting 136 s)
MAX_IN_FLIGHT = 8

#: the tool annotations (MCP ``ToolAnnotations``): a read changes nothing; a write adds or edits
#: the journal; an action on a server may stop it (destructive)
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
EDIT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ACT = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
#: a benchmark adds load and results, stops nothing
MEASURE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

# the parameters' types: limits and help in the schema the client reads
Server = Annotated[str, Field(max_length=MAX_NAME, description="a server of the config (status lists them)")]
Why = Annotated[str, Field(min_length=1, max_length=MAX_WHY,
                           description=f"why you ask: the operator decides on it (at most {MAX_WHY} characters)")]
WaitS = Annotated[float, Field(ge=1, le=MAX_DECISION_WAIT_S,
                               description="seconds to wait for the operator's decision")]
SetFlags = Annotated[dict[str, str | None] | None, Field(
    max_length=64, description='flags to set, name to value ({"--max-running-requests": "64"}); null for a boolean '
    "flag. Full names only: an abbreviation is refused with the full name")]
UnsetFlags = Annotated[list[Annotated[str, Field(max_length=MAX_NAME)]] | None,
                       Field(max_length=64, description="flags to remove from the running launch")]
Repeat = Annotated[int | None, Field(ge=1, le=50, description="runs per point (default: the config's; verdicts "
                                                              "need >= 3)")]
Points = Annotated[list[float] | None, Field(max_length=64, description=(
    "a subset of the preset's concurrency (or request-rate) points to run, e.g. [1, 2]; benchmarks lists them"))]
Detail = Annotated[bool, Field(description="the full results and evidence (default: one row per workload)")]
TodoId = Annotated[int, Field(ge=1, le=MAX_ID, description="the item's id (todo_list shows them)")]
Text = Annotated[str, Field(max_length=MAX_TEXT, description=f"at most {MAX_TEXT} characters")]
Priority = Literal["high", "medium", "low"]
TodoStatusName = Literal["pending", "in_progress", "completed", "cancelled"]
SortKey = Literal["id", "server", "ready", "throughput", "delta", "ttft", "ttft_delta", "verdict", "outcome", "change"]


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


def _tool_error(text: str) -> dict[str, Any]:
    """A ``tools/call`` result the client reads as a tool error (``isError``)."""
    return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}


def _call_guard(mcp: MCPServer, limit: int = MAX_IN_FLIGHT):
    """Middleware on every ``tools/call``: an argument the tool does not take is refused
    with the ones it does (the SDK would drop it silently), and past ``limit`` calls in
    flight more are refused at once (the client waits for an answer first)."""
    in_flight = 0
    params_of: dict[str, set[str]] = {}

    async def guard(ctx, call_next):
        nonlocal in_flight
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        if not params_of:
            params_of.update({t.name: set((t.input_schema or {}).get("properties", {})) for t in await mcp.list_tools()})
        name = str((ctx.params or {}).get("name") or "")
        args = (ctx.params or {}).get("arguments") or {}
        known = params_of.get(name)
        if known is not None and isinstance(args, dict) and (unknown := sorted(set(args) - known)):
            return _tool_error(f"{name}: unknown argument{'s' if len(unknown) > 1 else ''} "
                               f"{', '.join(map(repr, unknown))} (it takes: {', '.join(sorted(known)) or 'none'})")
        if in_flight >= limit:
            return _tool_error(f"{name}: refused, {in_flight} calls of this client are in flight ({limit} at most): "
                               "wait for an answer before sending more")
        in_flight += 1
        try:
            result = await call_next(ctx)
        finally:
            in_flight -= 1
        return _plain_errors(result)

    return guard


_VALIDATION_HEAD = re.compile(r"^Error executing tool (\S+): \d+ validation errors? for \S+$")
_VALIDATION_LINE = re.compile(r"^\s+(.*?)(?: \[type=[^,\]]*(?:, input_value=(.*?))?(?:, input_type=\w+)?\])?$")


def plain_validation_error(text: str) -> str:
    """The SDK's pydantic error on a tool's arguments (``Error executing tool X: 1
    validation error for XArguments`` / field / message ``[type=..., input_value=...]`` /
    a link) as one line an agent reads: ``X: field: message, got VALUE``; other text as it
    is. The limit a value broke is in the message (``less than or equal to 500``)."""
    lines = text.splitlines()
    head = _VALIDATION_HEAD.match(lines[0]) if lines else None
    if head is None:
        return text
    problems: list[str] = []
    field: str | None = None
    for line in lines[1:]:
        if not line.startswith(" "):
            field = line.strip()
        elif line.strip().startswith("For further information"):
            continue
        elif (m := _VALIDATION_LINE.match(line)) is not None:
            got = m.group(2)
            got = got if got is None or len(got) <= 60 else got[:57] + "..."
            problems.append(f"{field}: {m.group(1)}" + (f", got {got}" if got is not None else ""))
    return f"{head.group(1)}: " + "; ".join(problems) if problems else text


def _plain_errors(result):
    """A ``tools/call`` result (the wire dict) with a pydantic argument error made one line
    (:func:`plain_validation_error`); any other result as it is."""
    if not isinstance(result, dict) or not result.get("isError"):
        return result
    content = result.get("content") or []
    if not content or not isinstance(content[0], dict) or not isinstance(content[0].get("text"), str):
        return result
    plain = plain_validation_error(content[0]["text"])
    return result if plain == content[0]["text"] else {**result, "content": [{**content[0], "text": plain}, *content[1:]]}


#: the tools that change the journal or a server (not served by a ``--read-only`` optui mcp,
#: which lists only the tools annotated :data:`READ`)
WRITE_TOOLS = ("todo_add", "todo_set", "note", "verdict", "restart_server", "run_experiment", "run_benchmark",
               "stop_server", "search_run", "search_stop")


def build_server(loaded: LoadedConfig, *, read_only: bool = False) -> MCPServer:
    """The MCP server on ``loaded``'s campaign; ``read_only`` (or the config's) lists and
    runs only the read tools (all but :data:`WRITE_TOOLS`). Run it with ``run_stdio_async()``."""

    cockpit: Cockpit | None = None
    started = 0.0
    read_only = read_only or loaded.config.read_only

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[None]:
        nonlocal cockpit, started
        from optui.session import Session

        session = Session(loaded, actor="agent", read_only=True, autostart=False, observer=True)
        await session.start()
        started = time.monotonic()
        cockpit = Cockpit(loaded, session, read_only=read_only)
        cockpit.withdraw_orphans()
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
    mcp = MCPServer("optui", instructions=INSTRUCTIONS, lifespan=lifespan, log_level="WARNING", version=__version__)
    mcp.middleware.append(_call_guard(mcp))

    @mcp.tool(annotations=READ)
    async def status(detail: Detail = False) -> dict[str, Any]:
        """The campaign now, in brief: each host in a line (GPUs, used/free MiB, the busiest GPU), servers (state,
        phase, argv, load: running/waiting requests, KV cache %, gen tok/s; crash class, config_mismatch, current
        experiment), the running benchmark, open todo items, the 3 newest experiments with their overall verdict and
        row count; detail=true: as `optui status --json` (every GPU, every workload row)."""
        await first_look()
        return here().status(detail=detail)

    @mcp.tool(annotations=READ)
    async def gpus(host: Annotated[str | None, Field(max_length=MAX_NAME, description="one host (default: all)")] = None
                   ) -> list[dict[str, Any]]:
        """GPU readings per host (memory MiB, util %, power W, temperature °C; null = not available), all hosts
        or the one named."""
        await first_look()
        with _as_tool_error():
            return here().gpus(host)

    @mcp.tool(annotations=READ)
    def journal_tail(
            limit: Annotated[int, Field(ge=1, le=500, description="events to return, newest last")] = 20,
            types: Annotated[list[Annotated[str, Field(max_length=MAX_NAME)]] | None, Field(
                max_length=64, description="event types (server.ready, note...) or groups (server, flags, failures, "
                "bench, todo, notes, experiments, agent: requests, decisions and outcomes of agents' actions)")] = None,
            server: Annotated[str | None, Field(max_length=MAX_NAME, description="the event's target")] = None,
            experiment: Annotated[str | None, Field(max_length=MAX_NAME, description="exp-0007")] = None,
            grep: Annotated[str | None, Field(max_length=MAX_NAME, description="text in the event")] = None,
            since: Annotated[str | None, Field(max_length=MAX_NAME, description="90m, 2h, 1d or an ISO time")] = None,
    ) -> list[dict[str, Any]]:
        """The newest journal events matching every filter given, oldest first (as `optui journal tail --json`)."""
        with _as_tool_error():
            return here().journal_tail(limit=limit, types=types, server=server, experiment=experiment, grep=grep,
                                       since=since)

    @mcp.tool(annotations=READ)
    def journal_event(seq: Annotated[int, Field(ge=1, le=MAX_ID, description="the event's number")]) -> dict[str, Any]:
        """One journal event by its number (as `optui journal show SEQ --json`): flag diff, phases, crash class
        and log lines, bench metrics."""
        with _as_tool_error():
            return here().journal_event(seq)

    @mcp.tool(annotations=READ)
    def experiments(server: Annotated[str | None, Field(max_length=MAX_NAME, description="one server's")] = None,
                    sort: Annotated[SortKey, Field(description="the order of the rows")] = "id",
                    detail: Detail = False) -> list[dict[str, Any]]:
        """One row per experiment: outcome, change vs baseline, one row per workload (concurrency, out tok/s,
        delta %, TTFT and ITL p50/p99 delta %, n, p, verdict) and the overall verdict (better, worse, mixed,
        same, untested); detail=true: as `optui journal experiments --json` (every metric, the evidence)."""
        with _as_tool_error():
            return here().experiments(server=server, sort=sort, detail=detail)

    @mcp.tool(annotations=READ)
    def benchmarks() -> list[dict[str, Any]]:
        """Every benchmark preset: its server, tool (builtin loadgen or the argv's client), points (concurrency or
        request rate: run_benchmark and run_experiment take a subset of them), input/output lengths, prompts per
        point and repeat."""
        return here().benchmarks()

    @mcp.tool(annotations=READ)
    def todo_list(open_only: Annotated[bool, Field(description="only items not done")] = False) -> list[dict[str, Any]]:
        """The campaign's todo items in display order (as `optui todo list --json`)."""
        return here().todo_list(open_only=open_only)

    @mcp.tool(annotations=ADD)
    def todo_add(ctx: Context, content: Text | None = None,
                 priority: Annotated[Priority, Field(description="the item's priority")] = "medium",
                 server: Annotated[str | None, Field(max_length=MAX_NAME, description="the server its experiment "
                                                                                        "restarts")] = None,
                 set_flags: SetFlags = None, unset_flags: UnsetFlags = None,
                 benchmarks: Annotated[list[Annotated[str, Field(max_length=MAX_NAME)]] | None,
                                       Field(max_length=16, description="presets its experiment runs")] = None,
                 text: Annotated[str | None, Field(max_length=MAX_TEXT,
                                                   description="deprecated: the old name of content")] = None,
                 status: Annotated[TodoStatusName, Field(description="its status")] = "pending",
                 activeForm: Annotated[str | None, Field(  # noqa: N803 (the name agents' own lists use)
                     max_length=MAX_NAME, description="what is being done, while in progress")] = None,
                 blockedBy: Annotated[list[Annotated[int, Field(ge=1, le=MAX_ID)]] | None, Field(  # noqa: N803
                     max_length=64, description="ids of the items this one waits for")] = None,
                 blocks: Annotated[list[Annotated[int, Field(ge=1, le=MAX_ID)]] | None, Field(
                     max_length=64, description="ids of the items that wait for this one")] = None,
                 ) -> dict[str, Any]:
        """Add a todo item in the shape agents keep their own lists (content, status, priority, activeForm,
        blockedBy/blocks: keep your plan here when your own todo tools are off); with
        server/set_flags/unset_flags/benchmarks it carries an experiment the operator can run."""
        with _as_tool_error():
            if content is not None and text is not None:
                raise AgentError("give content only (text is its deprecated old name)")
            body = content if content is not None else text
            if body is None:
                raise AgentError("content is required: the item's text")
            return here().todo_add(body, actor=_client_actor(ctx), priority=priority, server=server, sets=set_flags,
                                   unsets=unset_flags, benches=benchmarks, status=status, active_form=activeForm,
                                   blocked_by=blockedBy, blocks=blocks)

    @mcp.tool(annotations=EDIT)
    def todo_set(todo_id: TodoId, ctx: Context,
                 status: Annotated[TodoStatusName | None, Field(description="the new status")] = None,
                 priority: Annotated[Priority | None, Field(description="the new priority")] = None,
                 content: Text | None = None,
                 note: Annotated[str | None, Field(max_length=MAX_TEXT, description="a note (empty removes it)")] = None,
                 activeForm: Annotated[str | None, Field(  # noqa: N803 (the name agents' own lists use)
                     max_length=MAX_NAME, description="what is being done, while in progress (empty removes it)")
                 ] = None,
                 blockedBy: Annotated[list[Annotated[int, Field(ge=1, le=MAX_ID)]] | None, Field(  # noqa: N803
                     max_length=64, description="ids of the items this one waits for: the whole list ([] clears "
                                                "it)")] = None,
                 blocks: Annotated[list[Annotated[int, Field(ge=1, le=MAX_ID)]] | None, Field(
                     max_length=64, description="ids of the items that wait for this one: the whole list (an item "
                                                "left out stops waiting for it)")] = None,
                 ) -> dict[str, Any]:
        """Change a todo item's status, priority, content, note, activeForm or blockedBy/blocks (as todo_add takes
        them). The operator's items: only their status (not to cancelled) and note (ask the operator in a note to
        cancel or rewrite one)."""
        with _as_tool_error():
            return here().todo_set(todo_id, actor=_client_actor(ctx), status=status, priority=priority,
                                   content=content, note=note, active_form=activeForm, blocked_by=blockedBy,
                                   blocks=blocks)

    @mcp.tool(annotations=ADD)
    def note(text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT, description="the note")], ctx: Context,
             server: Annotated[str | None, Field(max_length=MAX_NAME, description="the server it is about")] = None,
             ) -> dict[str, Any]:
        """A note in the journal, linked to the server's current experiment (else the newest experiment)."""
        with _as_tool_error():
            return here().note(text, actor=_client_actor(ctx), server=server)

    @mcp.tool(annotations=ADD)
    def verdict(experiment: Annotated[str, Field(max_length=MAX_NAME, description="exp-0007")],
                decision: Annotated[Literal["keep", "reject", "inconclusive"], Field(description="your decision")],
                ctx: Context,
                reason: Annotated[str, Field(max_length=MAX_WHY, description="why (shown in the report)")] = "",
                ) -> dict[str, Any]:
        """Record your decision on an experiment: keep, reject or inconclusive, with the reason (shown in the
        report beside the measured verdict). The baseline is the operator's: not yours to reject."""
        with _as_tool_error():
            return here().verdict(experiment, decision, actor=_client_actor(ctx), reason=reason)

    @mcp.tool(annotations=ACT)
    async def restart_server(server: Server, why: Why, ctx: Context, set_flags: SetFlags = None,
                             unset_flags: UnsetFlags = None,
                             rollback: Annotated[bool, Field(description="back to the server's last good flags "
                                                                         "(no set_flags/unset_flags)")] = False,
                             wait_s: WaitS = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask the operator to restart a server with changed flags (or rollback=true: its last good flags); waits
        up to wait_s for the decision in optui, then runs the same checks as optui's own restart. Returns outcome
        (ran; failed: the server crashed, with crash_class and log lines; denied, timeout, refused), the request,
        the flag diff, catalogue warnings (shown to the operator too), the restart (state, config_mismatch)."""
        with _as_tool_error():
            return await here().restart(server, actor=_client_actor(ctx), why=why, sets=set_flags,
                                        unsets=unset_flags, rollback=rollback, wait_s=wait_s)

    @mcp.tool(annotations=ACT)
    async def run_experiment(benchmark: Annotated[str, Field(max_length=MAX_NAME, description="a preset "
                                                                                            "(benchmarks lists them)")],
                             why: Why, ctx: Context, set_flags: SetFlags = None, unset_flags: UnsetFlags = None,
                             repeat: Repeat = None, points: Points = None,
                             server: Annotated[str | None, Field(max_length=MAX_NAME,
                                                                 description="the preset's server")] = None,
                             detail: Detail = False, wait_s: WaitS = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """One experiment in one call: restart the benchmark's server with its running flags changed, then run the
        benchmark (its points, or the subset given) `repeat` times and compare with the baseline. One request the
        operator approves in optui (the policy may allow it: flags inside allowed_flags and
        benchmarks_without_approval). Returns outcome (ran, failed, denied, timeout, refused), the request, the
        flag diff, experiment, run, restart, unverified flags and summary: one row per workload (concurrency,
        out tok/s, delta %, TTFT/ITL delta %, n, p, verdict) and the overall verdict; detail=true adds every
        result."""
        with _as_tool_error():
            return await here().run_experiment(benchmark, actor=_client_actor(ctx), why=why, server=server,
                                               sets=set_flags, unsets=unset_flags, repeat=repeat, points=points,
                                               detail=detail, wait_s=wait_s)

    @mcp.tool(annotations=MEASURE)
    async def run_benchmark(benchmark: Annotated[str, Field(max_length=MAX_NAME, description="a preset "
                                                                                           "(benchmarks lists them)")],
                            why: Why, ctx: Context, repeat: Repeat = None, points: Points = None,
                            detail: Detail = False, wait_s: WaitS = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask to run a configured benchmark against its server (which must be ready), each of its points (or the
        subset given) `repeat` times. A request the operator approves in optui, unless the config allows
        benchmarks without approval. Results are stored under the server's current experiment; the answer has one
        row per workload vs the baseline (n, p, verdict) and the overall verdict; detail=true every result. One
        run alone is 'untested', never better or worse."""
        with _as_tool_error():
            return await here().run_benchmark(benchmark, actor=_client_actor(ctx), why=why, repeat=repeat,
                                              points=points, detail=detail, wait_s=wait_s)

    @mcp.tool(annotations=ACT)
    async def stop_server(server: Server, why: Why, ctx: Context, wait_s: WaitS = DEFAULT_DECISION_WAIT_S
                          ) -> dict[str, Any]:
        """Ask the operator to stop a server; returns the outcome and the server's state."""
        with _as_tool_error():
            return await here().stop(server, actor=_client_actor(ctx), why=why, wait_s=wait_s)

    @mcp.tool(annotations=READ)
    async def search_status(name: Annotated[str | None, Field(max_length=MAX_NAME, description="a search's name "
                                                                                               "(default: the newest)")] = None,
                            detail: Detail = False) -> dict[str, Any]:
        """The newest flag search (of name), whichever process runs it: status (running, done, stopped, failed,
        interrupted), planned trials, eta_s, trials (flags, score, status, crash_class, experiment), best, message;
        detail=true: as `optui search status --json` (the spec, the winner's evidence)."""
        with _as_tool_error():
            return await here().search_status(name, detail=detail)

    @mcp.tool(annotations=ACT)
    async def search_run(spec: Annotated[str, Field(max_length=MAX_NAME, description=(
            "a [search.NAME] of optui.toml, or a spec file inside the campaign's directory"))],
                         why: Why, ctx: Context,
                         fresh: Annotated[bool, Field(description="not resuming a stopped one")] = False,
                         server: Annotated[str | None, Field(max_length=MAX_NAME,
                                                             description="for another tool's file")] = None,
                         bench: Annotated[str | None, Field(max_length=MAX_NAME,
                                                            description="for another tool's file")] = None,
                         wait_s: WaitS = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask to run a flag search (every trial restarts the server and benchmarks it): a request the operator
        approves in optui, holding the server while it runs. Returns once decided: outcome (started, denied,
        timeout, refused), the request, the diff, progress. Follow it with search_status, end it with
        search_stop."""
        with _as_tool_error():
            return await here().search_run(spec, actor=_client_actor(ctx), why=why, fresh=fresh, server=server,
                                           bench=bench, wait_s=wait_s)

    @mcp.tool(annotations=ACT)
    async def search_stop(why: Why, ctx: Context,
                          name: Annotated[str | None, Field(max_length=MAX_NAME, description="the search's name")] = None,
                          wait_s: WaitS = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask the operator to stop the running flag search (any process's); once approved it waits for its end.
        Returns outcome, the request, search (its search_status) and the server's state."""
        with _as_tool_error():
            return await here().search_stop(actor=_client_actor(ctx), why=why, name=name, wait_s=wait_s)

    @mcp.resource("optui://report", name="report", mime_type="text/markdown")
    def report() -> str:
        """The findings report (Markdown, as `optui journal export --format md`)."""
        return here().report()

    @mcp.resource("optui://plan", name="plan", mime_type="text/markdown")
    def plan() -> str:
        """The campaign's plan: its open todo items with their ids, priority, in-progress wording and blockers
        (read it at your start; keep it with todo_add/todo_set)."""
        return here().plan()

    @mcp.resource("optui://servers/{server}/flags", name="flag-catalogue", mime_type="application/json")
    async def flag_catalogue(server: str) -> str:
        """The server's flag catalogue, learned from its --help (names, types, choices, defaults, help)."""
        try:
            return json.dumps(await here().flag_catalog(server))
        except AgentError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    @mcp.resource("optui://servers/{server}/log{?lines,hide_probes}", name="server-log", mime_type="text/plain")
    async def server_log(server: str, lines: str = "200", hide_probes: str = "true") -> str:
        """The server's last log lines this optui read: lines (1..2000, default 200); hide_probes (default true)
        leaves out the requests of health and metrics monitors (optui's own polling among them)."""
        await first_look()  # the log follower starts once the server is attached
        try:
            return "\n".join(here().log_lines(server, _int_param("lines", lines),
                                              hide_probes=_bool_param("hide_probes", hide_probes)))
        except AgentError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    if read_only:  # it lists only what it allows
        for tool in WRITE_TOOLS:
            mcp.remove_tool(tool)
    return mcp


def _int_param(name: str, text: str) -> int:
    """A resource's query parameter as a whole number; AgentError naming it."""
    try:
        return int(text)
    except ValueError:
        raise AgentError(f"{name} must be a whole number, got {text!r}") from None


def _bool_param(name: str, text: str) -> bool:
    """A resource's query parameter as true/false (1/0, yes/no); AgentError naming it."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise AgentError(f"{name} must be true or false, got {text!r}")
