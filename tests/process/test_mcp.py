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
from optui.core.agent.requests import decision_data
from optui.session import Session
from optui.ui.app import OptuiApp
from optui.ui.screens.agent_requests import AgentRequestScreen
from tests.helpers.demo import started_demo_campaign, subprocess_env
from tests.helpers.pilot import wait_for
from tests.process.test_cli_headless import kill_demo_server, optui, small_demo_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A demo campaign whose server was started (and benchmarked once) by the CLI."""
    with started_demo_campaign(small_demo_config(tmp_path_factory.mktemp("mcp-campaign"))) as cfg:
        yield cfg


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
        status = data(await client.call_tool("status", {"detail": True}))
        assert status.keys() == cli_status.keys()
        server = status["servers"][0]
        assert server.keys() == cli_status["servers"][0].keys()
        assert server["name"] == "demo" and server["state"] == "ready" and server["phase"] == "ready"
        assert server["flags"] == cli_status["servers"][0]["flags"]
        assert server["experiment"] == cli_status["servers"][0]["experiment"] is not None
        assert [h["host"] for h in status["hosts"]] == ["gpu-node-1", "gpu-node-2"]
        gpus = data(await client.call_tool("gpus", {"host": "gpu-node-1"}))
        assert len(gpus) == 1 and gpus[0]["gpus"] and gpus[0]["gpus"][0].keys() == cli_status["hosts"][0]["gpus"][0].keys()
        assert data(await client.call_tool("experiments", {"detail": True})) == cli_experiments
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
        assert "journal_tail: limit: Input should be greater than or equal to 1, got 0" == error_text(
            await client.call_tool("journal_tail", {"limit": 0}))
        assert "unknown event type or group 'bogus'" in error_text(await client.call_tool("journal_tail", {"types": ["bogus"]}))
        assert "since:" in error_text(await client.call_tool("journal_tail", {"since": "yesterday-ish"}))
        assert "no event #999999" in error_text(await client.call_tool("journal_event", {"seq": 999999}))
        assert error_text(await client.call_tool("experiments", {"sort": "fast"})).startswith(
            "experiments: sort: Input should be 'id', 'server', ")
        wrong_type = error_text(await client.call_tool("journal_event", {"seq": "first"}))
        assert "seq" in wrong_type and "Traceback" not in wrong_type
        urgent = error_text(await client.call_tool("todo_add", {"content": "x", "priority": "urgent"}))
        assert "priority" in urgent and "'high', 'medium' or 'low'" in urgent and "Traceback" not in urgent
        assert "no todo item #424242" in error_text(await client.call_tool("todo_set", {"todo_id": 424242, "status": "completed"}))
        assert "experiment:" in error_text(await client.call_tool("todo_add", {"content": "x", "benchmarks": ["nope"]}))


async def test_todo_items_and_notes_are_journaled_as_the_agent(campaign):
    async with agent(campaign, name="opencode") as client:
        item = data(await client.call_tool("todo_add", {
            "content": "try 16 running requests", "priority": "high", "server": "demo",
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
        assert "'keep', 'reject' or 'inconclusive'" in error_text(
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
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == {"status", "gpus", "journal_tail", "journal_event", "experiments", "todo_list",
                          "search_status", "benchmarks"}, "a read-only optui mcp lists only what it allows"
        assert "todo_add" in error_text(await client.call_tool("todo_add", {"content": "x"}))
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
        # the journal panel's rows say who asked, who decided and how it ended, with the agent's name
        seq, exp = ran["request"]["request"], ran["restart"]["experiment"]
        journal_rows = lambda: app.query_one("#journal").render().plain  # noqa: E731
        await wait_for(pilot, lambda: f"agent.outcome   demo [agent:claude-code] {exp} agent:claude-code's request #{seq} "
                                      "(restart) ran: ready" in journal_rows(), what=journal_rows)
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
    lines = optui(campaign, "journal", "tail", "--type", "agent", "-n", "5").stdout.splitlines()
    change = "~ --max-running-requests: " + f"{argv_flag(before, '--max-running-requests')} → 6"
    assert [line.split(maxsplit=6)[-1] for line in lines] == [
        f"agent:claude-code asks to restart: {change} — why: more requests in flight",
        f"tui denied agent:claude-code's request #{requests[0].seq} to restart: {change}",
        f"agent:claude-code asks to restart: {change} — why: more requests in flight",
        f"tui approved agent:claude-code's request #{requests[1].seq} to restart: {change}",
        f"agent:claude-code's request #{requests[1].seq} (restart) ran: ready, {restart['experiment']}"]


async def test_restart_request_nobody_answers_times_out(campaign):
    async with agent(campaign, name="codex") as client:
        result = data(await client.call_tool("restart_server", {
            "server": "demo", "why": "try 5", "wait_s": 1, "set_flags": {"--max-running-requests": "5"}}))
    assert result["outcome"] == "timeout" and result["request"] == {**result["request"], "decision": "timeout", "by": "agent:codex"}
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        last = j.events(types=["agent.decision"])[-1]
        assert (last.data["request"], last.data["decision"], last.actor) == (result["request"]["request"], "timeout",
                                                                             "agent:codex")
    finally:
        j.close()


def journal_request(db: Path, pid: int, why: str) -> int:
    """Journal an ``agent.request`` on demo as ``agent:mcp`` asking from process ``pid`` (an
    optui mcp stand-in), waiting 300 s; its seq."""
    j = Journal(db)
    try:
        return j.append("agent.request", "demo", {"action": "restart", "diff": ["~ --max-running-requests: 4 → 9"],
                                                  "argv": [], "why": why, "timeout_s": 300,
                                                  "deadline_ts": time.time() + 300, "pid": pid}, actor="agent:mcp").seq
    finally:
        j.close()


async def test_a_request_decided_elsewhere_closes_its_dialog_and_a_late_key_records_nothing(campaign):
    """Two windows on one campaign: the other window's decision (journaled through the same
    door by another Session's journal, as a second optui process does) closes this window's
    dialog with who decided, a key pressed meanwhile journals nothing; a request whose optui
    mcp ends closes too; q quits while a dialog is up (a modal screen hides the app's keys)."""
    import subprocess

    from optui.session.agent_requests import decide_request

    db = campaign.parent / ".optui" / "optui.db"
    app = OptuiApp(Session(load_config(campaign)), title="test")
    askers = [subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
              for _ in range(2)]
    toasts = lambda: [n.message for n in app._notifications]  # noqa: E731
    shown = lambda seq: lambda: (isinstance(app.screen, AgentRequestScreen) and app.screen.request.seq == seq  # noqa: E731
                                 and bool(app.screen.query("#agent-request-body")))
    try:
        async with app.run_test(size=(60, 40)) as pilot:
            await wait_for(pilot, lambda: app.client is not None and app.panels_mounted, what="the campaign on screen")
            first = journal_request(db, askers[0].pid, "decided elsewhere")
            await wait_for(pilot, shown(first), what=lambda: app.screen)
            other = Journal(db)  # the wide window denies it
            try:
                decide_request(other, first, "denied", actor="tui")
            finally:
                other.close()
            await pilot.press("d")  # this window's answer, before or after its dialog closed: not journaled
            await wait_for(pilot, lambda: not isinstance(app.screen, AgentRequestScreen)
                           and any(f"request #{first}" in t and "denied by tui" in t for t in toasts()), what=toasts)

            withdrawn = journal_request(db, askers[1].pid, "its optui mcp ends")
            await wait_for(pilot, shown(withdrawn), what=lambda: app.screen)
            askers[1].kill()
            askers[1].wait()
            await wait_for(pilot, lambda: not isinstance(app.screen, AgentRequestScreen)
                           and any(f"request #{withdrawn}" in t and "withdrawn" in t for t in toasts()), what=toasts)

            last = journal_request(db, askers[0].pid, "quit while it waits")
            await wait_for(pilot, shown(last), what=lambda: app.screen)
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running, what=lambda: app.screen)
    finally:
        for asker in askers:  # no request of these outlives the test holding demo
            asker.kill()
            asker.wait()
    j = Journal(db, read_only=True)
    try:
        decisions = [(e.data["request"], e.data["decision"]) for e in j.events(types=["agent.decision"], since_seq=first)]
    finally:
        j.close()
    assert decisions == [(first, "denied")]


async def test_restart_requests_refused_read_only_or_with_a_bad_flag(campaign):
    async with agent(campaign, "--read-only") as client:
        assert "restart_server" in error_text(await client.call_tool("restart_server", {"server": "demo", "why": "x"}))
    async with agent(campaign) as client:
        assert "unknown server 'nope'" in error_text(await client.call_tool("restart_server", {"server": "nope", "why": "x"}))
        bad = error_text(await client.call_tool("restart_server", {
            "server": "demo", "why": "x", "set_flags": {"--max-running-requestz": "8"}}))
        assert "--max-running-requestz: unknown flag" in bad and "Traceback" not in bad
        bad = error_text(await client.call_tool("restart_server", {
            "server": "demo", "why": "x", "set_flags": {"--kv-cache-dtype": "fp7"}}))
        assert "--kv-cache-dtype: invalid choice: 'fp7'" in bad and "not restarted" in bad
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:  # nothing was asked: each refusal journaled at once (the request and its refused decision)
        asked = [e.seq for e in j.events(types=["agent.request"]) if e.data.get("why") == "x"]
        refused = {e.data["request"]: e.data for e in j.events(types=["agent.decision"]) if e.data["request"] in asked}
        assert len(asked) == 2 and [refused[seq]["decision"] for seq in asked] == ["refused", "refused"]
        assert "--max-running-requestz: unknown flag" in refused[asked[0]]["policy"]
        assert "invalid choice: 'fp7'" in refused[asked[1]]["policy"]
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
    assert run["results"]["runs"] >= 1 and run["results"]["failed"] == 0
    assert run["summary"]["verdict"] in ("untested", "baseline"), run["summary"]  # one run: no claim
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


async def test_run_experiment_restarts_benchmarks_and_compares_in_one_call(campaign):
    policed = campaign.with_name("optui-experiment.toml")  # the same campaign, the experiment allowed by the policy
    policed.write_text(campaign.read_text() + '\n[agent]\nallowed_flags = ["--max-running-requests"]\n'
                       + 'benchmarks_without_approval = true\n')
    async with agent(policed, name="codex") as client:
        before = data(await client.call_tool("status", {}))["servers"][0]["argv"]
        # a baseline measured before (the campaign's first sweep result, this one when none is older)
        assert data(await client.call_tool("run_benchmark", {"benchmark": "sweep", "why": "baseline", "repeat": 1}))[
            "run"]["status"] == "ok"
        ran = data(await client.call_tool("run_experiment", {
            "benchmark": "sweep", "why": "does 12 in flight help", "set_flags": {"--max-running-requests": "12"},
            "repeat": 3, "detail": True}))
        assert "unknown server 'nope' (known: demo)" in error_text(await client.call_tool(
            "run_experiment", {"benchmark": "sweep", "why": "x", "server": "nope"}))
        rows = data(await client.call_tool("experiments", {"server": "demo", "detail": True}))
        brief = data(await client.call_tool("experiments", {"server": "demo"}))
        item = next(t for t in data(await client.call_tool("todo_list", {})) if t["id"] == ran.get("todo_id"))
    assert ran["outcome"] == "ran" and ran["request"]["decision"] == "allowed", ran
    exp = ran["experiment"]
    assert ran["request"]["policy"] == ("[agent] allowed_flags: --max-running-requests; "
                                        "[agent] benchmarks_without_approval")
    old = argv_flag(before, "--max-running-requests")
    assert ran["diff"] == [f"~ --max-running-requests: {old} → 12"] and ran["repeats"] == 3
    assert ran["run"]["status"] == "ok" and ran["run"]["crash_class"] is None and ran["unverified"] == []
    assert ran["restart"]["state"] == "ready" and argv_flag(ran["restart"]["argv"], "--max-running-requests") == "12"
    assert exp is not None and exp == ran["restart"]["experiment"] != rows[0]["id"]
    assert len(ran["results"]) == 3 and all(r["experiment"] == exp for r in ran["results"])
    assert all(r["output_throughput_tok_s"] > 0 and "vs_baseline" in r and r["baseline_result_id"]
               for r in ran["results"])
    summary = ran["experiment_summary"]
    row = next(x for x in rows if x["id"] == exp)
    assert summary["verdict"] == row["verdict"] and summary["baseline"] == row["baseline"] is not None
    assert summary["evidence"] is not None and summary["runs"] and summary["evidence_text"], summary
    assert item["status"] == "completed" and item["experiment"]["bench"] == ["sweep"]
    # the compact answer: one row per workload and the overall verdict, as the compact experiments list
    assert ran["summary"] == next(b for b in brief if b["id"] == exp)
    assert ran["summary"]["verdict"] in ("better", "worse", "mixed", "same", "untested noise", "untested")
    assert all(w["n"] == 3 and w["verdict"] for w in ran["summary"]["workloads"]), ran["summary"]
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        outcome = j.events(types=["agent.outcome"])[-1]
        assert (outcome.actor, outcome.experiment, outcome.data["outcome"], outcome.data["state"]) == (
            "agent:codex", exp, "ran", "ready")
        assert outcome.summary().startswith(f"agent:codex's request #{ran['request']['request']} (experiment) ran: "
                                            f"ready, {exp}, verdict {ran['summary']['verdict']}")
    finally:
        j.close()


async def test_a_second_agent_is_refused_while_another_agents_request_holds_the_server(campaign):
    db = campaign.parent / ".optui" / "optui.db"
    async with agent(campaign, name="claude-code") as first, agent(campaign, name="opencode") as second:
        ask = {"server": "demo", "why": "try 10", "wait_s": 60, "set_flags": {"--max-running-requests": "10"}}
        call = asyncio.create_task(first.call_tool("restart_server", ask))
        deadline = time.monotonic() + 30
        while not (pending := _agent_requests(db, "agent:claude-code", "try 10")):
            assert time.monotonic() < deadline and not call.done(), call
            await asyncio.sleep(0.05)
        seq = pending[0].seq
        refused = error_text(await second.call_tool("run_benchmark", {"benchmark": "sweep", "why": "measure now"}))
        assert (f"demo: not benchmarked, agent:claude-code's request #{seq} (restart demo: ~ --max-running-requests: "
                in refused and "→ 10) waits for the operator's decision: one guarded action per server" in refused)
        j = Journal(db)
        try:  # the operator denies the first request (as the TUI journals it)
            j.append("agent.decision", "demo", {"request": seq, "decision": "denied"}, actor="tui")
        finally:
            j.close()
        assert data(await call)["outcome"] == "denied"
        again = data(await second.call_tool("stop_server", {"server": "demo", "why": "free the GPUs", "wait_s": 1}))
        assert again["outcome"] == "timeout", "the server is free again: the second agent's request was asked"
    j = Journal(db, read_only=True)
    try:
        mine = [e for e in j.events(types=["agent.request", "agent.decision"]) if e.seq > seq]
        assert [(e.type, e.actor, e.data.get("decision")) for e in mine] == [
            ("agent.request", "agent:opencode", None), ("agent.decision", "agent:opencode", "refused"),
            ("agent.decision", "tui", "denied"),
            ("agent.request", "agent:opencode", None), ("agent.decision", "agent:opencode", "timeout")]
    finally:
        j.close()


def _agent_requests(db: Path, actor: str, why: str) -> list:
    j = Journal(db, read_only=True)
    try:
        return [e for e in j.events(types=["agent.request"]) if e.actor == actor and e.data.get("why") == why]
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


# --- flag searches: search_run / search_status / search_stop ------------------------------------

SEARCH = '''
[benchmarks.tiny]
server = "demo"
repeat = 1
argv = [{py!r}, "-m", "optui.demo.bench_client", "--base-url", "{url}", "--num-prompts", "8",
        "--random-input-len", "32", "--random-output-len", "16", "--max-concurrency", "8"]

[search.pair]
server = "demo"
bench = "tiny"
objective = "max output_tok_s"
confirm_top = 0
[search.pair.flags]
"--max-running-requests" = [2, 8]
'''


def search_config(campaign: Path, name: str, policy: str = "") -> Path:
    """The module's campaign (its journal and demo server) with a 2-trial grid, ``pair``."""
    cfg = campaign.with_name(name)
    url = load_config(campaign).config.servers["demo"].url
    cfg.write_text(campaign.read_text() + SEARCH.format(py=sys.executable, url=url) + policy)
    return cfg


async def decide(db: Path, actor: str, why: str, decision: str, call: asyncio.Task) -> int:
    """Journal the operator's ``decision`` on ``actor``'s request ``why`` once it waits (as
    the TUI's agent-request screen journals it); the request's seq."""
    deadline = time.monotonic() + 30
    while not (pending := [e for e in _agent_requests(db, actor, why)
                           if not _decided(db, e.seq)]):
        assert time.monotonic() < deadline and not call.done(), call
        await asyncio.sleep(0.05)
    j = Journal(db)
    try:
        asked = pending[0]
        j.append("agent.decision", asked.target, decision_data(asked.seq, decision, agent=actor,
                                                               action=asked.data["action"], diff=asked.data["diff"]),
                 actor="tui")
    finally:
        j.close()
    return pending[0].seq


def _decided(db: Path, seq: int) -> bool:
    j = Journal(db, read_only=True)
    try:
        return any(e.data.get("request") == seq for e in j.events(types=["agent.decision"], since_seq=seq))
    finally:
        j.close()


def bench_processes(url: str) -> list[int]:
    """The pids of the demo's benchmark clients against ``url`` running now."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"optui.demo.bench_client" in argv and url.encode() in argv:
                found.append(int(entry.name))
    return found


async def until_search_ends(client: Client, name: str, seen: list[dict]) -> dict:
    """search_status of ``name`` polled until it is no longer running (each answer kept in ``seen``)."""
    deadline = time.monotonic() + 90
    while (now := data(await client.call_tool("search_status", {"name": name, "detail": True})))["status"] == "running":
        seen.append(now)
        assert time.monotonic() < deadline, now
        await asyncio.sleep(0.2)
    return now


async def test_search_run_denied_then_approved_runs_in_the_background_and_status_names_the_winner(campaign):
    cfg = search_config(campaign, "optui-search.toml")
    db = campaign.parent / ".optui" / "optui.db"
    async with agent(cfg, name="claude-code") as client:
        assert {"search_run", "search_status", "search_stop"} <= {t.name for t in (await client.list_tools()).tools}
        assert "nope: neither a [search.NAME]" in error_text(await client.call_tool("search_run", {
            "spec": "nope", "why": "x"}))
        assert "no search pair has run on this campaign" in error_text(await client.call_tool("search_status", {
            "name": "pair"}))
        ask = {"spec": "pair", "why": "which batch size", "wait_s": 60}
        call = asyncio.create_task(client.call_tool("search_run", ask))
        await decide(db, "agent:claude-code", "which batch size", "denied", call)
        denied = data(await call)
        assert denied["outcome"] == "denied" and denied["request"]["by"] == "tui" and "progress" not in denied
        assert denied["diff"] == ["grid search pair of demo with tiny: up to 2 trials, each a restart and a benchmark",
                                  "--max-running-requests: 2, 8", "objective max output_tok_s"]
        assert "no search pair has run" in error_text(await client.call_tool("search_status", {"name": "pair"}))

        call = asyncio.create_task(client.call_tool("search_run", ask))
        seq = await decide(db, "agent:claude-code", "which batch size", "approved", call)
        started = data(await call)  # at once: the search runs on in the background
        assert started["outcome"] == "started" and started["request"]["decision"] == "approved"
        assert (started["progress"]["search_id"], started["progress"]["planned"]) == ("pair.1", 2)
        # while it runs it holds the server as an approved request does: even its own agent's restart is refused
        busy = error_text(await client.call_tool("restart_server", {"server": "demo", "why": "x", "wait_s": 1}))
        assert f"agent:claude-code's request #{seq} (search demo: grid search pair" in busy and "is running" in busy
        again = data(await client.call_tool("search_run", ask))  # refused, journaled: the search holds the server
        assert again["outcome"] == "refused" and again["request"]["decision"] == "refused", again
        assert again["error"].startswith(f"no search run, agent:claude-code's request #{seq} (search demo: grid ")
        seen: list[dict] = []
        end = await until_search_ends(client, "pair", seen)
        state = data(await client.call_tool("status", {}))["servers"][0]["state"]
    assert end["status"] == "done" and end["search_id"] == "pair.1" and end["eta_s"] is None, end
    assert [(t["point"], t["status"]) for t in end["trials"]] == [
        ([["--max-running-requests", "2"]], "ok"), ([["--max-running-requests", "8"]], "ok")]
    assert all(t["score"] > 0 and t["experiment"].startswith("exp-") for t in end["trials"])
    best = end["best"]
    assert best["flags"] in ("--max-running-requests 2", "--max-running-requests 8") and best["vs"], best
    assert best["vs"][0]["role"] == "runner-up" and best["vs"][0]["evidence"]["n"] == 1, best["vs"]
    # the ETA while it ran: once the first trial ended, the trials left times its time
    assert any(s["eta_s"] is not None and s["eta_s"] > 0 and len(s["trials"]) == 1 for s in seen), seen
    assert state == "ready"
    # the same dict as the CLI's
    assert json.loads(optui(cfg, "search", "status", "pair", "--json").stdout) == end
    lines = [line.split(maxsplit=6)[-1] for line in optui(cfg, "journal", "tail", "--type", "agent", "-n", "7")
             .stdout.splitlines()]  # the search's request, its approval, the refused restart and search, its end
    assert lines[5].startswith(f"refused by the policy: agent:claude-code's request #{again['request']['request']} "
                               "to run a flag search"), lines
    assert lines[0].startswith("agent:claude-code asks to run a flag search: grid search pair of demo with tiny: "
                               "up to 2 trials, each a restart and a benchmark; --max-running-requests: 2, 8")
    assert lines[-1].startswith(
        f"agent:claude-code's request #{seq} (search) ran: ready, verdict search pair.1 done: best --max-running-requests ")


async def test_search_stop_mid_search_leaves_the_server_ready_and_no_benchmark(campaign):
    policy = '\n[agent]\nallowed_flags = ["--max-running-requests"]\nbenchmarks_without_approval = true\n'
    cfg = search_config(campaign, "optui-search-allowed.toml", policy)
    db = campaign.parent / ".optui" / "optui.db"
    url = load_config(campaign).config.servers["demo"].url
    async with agent(cfg, name="codex") as client:
        started = data(await client.call_tool("search_run", {"spec": "pair", "why": "batch sizes", "fresh": True}))
        assert started["outcome"] == "started" and started["request"]["decision"] == "allowed", started
        assert started["request"]["policy"] == ("[agent] allowed_flags: --max-running-requests; "
                                                "[agent] benchmarks_without_approval")
        deadline = time.monotonic() + 60
        while not (running := bench_processes(url)):  # the first trial's benchmark runs
            assert time.monotonic() < deadline, "no benchmark ran"
            await asyncio.sleep(0.02)
        call = asyncio.create_task(client.call_tool("search_stop", {"why": "enough", "wait_s": 60}))
        await decide(db, "agent:codex", "enough", "approved", call)
        stopped = data(await call)
        status = data(await client.call_tool("status", {}))
    assert stopped["outcome"] == "ran" and stopped["state"] == "ready", stopped
    end = stopped["search"]
    assert end["search_id"] == started["progress"]["search_id"] and end["status"] == "stopped"
    assert len(end["trials"]) < 2, "stopped before its second trial ended"
    assert "stopped: stopped by agent:codex (approved by " in end["message"], end["message"]  # was 'by the operator'
    assert bench_processes(url) == [] and not any(Path(f"/proc/{pid}").exists() for pid in running)
    assert status["bench"] is None and status["servers"][0]["state"] == "ready"
    j = Journal(db, read_only=True)
    try:
        stops = j.events(types=["search.stop"])
        assert stops[-1].actor == "agent:codex" and stops[-1].data["search_id"] == end["search_id"]
        outcome = [e for e in j.events(types=["agent.outcome"]) if e.data["action"] == "search"][-1]
        assert outcome.actor == "agent:codex" and "stopped" in outcome.data["error"]
    finally:
        j.close()


async def test_status_and_stop_of_a_search_the_cli_runs(campaign):
    import subprocess

    from tests.helpers.demo import stop_process_group

    cfg = search_config(campaign, "optui-search-cli.toml")
    db = campaign.parent / ".optui" / "optui.db"
    child = subprocess.Popen([sys.executable, "-m", "optui", "-c", str(cfg), "search", "run", "pair", "--fresh", "--json"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=subprocess_env(), start_new_session=True)
    try:
        async with agent(cfg, name="opencode") as client:
            deadline = time.monotonic() + 60
            while (now := data(await client.call_tool("search_status", {"detail": True})))["pid"] != child.pid or not now["trials"]:
                assert time.monotonic() < deadline and child.poll() is None, now
                await asyncio.sleep(0.2)
            cli = json.loads(optui(cfg, "search", "status", "--json").stdout)
            assert now["status"] == "running" and now["trials"][0]["point"] == [["--max-running-requests", "2"]]
            # the same dict but what moves between the two reads: the ETA, the trial in progress's step
            def settled(d):
                return {**d, "eta_s": None, "eta_note": None,
                        "current": d["current"] and {**d["current"], "step": None, "started_at": None}}

            assert now.keys() == cli.keys() and settled(now) == settled(cli)
            second = data(await client.call_tool("search_run", {"spec": "pair", "why": "a second search"}))
            assert second["outcome"] == "refused" and second["request"]["decision"] == "refused", second
            assert second["error"] == (f"no search run, search {now['search_id']} runs (optui process {child.pid}): "
                                       "one search at a time, search_stop ends it")
            call = asyncio.create_task(client.call_tool("search_stop", {"why": "the operator wants the GPUs",
                                                                         "name": "pair"}))
            seq = await decide(db, "agent:opencode", "the operator wants the GPUs", "approved", call)
            stopped = data(await call)
        assert stopped["outcome"] == "ran" and stopped["search"]["status"] == "stopped", stopped
        assert stopped["search"]["search_id"] == now["search_id"] and stopped["state"] == "ready"
        assert child.wait(30) == 130  # the CLI's search read the search.stop and ended
        lines = [line.split(maxsplit=6)[-1] for line in optui(cfg, "journal", "tail", "--type", "agent", "-n", "5")
                 .stdout.splitlines()]
        assert lines[0].startswith("agent:opencode asks to run a flag search: grid search pair") and lines[0].endswith("why: a second search")
        assert lines[1].startswith(f"refused by the policy: agent:opencode's request #{second['request']['request']} "
                                   "to run a flag search: ") and f"(search {now['search_id']} runs" in lines[1], lines
        lines = lines[2:]
        assert lines[0].startswith(f"agent:opencode asks to stop search {now['search_id']} of demo in optui process "
                                   f"{child.pid} after ")
        assert lines[1].startswith(f"tui approved agent:opencode's request #{seq} to stop search {now['search_id']}")
        assert lines[2] == f"agent:opencode's request #{seq} (search_stop) ran: ready"
    finally:
        if child.poll() is None:
            stop_process_group(child)


async def test_a_restart_that_crashes_answers_with_the_crash_class_and_log_lines(campaign):
    """Last in the module: it leaves the demo server crashed (rollback = "offer")."""
    policed = campaign.with_name("optui-oom.toml")  # the module's restarts by agents pass the default hourly 10
    # (--max-running-requests too: the rollback goes back from the module's last launch, a search's flags)
    policed.write_text(campaign.read_text() + '\n[agent]\nallowed_flags = ["--mem-fraction-static", '
                       + '"--max-running-requests"]\nbenchmarks_without_approval = true\nmax_restarts_per_hour = 100\n')
    async with agent(policed) as client:
        ran = data(await client.call_tool("restart_server", {
            "server": "demo", "why": "all memory to the KV cache", "set_flags": {"--mem-fraction-static": "0.99"}}))
        experiment = data(await client.call_tool("run_experiment", {
            "benchmark": "sweep", "why": "all memory, measured", "set_flags": {"--mem-fraction-static": "0.99"}}))
    run = experiment["run"]
    assert experiment["outcome"] == "failed" and run["status"] == "failed" and run["step"] == "restart"
    assert experiment["crash_class"] == "oom" and experiment["lines"] and "rollback=true" in experiment["rollback"]
    assert run["crash_class"] == "oom" and any("out of memory" in line.lower() for line in run["lines"]), run
    assert experiment["restart"]["state"] == "crashed" and experiment["results"]["runs"] == 0
    assert experiment["experiment"] and experiment["experiment"] != ran["restart"]["experiment"]
    restart = ran["restart"]
    # a crash is the outcome "failed" (never "ran"), with its class and lines up front and the request
    # that rolls back (not a CLI command)
    assert ran["outcome"] == "failed" and restart["state"] == "crashed" and restart["crash_class"] == "oom"
    assert ran["crash_class"] == "oom" and ran["lines"] == restart["lines"]
    assert any("out of memory" in line.lower() for line in restart["lines"]), restart["lines"]
    assert "rollback_command" not in restart and "rollback=true" in ran["rollback"]
    # the rollback, as the agent asks it: a guarded request (here the policy allows its flag)
    async with agent(policed) as client:
        back = data(await client.call_tool("restart_server", {"server": "demo", "why": "back", "rollback": True}))
        mixed = error_text(await client.call_tool("restart_server", {
            "server": "demo", "why": "x", "rollback": True, "set_flags": {"--mem-fraction-static": "0.5"}}))
    assert back["outcome"] == "ran" and back["restart"]["state"] == "ready", back
    assert back["request"]["decision"] == "allowed" and any("--mem-fraction-static" in line for line in back["diff"])
    assert "0.99" not in back["restart"]["argv"]
    assert "rollback restores the last good flags: give no set_flags" in mixed
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        asked = [e for e in j.events(types=["agent.request"]) if e.data.get("why") == "back"]
    finally:
        j.close()
    assert asked[0].data["diff"][0] == "rollback to the last good flags"
