"""``optui mcp`` driven by the official SDK's own stdio client (a real subprocess, real
SQLite, the demo server): the read tools answer in the CLI's ``--json`` shapes, the
resources, bad arguments as tool errors that say what is wrong, todo items and notes
journaled as ``agent:<clientInfo.name>``, ``--read-only`` refusing writes."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from optui.adapters.journal import Journal
from tests.helpers.demo import subprocess_env
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
async def agent(cfg: Path, *options: str, name: str = "claude-code") -> AsyncIterator[Client]:
    """The SDK's stdio client connected to ``python -m optui -c CFG [OPTIONS] mcp``, as
    client ``name``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "optui", "-c", str(cfg), *options, "mcp"],
                                   env=subprocess_env(), cwd=str(cfg.parent))
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
