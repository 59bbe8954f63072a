"""The whole tuning loop an agent walks, through the official SDK's own stdio client against
``optui mcp`` on the demo campaign, every guarded request approved by the operator in the real
TUI (``App.run_test`` + Pilot): status → todo items → a proposed experiment → the baseline
benchmark → ``run_experiment`` changing ``--max-running-requests`` → the comparison with the
baseline (deltas) → the agent's verdict. Each answer is checked for its fields and units."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from optui.ui.screens.agent_requests import AgentRequestScreen
from tests.helpers.demo import started_demo_campaign, subprocess_env
from tests.helpers.pilot import wait_for
from tests.process.test_cli_headless import small_demo_config
from tests.process.test_mcp import agent, argv_flag, data, error_text

pytestmark = pytest.mark.timeout(180)

REPEATS = 3  # the fewest runs a side whose verdict is tested (n=3 vs 3: p can reach 0.10)


async def approve_in_the_tui(pilot, app: OptuiApp, *shown: str) -> str:
    """Wait for the request's screen, check its body shows each of ``shown``, press ``a``;
    returns the body's text."""
    await wait_for(pilot, lambda: isinstance(app.screen, AgentRequestScreen)
                   and bool(app.screen.query("#agent-request-body")), what=lambda: app.screen)
    body = str(app.screen.query_one("#agent-request-body").render())
    assert all(text in body for text in shown), body
    assert "agent:claude-code asks" in str(app.screen.query_one("#agent-request-title").render())
    await pilot.press("a")
    return body


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A demo campaign (a tiny sweep: 8 prompts of 24 tokens out) whose server the CLI started."""
    cfg = small_demo_config(tmp_path_factory.mktemp("mcp-loop"))
    cfg.write_text(cfg.read_text().replace('"--num-prompts", "16"', '"--num-prompts", "8"')
                   .replace('"--random-output-len", "96"', '"--random-output-len", "24"'))
    assert '"--num-prompts", "8"' in cfg.read_text() and '"--random-output-len", "24"' in cfg.read_text()
    with started_demo_campaign(cfg):
        yield cfg


async def test_the_tuning_loop_through_the_sdk_client_approved_in_the_tui(campaign):
    cfg = campaign
    app = OptuiApp(Session(load_config(cfg)), title="test")
    async with app.run_test(size=(120, 40)) as pilot, agent(cfg, name="claude-code") as client:
        await wait_for(pilot, lambda: app.client is not None and app.panels_mounted, what="the campaign on screen")
        # 1. status: the server, its flags and its current experiment (the baseline to be)
        status = data(await client.call_tool("status", {}))
        server = status["servers"][0]
        assert (server["name"], server["state"], server["phase"]) == ("demo", "ready", "ready")
        baseline_exp = server["experiment"]
        assert baseline_exp and baseline_exp.startswith("exp-")
        old = argv_flag(server["argv"], "--max-running-requests") or "32"  # the demo's default
        new = str(int(old) * 2)
        assert [h["host"] for h in status["hosts"]] == ["gpu-node-1", "gpu-node-2"]
        assert all(h["gpus"] == 4 and {"mem_used_mib", "mem_free_mib", "busiest"} <= h.keys()
                   for h in status["hosts"]), "each host in a line (every GPU: detail=true, gpus)"

        # 2. todo items, 3. one of them a proposed experiment (flags and a benchmark)
        plain = data(await client.call_tool("todo_add", {"text": "measure the baseline", "priority": "high"}))
        proposal = data(await client.call_tool("todo_add", {
            "text": f"does {new} in flight help", "server": "demo", "set_flags": {"--max-running-requests": new},
            "benchmarks": ["sweep"]}))
        assert plain["experiment"] is None and plain["priority"] == "high" and plain["status"] == "pending"
        assert proposal["experiment"]["server"] == "demo" and proposal["experiment"]["bench"] == ["sweep"]
        assert proposal["experiment"]["set"] == {"--max-running-requests": new}
        listed = {t["id"]: t for t in data(await client.call_tool("todo_list", {"open_only": True}))}
        assert {plain["id"], proposal["id"]} <= set(listed)

        # the baseline measured first: a guarded benchmark the operator approves in the TUI
        call = asyncio.create_task(client.call_tool("run_benchmark", {
            "benchmark": "sweep", "why": "the baseline", "repeat": REPEATS, "wait_s": 90, "detail": True}))
        await approve_in_the_tui(pilot, app, "benchmark sweep x3", "the baseline")
        base = data(await call)
        assert base["outcome"] == "ran" and base["request"]["decision"] == "approved" and base["request"]["by"] == "tui"
        assert base["run"]["status"] == "ok" and base["run"]["experiment"] == baseline_exp
        assert base["run"]["results"] and all(r["output_throughput_tok_s"] > 0 for r in base["run"]["results"])
        assert base["run"]["experiment_summary"]["verdict"] == "baseline"
        await client.call_tool("todo_set", {"todo_id": plain["id"], "status": "completed"})

        # 4. the experiment: restart with the new value (the TUI shows the diff), 5. the benchmark
        call = asyncio.create_task(client.call_tool("run_experiment", {
            "benchmark": "sweep", "why": f"does {new} in flight help", "repeat": REPEATS, "wait_s": 90,
            "set_flags": {"--max-running-requests": new}, "detail": True}))
        await approve_in_the_tui(pilot, app, "experiment demo", "--max-running-requests", f"{old} → {new}",
                                 "benchmark sweep x3", f"does {new} in flight help")
        ran = data(await call)

        # 6. the comparison with the baseline, 7. the agent's verdict
        rows = {x["id"]: x for x in data(await client.call_tool("experiments", {"server": "demo", "detail": True}))}
        exp = ran["experiment"]
        summary = ran["experiment_summary"]
        decision = "keep" if summary["verdict"] == "better" else "reject"
        verdict = data(await client.call_tool("verdict", {
            "experiment": exp, "decision": decision, "reason": f"{summary['verdict']} ({summary['evidence_text']})"}))
        await client.call_tool("todo_set", {"todo_id": proposal["id"], "status": "completed",
                                            "note": f"ran as {exp}"})
        decided = {x["id"]: x for x in data(await client.call_tool("experiments", {"server": "demo", "detail": True}))}[exp]

    # the experiment's answer: id, restart, flags really in effect, results with deltas (tok/s, %)
    assert ran["outcome"] == "ran" and ran["request"]["decision"] == "approved" and ran["request"]["by"] == "tui"
    assert ran["diff"] == [f"~ --max-running-requests: {old} → {new}"] and ran["repeats"] == REPEATS
    assert exp and exp.startswith("exp-") and exp != baseline_exp and exp == ran["restart"]["experiment"]
    assert ran["run"]["status"] == "ok" and ran["run"]["crash_class"] is None
    assert ran["restart"]["state"] == "ready" and argv_flag(ran["restart"]["argv"], "--max-running-requests") == new
    assert ran["unverified"] == [] and ran["restart"]["config_mismatch"] == []
    assert len(ran["results"]) == len(base["run"]["results"]) and all(r["experiment"] == exp for r in ran["results"])
    for r in ran["results"]:
        tok_s = r["vs_baseline"]["output_throughput_tok_s"]
        assert r["output_throughput_tok_s"] > 0 and tok_s["baseline"] > 0 and isinstance(tok_s["delta_pct"], float)
        assert tok_s["delta_pct"] == pytest.approx(100 * (r["output_throughput_tok_s"] / tok_s["baseline"] - 1))
    # the verdict the answer carries: noise-aware, with n, spread and the baseline
    evidence = summary["evidence"]
    assert summary["verdict"] in ("better", "worse", "same") and summary["baseline"] == baseline_exp
    assert (evidence["n"], evidence["base_n"]) == (REPEATS, REPEATS) and evidence["p"] is not None
    assert evidence["spread_pct"] is not None and evidence["base_spread_pct"] is not None
    assert summary["evidence_text"].startswith(f"n={REPEATS} vs {REPEATS}, ±") and summary["evidence_text"].endswith(
        f"vs {baseline_exp}")
    assert summary["output_throughput_tok_s"] > 0 and isinstance(summary["delta_pct"], float)
    # the comparison the experiments tool shows: the same verdict, the change and each metric's delta
    row = rows[exp]
    assert row["verdict"] == summary["verdict"] and row["baseline"] == baseline_exp and row["unverified"] == []
    assert row["change_vs_baseline"] == [f"~ --max-running-requests: {old} → {new}"]
    assert rows[baseline_exp]["is_baseline"] and rows[baseline_exp]["verdict"] == "baseline"
    tok_s = row["workloads"][0]["metrics"]["output_throughput_tok_s"]
    assert tok_s["delta_pct"] == pytest.approx(summary["delta_pct"]) and tok_s["value"] == summary["output_throughput_tok_s"]
    assert row["workloads"][0]["runs"] == REPEATS and row["evidence"] == evidence
    # the agent's verdict, journaled as the agent, beside the measured one
    assert (verdict["type"], verdict["experiment"], verdict["actor"]) == ("verdict", exp, "agent:claude-code")
    assert decided["decision"] == decision and decided["verdict"] == summary["verdict"]
    j = Journal(cfg.parent / ".optui" / "optui.db", read_only=True)
    try:
        requests = j.events(types=["agent.request"])
        assert [(e.data["action"], e.actor) for e in requests] == [("benchmark", "agent:claude-code"),
                                                                    ("experiment", "agent:claude-code")]
        assert [(e.data["decision"], e.actor) for e in j.events(types=["agent.decision"])] == [("approved", "tui")] * 2
        outcome = j.events(types=["agent.outcome"])[-1]
        assert (outcome.experiment, outcome.data["outcome"], outcome.data["state"]) == (exp, "ran", "ready")
        baseline_results = j.results(experiment=baseline_exp)
        assert len(baseline_results) == len(base["run"]["results"])  # the baseline's runs, each judged against
        assert {r["baseline_result_id"] for r in ran["results"]} <= {r.id for r in baseline_results}
        assert j.events(types=["experiment.started"], experiment=exp)[0].actor == "agent:claude-code"
        assert {t.id: t.status.value for t in j.todos()} == {plain["id"]: "completed", proposal["id"]: "completed",
                                                              ran["todo_id"]: "completed"}
    finally:
        j.close()


async def test_an_agent_is_told_who_restarts_the_server_while_the_operators_restart_holds_it(campaign):
    """Last in the module: the operator's restart leaves the server at demo speed 3."""
    db = campaign.parent / ".optui" / "optui.db"
    async with agent(campaign, name="codex") as client:
        j = Journal(db, read_only=True)
        try:
            since = j.last_seq()
        finally:
            j.close()
        # the operator's `optui restart` (its server starts in ~2 s at demo speed 3: it holds the lock meanwhile)
        operator = subprocess.Popen(
            [sys.executable, "-m", "optui", "-c", str(campaign), "restart", "demo", "--set", "--demo-speed=3",
             "--reason", "slower start", "--json"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=subprocess_env({"OPTUI_ACTOR": "ann"}), start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while not _restarts_by(db, operator.pid, since):
                assert time.monotonic() < deadline and operator.poll() is None, operator.communicate()
                await asyncio.sleep(0.05)
            holder = f"ann (pid {operator.pid}, why: slower start) is restarting it now: one restart per server at a time"
            refused = error_text(await client.call_tool("restart_server", {
                "server": "demo", "why": "try 20", "set_flags": {"--max-running-requests": "20"}, "wait_s": 2}))
            assert f"demo: not restarted, {holder}" in refused, refused
            refused = error_text(await client.call_tool("run_experiment", {
                "benchmark": "sweep", "why": "try 20", "set_flags": {"--max-running-requests": "20"}, "wait_s": 2}))
            assert f"demo: no experiment run, {holder}" in refused, refused
            refused = error_text(await client.call_tool("stop_server", {"server": "demo", "why": "free the GPUs", "wait_s": 2}))
            assert f"demo: not stopped, {holder}" in refused, refused
            spec = campaign.parent / "pair.toml"  # a spec file: a search restarts the server every trial
            spec.write_text('server = "demo"\nbench = "sweep"\n[flags]\n"--max-running-requests" = [2, 8]\n')
            refused = error_text(await client.call_tool("search_run", {"spec": str(spec), "why": "batch", "wait_s": 2}))
            assert f"demo: no search run, {holder}" in refused, refused
            assert operator.poll() is None, "the operator's restart held the lock through every answer"
            out, err = operator.communicate(timeout=60)
        finally:
            if operator.poll() is None:
                operator.kill()
                operator.wait()
    assert operator.returncode == 0, err + out
    j = Journal(db, read_only=True)
    try:
        assert not [e for e in j.events(types=["agent.request"], since_seq=since)], "nothing was asked"
    finally:
        j.close()


def _restarts_by(db, pid: int, since: int) -> list:
    """The ``server.restart`` events process ``pid`` journaled after event ``since``."""
    j = Journal(db, read_only=True)
    try:
        return [e for e in j.events(types=["server.restart"], since_seq=since) if e.data.get("pid") == pid]
    finally:
        j.close()
