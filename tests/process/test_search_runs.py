"""Flag searches (:mod:`optui.session.search`) against the real demo server: every trial a
todo run through the session's experiment loop (restart → ready → benchmark → compare),
the known optimum found within the budget, an OOM point kept as infeasible, and a stop in
the middle that leaves no benchmark and no half-started server."""

from __future__ import annotations

import asyncio
import sys

import pytest

from optui.config import load_config
from optui.core.search.spec import parse_search_text
from optui.core.search.strategies import Trial
from optui.core.todo.items import TodoStatus
from optui.demo.campaign import write_demo_config
from optui.session import Session
from tests.helpers.demo import TEST_SPEED, free_port

pytestmark = pytest.mark.timeout(120)

# the demo's cost model (demo/scheduler.py): without CUDA graphs at tp 1 a decode step costs
# 14 ms + 0.15 ms per running request, so with 16 requests in flight --max-running-requests 16
# decodes ~7x the tokens per second of 2 (the simulated step dominates the Python HTTP cost of
# streaming, also on a loaded host); --mem-fraction-static above 0.95 is a CUDA OOM at startup
# (demo/startup.py)
SEARCH = '''
[benchmarks.tiny]
server = "demo"
repeat = 1
argv = [{py!r}, "-m", "optui.demo.bench_client", "--base-url", "http://127.0.0.1:{port}", "--num-prompts", "16",
        "--random-input-len", "32", "--random-output-len", "16", "--max-concurrency", "16"]

[search.batch]
server = "demo"
bench = "tiny"
objective = "max output_tok_s"
confirm_top = 1
fixed = {{ "--disable-cuda-graph" = true, "--tp-size" = 1 }}
[search.batch.flags]
"--max-running-requests" = [2, 16]
"--mem-fraction-static" = [0.88, 0.97]
'''


def campaign(tmp_path):
    port = free_port()
    cfg = write_demo_config(tmp_path, port=port, speed=TEST_SPEED)
    with open(cfg, "a") as fh:
        fh.write(SEARCH.format(py=sys.executable, port=port))
    return cfg


async def started(cfg) -> Session:
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    await session.start()
    for _ in range(300):  # the demo autostarts
        st = session.servers["demo"].status
        if st.state.value == "ready" and st.busy is None:
            return session
        await asyncio.sleep(0.05)
    raise AssertionError(f"demo not ready: {session.servers['demo'].status}")


@pytest.mark.serial  # its optimum is a throughput ratio (~7x): at load ~10 with the engine peers beside it, 134 vs 129
async def test_grid_finds_the_demos_optimum_and_keeps_the_oom_points(tmp_path):
    cfg = campaign(tmp_path)
    session = await started(cfg)
    try:
        spec = parse_search_text(cfg.read_text(), str(cfg), "batch")
        start_argv = list(session.servers["demo"].status.argv)
        first = await session.search.start(spec, "batch")
        assert first.search_id == "batch.1" and first.planned == 6  # 4 points + the best one and the first one re-run
        end = await session.search.wait()
        assert end.status == "done", end.message
        trials = session.search.trials
        got = [(dict(t.point)["--max-running-requests"], dict(t.point)["--mem-fraction-static"], t.phase, t.status)
               for t in trials]
        assert got == [("2", "0.88", "explore", "ok"), ("2", "0.97", "explore", "failed"),
                       ("16", "0.88", "explore", "ok"), ("16", "0.97", "explore", "failed"),
                       ("16", "0.88", "confirm", "ok"), ("2", "0.88", "confirm", "ok")]
        assert [t.crash_class for t in trials if t.status == "failed"] == ["oom", "oom"]
        assert trials[2].score > 2 * trials[0].score, [t.score for t in trials]  # ~7x in simulated time
        # the GPU memory ceiling's metric: the simulated H200s follow the demo server's memory plan
        assert all(t.values["gpu_mem_mib"] > 10_000 for t in trials if t.feasible), [t.values.get("gpu_mem_mib") for t in trials]
        assert end.best_point == "--max-running-requests 16 --mem-fraction-static 0.88" and end.infeasible == 2
        # journaled like hand-made experiments: one exp-NNNN per trial, the search's own events
        j = session.journal
        exps = [t.experiment for t in trials]
        assert all(e and e.startswith("exp-") for e in exps) and len(set(exps)) == 6
        events = j.events(target="search:batch", types=["search.started", "search.trial", "search.finished"])
        assert [e.type for e in events] == ["search.started"] + ["search.trial"] * 6 + ["search.finished"]
        begun = j.events(target="search:batch", types=["search.trial.started"])  # another process's TUI shows them
        assert [e.data["number"] for e in begun] == [1, 2, 3, 4, 5, 6] and begun[4].data["phase"] == "confirm"
        assert begun[1].data["flags"] == "--max-running-requests 2 --mem-fraction-static 0.97"
        assert [e.experiment for e in events[1:7]] == exps
        assert events[2].data["crash_class"] == "oom" and events[2].data["status"] == "failed"
        assert "infeasible (oom)" in events[2].data["message"]
        # the journal panel's line of each: what it says, not its fields
        assert events[2].summary().startswith("trial 2: --max-running-requests 2 --mem-fraction-static 0.97 → infeasible (oom)")
        # the trial's own message, not its whole line again ('trial 2: … → infeasible (oom): trial 2: …')
        assert events[2].summary().count("trial 2:") == 1 and Trial.from_json(events[2].data).message.startswith("failed at restart")
        assert events[-1].summary().startswith("search batch.1 done: best --max-running-requests 16 ")
        fin = events[-1].data
        assert fin["status"] == "done" and fin["winner"]["flags"] == "--max-running-requests 16 --mem-fraction-static 0.88"
        # trials and benchmark runs counted apart (repeat = 1: one run a trial); a winner said '(median of 1)'
        assert fin["winner"]["trials"] == 2 and fin["winner"]["bench_runs"] == 2 and len(fin["infeasible"]) == 2
        assert "(median of 2 trials, 2 runs)" in fin["message"]
        # its evidence as a verdict's: 2 runs against the runner-up's 2 tell nothing apart
        assert "(runner-up): untested noise (n=2 vs 2" in fin["message"], fin["message"]
        assert " — too few runs to test it against the runner-up; " in fin["message"], fin["message"]
        # the noisy case: nothing beat the runner-up, so no winner is launched: the server goes back to the
        # flags the search started from (it ran the last re-run's, --max-running-requests 2), and says so
        assert fin["won"] is False and fin["running"]["why"] == "start" and fin["running"]["restarted"], fin["running"]
        assert fin["message"].endswith("; nothing won: demo runs the flags it started from ("
                                       f"{' '.join(start_argv[1:])})"), fin["message"]
        st = session.servers["demo"].status
        assert list(st.argv) == start_argv and st.state.value == "ready"
        assert fin["winner"]["vs"][0]["role"] == "runner-up" and fin["winner"]["vs"][0]["evidence"]["n"] == 2
        from optui.session.search import search_status

        best = search_status(j, "batch")["best"]  # search status --json's
        assert best["text"] in fin["message"] and best["vs"] == fin["winner"]["vs"] and best["bench_runs"] == 2
        assert {r.experiment for r in j.results(server="demo")} >= {exps[0], exps[2], exps[4]}
        # every trial was a todo run; the search leaves no open item behind
        items = [t for t in j.todos() if t.content.startswith("search batch.1 #")]
        assert len(items) == 6
        assert [t.status for t in items] == [TodoStatus.COMPLETED, TodoStatus.CANCELLED, TodoStatus.COMPLETED,
                                             TodoStatus.CANCELLED, TodoStatus.COMPLETED, TodoStatus.COMPLETED]
        assert items[1].run["crash_class"] == "oom"
        # the findings report: the search's table, its infeasible region, the winner's launch command
        from optui.session.journal.export import render, report_input

        md = render("md", report_input(j, load_config(cfg), "md"))
        section = md[md.index("## Flag search batch.1"):]
        assert "grid search of demo with tiny: max output_tok_s, constraints none; 6 trials, done." in section
        rows = [line for line in section.splitlines() if line.startswith("| --max-running-requests")]
        assert rows[0].startswith("| --max-running-requests 16 --mem-fraction-static 0.88 | ") and "| 2 (2) | yes |" in rows[0]  # trials (runs)
        assert [r.split(" | ")[4] for r in rows[2:]] == ["oom", "oom"] and all("| no |" in r for r in rows[2:])
        # no "Winner" launch command where its own evidence says nothing beat the runner-up (it printed one)
        assert "Winner:" not in section and "```bash" not in section, section
        assert "No winner: the best, --max-running-requests 16 --mem-fraction-static 0.88 (output_tok_s " in section
        assert ", median of 2 trials, 2 runs), did not beat the others outside the noise." in section
        assert "Evidence: best --max-running-requests 16 " in section and "(runner-up): untested noise" in section
        assert "At its end: nothing won: demo runs the flags it started from (" in section
    finally:
        await session.close()
        session.kill_leftovers()


async def test_stop_in_the_middle_leaves_no_benchmark_and_no_half_started_server(tmp_path):
    from optui.adapters import proc

    cfg = campaign(tmp_path)
    session = await started(cfg)
    try:
        spec = parse_search_text(cfg.read_text(), str(cfg), "batch")
        await session.search.start(spec, "batch")
        runs = session.todo_runs
        for _ in range(400):  # the first trial's benchmark is running
            bench = session.benches.current
            if bench is not None and bench.pid is not None and runs.current is not None and runs.current.step.startswith("bench"):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the first trial's benchmark never ran")
        bench_pid = bench.pid
        assert session.search.progress.step == "bench tiny" and session.search.progress.trial == 1
        assert session.search.stop()
        end = await asyncio.wait_for(session.search.wait(), 30)
        assert end.status == "stopped" and session.search.trials == []  # the cut trial measured nothing
        assert not session.benches.running and not runs.running
        assert not proc.pid_alive(bench_pid)  # the client's process group was killed
        st = session.servers["demo"].status
        assert st.busy is None and st.state.value == "ready"
        fin = session.journal.events(target="search:batch", types=["search.finished"])[-1]
        assert fin.data["status"] == "stopped" and fin.data["trials"] == 0
        assert fin.data["message"].startswith("search batch.1 stopped: stopped by the operator before any trial "
                                              "finished; nothing won: demo runs the flags it started from ("), fin.data
        bench_end = session.journal.events(types=["bench.finished"])[-1]
        assert bench_end.data.get("status") == "aborted", bench_end.data
        (item,) = [t for t in session.journal.todos() if t.content.startswith("search batch.1 #1")]
        assert item.status is TodoStatus.CANCELLED
        # run again it resumes (a stop is a pause); stopped during a restart: the restart ends
        # (ready), no benchmark starts, no trial is kept
        seq = session.journal.last_seq()
        await session.search.start(spec, "batch")
        for _ in range(400):
            if session.servers["demo"].status.busy is not None:
                break
            await asyncio.sleep(0.01)
        assert session.search.stop()
        end = await asyncio.wait_for(session.search.wait(), 30)
        assert end.search_id == "batch.1" and end.status == "stopped" and session.search.trials == []
        assert [e.data["resumed"] for e in session.journal.events(types=["search.started"])] == [False, True]
        assert (await session.search.start(spec, "batch", fresh=True)).search_id == "batch.2"
        session.search.stop()
        await asyncio.wait_for(session.search.wait(), 30)
        st = session.servers["demo"].status
        assert st.busy is None and st.state.value == "ready" and "--max-running-requests" in " ".join(st.argv)
        assert not session.journal.events(since_seq=seq, types=["bench.started"])
    finally:
        await session.close()
        session.kill_leftovers()


def test_the_cli_runs_shows_and_stops_a_search(tmp_path):
    """``optui search run`` in a process of its own, ``status`` and ``stop`` from others."""
    import json
    import subprocess
    import time

    from click.testing import CliRunner

    from optui.adapters import proc
    from optui.cli import cli
    from tests.helpers.demo import stop_process_group, subprocess_env

    cfg = campaign(tmp_path)
    runner = CliRunner()
    r = runner.invoke(cli, ["-c", str(cfg), "search", "run", "nosuch"])
    assert r.exit_code == 2 and "nosuch: neither a [search.NAME]" in r.stderr and "(searches there: batch)" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('server = "demo"\nbench = "tiny"\n[flags]\n"--max-running-requests" = []\n')
    r = runner.invoke(cli, ["-c", str(cfg), "search", "run", str(bad)])
    assert r.exit_code == 2 and f"{bad}:4: flags.--max-running-requests: the list of values is empty" in r.stderr
    other = tmp_path / "other.toml"  # a preset the config lacks: FILE:LINE: FIELD like the spec's other errors
    other.write_text('server = "demo"\nbench = "nosuch"\n[flags]\n"--max-running-requests" = [2]\n')
    r = runner.invoke(cli, ["-c", str(cfg), "search", "run", str(other)])
    assert r.exit_code == 2 and f"{other}:2: bench: unknown benchmark 'nosuch' (known: " in r.stderr, r.stderr
    vllm = tmp_path / "serve_params.json"  # another tool's file: where it runs is asked for
    vllm.write_text('[{"max_running_requests": 8}, 3]')
    r = runner.invoke(cli, ["-c", str(cfg), "search", "run", str(vllm)])
    assert r.exit_code == 2 and "--server and --bench say which server and preset it runs" in r.stderr
    r = runner.invoke(cli, ["-c", str(cfg), "search", "run", str(vllm), "--server", "demo", "--bench", "tiny"])
    assert r.exit_code == 2 and f"{vllm}: record 2: expected an object of parameters" in r.stderr
    r = runner.invoke(cli, ["-c", str(cfg), "search", "status"])
    assert r.exit_code == 1
    child = subprocess.Popen([sys.executable, "-m", "optui", "-c", str(cfg), "search", "run", "batch", "--json"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=subprocess_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        current = None
        while time.monotonic() < deadline:  # the first trial is journaled (polled from another process)
            r = runner.invoke(cli, ["-c", str(cfg), "search", "status", "--json"])
            if r.exit_code == 0 and json.loads(r.stdout)["trials"]:
                break
            if r.exit_code == 0 and current is None and json.loads(r.stdout).get("current"):
                current = json.loads(r.stdout)  # trial 1 in progress: it was '"trials": []' and nothing else
                text = runner.invoke(cli, ["-c", str(cfg), "search", "status"]).stdout
            assert child.poll() is None, child.communicate()
            time.sleep(0.2)
        assert current is not None and current["trials"] == [] and current["eta_s"] is None
        cur = current["current"]
        assert cur["number"] == 1 and cur["flags"] == "--max-running-requests 2 --mem-fraction-static 0.88", cur
        assert cur["step"] in ("queued", "restart", "ready", "bench tiny", "compare") and cur["started_at"] > 0, cur
        assert current["eta_note"].startswith("no estimate until a trial of this run has ended"), current
        assert "  trial 1: --max-running-requests 2 --mem-fraction-static 0.88 … " in text, text
        assert "ETA: no estimate until a trial" in text, text
        data = json.loads(r.stdout)
        assert data["status"] == "running" and data["search_id"] == "batch.1" and data["planned"] == 6
        assert data["eta_s"] is not None and data["eta_note"].startswith("an estimate: "), data
        assert data["trials"][0]["point"] == [["--max-running-requests", "2"], ["--mem-fraction-static", "0.88"]]
        r = runner.invoke(cli, ["-c", str(cfg), "search", "status"])
        assert r.exit_code == 0 and r.stdout.startswith("batch.1 running: grid, max output_tok_s, ")
        assert "  trial 1: --max-running-requests 2 --mem-fraction-static 0.88 → " in r.stdout
        r = runner.invoke(cli, ["-c", str(cfg), "search", "stop", "--json"])
        assert r.exit_code == 0 and json.loads(r.stdout)["asked"] is True
        out, err = child.communicate(timeout=60)
        assert child.returncode == 130, err
        final = json.loads(out)
        assert final["status"] == "stopped" and final["finished_at"] and 1 <= len(final["trials"]) < 6
        assert final["message"].startswith("search batch.1 stopped: stopped by cli; so far "), final["message"]  # who asked
        r = runner.invoke(cli, ["-c", str(cfg), "search", "stop"])
        assert r.exit_code == 1 and "no search is running (batch.1 is stopped)" in r.stderr
        r = runner.invoke(cli, ["-c", str(cfg), "search", "status", "batch", "--json"])
        assert json.loads(r.stdout)["status"] == "stopped"
    finally:
        if child.poll() is None:
            stop_process_group(child)
        session = Session(load_config(cfg), stop_servers_on_exit=True)  # only to stop what the CLI left
        launch = session.servers["demo"].controller.recorded()
        if launch is not None:
            proc.kill_group_now(launch.pid)
        session.journal.close()


@pytest.mark.serial  # its SLO is a latency (TTFT p99 <= 60 ms): a loaded CI machine's queueing moved the line
async def test_sla_finds_the_largest_concurrency_under_the_ttft_slo(tmp_path):
    """One configuration (4 running requests at most), one restart, then the preset at each
    load of the bisection: beyond 4 requests in flight the rest queue for a whole batch and
    the TTFT p99 jumps over the SLO."""
    cfg = campaign(tmp_path)
    with open(cfg, "a") as fh:
        fh.write('''
[search.load]
server = "demo"
bench = "tiny"
strategy = "sla"
constraints = ["ttft_p99_ms <= 60"]
fixed = { "--max-running-requests" = 4, "--mem-fraction-static" = 0.9 }
sla = { kind = "concurrency", low = 1, high = 16 }
''')
    session = await started(cfg)
    try:
        seq = session.journal.last_seq()
        spec = parse_search_text(cfg.read_text(), str(cfg), "load")
        await session.search.start(spec, "load")
        end = await session.search.wait()
        assert end.status == "done", end.message
        trials = session.search.trials
        loads = [t.load for t in trials]
        assert loads[:2] == [1.0, 16.0] and len(set(loads)) == len(loads) <= 6, loads
        good = [t.load for t in trials if t.feasible]
        bad = [t.load for t in trials if not t.feasible]
        assert good and bad and max(good) < min(bad) and min(bad) - max(good) == 1, [(t.load, t.values.get("ttft_p99_ms")) for t in trials]
        assert 2 <= max(good) <= 8, [(t.load, t.values.get("ttft_p99_ms")) for t in trials]
        # one restart, one experiment: every load a benchmark point of it
        assert len(session.journal.events(since_seq=seq, types=["server.restart"])) == 1
        assert len({t.experiment for t in trials}) == 1 and trials[0].experiment.startswith("exp-")
        assert [r.result.max_concurrency for r in session.journal.results(server="demo")][::-1][-len(trials):] == [int(x) for x in loads]
    finally:
        await session.close()
        session.kill_leftovers()


def test_status_says_the_budgets_cut_and_the_trial_in_progress_from_the_journal(tmp_path):
    """`search status` (text) of a search whose grid is larger than its budget, its first trial
    running: it said '0/15 trials' and nothing of the cut or of the trial (no server needed: the
    journal as a running search leaves it)."""
    import os

    from click.testing import CliRunner

    from optui.adapters.journal import Journal
    from optui.cli import cli

    cfg = campaign(tmp_path)
    spec = parse_search_text(cfg.read_text(), str(cfg), "batch").model_copy(update={"budget": 2, "confirm_top": 0})
    (cfg.parent / ".optui").mkdir(exist_ok=True)
    j = Journal(cfg.parent / ".optui" / "optui.db")
    try:
        note = "grid of 4, budget 2: 2 points not tried (a spread of 2 runs, not the first 2)"
        j.append("search.started", "search:batch", {"search_id": "batch.1", "name": "batch", "spec": spec.model_dump(mode="json"),
                                                    "planned": 2, "pid": os.getpid(), "note": note, "message": "search batch.1"})
        j.append("search.trial.started", "search:batch", {"search_id": "batch.1", "number": 1, "phase": "explore",
                                                          "point": [["--max-running-requests", "2"]], "bench": "tiny",
                                                          "flags": "--max-running-requests 2", "started_at": 1.0})
        j.append("todo.run.step", "todo:1", {"todo_id": 1, "step": "restart"})
    finally:
        j.close()
    r = CliRunner().invoke(cli, ["-c", str(cfg), "search", "status"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1:] == [note, "  trial 1: --max-running-requests 2 … restart",
                                         "ETA: no estimate until a trial of this run has ended (each trial restarts "
                                         "the server: no prior time)", "best: none feasible yet"], r.stdout
