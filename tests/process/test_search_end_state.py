"""A flag search on the real demo server (issue 29, 30): a multi-point preset without the
objective's workload refused (FILE:LINE: FIELD, before any server starts), a search scored at
c=16 only that ends with the server on its winner and says so, and one search per campaign
across processes (a second ``optui search run`` refused naming the first; the first, stopped,
prints its own summary and exits 130)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from optui.core.search.spec import parse_search_text

pytestmark = pytest.mark.timeout(150)


# --- on the real demo server: the objective's workload, the end on a stated configuration, one search per campaign

DEMO_SEARCH = '''
[benchmarks.two]
server = "demo"
repeat = 3
builtin = {{ concurrency = [1, 16], input_len = 32, output_len = 16, prompts = 16 }}

[search.pool]
server = "demo"
bench = "two"
objective = "max output_tok_s"
[search.pool.flags]
"--max-running-requests" = [2, 16]

[benchmarks.one]
server = "demo"
repeat = 1
# long enough that the first search still runs when the test stops it (16 prompts: on a loaded
# machine the whole search ended while the second `search run` started, and `search stop` found none)
builtin = {{ concurrency = [8], input_len = 32, output_len = 16, prompts = 2000 }}

[search.solo]
server = "demo"
bench = "one"
[search.solo.flags]
"--max-running-requests" = [2, 8, 16]

[search.at16]
server = "demo"
bench = "two"
objective = "output_tok_s @ c=16"
constraints = ["ttft_p99_ms <= 60000 @ c=1"]
confirm_top = 1
fixed = {{ "--disable-cuda-graph" = true, "--tp-size" = 1 }}
[search.at16.flags]
"--max-running-requests" = [2, 16]
'''


def demo_campaign(tmp_path):
    from optui.demo.campaign import write_demo_config
    from tests.helpers.demo import TEST_SPEED, free_port

    cfg = write_demo_config(tmp_path, port=free_port(), speed=TEST_SPEED)
    with open(cfg, "a") as fh:
        fh.write(DEMO_SEARCH.format())
    return cfg


def test_a_multi_point_preset_without_the_objectives_workload_is_refused_with_how_to_name_one(tmp_path):
    """It ran, each trial's score the median of every run at c=1 and c=16 together."""
    from click.testing import CliRunner

    from optui.cli import cli

    cfg = demo_campaign(tmp_path)
    line = next(i for i, text in enumerate(cfg.read_text().splitlines(), 1) if text.startswith('objective = "max output_tok_s"'))
    r = CliRunner().invoke(cli, ["-c", str(cfg), "search", "run", "pool"])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == (f"optui: error: {cfg}:{line}: search.pool.objective: benchmark 'two' measures 2 workloads (c=1, c=16): "
                                "a score never pools them; name the one the objective is measured on, e.g. "
                                'objective = "max output_tok_s @ c=16"'), r.stderr
    other = tmp_path / "c4.toml"  # a workload the preset does not measure
    other.write_text('server = "demo"\nbench = "two"\nobjective = "output_tok_s @ c=4"\n[flags]\n"--max-running-requests" = [2]\n')
    r = CliRunner().invoke(cli, ["-c", str(cfg), "search", "run", str(other)])
    assert r.exit_code == 2 and r.stderr.startswith(f"optui: error: {other}:3: objective: benchmark 'two' does not measure c=4 "
                                                    "(its workloads: c=1, c=16)"), r.stderr


@pytest.mark.timeout(330)
async def test_a_search_on_c16_scores_only_c16_and_ends_with_the_server_on_its_winner(tmp_path):
    """``--max-running-requests 2 → 16`` is the same at c=1 and ~7x at c=16: scored at c=16 the
    winner beats the runner-up outside the noise, and the search leaves the server on it (its
    last trial was the runner-up's re-run, whose flags the server kept) and says so."""
    from optui.config import load_config
    from optui.session import Session

    cfg = demo_campaign(tmp_path)
    session = Session(load_config(cfg), stop_servers_on_exit=True)
    await session.start()
    try:
        for _ in range(300):
            st = session.servers["demo"].status
            if st.state.value == "ready" and st.busy is None:
                break
            await asyncio.sleep(0.05)
        spec = parse_search_text(cfg.read_text(), str(cfg), "at16")
        await session.search.start(spec, "at16")
        end = await asyncio.wait_for(session.search.wait(), 280)  # a bound: ~20 s idle, >110 s beside a CPU hog
        assert end.status == "done", end.message
        trials = session.search.trials
        assert [(dict(t.point)["--max-running-requests"], t.phase) for t in trials] == [
            ("2", "explore"), ("16", "explore"), ("16", "confirm"), ("2", "confirm")]
        results = {r.id: r for r in session.journal.results(server="demo", limit=100)}
        assert len(results) == 24  # 4 trials x 3 repeats x 2 points
        for t in trials:  # the score is of the c=16 runs only, never the pool of c=1 and c=16
            assert len(t.run_scores) == 3 and t.score == sorted(t.run_scores)[1], t
            assert "output_tok_s@c=1" in t.values and t.values["output_tok_s"] == t.values["output_tok_s@c=16"]
        fin = session.journal.events(target="search:at16", types=["search.finished"])[-1].data
        assert fin["won"] is True and fin["winner"]["flags"] == "--max-running-requests 16", fin
        assert fin["winner"]["vs"][0]["evidence"]["verdict"] == "better", fin["winner"]["vs"]
        running = fin["running"]
        assert running["why"] == "winner" and running["restarted"] and running["state"] == "ready", running
        st = session.servers["demo"].status
        assert list(st.argv) == running["argv"] and "--max-running-requests" in st.argv
        assert st.argv[st.argv.index("--max-running-requests") + 1] == "16" and st.state.value == "ready"
        assert fin["message"].endswith("; demo runs the winner's flags (--max-running-requests 16)"), fin["message"]
        restart = session.journal.events(target="demo", types=["server.restart"])[-1]  # through the restart door
        assert "ends on the winner's flags" in restart.summary() or "ends on the winner's flags" in str(restart.data)
    finally:
        await session.close()
        session.kill_leftovers()


def test_a_second_search_run_is_refused_naming_the_first_and_the_first_stopped_prints_its_own_summary(tmp_path):
    """Two ``optui search run`` processes on one campaign: the second is refused naming the
    first, and the first, stopped, prints its own summary and exits 130 (before: the second
    started a search whose trials were all infeasible, status/stop saw only it, and the first
    ended printing the other's summary with exit 1)."""
    import json
    import subprocess
    import time

    from click.testing import CliRunner

    from optui.adapters import proc
    from optui.cli import cli
    from optui.config import load_config
    from optui.session import Session
    from tests.helpers.demo import stop_process_group, subprocess_env

    cfg = demo_campaign(tmp_path)
    runner = CliRunner()
    first = subprocess.Popen([sys.executable, "-m", "optui", "-c", str(cfg), "search", "run", "solo", "--json"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=subprocess_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # the first search runs (journaled by its process)
            r = runner.invoke(cli, ["-c", str(cfg), "search", "status", "--json"])
            if r.exit_code == 0 and json.loads(r.stdout)["status"] == "running":
                break
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.2)
        data = json.loads(r.stdout)
        assert data["search_id"] == "solo.1" and data["pid"] == first.pid
        second = subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), "search", "run", "solo", "--fresh"],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, env=subprocess_env(), timeout=60)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data["started_at"]))
        assert second.returncode == 2, second.stdout + second.stderr
        assert (f"search solo.1 runs (optui process {first.pid}, started {when}): one search per campaign; "
                "`optui search stop` ends it") in second.stderr, second.stderr
        j = load_config(cfg)
        from optui.adapters.journal import Journal

        journal = Journal(j.journal_path, read_only=True)
        try:
            assert [e.data["search_id"] for e in journal.events(types=["search.started"])] == ["solo.1"]
        finally:
            journal.close()
        r = runner.invoke(cli, ["-c", str(cfg), "search", "status", "--json"])  # still sees the first
        assert json.loads(r.stdout)["search_id"] == "solo.1" and json.loads(r.stdout)["pid"] == first.pid
        r = runner.invoke(cli, ["-c", str(cfg), "search", "stop", "--json"])
        assert r.exit_code == 0 and json.loads(r.stdout)["pid"] == first.pid
        out, err = first.communicate(timeout=90)
        assert first.returncode == 130, err
        final = json.loads(out)
        assert final["search_id"] == "solo.1" and final["status"] == "stopped", final
        assert final["message"].startswith("search solo.1 stopped: stopped by cli"), final["message"]
        assert final["running"]["state"] == "ready" and final["running"]["why"] in ("winner", "start"), final["running"]
        # free again: a new search may start (the lock went with its process)
        assert not (Path(j.journal_path).parent / "search.lock").read_text().strip()
    finally:
        if first.poll() is None:
            stop_process_group(first)
        session = Session(load_config(cfg), stop_servers_on_exit=True)
        launch = session.servers["demo"].controller.recorded()
        if launch is not None:
            proc.kill_group_now(launch.pid)
        session.journal.close()
