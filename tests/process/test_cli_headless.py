"""The headless CLI end to end against the demo server (real subprocesses, real SQLite):
``optui restart`` exit codes (ready / bad flag / lock held), ``optui bench run``,
``optui status``, ``optui journal tail -f / show / experiments / export / note / verdict``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optui.adapters.journal import Journal
from optui.demo.campaign import write_demo_config
from tests.helpers.demo import TEST_SPEED, free_port, http_status, started_demo_campaign, subprocess_env

pytestmark = pytest.mark.timeout(120)


def optui(cfg: Path, *args: str, timeout: float = 90, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m optui -c CFG ARGS`` (stdin closed, own session)."""
    return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, env=subprocess_env(env),
                          start_new_session=True)


def small_demo_config(directory: Path) -> Path:
    """The demo campaign with a quicker sweep (16 prompts)."""
    cfg = write_demo_config(directory, port=free_port(), speed=TEST_SPEED)
    cfg.write_text(cfg.read_text().replace('"--num-prompts", "64"', '"--num-prompts", "16"'))
    return cfg


def kill_demo_server(cfg: Path) -> None:
    """Kill the demo server the CLI left running (it outlives optui by design)."""
    pidfile = cfg.parent / ".optui" / "servers" / "demo.json"
    try:
        pid = json.loads(pidfile.read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    with started_demo_campaign(small_demo_config(tmp_path_factory.mktemp("cli-campaign"))) as cfg:
        yield cfg


def journal_of(cfg: Path) -> Journal:
    return Journal(cfg.parent / ".optui" / "optui.db")


def test_restart_ready_exits_0_and_opens_an_experiment(campaign):
    res = optui(campaign, "restart", "demo", "--set", "--max-running-requests=8", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["state"] == "ready" and data["crash_class"] is None
    assert data["argv"][data["argv"].index("--max-running-requests") + 1] == "8"
    exp = data["experiment"]
    j = journal_of(campaign)
    started = j.events(types=["experiment.started"], experiment=exp)[0]
    assert started.actor == "cli" and started.data["diff"] == ["~ --max-running-requests: 4 → 8"]
    types = [e.type for e in j.events(experiment=exp)]
    assert {"server.restart", "flags.changed", "server.stopped", "server.starting", "server.ready"} <= set(types)
    assert j.current_experiment("demo") == exp
    j.close()


def test_restart_with_a_bad_flag_exits_1_with_the_crash_class(campaign):
    res = optui(campaign, "restart", "demo", "--set", "--no-such-flag=1", "--force")  # the operator knows better
    assert res.returncode == 1
    assert res.stdout.startswith("demo: crashed (bad_flag)")
    assert "unrecognized arguments" in res.stdout
    j = journal_of(campaign)
    failed = j.events(types=["server.failed"])[-1]
    assert failed.data["class"] == "bad_flag" and failed.experiment == j.current_experiment("demo")
    j.close()
    # --no-wait: back as soon as the new process runs; it becomes ready on its own
    fixed = optui(campaign, "restart", "demo", "--unset", "--no-such-flag", "--no-wait", "--json")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert json.loads(fixed.stdout)["state"] in ("starting", "warming", "ready")
    url = next(line.split('"')[1] for line in campaign.read_text().splitlines() if line.startswith("url = "))
    deadline = time.monotonic() + 30
    while http_status(url + "/health") != 200:
        assert time.monotonic() < deadline, "server never became ready after --no-wait"
        time.sleep(0.1)


def test_restart_refused_while_another_process_restarts(campaign):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from optui.session.server.locks import ServerLock;"
         "lock = ServerLock(Path(sys.argv[1]), 'demo'); assert lock.acquire(); print('held', flush=True); time.sleep(60)",
         str(campaign.parent / ".optui")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=subprocess_env(), start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = optui(campaign, "restart", "demo", "--set", "--max-running-requests=12")
        assert res.returncode == 2
        assert f"demo is being restarted by another optui process (pid {holder.pid})" in res.stderr
        assert "Traceback" not in res.stderr
    finally:
        holder.kill()
        holder.wait()


def test_bench_run_repeats_and_stores_under_the_experiment(campaign):
    j = journal_of(campaign)
    before = j.last_seq()
    j.close()
    res = optui(campaign, "bench", "run", "demo", "sweep", "--repeat", "2", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    # one run whose points are repeated (they group as repeats: median, spread, a verdict)
    assert [r["status"] for r in data["runs"]] == ["ok"] and data["runs"][0]["repeats"] == 2
    exp = data["experiment"]
    assert data["runs"][0]["results"][0]["completed"] == 16
    assert "output_throughput_tok_s" in data["runs"][0]["results"][1]["vs_baseline"]
    assert data["experiment_summary"]["verdict"] in ("baseline", "better", "same", "worse", "untested noise")
    j = journal_of(campaign)
    assert len(j.results(experiment=exp)) == 2
    finished = j.events(types=["bench.finished"], experiment=exp)
    assert len(finished) == 1 and all(e.actor == "cli" for e in finished)
    # Each session journals the server's state only where it differs from what the journal
    # last said, from that state: the chain of transitions has no gap (the --no-wait
    # restart above left "starting"; this session found it ready), and no session journals
    # its own initial "down" (each CLI session used to add a spurious "down → ready").
    states = [e.data for e in j.events(types=["server.state"])]
    assert all(a["new"] == b["old"] for a, b in zip(states, states[1:], strict=False)), states
    assert [e.data["old"] for e in j.events(since_seq=before, types=["server.state"])] in ([], ["starting"])
    before = j.last_seq()
    text = optui(campaign, "bench", "run", "demo", "sweep", "--repeat", "1")
    assert text.returncode == 0 and f"sweep on demo ({exp}): ok, 1 run (" in text.stdout and "  run 1/1: " in text.stdout
    assert j.events(since_seq=before, types=["server.state"]) == []  # found ready, as journaled
    j.close()


def test_bench_run_bad_input(campaign, tmp_path):
    res = optui(campaign, "bench", "run", "demo", "nope")
    assert res.returncode == 2 and "unknown benchmark 'nope' (known: sweep, loadgen)" in res.stderr
    res = optui(campaign, "bench", "run", "other", "sweep")
    assert res.returncode == 2 and "unknown server 'other'" in res.stderr
    down = small_demo_config(tmp_path / "down")  # its server was never started
    res = optui(down, "bench", "run", "demo", "sweep")
    assert res.returncode == 1 and "demo is down (pass --wait to wait for it)" in res.stderr


def test_status_reports_everything_and_writes_nothing(campaign):
    j = journal_of(campaign)
    j.add_todo("try tp 4")
    before = j.last_seq()
    res = optui(campaign, "status", "--json", "--wait", "1.0")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [h["host"] for h in data["hosts"]] == ["gpu-node-1", "gpu-node-2"]
    assert len(data["hosts"][0]["gpus"]) == 4 and data["hosts"][0]["gpus"][0]["mem_total_mib"] > 0
    server = data["servers"][0]
    assert server["name"] == "demo" and server["state"] == "ready"
    assert server["phase"] == "ready"  # issue 20: an observer found it ready with phase None / "warmup"
    assert server["experiment"] == j.current_experiment("demo")
    assert server["flags"]["--tp-size"] == ["2"] and server["load"]["source"] == "metrics"
    assert server["last_good_argv"]  # (the --no-wait start above was not watched: no new last good)
    assert any(t["content"] == "try tp 4" for t in data["todo"])
    assert data["results"] and data["results"][0]["experiment"]
    assert data["experiments"][-1]["id"] == server["experiment"]
    assert j.last_seq() == before  # status only observes
    text = optui(campaign, "status", "--wait", "0.5")
    assert "server demo: ready" in text.stdout and "gpu 0 NVIDIA H200 (demo)" in text.stdout
    # the experiments too, as the README says (a new user found them in --json only)
    assert f"experiment {server['experiment']} on demo: ready, " in text.stdout, text.stdout
    j.close()


def test_journal_tail_follow_prints_new_events(campaign):
    # ctrl-c reaches a command run in the foreground; a test suite started in the background
    # by a shell (`pytest &`) ignores SIGINT, and a child would inherit that: not here
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        follower = subprocess.Popen([sys.executable, "-m", "optui", "-c", str(campaign), "journal", "tail", "-f", "-n",
                                     "1", "--json"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=subprocess_env(), start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        json.loads(follower.stdout.readline())  # the newest event: it is following now
        j = journal_of(campaign)
        note = j.append("note", "demo", {"text": "followed?"}, actor="agent:test")
        line = follower.stdout.readline()
        j.close()
        got = json.loads(line)
        assert got["seq"] == note.seq and got["data"]["text"] == "followed?" and got["actor"] == "agent:test"
    finally:
        follower.send_signal(signal.SIGINT)
        stuck = ""
        try:
            follower.wait(timeout=10)
        except subprocess.TimeoutExpired:  # say where it is (seen twice in full-suite runs, never alone)
            proc = Path(f"/proc/{follower.pid}")
            with contextlib.suppress(OSError):
                status = [line for line in (proc / "status").read_text().splitlines() if line.startswith(("State", "Sig", "Shd"))]
                stuck = f"still running 10 s after SIGINT: {status}, wchan {(proc / 'wchan').read_text()!r}"
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, stuck + follower.stderr.read()


def test_journal_commands(campaign, tmp_path):
    tail = optui(campaign, "journal", "tail", "-n", "3", "--type", "bench")  # (two runs above: 4 bench events)
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 3
    assert all(" bench." in line for line in tail.stdout.splitlines())
    note = optui(campaign, "journal", "note", "looks stable", "--server", "demo", env={"OPTUI_ACTOR": "agent:claude"})
    j = journal_of(campaign)
    exp = j.current_experiment("demo")
    assert note.returncode == 0 and note.stdout.strip().endswith(f"note ({exp})")
    last = j.events(newest_first=True, limit=1)[0]
    assert (last.type, last.actor, last.experiment) == ("note", "agent:claude", exp)
    verdict = optui(campaign, "journal", "verdict", exp, "keep", "--reason", "stable")
    assert verdict.returncode == 0 and optui(campaign, "journal", "verdict", "exp-9999", "keep").returncode == 2
    ready = j.events(types=["server.ready"], newest_first=True, limit=1)[0]
    show = optui(campaign, "journal", "show", str(ready.seq))
    assert show.returncode == 0 and "phase timings" in show.stdout and "ready in" in show.stdout
    assert optui(campaign, "journal", "show", "999999").returncode == 1
    exps = json.loads(optui(campaign, "journal", "experiments", "--json").stdout)
    assert exps[-1]["id"] == exp and exps[-1]["decision"] == "keep"
    assert any(x["outcome"] == "failed" and x["crash_class"] == "bad_flag" for x in exps)
    table = optui(campaign, "journal", "experiments", "--sort", "delta")
    assert table.returncode == 0 and table.stdout.splitlines()[0].startswith("experiment")
    out = tmp_path / "report.md"
    res = optui(campaign, "journal", "export", "--format", "md", "-o", str(out))
    assert res.returncode == 0 and f"wrote {out}" in res.stderr
    md = out.read_text()
    assert "## Best configuration" in md and "bad_flag" in md and "## Setup" in md
    assert "NVIDIA H200 (demo)" in md  # GPU inventory journaled by the session (hosts.seen)
    csv_text = optui(campaign, "journal", "export", "--format", "csv", "--server", "demo").stdout
    assert csv_text.splitlines()[0].startswith("experiment,server,started")
    jsonl = optui(campaign, "journal", "export", "--format", "jsonl", "--since", "1h").stdout.splitlines()
    assert len(jsonl) > 10 and all(json.loads(line)["ts"] for line in jsonl)
    bad = optui(campaign, "journal", "export", "--since", "yesterday")
    assert bad.returncode == 2 and "expected a duration" in bad.stderr
    j.close()


def test_a_flag_the_server_does_not_apply_is_unverified_in_every_listing(tmp_path):
    cfg = small_demo_config(tmp_path)
    ignore = {"OPTUI_DEMO_IGNORE": "--max-running-requests"}  # the demo accepts the flag but runs its default
    try:
        res = optui(cfg, "restart", "demo", "--set", "--max-running-requests=8", "--json", env=ignore)
        assert res.returncode == 0, res.stderr
        exp = json.loads(res.stdout)["experiment"]
        line = "--max-running-requests 8: server runs max_running_requests=32 (expected 8)"
        assert json.loads(res.stdout)["config_mismatch"] == [line]
        again = optui(cfg, "restart", "demo", env=ignore)
        assert again.returncode == 0 and f"  UNVERIFIED {line}" in again.stdout
        j = journal_of(cfg)
        ready = j.events(types=["server.ready"], experiment=exp)[-1].data
        j.close()
        assert ready["config_check"]["status"] == "unverified"
        listed = json.loads(optui(cfg, "journal", "experiments", "--json").stdout)
        assert next(x for x in listed if x["id"] == exp)["unverified"] == [line]
        assert f"UNVERIFIED {line}" in optui(cfg, "journal", "experiments").stdout
        status = json.loads(optui(cfg, "status", "--json", "--wait", "0.5").stdout)
        assert status["servers"][0]["config_mismatch"] == [line]
        assert next(x for x in status["experiments"] if x["id"] == exp)["unverified"] == [line]
        report = optui(cfg, "journal", "export", "--format", "md").stdout
        assert "**Unverified**" in report and "max_running_requests=32" in report
    finally:
        kill_demo_server(cfg)


# ------------------------------------------------------------------ one set of checks for every door (issue 16)
def demo_pid(cfg: Path) -> int:
    return json.loads((cfg.parent / ".optui" / "servers" / "demo.json").read_text())["pid"]


def argv_value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_a_bad_value_is_refused_before_anything_stops(campaign):
    assert optui(campaign, "restart", "demo", "--json").returncode == 0  # running, whatever the tests before did
    pid = demo_pid(campaign)
    j = journal_of(campaign)
    before = j.last_seq()
    j.close()
    res = optui(campaign, "restart", "demo", "--set", "--kv-cache-dtype=fp4")  # not among the --help's choices
    assert res.returncode == 2, res.stdout + res.stderr
    assert "invalid choice: 'fp4'" in res.stderr and "the server was not stopped" in res.stderr
    assert "Traceback" not in res.stderr
    assert demo_pid(campaign) == pid  # the same process kept running
    os.kill(pid, 0)
    url = next(line.split('"')[1] for line in campaign.read_text().splitlines() if line.startswith("url = "))
    assert http_status(url + "/health") == 200
    # a flag the --help does not know: refused the same way (it stopped the server, which then
    # crashed with bad_flag), naming the flag and the known ones like it; --force overrides
    for flag, close in (("-np=abc", ""), ("--max-running-requestz=8", "; closest known: --max-running-requests")):
        res = optui(campaign, "restart", "demo", "--set", flag)
        assert res.returncode == 2, res.stdout + res.stderr
        name = flag.partition("=")[0]
        assert f"{name}: unknown flag (not in `" in res.stderr and f"--help`{close})" in res.stderr
        assert "the server was not stopped" in res.stderr and "--force restarts with it anyway" in res.stderr
        assert "Traceback" not in res.stderr
    assert demo_pid(campaign) == pid and http_status(url + "/health") == 200
    j = journal_of(campaign)
    assert not [e for e in j.events(since_seq=before) if e.type in ("server.restart", "server.stopped", "experiment.started")]
    j.close()


def test_after_a_failed_restart_the_next_change_starts_from_the_last_good_flags(tmp_path):
    cfg = small_demo_config(tmp_path)  # config: --max-running-requests 4
    try:
        assert optui(cfg, "restart", "demo", "--set", "--max-running-requests=32").returncode == 0
        failed = optui(cfg, "restart", "demo", "--set", "--no-such-flag=1", "--force")
        assert failed.returncode == 1 and "roll back to the last good flags: optui -c" in failed.stdout
        assert "restart demo --rollback" in failed.stdout
        res = optui(cfg, "restart", "demo", "--set", "--max-running-requests=16", "--set", "--chunked-prefill-size=4096",
                    "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        data = json.loads(res.stdout)
        assert data["base"] == "last good" and "is not running: the changes apply to its last good flags" in res.stderr
        assert argv_value(data["argv"], "--chunked-prefill-size") == "4096" and "--no-such-flag" not in data["argv"]
        # the journaled diff is against the last good flags it applied to (32), not the config's 4
        diff = ["~ --max-running-requests: 32 → 16", "+ --chunked-prefill-size 4096"]
        j = journal_of(cfg)
        assert j.events(types=["flags.changed"], experiment=data["experiment"])[0].data["diff"] == diff
        j.close()
        rows = json.loads(optui(cfg, "journal", "experiments", "--json").stdout)
        assert next(r for r in rows if r["id"] == data["experiment"])["change_vs_previous"] == diff
        # the printed way back works
        assert optui(cfg, "restart", "demo", "--set", "--no-such-flag=1", "--force").returncode == 1
        back = optui(cfg, "restart", "demo", "--rollback", "--json")
        assert back.returncode == 0, back.stdout + back.stderr
        assert json.loads(back.stdout)["argv"] == data["argv"]
    finally:
        kill_demo_server(cfg)


def test_status_after_another_process_s_failed_restart_says_crashed_with_its_class(tmp_path):
    """Issue 34's walk: after a window's restart failed with bad_flag (its server process gone),
    `optui status` printed `server demo: down` and `crash_class: null` while that window showed
    `CRASHED bad_flag` and the journal had `server.failed … bad_flag`. Nothing runs: status
    reads how the newest launch ended, and journals nothing."""
    cfg = small_demo_config(tmp_path)
    try:
        assert optui(cfg, "restart", "demo", "--set", "--no-such-flag=1", "--force").returncode == 1  # another process
        j = journal_of(cfg)
        before = j.last_seq()
        res = optui(cfg, "status", "--json", "--wait", "0.5")
        assert res.returncode == 0, res.stderr
        server = json.loads(res.stdout)["servers"][0]
        assert server["state"] == "crashed" and server["crash_class"] == "bad_flag", server
        assert "unrecognized arguments: --no-such-flag" in (server["crash_cause"] or ""), server
        assert "--no-such-flag=1" in server["argv"] or "--no-such-flag" in server["argv"], server["argv"]
        text = optui(cfg, "status", "--wait", "0.5").stdout
        assert "server demo: crashed" in text and "(bad_flag)" in text, text
        assert "bad_flag: " in text and "unrecognized arguments" in text, text  # the cause, not only the class
        assert j.last_seq() == before  # read, not journaled again
        j.close()
    finally:
        kill_demo_server(cfg)


def test_auto_rollback_from_the_cli_says_it_failed(tmp_path):
    cfg = small_demo_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("[servers.demo]\n", '[servers.demo]\nrollback = "auto"\n', 1))
    try:
        good = optui(cfg, "restart", "demo", "--json")
        assert good.returncode == 0, good.stderr
        good_argv = json.loads(good.stdout)["argv"]
        res = optui(cfg, "restart", "demo", "--set", "--no-such-flag=1", "--force")
        assert res.returncode == 1, res.stdout + res.stderr
        assert res.stdout.startswith("demo: failed (bad_flag); rolled back to the last good flags: ready")
        j = journal_of(cfg)
        assert j.events(types=["rollback"])[-1].data["reason"] == "auto after bad_flag"
        j.close()
        status = json.loads(optui(cfg, "status", "--json", "--wait", "0.5").stdout)["servers"][0]
        assert status["state"] == "ready" and status["argv"] == good_argv
    finally:
        kill_demo_server(cfg)


def test_each_experiments_log_is_kept_after_the_next_start(tmp_path):
    # issue 20: only one old log was kept, so earlier experiments' logs were gone
    cfg = small_demo_config(tmp_path)
    try:
        ids = []
        for value in ("8", "16", "32"):
            res = optui(cfg, "restart", "demo", "--set", f"--max-running-requests={value}", "--json")
            assert res.returncode == 0, res.stderr + res.stdout
            ids.append(json.loads(res.stdout)["experiment"])
        assert len(set(ids)) == 3, ids
        logs = cfg.parent / ".optui" / "logs"
        kept = {p.name: p.read_text() for p in logs.iterdir()}
        assert set(kept) == {"demo.log", f"demo.log.{ids[0]}", f"demo.log.{ids[1]}"}, sorted(kept)
        assert "max_running_requests=8," in kept[f"demo.log.{ids[0]}"]
        assert "max_running_requests=16," in kept[f"demo.log.{ids[1]}"]
        assert "max_running_requests=32," in kept["demo.log"]
    finally:
        kill_demo_server(cfg)
