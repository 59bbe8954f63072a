"""The agent's cockpit, second generation (issue 31), driven by the official SDK's stdio client
on the demo with ``forbidden_flags = ["--tp-size"]`` and ``benchmarks_without_approval``:
tool annotations and schemas as clients expect them, the presets and their points, a policy
on canonical flags (an alias or an abbreviation of a forbidden flag refused at once, and
journaled), compact answers, the break-it inputs refused with the journal unchanged, and a
tuning loop start to end. The pure parts (the overall verdict, the policy's resolution, the
validation message) are tested first, without a process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from optui import __version__
from optui.adapters.journal import Journal
from optui.agent.mcp_server import plain_validation_error
from optui.core.agent.requests import restart_policy
from optui.core.bench.compare import Judgement, overall_verdict
from optui.core.flags.catalog import FlagCatalog, FlagSpec
from optui.core.journal.experiments import shown_workload_verdict
from tests.helpers.demo import started_demo_campaign
from tests.process.test_cli_headless import optui, small_demo_config
from tests.process.test_mcp import agent, data, error_text

pytestmark = pytest.mark.timeout(180)

POLICY = '\n[agent]\nallowed_flags = ["--max-running-requests"]\nforbidden_flags = ["--tp-size"]\n' \
         'benchmarks_without_approval = true\n'


# --- pure parts ------------------------------------------------------------------------------

def test_the_agents_answers_use_the_one_rule_of_the_experiments():
    """The agent's rows and overall verdict come from journal_experiments (one rule, issue 29):
    agent_answers judges nothing of its own (it had a second overall_verdict)."""
    import optui.core.agent.answers as answers

    assert not hasattr(answers, "overall_verdict") and not hasattr(answers, "workload_verdict")
    assert overall_verdict(["better", "same"]) == "better"
    assert overall_verdict(["better", "worse"]) == "mixed", "helps one point, hurts another"
    assert overall_verdict(["same", "untested noise"]) == "untested noise", "too few runs on some side: no claim"
    assert overall_verdict([None, None]) == "untested", "nothing compared (a failed run): no claim"


def test_a_noisy_workload_reads_same_and_a_single_run_untested():
    class W:  # the fields shown_workload_verdict reads of a WorkloadOutcome
        def __init__(self, judgement, base=("exp-0001", {"x": 1.0})):
            self.judgement, (self.base_experiment, self.base_values) = judgement, base
            self.n_ok = judgement.n if judgement is not None else 0

    class X:  # the fields it reads of an Experiment: a changed configuration
        id, same_config_as, is_baseline, diff_vs_baseline = "exp-0002", None, False, ("--x 1",)

    assert shown_workload_verdict(X(), W(Judgement("same", 1.0, 3, 3, p=0.7))) == "same"
    assert shown_workload_verdict(X(), W(Judgement("untested noise", 40.0, 1, 3))) == "untested noise"
    assert shown_workload_verdict(X(), W(Judgement("better", 12.0, 3, 3, p=0.05))) == "better"
    assert shown_workload_verdict(X(), W(None, (None, None))) == "untested", "no baseline for it"


def test_a_host_in_a_line_sums_its_gpus_and_names_the_busiest():
    from optui.core.agent.answers import host_line

    gpus = [{"index": 0, "mem_used_mib": 1000.4, "mem_total_mib": 8000.0, "util_gpu_pct": 10.0},
            {"index": 1, "mem_used_mib": 500.0, "mem_total_mib": 8000.0, "util_gpu_pct": 90.0},
            {"index": 2, "mem_used_mib": None, "mem_total_mib": 8000.0, "util_gpu_pct": None}]
    line = host_line({"host": "h", "status": "live", "error": None, "source": "demo", "gpus": gpus})
    assert line == {"host": "h", "status": "live", "gpus": 3, "mem_used_mib": 1500, "mem_free_mib": 14500,
                    "mem_total_mib": 24000, "busiest": {"index": 1, "util_gpu_pct": 90.0, "mem_used_mib": 500.0}}
    assert host_line({"host": "h", "status": "error", "error": "ssh: timeout", "gpus": []})["busiest"] is None


def test_the_policy_compares_canonical_flags_an_alias_or_abbreviation_is_the_forbidden_flag():
    catalog = FlagCatalog((FlagSpec(("--tp-size", "--tensor-parallel-size"), type="int"),
                           FlagSpec(("--max-running-requests",), type="int")))
    assert catalog.canonical("--tensor-parallel-size") == catalog.canonical("--tp") == "--tp-size"
    for given in ("--tensor-parallel-size", "--tp", "--tp-size"):
        verdict = restart_policy([given], allowed=["--max-running-requests"], forbidden=["--tp-size"],
                                 max_per_hour=10, restarts_last_hour=0, resolve=catalog.canonical)
        assert verdict.verdict == "refuse" and verdict.reason.startswith("[agent] forbidden_flags: " + given), verdict
    unresolved = restart_policy(["--tensor-parallel-size"], allowed=[], forbidden=["--tp-size"], max_per_hour=10,
                                restarts_last_hour=0)
    assert unresolved.verdict == "ask", "the old rule: names as written (what let the alias through)"
    allowed = restart_policy(["--max-running"], allowed=["max-running-requests"], forbidden=["--tp-size"],
                             max_per_hour=10, restarts_last_hour=0, resolve=catalog.canonical)
    assert allowed.verdict == "allow"


def test_a_pydantic_argument_error_reads_as_one_line():
    text = ("Error executing tool todo_set: 1 validation error for todo_setArguments\ntodo_id\n  Input should be less "
            "than or equal to 9223372036854775807 [type=less_than_equal, input_value=1208925819614629174706176, "
            "input_type=int]\n    For further information visit https://errors.pydantic.dev/2.14/v/less_than_equal")
    assert plain_validation_error(text) == ("todo_set: todo_id: Input should be less than or equal to "
                                            "9223372036854775807, got 1208925819614629174706176")
    assert plain_validation_error("demo: not restarted") == "demo: not restarted"


async def test_calls_past_the_bound_in_flight_are_refused_at_once_and_unknown_arguments_named():
    """The guard on a real MCPServer through the SDK's client (in-memory transport): a slow
    tool called 6 times at once with a bound of 2 answers 2 and refuses 4 at once."""
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    from optui.agent.mcp_server import _call_guard

    server = MCPServer("guarded")
    server.middleware.append(_call_guard(server, limit=2))
    release = asyncio.Event()

    @server.tool()
    async def slow(x: int = 0) -> int:
        await release.wait()
        return x

    async with Client(server) as client:
        calls = [asyncio.create_task(client.call_tool("slow", {"x": i})) for i in range(6)]
        done, _ = await asyncio.wait(calls, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        refused_first = [t.result() for t in done]
        await asyncio.sleep(0.2)
        release.set()
        results = [await c for c in calls]
        unknown = await client.call_tool("slow", {"x": 1, "y": 2})
    assert refused_first and all(r.is_error for r in refused_first), "the refusals come before any answer"
    assert sum(not r.is_error for r in results) == 2 and sum(r.is_error for r in results) == 4
    assert error_text(next(r for r in results if r.is_error)) == (
        "slow: refused, 2 calls of this client are in flight (2 at most): wait for an answer before sending more")
    assert error_text(unknown) == "slow: unknown argument 'y' (it takes: x)"


# --- the demo through the SDK's client -------------------------------------------------------

@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A demo campaign with the issue's policy, its server started by the CLI; the loadgen preset
    small (8 prompts of 16 tokens out a point)."""
    cfg = small_demo_config(tmp_path_factory.mktemp("mcp-cockpit"))
    text = cfg.read_text().replace("input_len = 128, output_len = 64, prompts = 16",
                                   "input_len = 32, output_len = 16, prompts = 8")
    assert "prompts = 8" in text
    cfg.write_text(text + POLICY)
    with started_demo_campaign(cfg):
        yield cfg


def journal_size(cfg: Path) -> tuple[int, int]:
    """(last event seq, bytes of the journal's files)."""
    db = cfg.parent / ".optui" / "optui.db"
    j = Journal(db, read_only=True)
    try:
        seq = j.last_seq()
    finally:
        j.close()
    return seq, sum(p.stat().st_size for p in db.parent.glob("optui.db*"))


async def test_tools_are_annotated_typed_and_versioned(campaign):
    async with agent(campaign) as client:
        assert client.server_info is not None and client.server_info.version == __version__
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("status", "gpus", "journal_tail", "journal_event", "experiments", "todo_list", "search_status",
                     "benchmarks"):
            assert tools[name].annotations.read_only_hint is True, name
        for name in ("restart_server", "stop_server", "run_experiment", "search_run"):
            assert tools[name].annotations.destructive_hint is True and not tools[name].annotations.read_only_hint
        assert all(t.annotations is not None and t.annotations.idempotent_hint is not None for t in tools.values())
        props = tools["todo_add"].input_schema["properties"]
        assert "content" in props and props["text"]["description"].startswith("deprecated")
        assert {"high", "medium", "low"} == set(props["priority"]["enum"])
        assert tools["todo_set"].input_schema["properties"]["todo_id"]["maximum"] == 2**63 - 1
        assert all(p.get("description") for name in ("restart_server", "run_benchmark")
                   for key, p in tools[name].input_schema["properties"].items()), "every parameter has its help"
        assert tools["restart_server"].input_schema["properties"]["wait_s"]["default"] == 60.0
        # the CLI's field name, and the old one still accepted
        assert data(await client.call_tool("todo_add", {"content": "a CLI-shaped item"}))["content"] == "a CLI-shaped item"
        assert data(await client.call_tool("todo_add", {"text": "an old-shaped item"}))["content"] == "an old-shaped item"
        # the log resource without optui's own polling by default, with it on demand
        plain = (await client.read_resource("optui://servers/demo/log")).contents[0].text
        every = (await client.read_resource("optui://servers/demo/log?lines=2000&hide_probes=false")).contents[0].text
        assert "GET /health" not in plain and "GET /health" in every
        two = (await client.read_resource("optui://servers/demo/log?lines=2&hide_probes=false")).contents[0].text
        assert len(two.splitlines()) == 2


async def test_the_presets_list_their_points_and_a_run_takes_a_subset(campaign):
    async with agent(campaign) as client:
        presets = {p["name"]: p for p in data(await client.call_tool("benchmarks", {}))}
        assert presets["loadgen"]["points"] == {"kind": "concurrency", "values": [1, 2, 4, 8]}
        assert (presets["loadgen"]["tool"], presets["loadgen"]["input_len"], presets["loadgen"]["prompts"]) == (
            "builtin", 32, 8)
        assert presets["sweep"]["points"] == {"kind": "concurrency", "values": [16]}
        assert presets["sweep"]["tool"] == "sglang" and presets["sweep"]["input_len"] == 256
        wrong = error_text(await client.call_tool("run_benchmark", {"benchmark": "loadgen", "why": "x",
                                                                    "points": [1, 3]}))
        assert "has concurrency points 1,2,4,8" in wrong and "(3 not among them)" in wrong
        answers = [data(await client.call_tool("run_benchmark", {"benchmark": "loadgen", "why": f"c=1, 2 #{i}",
                                                                 "points": [1, 2], "repeat": 2}))
                   for i in (1, 2)]
        size = len(json.dumps(answers[1]))
    assert size <= 8000, f"a compact answer: {size} characters"
    run = answers[1]["run"]
    assert answers[1]["points"] == [1.0, 2.0] and run["status"] == "ok" and run["results"]["runs"] == 4
    rows = run["summary"]["workloads"]
    assert [r["concurrency"] for r in rows] == [1, 2] and all(r["out_tok_s"] > 0 for r in rows)
    assert run["summary"]["verdict"] in ("baseline", "same", "better", "worse", "mixed", "untested")
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:  # the subset journaled with the request
        asked = [e.data["diff"] for e in j.events(types=["agent.request"]) if e.data.get("why") == "c=1, 2 #1"]
    finally:
        j.close()
    assert asked == [["benchmark loadgen x2 at concurrency 1,2"]]


async def test_an_alias_or_abbreviation_of_a_forbidden_flag_is_refused_at_once_and_journaled(campaign):
    async with agent(campaign, name="codex") as client:
        short = error_text(await client.call_tool("restart_server", {"server": "demo", "why": "tp", "set_flags":
                                                                     {"--tp": "2"}}))
        alias = error_text(await client.call_tool("restart_server", {"server": "demo", "why": "tp alias", "set_flags":
                                                                     {"--tensor-parallel-size": "2"}}))
        lots = error_text(await client.call_tool("restart_server", {"server": "demo", "why": "lots", "set_flags":
                                                                    {"--max-running-requests": "lots"}}))
    assert short.endswith(": demo: not restarted, --tp is an abbreviation of --tp-size: write --tp-size"), short
    assert alias.endswith("demo: not restarted, [agent] forbidden_flags: --tensor-parallel-size (the same flag as "
                     "--tp-size)"), alias
    # refused before anything is asked by the door every restart goes through (issue 32: a value that
    # fits none of the flag's seen forms, where the --help prints no type), never a dialog
    assert lots.split(": ", 1)[1].startswith("demo: not restarted, the flags fail the checks of "), lots
    assert "--max-running-requests" in lots and "'lots'" in lots and "(the server was not stopped)" in lots, lots
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:  # every refusal journaled: the request and its refused decision, nothing asked of the operator
        asked = {e.seq: e.data["why"] for e in j.events(types=["agent.request"]) if e.actor == "agent:codex"}
        decided = {e.data["request"]: e.data["decision"] for e in j.events(types=["agent.decision"])}
    finally:
        j.close()
    assert sorted(asked.values()) == ["lots", "tp", "tp alias"]
    assert [decided[seq] for seq in asked] == ["refused"] * 3


async def test_break_it_inputs_end_in_clear_refusals_with_the_journal_unchanged(campaign, tmp_path):
    operator = json.loads(optui(campaign, "todo", "add", "the operator's own item", "--json").stdout)
    before = journal_size(campaign)
    async with agent(campaign) as client:
        huge = error_text(await client.call_tool("todo_add", {"content": "x" * 50_000_000}))
        assert huge.startswith("todo_add: content: String should have at most 4000 characters")
        assert len(huge) < 300, "the 50 MB value is not echoed back"
        big_id = error_text(await client.call_tool("todo_set", {"todo_id": 2**80, "status": "completed"}))
        assert big_id.startswith("todo_set: todo_id: Input should be less than or equal to 9223372036854775807")
        assert "journal_event: seq: Input should be less than or equal to" in error_text(
            await client.call_tool("journal_event", {"seq": 2**80}))
        shadow = error_text(await client.call_tool("search_run", {"spec": "/etc/shadow", "why": "x"}))
        assert "spec '/etc/shadow': an agent's spec is a [search.NAME] of the config" in shadow
        assert "inside the campaign's directory" in error_text(
            await client.call_tool("search_run", {"spec": "../../../../etc/passwd", "why": "x"}))
        unknown = error_text(await client.call_tool("todo_add", {"content": "x", "colour": "red"}))
        assert unknown.startswith("todo_add: unknown argument 'colour' (it takes: ")
        assert "at most 1000 characters" in error_text(await client.call_tool(
            "restart_server", {"server": "demo", "why": "w" * 1001}))
        assert "todo_id: Input should be greater than or equal to 1" in error_text(
            await client.call_tool("todo_set", {"todo_id": 0, "status": "completed"}))
        # the operator's item and the baseline are not the agent's to cancel or reject
        assert f"todo item #{operator['id']} is cli's" in error_text(await client.call_tool(
            "todo_set", {"todo_id": operator["id"], "status": "cancelled"}))
        baseline = next(x["id"] for x in data(await client.call_tool("experiments", {})) if x["verdict"] == "baseline")
        assert "is the baseline: the operator's to reject" in error_text(await client.call_tool(
            "verdict", {"experiment": baseline, "decision": "reject", "reason": "slow"}))
        assert (await client.list_tools()).tools, "the server still answers"
    assert journal_size(campaign) == before, "nothing of the refused inputs reached the journal"


async def test_a_tuning_loop_runs_start_to_end_from_the_sdk_client_each_step_journaled(campaign):
    """The seeds' loop: health and free memory → plan → one flag → restart → ready → bench
    c=1, 2 → compare → record, every answer compact."""
    first = journal_size(campaign)[0]
    async with agent(campaign, name="claude-code") as client:
        status = data(await client.call_tool("status", {}))
        assert status["servers"][0]["state"] == "ready"
        gpus = data(await client.call_tool("gpus", {}))
        assert all(g["mem_total_mib"] > 0 for h in gpus for g in h["gpus"])
        plan = data(await client.call_tool("todo_add", {"content": "does 8 running requests help at c=1, 2",
                                                        "priority": "high"}))
        data(await client.call_tool("todo_set", {"todo_id": plan["id"], "status": "in_progress"}))
        base = data(await client.call_tool("run_benchmark", {"benchmark": "loadgen", "why": "the baseline at c=1, 2",
                                                             "points": [1, 2], "repeat": 3}))
        restart = data(await client.call_tool("restart_server", {"server": "demo", "why": "one flag",
                                                                 "set_flags": {"--max-running-requests": "8"}}))
        bench = data(await client.call_tool("run_benchmark", {"benchmark": "loadgen", "why": "8 at c=1, 2",
                                                              "points": [1, 2], "repeat": 3}))
        rows = data(await client.call_tool("experiments", {"server": "demo"}))
        exp = bench["run"]["experiment"]
        summary = bench["run"]["summary"]
        record = data(await client.call_tool("verdict", {
            "experiment": exp, "decision": "keep" if summary["verdict"] == "better" else "inconclusive",
            "reason": f"{summary['verdict']} over c=1, 2"}))
        data(await client.call_tool("note", {"text": f"{exp}: {summary['verdict']}", "server": "demo"}))
        data(await client.call_tool("todo_set", {"todo_id": plan["id"], "status": "completed"}))
    assert base["outcome"] == restart["outcome"] == bench["outcome"] == "ran"
    assert restart["restart"]["state"] == "ready" and exp == restart["restart"]["experiment"]
    assert [w["concurrency"] for w in summary["workloads"]] == [1, 2]
    assert all(w["n"] == 3 and w["base_n"] >= 3 and w["p"] is not None for w in summary["workloads"]), summary
    assert all(len(json.dumps(a)) <= 4000 for a in (base, restart, bench)), "a typical answer under 4 KB"
    assert summary["verdict"] in ("better", "worse", "mixed", "same") and summary["baseline"] is not None
    assert summary["change"] and "--max-running-requests" in summary["change"][0]
    assert next(r for r in rows if r["id"] == exp) == summary
    assert all(len(json.dumps(a)) <= 8000 for a in (base, restart, bench, rows, status))
    j = Journal(campaign.parent / ".optui" / "optui.db", read_only=True)
    try:
        mine = [e for e in j.events(since_seq=first) if e.actor == "agent:claude-code"]
    finally:
        j.close()
    kinds = [(e.type, e.data.get("action") or e.data.get("op") or "") for e in mine
             if e.type in ("todo.changed", "agent.request", "agent.outcome", "verdict", "note")]
    assert kinds == [("todo.changed", "add"), ("todo.changed", "status"),
                     ("agent.request", "benchmark"), ("agent.outcome", "benchmark"),
                     ("agent.request", "restart"), ("agent.outcome", "restart"),
                     ("agent.request", "benchmark"), ("agent.outcome", "benchmark"),
                     ("verdict", ""), ("note", ""), ("todo.changed", "status")], kinds
    assert record["experiment"] == exp


@pytest.fixture
def three_experiments(tmp_path):
    """A demo campaign of its own after 3 experiments with the 4-point loadgen preset (the
    baseline measured, then two flag changes run as experiments), each point run twice."""
    cfg = small_demo_config(tmp_path)
    text = cfg.read_text().replace("input_len = 128, output_len = 64, prompts = 16",
                                   "input_len = 32, output_len = 16, prompts = 8")
    cfg.write_text(text + POLICY)
    with started_demo_campaign(cfg):
        yield cfg


async def test_the_compact_status_is_a_summary_under_4_kb_the_detail_has_everything(three_experiments):
    """Issue 31: ``status`` was 4.3-5 KB on the demo (8 GPUs, every experiment's 4 workload
    rows); compact, it is one line per host (used/free MiB, the busiest GPU) and each newest
    experiment's overall verdict with its row count; detail=true is ``optui status --json``."""
    async with agent(three_experiments, name="claude-code") as client:
        base = data(await client.call_tool("run_benchmark", {"benchmark": "loadgen", "why": "baseline", "repeat": 2}))
        assert base["outcome"] == "ran", base
        for n in ("8", "16"):
            ran = data(await client.call_tool("run_experiment", {
                "benchmark": "loadgen", "why": f"{n} in flight", "repeat": 2, "set_flags": {"--max-running-requests": n}}))
            assert ran["outcome"] == "ran", ran
            # each row carries ITL p99 Δ too (the loadgen reports ITL p99 on both sides)
            rows = ran["summary"]["workloads"]
            assert len(rows) == 4 and all(isinstance(w.get("itl_p99_delta_pct"), float) for w in rows), rows
        status = data(await client.call_tool("status", {}))
        full = data(await client.call_tool("status", {"detail": True}))
    size = len(json.dumps(status))
    print(f"status: {size} characters compact, {len(json.dumps(full))} with detail=true")
    assert size < 4000, (size, status)
    assert [h["host"] for h in status["hosts"]] == ["gpu-node-1", "gpu-node-2"]
    for host, every in zip(status["hosts"], full["hosts"], strict=True):
        gpus = every["gpus"]
        assert host["gpus"] == len(gpus) == 4
        assert host["mem_total_mib"] == round(sum(g["mem_total_mib"] for g in gpus))
        assert host["mem_used_mib"] + host["mem_free_mib"] == host["mem_total_mib"]
        # the readings of two calls a moment apart (the demo's GPUs move)
        assert host["mem_used_mib"] == pytest.approx(sum(g["mem_used_mib"] for g in gpus), rel=0.2)
        assert host["busiest"]["index"] in {g["index"] for g in gpus}
    assert len(status["experiments"]) == 3
    for brief in status["experiments"]:
        assert brief["workloads"] == 4, "the row count; the rows are behind detail=true and experiments"
        assert brief["verdict"] and brief["points"].count("c=") == 4, brief
    assert [x["id"] for x in status["experiments"]] == [x["id"] for x in full["experiments"][-3:]]
    assert status["servers"][0]["state"] == "ready" and status["servers"][0]["argv"]
    assert "detail=true" in status["more"]
    assert all(len(x["workloads"]) == 4 for x in full["experiments"]), "the rows with detail=true"
    assert all(g.keys() >= {"uuid", "mem_used_mib"} for h in full["hosts"] for g in h["gpus"])


async def wait_for_request(cfg: Path, why: str, timeout_s: float = 30.0) -> dict:
    """The journaled ``agent.request`` with ``why`` (its seq and pid), once it is there."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        j = Journal(cfg.parent / ".optui" / "optui.db", read_only=True)
        try:
            found = [e for e in j.events(types=["agent.request"]) if e.data.get("why") == why]
        finally:
            j.close()
        if found:
            return {"seq": found[0].seq, "pid": found[0].data["pid"]}
        await asyncio.sleep(0.1)
    raise AssertionError(f"no request {why!r} journaled in {timeout_s} s")


def decisions_on(cfg: Path, seq: int) -> list[tuple[str, str, str]]:
    j = Journal(cfg.parent / ".optui" / "optui.db", read_only=True)
    try:
        return [(e.data["decision"], e.actor, e.summary()) for e in j.events(types=["agent.decision"])
                if e.data["request"] == seq]
    finally:
        j.close()


async def test_a_request_whose_agent_closes_or_dies_is_journaled_withdrawn(campaign):
    import os
    import signal

    async with agent(campaign, name="quitter") as client:  # closes its session while the request waits
        call = asyncio.create_task(client.call_tool("stop_server", {"server": "demo", "why": "closing", "wait_s": 60}))
        closing = await wait_for_request(campaign, "closing")
        call.cancel()
    for _ in range(100):
        if decisions_on(campaign, closing["seq"]):
            break
        await asyncio.sleep(0.1)
    assert [d[:2] for d in decisions_on(campaign, closing["seq"])] == [("withdrawn", "agent:quitter")]

    with pytest.raises(BaseException):  # noqa: B017 (the SDK's errors on a dead server vary)
        async with agent(campaign, name="victim") as client:
            call = asyncio.create_task(client.call_tool("stop_server", {"server": "demo", "why": "killed",
                                                                        "wait_s": 60}))
            killed = await wait_for_request(campaign, "killed")
            os.kill(killed["pid"], signal.SIGKILL)
            await call
    assert decisions_on(campaign, killed["seq"]) == [], "a killed process says nothing"
    async with agent(campaign, name="next") as client:  # the next optui mcp finds it gone
        await client.list_tools()
    [(decision, by, line)] = decisions_on(campaign, killed["seq"])
    assert (decision, by) == ("withdrawn", "optui mcp")
    assert line == (f"agent:victim's request #{killed['seq']} to stop the server withdrawn: its optui mcp process ended")


async def test_the_agents_plan_kept_in_optui_in_the_shape_agents_write(campaign):
    async with agent(campaign, name="claude-code") as client:
        first = data(await client.call_tool("todo_add", {"content": "measure the baseline at c=1, 2",
                                                         "priority": "high"}))
        second = data(await client.call_tool("todo_add", {
            "content": "try --max-running-requests 8", "status": "in_progress", "activeForm": "Trying 8 in flight",
            "blockedBy": [first["id"]]}))
        third = data(await client.call_tool("todo_add", {"content": "check free GPU memory", "blocks": [first["id"]]}))
        missing = error_text(await client.call_tool("todo_add", {"content": "x", "blockedBy": [999_999]}))
        listed = {t["id"]: t for t in data(await client.call_tool("todo_list", {"open_only": True}))}
        plan = (await client.read_resource("optui://plan")).contents[0].text
    assert second["status"] == "in_progress" and second["activeForm"] == "Trying 8 in flight"
    assert second["blockedBy"] == [first["id"]] and listed[first["id"]]["blocks"] == [second["id"]]
    assert listed[first["id"]]["blockedBy"] == [third["id"]], "blocks= makes the other item wait"
    assert "no todo item #999999" in missing
    assert f"- [ ] #{first['id']} **high** measure the baseline at c=1, 2 — blocked by #{third['id']}" in plan
    assert f"- [ ] #{second['id']} (medium) *in progress: Trying 8 in flight* try --max-running-requests 8 — " \
           f"blocked by #{first['id']}" in plan, plan


async def test_todo_set_takes_active_form_and_dependencies_like_todo_add_journaled(campaign):
    async with agent(campaign, name="claude-code") as client:
        a = data(await client.call_tool("todo_add", {"content": "bench c=1"}))
        b = data(await client.call_tool("todo_add", {"content": "bench c=2"}))
        c = data(await client.call_tool("todo_add", {"content": "compare"}))
        first = len(journal_events(campaign, a["id"], b["id"], c["id"]))
        moved = data(await client.call_tool("todo_set", {"todo_id": c["id"], "status": "in_progress",
                                                         "activeForm": "Comparing", "blockedBy": [a["id"], b["id"]]}))
        assert moved["status"] == "in_progress" and moved["activeForm"] == "Comparing"
        assert moved["blockedBy"] == [a["id"], b["id"]]
        blocks = data(await client.call_tool("todo_set", {"todo_id": a["id"], "blocks": [b["id"]]}))
        listed = {t["id"]: t for t in data(await client.call_tool("todo_list", {}))}
        assert blocks["blocks"] == [b["id"]], "the whole list: c no longer waits for a"
        assert listed[b["id"]]["blockedBy"] == [a["id"]] and listed[c["id"]]["blockedBy"] == [b["id"]]
        cleared = data(await client.call_tool("todo_set", {"todo_id": c["id"], "activeForm": "", "blockedBy": []}))
        assert cleared["activeForm"] is None and cleared["blockedBy"] == []
        plan = (await client.read_resource("optui://plan")).contents[0].text
        assert f"#{b['id']} (medium) bench c=2 — blocked by #{a['id']}" in plan, plan
        # the same checks and bounds as todo_add
        assert "no todo item #999999" in error_text(await client.call_tool(
            "todo_set", {"todo_id": a["id"], "blockedBy": [999_999]}))
        assert "cannot wait for itself" in error_text(await client.call_tool(
            "todo_set", {"todo_id": a["id"], "blocks": [a["id"]]}))
        assert "activeForm: String should have at most 200 characters" in error_text(await client.call_tool(
            "todo_set", {"todo_id": a["id"], "activeForm": "x" * 201}))
        assert "blockedBy: List should have at most 64 items" in error_text(await client.call_tool(
            "todo_set", {"todo_id": a["id"], "blockedBy": list(range(1, 66))}))
        assert "Input should be less than or equal to 9223372036854775807" in error_text(await client.call_tool(
            "todo_set", {"todo_id": a["id"], "blocks": [2**80]}))
        operator = json.loads(optui(campaign, "todo", "add", "the operator's plan", "--json").stdout)
        assert f"todo item #{operator['id']} is cli's" in error_text(await client.call_tool(
            "todo_set", {"todo_id": operator["id"], "activeForm": "Rewriting"}))
    changes = journal_events(campaign, a["id"], b["id"], c["id"])[first:]
    assert [(e.target, e.data["op"], e.actor) for e in changes] == [
        (f"todo:{c['id']}", "status", "agent:claude-code"),  # status, activeForm and blockedBy in one event
        (f"todo:{b['id']}", "edit", "agent:claude-code"), (f"todo:{c['id']}", "edit", "agent:claude-code"),
        (f"todo:{c['id']}", "edit", "agent:claude-code")], changes


def journal_events(cfg: Path, *todo_ids: int) -> list:
    """The ``todo.changed`` events of ``todo_ids``, oldest first."""
    j = Journal(cfg.parent / ".optui" / "optui.db", read_only=True)
    try:
        targets = {f"todo:{i}" for i in todo_ids}
        return [e for e in j.events(types=["todo.changed"]) if e.target in targets]
    finally:
        j.close()


def test_a_single_claude_code_task_file_imports(campaign, tmp_path):
    task = tmp_path / "tasks" / "list-1" / "3.json"
    task.parent.mkdir(parents=True)
    task.write_text(json.dumps({"id": "3", "subject": "Bench c=1 and c=2", "description": "two points",
                                "activeForm": "Benchmarking c=1, 2", "status": "in_progress", "blocks": [],
                                "blockedBy": ["1"]}))
    done = optui(campaign, "todo", "import", str(task), "--json")
    assert done.returncode == 0, done.stderr
    [item] = json.loads(done.stdout)
    assert (item["content"], item["status"], item["active_form"]) == ("Bench c=1 and c=2", "in_progress",
                                                                      "Benchmarking c=1, 2")
    assert item["origin"] == f"claude:{task}" and "1 new" in done.stderr


def test_the_silent_list_hint_needs_an_active_agent_and_a_quiet_list():
    from optui.core.todo.formats import silent_list_hint

    now = 10_000.0
    agent_now = [("agent:claude-code", now - 10)]
    missing = silent_list_hint([("claude:/x/tasks/l1", "waiting", None)], agent_now, now)
    assert missing is not None and "agent:claude-code acts through optui mcp" in missing and "is missing" in missing
    assert "CLAUDE_CODE_ENABLE_TODO_TOOLS=1" in missing
    assert "is silent" in (silent_list_hint([("todowrite:p.json", "ok", now - 900)], agent_now, now) or "")
    assert silent_list_hint([("todowrite:p.json", "ok", now - 60)], agent_now, now) is None, "it changed lately"
    assert silent_list_hint([("claude:/x", "waiting", None)], [("agent:codex", now - 900)], now) is None, \
        "no agent acts now: an empty list is just empty"
    assert silent_list_hint([("claude:/x", "waiting", None)], [], now) is None


async def test_a_followed_list_that_is_missing_while_its_agent_acts_shows_the_hint(tmp_path):
    from optui.core.agent.requests import AGENT_REQUEST
    from tests.helpers.pilot import wait_for
    from tests.process.test_todo_panel import campaign as todo_campaign
    from tests.process.test_todo_panel import make_app, shown

    tasks = tmp_path / "tasks" / "list-1"  # the agent's own task list: never written (its tools are off)
    cfg = todo_campaign(tmp_path, f'[todo]\npoll_s = 0.1\nfollow = ["claude:{tasks}"]\n')
    app = make_app(cfg)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: "no todo items" in shown(app), what=lambda: shown(app))
        j = Journal(cfg.parent / ".optui" / "optui.db")
        try:  # an agent acting through optui mcp (its request, as the cockpit journals it)
            j.append(AGENT_REQUEST, "demo", {"action": "benchmark", "diff": ["benchmark x"], "why": "w",
                                             "deadline_ts": 0.0}, actor="agent:claude-code")
        finally:
            j.close()
        await wait_for(pilot, lambda: "CLAUDE_CODE_ENABLE_TODO_TOOLS=1" in shown(app), what=lambda: shown(app))
        assert "agent:claude-code acts through optui mcp" in shown(app)
        assert "⚠ silent" in app.query_one("#todo-box").border_subtitle
        await pilot.press("q")
