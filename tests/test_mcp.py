"""``optui mcp`` driven by the official SDK's own stdio client (a real subprocess, real
SQLite, the demo server): the read tools answer in the CLI's ``--json`` shapes, the
resources, bad arguments as tool errors that say what is wrong, todo items and notes
journaled as ``agent:<clientInfo.name>``, ``--read-only`` refusing writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from optui.ui.screens.agent_requests import AgentRequestScreen
from tests.helpers.demo import subprocess_env
from tests.helpers.pilot import wait_for
from tests.test_cli_headless import kill_demo_server, optui, small_demo_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A demo campaign whose server was started (and benchmarked once) by the CLI."""
    cfg = small_demo_config(tmp_path_factory.mktemp("mcp-campaign"))
    try:
        started = optui(cfg, "restart", "demo", "--reason", "first start", "--json")
        assert started.returncode == 0, started.stderr + started.stdout
        yield cfg
    finally:
        kill_demo_server(cfg)


@contextlib.asynccontextmanager
async def agent(cfg: Path, *options: str, name: str = "claude-code", env: dict | None = None) -> AsyncIterator[Client]:
    """The SDK's stdio client connected to ``python -m optui -c CFG [OPTIONS] mcp``, as
    client ``name`` (``env``: more environment for optui and the servers it starts)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "optui", "-c", str(cfg), *options, "mcp"],
                                   env=subprocess_env(env), cwd=str(cfg.parent))
    async with Client(params, client_info=types.Implementation(name=name, version="1.0"),
                      read_timeout_seconds=60) as client:
        yield client


def data(result: types.CallToolResult):
    """A tool's structured answer (a list answer comes wrapped as {"result": [...]})."""
    assert not result.is_error, result.content
    out = result.structured_content
    return out["result"] if set(out) == {"result"} else out


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_read_tools_answer_in_the_cli_shapes(campaign):
    cli_status = json.loads(optui(campaign, "status", "--json").stdout)
    cli_experiments = json.loads(optui(campaign, "journal", "experiments", "--json").stdout)
    cli_tail = [json.loads(line) for line in optui(campaign, "journal", "tail", "-n", "5", "--json").stdout.splitlines()]
    async with agent(campaign) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"status", "gpus", "journal_tail", "journal_event", "experiments", "todo_list", "todo_add",
                "todo_set", "note"} <= tools
        status = data(await client.call_tool("status", {}))
        assert status.keys() == cli_status.keys()
        server = status["servers"][0]
        assert server.keys() == cli_status["servers"][0].keys()
        assert server["name"] == "demo" and server["state"] == "ready" and server["phase"] == "ready"
        assert server["flags"] == cli_status["servers"][0]["flags"]
        assert server["experiment"] == cli_status["servers"][0]["experiment"] is not None
        assert [h["host"] for h in status["hosts"]] == ["gpu-node-1", "gpu-node-2"]
        gpus = data(await client.call_tool("gpus", {"host": "gpu-node-1"}))
        assert len(gpus) == 1 and gpus[0]["gpus"] and gpus[0]["gpus"][0].keys() == cli_status["hosts"][0]["gpus"][0].keys()
        assert data(await client.call_tool("experiments", {})) == cli_experiments
        tail = data(await client.call_tool("journal_tail", {"limit": 5}))
        assert tail == cli_tail
        ready = data(await client.call_tool("journal_tail", {"types": ["server.ready"], "server": "demo", "limit": 1}))
        assert [e["type"] for e in ready] == ["server.ready"]
        event = data(await client.call_tool("journal_event", {"seq": ready[0]["seq"]}))
        assert event["seq"] == ready[0]["seq"] and event["data"]["argv"] == server["argv"]


async def test_resources_report_flags_and_log(campaign):
    async with agent(campaign) as client:
        report = (await client.read_resource("optui://report")).contents[0]
        assert report.mime_type == "text/markdown" and report.text.startswith("#")
        flags = json.loads((await client.read_resource("optui://servers/demo/flags")).contents[0].text)
        assert "--max-running-requests" in json.dumps(flags)
        log = (await client.read_resource("optui://servers/demo/log")).contents[0].text
        assert log.strip(), "the log follower read the running server's log"
        with pytest.raises(MCPError, match="unknown server 'nope' \\(known: demo\\)"):
            await client.read_resource("optui://servers/nope/log")


async def test_bad_arguments_are_tool_errors_that_say_what_is_wrong(campaign):
    async with agent(campaign) as client:
        assert "unknown server 'nope' (known: demo)" in error_text(await client.call_tool("experiments", {"server": "nope"}))
        assert "unknown host 'x'" in error_text(await client.call_tool("gpus", {"host": "x"}))
        assert "limit must be between 1 and 500, got 0" in error_text(await client.call_tool("journal_tail", {"limit": 0}))
        assert "unknown event type or group 'bogus'" in error_text(await client.call_tool("journal_tail", {"types": ["bogus"]}))
        assert "since:" in error_text(await client.call_tool("journal_tail", {"since": "yesterday-ish"}))
        assert "no event #999999" in error_text(await client.call_tool("journal_event", {"seq": 999999}))
        assert "unknown sort 'fast'" in error_text(await client.call_tool("experiments", {"sort": "fast"}))
        wrong_type = error_text(await client.call_tool("journal_event", {"seq": "first"}))
        assert "seq" in wrong_type and "Traceback" not in wrong_type
        assert "priority must be one of high, medium, low, got 'urgent'" in error_text(
            await client.call_tool("todo_add", {"text": "x", "priority": "urgent"}))
        assert "no todo item #424242" in error_text(await client.call_tool("todo_set", {"todo_id": 424242, "status": "completed"}))
        assert "experiment:" in error_text(await client.call_tool("todo_add", {"text": "x", "benchmarks": ["nope"]}))


async def test_todo_items_and_notes_are_journaled_as_the_agent(campaign):
    async with agent(campaign, name="opencode") as client:
        item = data(await client.call_tool("todo_add", {
            "text": "try 16 running requests", "priority": "high", "server": "demo",
            "set_flags": {"--max-running-requests": "16"}}))
        assert item["priority"] == "high" and item["experiment"]["server"] == "demo"
        done = data(await client.call_tool("todo_set", {"todo_id": item["id"], "status": "in_progress"}))
        assert done["status"] == "in_progress"
        listed = data(await client.call_tool("todo_list", {"open_only": True}))
        assert item["id"] in [t["id"] for t in listed]
        note = data(await client.call_tool("note", {"text": "16 looks promising", "server": "demo"}))
        assert note["type"] == "note" and note["actor"] == "agent:opencode"
        exp = data(await client.call_tool("experiments", {}))[-1]["id"]
        decided = data(await client.call_tool("verdict", {"experiment": exp, "decision": "keep", "reason": "fits"}))
        assert (decided["type"], decided["experiment"], decided["actor"]) == ("verdict", exp, "agent:opencode")
        assert "decision must be one of keep, reject, inconclusive" in error_text(
            await client.call_tool("verdict", {"experiment": exp, "decision": "ship"}))
        assert "unknown experiment 'exp-9999'" in error_text(
            await client.call_tool("verdict", {"experiment": "exp-9999", "decision": "keep"}))
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        changes = j.events(target=f"todo:{item['id']}", types=["todo.changed"])
        assert [(e.data["op"], e.actor) for e in changes] == [("add", "agent:opencode"), ("status", "agent:opencode")]
    finally:
        j.close()
    cli_list = json.loads(optui(campaign, "todo", "list", "--json").stdout)
    assert any(t["id"] == item["id"] and t["status"] == "in_progress" for t in cli_list)


async def test_read_only_refuses_writes_and_still_reads(campaign):
    async with agent(campaign, "--read-only") as client:
        assert "read-only mode" in error_text(await client.call_tool("todo_add", {"text": "x"}))
        assert "read-only mode" in error_text(await client.call_tool("note", {"text": "x"}))
        assert data(await client.call_tool("todo_list", {})) is not None


# --- guarded actions: a request the operator decides in the TUI -------------------------------

def argv_flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


async def test_restart_request_denied_then_approved_through_the_tui(campaign):
    before = json.loads(optui(campaign, "status", "--json", "--wait", "0.5").stdout)["servers"][0]["argv"]
    app = OptuiApp(Session(load_config(campaign)), title="test")
    async with app.run_test(size=(120, 40)) as pilot, agent(campaign, name="claude-code") as client:
        await wait_for(pilot, lambda: app.client is not None and app.panels_mounted, what="the campaign on screen")
        ask = {"server": "demo", "why": "more requests in flight", "wait_s": 90,
               "set_flags": {"--max-running-requests": "6"}}
        call = asyncio.create_task(client.call_tool("restart_server", ask))
        await wait_for(pilot, lambda: isinstance(app.screen, AgentRequestScreen)
                       and bool(app.screen.query("#agent-request-body")), what=lambda: app.screen)  # pushed, then composed
        body = str(app.screen.query_one("#agent-request-body").render())
        assert "restart demo" in body and "--max-running-requests" in body and "more requests in flight" in body
        assert "agent:claude-code asks" in str(app.screen.query_one("#agent-request-title").render())
        await pilot.press("d")
        denied = data(await call)
        assert denied["outcome"] == "denied" and denied["request"]["by"] == "tui" and "restart" not in denied
        assert any("--max-running-requests" in line for line in denied["diff"])

        call = asyncio.create_task(client.call_tool("restart_server", ask))
        await wait_for(pilot, lambda: isinstance(app.screen, AgentRequestScreen), what=lambda: app.screen)
        await pilot.press("a")
        ran = data(await call)
    assert ran["outcome"] == "ran" and ran["request"]["decision"] == "approved"
    restart = ran["restart"]
    assert restart["state"] == "ready" and restart["crash_class"] is None and restart["config_mismatch"] == []
    assert argv_flag(restart["argv"], "--max-running-requests") == "6" != argv_flag(before, "--max-running-requests")
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        requests = j.events(types=["agent.request"])[-2:]
        assert [e.actor for e in requests] == ["agent:claude-code"] * 2
        assert requests[0].data["why"] == "more requests in flight" and requests[0].data["diff"] == denied["diff"]
        decisions = [(e.data["request"], e.data["decision"], e.actor) for e in j.events(types=["agent.decision"])[-2:]]
        assert decisions == [(requests[0].seq, "denied", "tui"), (requests[1].seq, "approved", "tui")]
        started = j.events(types=["experiment.started"], experiment=restart["experiment"])[0]
        assert started.actor == "agent:claude-code"
    finally:
        j.close()


async def test_restart_request_nobody_answers_times_out(campaign):
    async with agent(campaign, name="codex") as client:
        result = data(await client.call_tool("restart_server", {
            "server": "demo", "why": "try 5", "wait_s": 1, "set_flags": {"--max-running-requests": "5"}}))
    assert result["outcome"] == "timeout" and result["request"] == {**result["request"], "decision": "timeout", "by": "agent:codex"}
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        last = j.events(types=["agent.decision"])[-1]
        assert (last.data, last.actor) == ({"request": result["request"]["request"], "decision": "timeout"}, "agent:codex")
    finally:
        j.close()


async def test_restart_requests_refused_read_only_or_with_a_bad_flag(campaign):
    async with agent(campaign, "--read-only") as client:
        assert "read-only mode" in error_text(await client.call_tool("restart_server", {"server": "demo", "why": "x"}))
    async with agent(campaign) as client:
        assert "unknown server 'nope'" in error_text(await client.call_tool("restart_server", {"server": "nope", "why": "x"}))
        bad = error_text(await client.call_tool("restart_server", {
            "server": "demo", "why": "x", "set_flags": {"--max-running-requestz": "8"}}))
        assert "--max-running-requestz: unknown flag" in bad and "Traceback" not in bad
        bad = error_text(await client.call_tool("restart_server", {
            "server": "demo", "why": "x", "set_flags": {"--kv-cache-dtype": "fp7"}}))
        assert "--kv-cache-dtype: invalid choice: 'fp7'" in bad and "not restarted" in bad
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        assert not [e for e in j.events(types=["agent.request"]) if e.data.get("why") == "x"], "nothing was asked"
    finally:
        j.close()


async def test_the_agent_policy_allows_or_forbids_flags_without_asking(campaign):
    policed = campaign.with_name("optui-policy.toml")  # the same campaign (journal, servers) with an [agent] policy
    policed.write_text(campaign.read_text()
                       + '\n[agent]\nallowed_flags = ["--max-running-requests"]\nforbidden_flags = ["tp-size"]\n'
                       + 'benchmarks_without_approval = true\n')
    async with agent(policed, name="codex") as client:
        ran = data(await client.call_tool("restart_server", {
            "server": "demo", "why": "inside the allowed flags", "set_flags": {"--max-running-requests": "7"}}))
        refused = error_text(await client.call_tool("restart_server", {
            "server": "demo", "why": "bigger TP", "set_flags": {"--tp-size": "4"}}))
        bench = data(await client.call_tool("run_benchmark", {"benchmark": "sweep", "why": "measure 7", "repeat": 1}))
        assert "unknown benchmark 'nope' (known: sweep, loadgen)" in error_text(
            await client.call_tool("run_benchmark", {"benchmark": "nope", "why": "x"}))
    assert bench["outcome"] == "ran" and bench["request"]["policy"] == "[agent] benchmarks_without_approval"
    run = bench["run"]
    assert run["status"] == "ok" and run["experiment"] == ran["restart"]["experiment"]
    assert run["results"][0]["output_throughput_tok_s"] > 0 and "vs_baseline" in run["results"][0]
    assert run["experiment_summary"]["verdict"] in ("untested noise", "untested", "baseline")  # one run: no claim
    assert ran["outcome"] == "ran" and ran["request"]["decision"] == "allowed" and ran["request"]["by"] == "agent:codex"
    assert ran["request"]["policy"] == "[agent] allowed_flags: --max-running-requests"
    assert ran["restart"]["state"] == "ready" and argv_flag(ran["restart"]["argv"], "--max-running-requests") == "7"
    assert "not restarted, [agent] forbidden_flags: --tp-size" in refused
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        decisions = [(e.data["decision"], e.actor, e.data.get("policy")) for e in j.events(types=["agent.decision"])[-3:]]
        assert decisions == [("allowed", "agent:codex", "[agent] allowed_flags: --max-running-requests"),
                             ("refused", "agent:codex", "[agent] forbidden_flags: --tp-size"),
                             ("allowed", "agent:codex", "[agent] benchmarks_without_approval")]
    finally:
        j.close()


async def test_a_stop_request_nobody_answers_leaves_the_server_running(campaign):
    async with agent(campaign) as client:
        result = data(await client.call_tool("stop_server", {"server": "demo", "why": "free the GPUs", "wait_s": 1}))
        assert result["outcome"] == "timeout"
        assert data(await client.call_tool("status", {}))["servers"][0]["state"] == "ready"


async def test_a_flag_the_server_does_not_apply_is_unverified_in_the_answers(tmp_path):
    cfg = small_demo_config(tmp_path)
    # the MCP process's observer session polls the server every 5 s: it reads the new launch's server.ready
    # from the journal before it adopts that launch from the pidfile (the race the status answer lost)
    cfg.write_text(cfg.read_text().replace("poll_interval_s = 1.0", "poll_interval_s = 5.0")
                   + '\n[agent]\nallowed_flags = ["--max-running-requests"]\n')
    ignore = {"OPTUI_DEMO_IGNORE": "--max-running-requests"}  # the demo accepts the flag but runs its default
    line = "--max-running-requests 8: server runs max_running_requests=32 (expected 8)"
    try:
        async with agent(cfg, env=ignore) as client:
            ran = data(await client.call_tool("restart_server", {
                "server": "demo", "why": "8 in flight", "set_flags": {"--max-running-requests": "8"}}))
            assert ran["restart"]["state"] == "ready" and ran["restart"]["config_mismatch"] == [line]
            rows = data(await client.call_tool("experiments", {"server": "demo"}))
            assert next(x for x in rows if x["id"] == ran["restart"]["experiment"])["unverified"] == [line]
            # status is the long-lived session's view: it checks the new process's config itself, a moment later
            deadline = time.monotonic() + 30
            while (found := data(await client.call_tool("status", {}))["servers"][0]["config_mismatch"]) != [line]:
                assert time.monotonic() < deadline, found
                await asyncio.sleep(0.2)
    finally:
        kill_demo_server(cfg)


async def test_a_restart_that_crashes_answers_with_the_crash_class_and_log_lines(campaign):
    """Last in the module: it leaves the demo server crashed (rollback = "offer")."""
    policed = campaign.with_name("optui-oom.toml")
    policed.write_text(campaign.read_text() + '\n[agent]\nallowed_flags = ["--mem-fraction-static"]\n')
    async with agent(policed) as client:
        ran = data(await client.call_tool("restart_server", {
            "server": "demo", "why": "all memory to the KV cache", "set_flags": {"--mem-fraction-static": "0.99"}}))
    restart = ran["restart"]
    assert ran["outcome"] == "ran" and restart["state"] == "crashed" and restart["crash_class"] == "oom"
    assert any("out of memory" in line.lower() for line in restart["lines"]), restart["lines"]
    assert restart["rollback_command"] and restart["rollback_command"].endswith("restart demo --rollback")
