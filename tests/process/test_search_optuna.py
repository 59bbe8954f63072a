"""The optuna strategy (issue 22): its study stored in the campaign directory, on a
synthetic objective (:mod:`optui.adapters.optuna_study`), and a search on the demo server
that resumes after ``optui search run`` is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from optui.adapters.optuna_study import STUDY_FILE, OptunaStudy
from optui.config import load_config
from optui.core.search.spec import parse_search_text
from optui.core.search.strategies import Trial, failed, judge, winner
from optui.session import Session
from tests.helpers.demo import subprocess_env
from tests.process.test_search_runs import campaign

pytestmark = pytest.mark.timeout(120)

SPEC = '''server = "d"
bench = "b"
strategy = "optuna"
budget = 12
seed = 3
constraints = ["ttft_p99_ms <= 500"]
[flags]
"--max-running-requests" = [4, 8, 16, 32]
"--mem-fraction-static" = [0.85, 0.9, 0.97]
'''


def measure(point):
    flags = dict(point)
    if flags["--mem-fraction-static"] == "0.97":
        return None  # OOM
    mrr = int(flags["--max-running-requests"])
    return {"output_tok_s": 100.0 * mrr + 100 * float(flags["--mem-fraction-static"]), "ttft_p99_ms": 20.0 * mrr}


def explore(study, spec, trials, n):
    for _ in range(n):
        point = study.ask({t.point: t for t in trials})
        if point is None:
            break
        values = measure(point)
        number = len(trials) + 1
        trial = failed(point, "oom", "CUDA out of memory", number=number) if values is None else \
            judge(spec, point, values, number=number)
        study.tell(trial)
        trials.append(trial)


def test_the_study_finds_the_optimum_keeps_failures_and_reopens_from_disk(tmp_path):
    spec = parse_search_text(SPEC, "s.toml")
    trials: list[Trial] = []
    study = OptunaStudy(tmp_path, spec, "opt.1")
    explore(study, spec, trials, 5)
    assert (tmp_path / STUDY_FILE).is_file() and study.told() >= 5
    # a new process reopens the study: what it was told is there, a trial left running is failed
    study.study.ask()  # asked, never told: the killed optui's trial
    again = OptunaStudy(tmp_path, spec, "opt.1")
    assert set(again.points()) == {t.point for t in trials}  # (a proposal tried before is told again)
    assert all(t.state.name != "RUNNING" for t in again.study.get_trials())
    explore(again, spec, trials, 7)
    points = [t.point for t in trials]
    assert len(points) == 12 and len(set(points)) == 12  # never the same configuration twice
    best = winner(spec, trials)
    # the optimum under the SLA (ttft_p99 <= 500: at most 16 running requests), no OOM point
    assert best is not None and dict(best.point) == {"--max-running-requests": "16", "--mem-fraction-static": "0.9"}
    assert {t.crash_class for t in trials if t.status == "failed"} == {"oom"}
    # another search id is another study in the same file
    assert OptunaStudy(tmp_path, spec, "opt.2").told() == 0


def test_a_killed_search_resumes_where_it_was(tmp_path):
    """``optui search run`` killed (SIGKILL) mid-search; run again it continues the same
    search id: no configuration measured twice, the optimum found within the budget."""
    cfg = campaign(tmp_path)
    text = cfg.read_text().replace('objective = "max output_tok_s"', 'objective = "max output_tok_s"\nstrategy = "optuna"\nbudget = 4')
    cfg.write_text(text)
    argv = [sys.executable, "-m", "optui", "-c", str(cfg), "search", "run", "batch", "--json"]
    env = subprocess_env()
    first = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
    session = None
    try:
        journal_path = load_config(cfg).journal_path
        deadline = time.monotonic() + 60
        from optui.adapters.journal import Journal, JournalError

        while time.monotonic() < deadline:  # two trials journaled
            if journal_path.exists():
                try:
                    j = Journal(journal_path, read_only=True)
                except JournalError:  # the search is creating it this moment ('not a journal yet')
                    time.sleep(0.1)
                    continue
                n = len(j.events(types=["search.trial"]))
                j.close()
                if n >= 2:
                    break
            assert first.poll() is None, first.communicate()
            time.sleep(0.2)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        second = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=90)
        assert second.returncode == 0, second.stderr
        data = json.loads(second.stdout)
        assert data["search_id"] == "batch.1" and data["status"] == "done"
        explored = [tuple(map(tuple, t["point"])) for t in data["trials"] if t["phase"] == "explore"]
        assert len(explored) == 4 and len(set(explored)) == 4  # the whole space, each point once, across both
        assert data["best"]["flags"] == "--max-running-requests 16 --mem-fraction-static 0.88"
        assert sorted(t["crash_class"] for t in data["trials"] if t["status"] == "failed") == ["oom", "oom"]
        assert (tmp_path / ".optui" / STUDY_FILE).is_file()
        j = Journal(journal_path, read_only=True)
        starts = j.events(types=["search.started"])
        assert [e.data["resumed"] for e in starts] == [False, True]
        items = [t for t in j.todos() if t.content.startswith("search batch.1 #")]
        assert items and all(t.done for t in items)  # the killed trial's item too
        j.close()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        from optui.adapters import proc

        session = Session(load_config(cfg), stop_servers_on_exit=True)  # only to stop what the CLI left
        launch = session.servers["demo"].controller.recorded()
        if launch is not None:
            proc.kill_group_now(launch.pid)
        session.journal.close()
