"""A flag search outlives its agent's MCP session (issue 31), driven by the official SDK's
stdio client against ``optui mcp``: the client disconnects mid-search; the search is
journaled as stopped by the agent's disconnect (it said "stopped by the operator" and left
the server on the trial's flags), resumes in an ``optui search run`` of its own, and ends
with the server on the winner's flags (nothing won: the flags it started from), saying so."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from optui.adapters import proc
from optui.adapters.journal import Journal
from tests.helpers.demo import started_demo_campaign
from tests.process.test_cli_headless import optui, small_demo_config
from tests.process.test_mcp import agent, bench_processes, data, search_config

pytestmark = pytest.mark.timeout(150)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A demo campaign whose server was started by the CLI."""
    with started_demo_campaign(small_demo_config(tmp_path_factory.mktemp("mcp-search-disconnect"))) as cfg:
        yield cfg


def finished(db) -> list:
    j = Journal(db, read_only=True)
    try:
        return j.events(target="search:pair", types=["search.started", "search.finished"])
    finally:
        j.close()


async def test_a_search_outlives_its_agents_disconnect_and_ends_on_a_stated_configuration(campaign):
    from optui.config import load_config

    policy = '\n[agent]\nallowed_flags = ["--max-running-requests"]\nbenchmarks_without_approval = true\n'
    cfg = search_config(campaign, "optui-search-disconnect.toml", policy)
    db = campaign.parent / ".optui" / "optui.db"
    url = load_config(campaign).config.servers["demo"].url
    before = json.loads(optui(cfg, "status", "--json").stdout)
    start_argv = next(s for s in before["servers"] if s["name"] == "demo")["argv"]
    async with agent(cfg, name="codex") as client:
        started = data(await client.call_tool("search_run", {"spec": "pair", "why": "batch sizes", "fresh": True}))
        assert started["outcome"] == "started", started
        sid = started["progress"]["search_id"]
        deadline = time.monotonic() + 60
        while not bench_processes(url):  # the first trial's benchmark runs: then the agent goes away
            assert time.monotonic() < deadline, "no benchmark ran"
            await asyncio.sleep(0.02)
    deadline = time.monotonic() + 120
    while True:  # the search, resumed in a process of its own, ends
        events = [e for e in finished(db) if e.data.get("search_id") == sid]
        ends = [e for e in events if e.type == "search.finished"]
        if len(ends) == 2:
            break
        assert time.monotonic() < deadline, [e.data.get("message") for e in events]
        await asyncio.sleep(0.3)
    first_end, last_end = ends
    starts = [e for e in events if e.type == "search.started"]
    assert [e.data["resumed"] for e in starts] == [False, True]
    pid = starts[1].data["pid"]
    # the disconnect journaled as that, with where the search goes on (never "by the operator")
    assert first_end.data["status"] == "stopped" and first_end.data["running"]["why"] == "handed_over"
    assert (f"stopped: stopped by agent:codex's disconnect (its MCP session closed); it resumes in optui process {pid}"
            in first_end.data["message"]), first_end.data["message"]
    assert all("the operator" not in e.data["message"] for e in ends)
    j = Journal(db, read_only=True)
    try:  # journaled at once too (a client kills optui mcp seconds after closing its stdin)
        (stop,) = [e for e in j.events(types=["search.stop"]) if e.data.get("search_id") == sid]
    finally:
        j.close()
    assert stop.actor == "agent:codex" and stop.data["disconnect"] is True and stop.data["resumed_by"] == pid
    assert stop.data["message"] == f"stop search {sid}: agent:codex's disconnect (its MCP session closed); it resumes in optui process {pid}"
    assert starts[1].actor == "agent:codex"  # the resumed search is still the agent's
    # the resumed search ends done, its trials kept, the server on the stated configuration
    fin = last_end.data
    assert fin["status"] == "done" and fin["trials"] == 2, fin["message"]
    running = fin["running"]
    assert running["why"] in ("winner", "start") and running["state"] == "ready" and running["error"] is None, running
    status = json.loads(optui(cfg, "status", "--json").stdout)
    demo = next(s for s in status["servers"] if s["name"] == "demo")
    assert demo["state"] == "ready" and demo["argv"] == running["argv"], (demo, running)
    if running["why"] == "start":  # the flags before the search, not those of the trial the agent's process left
        assert running["argv"] == start_argv, (running["argv"], start_argv)
    assert starts[1].data["start_argv"] == start_argv or running["why"] == "winner"
    said = "demo runs the winner's flags (" if running["why"] == "winner" else "nothing won: demo runs the flags it started from ("
    assert said in fin["message"], fin["message"]
    search = json.loads(optui(cfg, "search", "status", "pair", "--json").stdout)
    assert search["status"] == "done" and search["running"] == running
    deadline = time.monotonic() + 30
    while proc.pid_alive(pid):  # nothing of it left running
        assert time.monotonic() < deadline, f"optui search run (pid {pid}) still runs"
        await asyncio.sleep(0.2)
    assert bench_processes(url) == []
