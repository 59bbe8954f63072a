"""Benchmark runs through the session (optui.session.bench.service / bench_run / bench_command)
with fake SGLang / vLLM clients as real subprocesses, a real SQLite journal, and a server
that is down (a closed port): result files preferred over stdout, sweeps and repeats, the
stall watchdog, abort, import."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from optui.adapters import proc
from optui.config import load_config
from optui.core.bench.parse import parse_any
from optui.core.bench.sweep import parse_sweep
from optui.session import Session
from optui.session.bench.service import import_results

pytestmark = pytest.mark.timeout(60)
TOOLS = Path(__file__).parents[1] / "helpers" / "fake_tools"
SGLANG = [sys.executable, str(TOOLS / "sglang" / "bench_serving.py")]
VLLM = [sys.executable, str(TOOLS / "benchmark_serving.py")]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "bench"


def campaign(tmp_path: Path, benches: dict[str, str]) -> Session:
    """A campaign whose server is down (port 1, observed only) with benchmark presets."""
    text = '[hosts.local]\ngpu_source = "none"\n[servers.s]\nurl = "http://127.0.0.1:1"\ncontrol = "none"\n'
    for name, body in benches.items():
        text += f"[benchmarks.{name}]\nserver = \"s\"\n{body}\n"
    (tmp_path / "optui.toml").write_text(text)
    return Session(load_config(tmp_path / "optui.toml"))


def argv(base: list[str], *extra: str) -> str:
    return "argv = " + json.dumps([*base, *extra])


async def run(session: Session, name: str, **kw):
    session.benches.run(name, **kw)
    await session.benches.wait()
    return session.benches.current


async def test_sglang_output_file_is_preferred_and_completed_from_stdout(tmp_path):
    out = tmp_path / "res.jsonl"
    out.write_text('{"backend": "sglang", "completed": 1, "total_throughput": 1, "mean_e2e_latency_ms": 1}\n')
    s = campaign(tmp_path, {"c": argv(SGLANG, "--num-prompts", "20", "--max-concurrency", "4",
                                      "--output-file", str(out))})
    bench = await run(s, "c")
    [r] = bench.view.results
    assert bench.view.status == "ok" and r.extra["source"] == "file"
    assert r.output_throughput_tok_s == pytest.approx(100 * 4**0.8 + 0.123456)  # full precision: the file
    assert r.failed == 0 and r.workload.num_prompts == 20  # from the Namespace line on stdout
    assert (r.workload.input_len, r.workload.max_concurrency) == (128, 4)
    assert any(line.startswith("optui: 1 result(s) read from") for line in bench.lines)
    assert len(out.read_text().splitlines()) == 2  # the older line was not read again
    stored = s.journal.results()
    assert len(stored) == 1 and stored[0].result.extra["source"] == "file"
    await s.close()


async def test_missing_result_file_falls_back_to_stdout(tmp_path):
    s = campaign(tmp_path, {"c": argv(SGLANG, "--output-file", str(tmp_path / "never.jsonl"), "--no-file")})
    bench = await run(s, "c")
    [r] = bench.view.results
    assert bench.view.status == "ok" and "source" not in r.extra
    assert r.output_throughput_tok_s == 100.12  # the printed block's two decimals
    assert any("result file not used" in line and "never.jsonl" in line for line in bench.lines)
    await s.close()


async def test_vllm_save_result_newest_json_in_result_dir(tmp_path):
    (tmp_path / "old.json").write_text((FIXTURES / "vllm_2025_save_result.json").read_text())
    s = campaign(tmp_path, {"v": argv(VLLM, "--save-result", "--result-dir", str(tmp_path),
                                      "--random-input-len", "1024", "--random-output-len", "128")})
    bench = await run(s, "v")
    [r] = bench.view.results
    expected = parse_any((FIXTURES / "vllm_save_result.json").read_text())[0]
    assert r.extra["source"] == "file" and r.tool == "vllm"
    assert r.output_throughput_tok_s == expected.output_throughput_tok_s and r.failed == expected.failed
    assert (r.workload.input_len, r.workload.output_len) == (1024, 128)  # the JSON has none: from the argv
    await s.close()


async def test_sweep_gives_one_result_per_point_with_scaling_efficiency(tmp_path):
    s = campaign(tmp_path, {"c": argv(SGLANG, "--num-prompts", "8") + "\nsweep = { concurrency = [1, 2, 4] }"})
    spec = s.benches.default_sweep("c")
    assert spec.describe() == "concurrency 1,2,4"
    bench = await run(s, "c", sweep=spec)
    view = bench.view
    assert view.status == "ok" and view.points_done == view.points_total == 3
    assert [r.max_concurrency for r in view.results] == [1, 2, 4]
    assert len({r.extra["run_id"] for r in view.results}) == 1
    assert [r.extra["point"] for r in view.results] == ["c=1", "c=2", "c=4"]
    assert sum(line.startswith("$ ") and "--max-concurrency" in line for line in bench.lines) == 3
    rows = s.benches.rows()
    assert [r.scaling for r in rows] == pytest.approx([1.0, 2**0.8 / 2, 4**0.8 / 4], abs=0.005)
    started = s.journal.events(types=["bench.started"])[-1].data
    assert started["plan"] == "sweep concurrency 1,2,4" and started["run_id"] == view.run_id
    await s.close()


async def test_repeats_fold_into_one_group_and_a_pinned_baseline_gives_deltas(tmp_path):
    s = campaign(tmp_path, {"c": argv(SGLANG, "--num-prompts", "4", "--max-concurrency", "2"),
                            "fast": argv(SGLANG, "--num-prompts", "4", "--max-concurrency", "2", "--scale", "1.5")})
    await run(s, "c", repeats=3)
    [base] = s.benches.rows()
    assert base.group.ids == (1, 2, 3) and base.samples["output_throughput_tok_s"].n == 3 and base.is_baseline
    s.benches.pin_baseline(2)
    pinned = s.journal.events(types=["bench.baseline"])[-1]
    assert pinned.data["result_id"] == 2
    # the event says what the rows are compared with: the group's median of 3, not result #2's own
    median = base.samples["output_throughput_tok_s"].median
    assert pinned.data["output_throughput_tok_s"] == median and pinned.data["runs"] == 3
    assert f"{median:.1f} out tok/s (median of 3 runs) (result #2)" in pinned.summary()
    await run(s, "fast")  # same workload, 1.5x the throughput — one run: a number, never a verdict
    _, once = s.benches.rows()
    delta = once.deltas["output_throughput_tok_s"]
    assert delta.pct == pytest.approx(50, abs=0.5) and delta.good and delta.verdict == "untested noise"
    await run(s, "fast", repeats=3)  # three runs, clear of the baseline's: better, with n and spread
    *_, new = s.benches.rows()
    delta = new.deltas["output_throughput_tok_s"]
    assert delta.pct == pytest.approx(50, abs=0.5) and delta.good and delta.verdict == "better"
    assert (delta.judgement.n, delta.judgement.base_n, delta.judgement.p) == (3, 3, pytest.approx(0.1))
    await s.close()


async def test_a_run_that_lost_most_requests_is_degraded_never_compared(tmp_path):
    """Issue 16: the server killed mid-run left 15 of 400 requests ok; that was stored ok and
    shown +13.1 %. Now the result is 'degraded' with the count, the run failed, no delta."""
    s = campaign(tmp_path, {"c": argv(SGLANG, "--num-prompts", "400", "--max-concurrency", "2"),
                            "killed": argv(SGLANG, "--num-prompts", "400", "--max-concurrency", "2", "--scale", "1.13",
                                           "--completed", "15"),
                            "lossy": argv(SGLANG, "--num-prompts", "400", "--max-concurrency", "2", "--completed", "396")
                            + "\nmax_failed_pct = 0.5"})
    await run(s, "c", repeats=3)
    bench = await run(s, "killed")
    [r] = bench.view.results
    assert (r.status, r.completed, r.failed) == ("degraded", 15, 385)
    assert bench.view.status == "failed" and "385 of 400 requests failed (96.2 % > 1 %)" in bench.view.error
    assert s.journal.results(limit=1)[0].result.status == "degraded"  # stored as such
    base, killed = s.benches.rows()
    assert killed.group.ok == () and killed.group.requests == (15, 400)
    assert all(d.pct is None and d.verdict is None for d in killed.deltas.values())  # never compared
    assert base.is_baseline and base.group.requests == (1200, 1200)
    lossy = await run(s, "lossy")  # 1 % lost, above this preset's own 0.5 %
    assert lossy.view.results[0].status == "degraded" and "(1.0 % > 0.5 %)" in lossy.view.error
    await s.close()


async def test_failed_tool_run_is_failed_not_a_zero_result(tmp_path):
    s = campaign(tmp_path, {"c": argv(SGLANG, "--fail")})
    bench = await run(s, "c")
    assert bench.view.status == "failed" and "IndexError" in bench.view.error
    assert [r.status for r in bench.view.results] == ["failed"]
    await s.close()


async def test_stall_is_detected_journaled_and_the_group_killed(tmp_path):
    s = campaign(tmp_path, {"slow": argv(SGLANG, "--silent", "300", "--child") + "\nstall_s = 1.0"})
    bench = await run(s, "slow")
    view = bench.view
    assert view.status == "stalled" and "no output for" in view.error
    assert not proc.group_alive(bench.pid)
    alert = s.journal.events(types=["alert"])[-1].data
    assert alert["kind"] == "bench_stalled" and "server down" in alert["message"] and "killed" in alert["message"]
    finished = s.journal.events(types=["bench.finished"])[-1].data
    assert finished["status"] == "stalled" and "not healthy" in finished["error"]
    await s.close()


async def test_abort_during_a_sweep_stops_it_and_kills_the_group(tmp_path):
    s = campaign(tmp_path, {"slow": argv(SGLANG, "--silent", "300", "--child")})
    s.benches.run("slow", sweep=parse_sweep("1,2,4"))
    bench = s.benches.current
    for _ in range(200):
        if bench.pid and any("Namespace(" in line for line in bench.lines):
            break
        await asyncio.sleep(0.05)
    assert s.benches.abort()
    await s.benches.wait()
    assert bench.view.status == "aborted" and bench.view.points_done == 1
    assert not proc.group_alive(bench.pid)
    assert s.journal.events(types=["bench.finished"])[-1].data["status"] == "aborted"
    await s.close()


def test_import_results_stores_workloads_and_journals(tmp_path):
    s = campaign(tmp_path, {})
    results = parse_any((FIXTURES / "vllm_0.33_sweep.log").read_text())
    ids = import_results(s.journal, results, source="sweep.log", server=None, bench="imported")
    stored = {r.id: r for r in s.journal.results()}
    assert sorted(stored) == ids and [stored[i].result.max_concurrency for i in ids] == [1, 8, 32]
    event = s.journal.events(types=["bench.imported"])[-1]
    assert event.data["file"] == "sweep.log" and event.data["result_ids"] == ids
    s.journal.close()


async def test_history_is_merged_not_reloaded_and_sees_other_processes(tmp_path):
    from optui.adapters.journal import Journal
    from optui.session.bench.service import HISTORY_LIMIT

    s = campaign(tmp_path, {"c": argv(SGLANG, "--num-prompts", "4")})
    await run(s, "c")
    assert len(s.benches.rows()) == 1
    limits: list[int] = []
    results = s.journal.results
    s.journal.results = lambda **kw: limits.append(kw.get("limit")) or results(**kw)
    await run(s, "c")
    assert [len(g.group.ids) for g in s.benches.rows()] == [1, 1]
    assert HISTORY_LIMIT not in limits  # the new result was merged from the newest ones
    other = Journal(s.journal.path)  # another optui process (the CLI) imports and pins
    import_results(other, parse_any((FIXTURES / "vllm_0.33_sweep.log").read_text()), source="x.log",
                   server=None, bench="imp")
    other.close()
    s.sync_journal()
    assert len(s.benches.rows()) == 5 and HISTORY_LIMIT in limits  # an import reloads the history
    s.journal.results = results
    await s.close()


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory):
    from tests.helpers.demo import start_demo_server

    with start_demo_server(tmp_path_factory.mktemp("demo")) as srv:
        yield srv.base_url


def builtin_campaign(tmp_path: Path, url: str, **builtin) -> Session:
    spec = {"concurrency": [1], "input_len": 16, "output_len": 4, "prompts": 4, "warmup": 0, **builtin}
    body = ", ".join(f"{k} = {json.dumps(v)}" for k, v in spec.items())
    (tmp_path / "optui.toml").write_text(
        f'[hosts.local]\ngpu_source = "none"\n[servers.d]\nurl = "{url}"\ncontrol = "none"\n'
        f'[benchmarks.gen]\nserver = "d"\nbuiltin = {{ {body} }}\n')
    return Session(load_config(tmp_path / "optui.toml"))


async def test_builtin_generator_sweep_with_repeats_and_a_rate_sweep(tmp_path, demo_url):
    s = builtin_campaign(tmp_path, demo_url)
    bench = await run(s, "gen", sweep=parse_sweep("1,2 x2"))
    view = bench.view
    assert view.status == "ok" and view.points_total == 4, view.error
    assert [r.extra["point"] for r in view.results] == ["c=1 run 1/2", "c=1 run 2/2", "c=2 run 1/2", "c=2 run 2/2"]
    assert {r.tool for r in view.results} == {"optui-loadgen"}
    one, two = s.benches.rows()
    assert (one.group.ids, two.group.ids) == ((1, 2), (3, 4))  # repeats fold into one row per point
    assert one.samples["output_throughput_tok_s"].n == 2 and two.scaling is not None and 0.3 < two.scaling < 1.5
    bench = await run(s, "gen", sweep=parse_sweep("rate 40,80"))
    assert [(r.request_rate, r.max_concurrency) for r in bench.view.results] == [(40.0, 1), (80.0, 1)]
    await s.close()


async def test_builtin_generator_abort_keeps_finished_points(tmp_path, demo_url):
    s = builtin_campaign(tmp_path, demo_url, concurrency=[1, 2], output_len=4)
    s.benches.run("gen", sweep=parse_sweep("1,2,3,4,5,6"))
    bench = s.benches.current
    for _ in range(400):
        if bench.view.points_done >= 1:
            break
        await asyncio.sleep(0.02)
    assert bench.view.points_done >= 1
    s.benches.abort()
    await s.benches.wait()
    assert bench.view.status == "aborted" and bench.view.points_done < 6
    stored = s.journal.results()
    assert stored and all(r.result.extra["run_id"] == bench.view.run_id for r in stored)
    assert s.journal.events(types=["bench.finished"])[-1].data["status"] == "aborted"
    await s.close()


async def test_every_run_of_an_external_client_gets_fresh_prompts_by_its_seed(tmp_path):
    """SGLang's bench_serving (--seed 1) and vLLM's bench serve (--seed 0) send the same
    prompts every run unless told otherwise: optui adds a fresh --seed to each run, sweep
    point and repeat, and records it with the result; an argv's own --seed is kept."""
    s = campaign(tmp_path, {"c": argv(SGLANG, "--num-prompts", "4"), "fixed": argv(VLLM, "--num-prompts", "4", "--seed", "7")})
    bench = await run(s, "c", repeats=3)
    commands = [line for line in bench.lines if line.startswith("$ ")]
    seeds = [int(c.split("--seed ")[1].split()[0]) for c in commands]
    assert len(commands) == 3 and len(set(seeds)) == 3, commands
    assert [r.workload.seed for r in bench.view.results] == seeds
    fixed = await run(s, "fixed")
    assert [r.workload.seed for r in fixed.view.results] == [7]
    assert all(line.count("--seed") == 1 for line in fixed.lines if line.startswith("$ "))
    # the journal keeps the commands as run, --seed included (issue 32: it had the preset's argv only)
    finished = s.journal.events(types=["bench.finished"])
    journaled = [" ".join(c) for e in finished for c in e.data["commands"]]
    assert journaled == [c.removeprefix("$ ") for c in commands] + [" ".join(bench_argv) for bench_argv in fixed.commands]
    assert all("--seed" in c for c in journaled)
    await s.close()


async def test_a_flood_is_taken_in_per_read_not_per_line(tmp_path):
    # issue 17 §2: 20k lines/s went through the ingest path line by line on the event loop
    # (capture, progress, on_change per line: ~30 % of it); now one call per pipe read
    flood = tmp_path / "flood.py"
    flood.write_text(
        "import sys\n"
        f"block = open({str(FIXTURES / 'sglang_0.5.2.log')!r}).read()\n"
        "for k in range(100):\n"
        "    sys.stdout.write(''.join(f'[bench] request {k * 200 + i} done\\n' for i in range(200)))\n"
        "    sys.stdout.flush()\n"
        "sys.stdout.write(block)\n")
    s = campaign(tmp_path, {"f": argv([sys.executable, str(flood)])})
    bench = s.benches.run("f")
    changes = []
    on_change = bench.on_change
    bench.on_change = lambda: (changes.append(1), on_change())
    await s.benches.wait()
    assert bench.view.status == "ok" and len(bench.view.results) == 1  # the block after the flood was parsed
    requests = [line for line in bench.lines if line.startswith("[bench] request ")]
    assert requests[-1] == "[bench] request 19999 done"
    assert requests == [f"[bench] request {n} done" for n in range(20_000 - len(requests), 20_000)]
    assert bench.total_lines > 20_000
    assert len(changes) < 2_000  # one per read (and per progress change), not one per line
    await s.close()
