"""One benchmark, one figure: the journal's line, the experiments listing and the stored
runs of a repeated benchmark on the demo agree (each figure the median of the runs');
``optui status`` says when the server became ready, not when it looked (real CLI, real
demo server, real SQLite)."""

from __future__ import annotations

import json

import pytest

from optui.core.bench.compare import sample
from tests.helpers.demo import started_demo_campaign
from tests.process.test_cli_headless import journal_of, optui, small_demo_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    with started_demo_campaign(small_demo_config(tmp_path_factory.mktemp("figures-campaign"))) as cfg:
        yield cfg


def test_status_gives_the_time_the_server_became_ready(campaign):
    """``ready_at`` was the moment each status command looked (two calls, two times)."""
    first = json.loads(optui(campaign, "status", "--json", "--wait", "0.5").stdout)["servers"][0]
    second = json.loads(optui(campaign, "status", "--json", "--wait", "0.5").stdout)["servers"][0]
    j = journal_of(campaign)
    (ready,) = j.events(types=["server.ready"], target="demo", limit=1, newest_first=True)
    j.close()
    assert first["state"] == second["state"] == "ready"
    assert first["ready_at"] == second["ready_at"] == ready.ts
    assert first["started_at"] <= first["ready_at"]


def test_a_repeated_benchmark_shows_the_median_of_its_runs_everywhere(campaign):
    """exp-0001's bench table said TTFT p50 862.8 (the median of the 3 runs' values) where
    the journal's bench.finished line said 986.6 ms (the run of median out tok/s)."""
    res = optui(campaign, "bench", "run", "demo", "sweep", "--repeat", "3")
    assert res.returncode == 0, res.stderr
    j = journal_of(campaign)
    exp = j.current_experiment("demo")
    runs = [r.result for r in j.results(experiment=exp)]
    (finished,) = j.events(types=["bench.finished"], experiment=exp)
    j.close()
    assert len(runs) == 3
    tput = sample(r.output_throughput_tok_s for r in runs).median
    ttft = sample(r.ttft_ms["median"] for r in runs).median
    line = optui(campaign, "journal", "tail", "-n", "50", "--experiment", exp).stdout
    assert f"bench sweep ok, median of 3 runs, {tput:.1f} out tok/s, TTFT p50 {ttft:.1f} ms" in line, line
    # the CLI counts the runs of the benchmark (it said 'run 1/1' over 3 result blocks) and gives their figures
    assert f"sweep on demo ({exp}): ok, 3 runs (" in res.stdout and "  run 3/3: " in res.stdout, res.stdout
    assert f"  median of 3 runs: {tput:.1f} out tok/s, TTFT p50 {ttft:.1f} ms" in res.stdout, res.stdout
    listed = next(x for x in json.loads(optui(campaign, "journal", "experiments", "--json").stdout) if x["id"] == exp)
    metrics = listed["workloads"][0]["metrics"]
    assert listed["workloads"][0]["runs"] == 3
    assert metrics["ttft_ms.median"]["value"] == pytest.approx(ttft)
    assert metrics["output_throughput_tok_s"]["value"] == pytest.approx(tput)


def test_an_imported_result_is_in_no_running_experiment_unless_imported_into_one(campaign):
    """A vLLM result imported with --server demo was counted a run of the SGLang demo's
    running experiment, and its journal line was a Python dict (``results=[{'id': 27, ...}]``)."""
    from tests.process.test_bench_import_journal import FIXTURES

    j = journal_of(campaign)
    exp = j.current_experiment("demo")
    j.close()
    res = optui(campaign, "bench", "import", str(FIXTURES / "vllm_0.33_spec.log"), "--server", "demo", "--json")
    assert res.returncode == 0, res.stderr
    (loose,) = json.loads(res.stdout)
    into = optui(campaign, "bench", "import", str(FIXTURES / "vllm_0.33_spec.log"), "--server", "demo",
                 "--experiment", exp)
    assert into.returncode == 0 and f"as runs of {exp}" in into.stdout, into.stdout + into.stderr
    rows = json.loads(optui(campaign, "journal", "experiments", "--json").stdout)
    mine = next(x for x in rows if x.get("id") == exp)
    keys = [w["key"] for w in mine["workloads"]]
    assert keys.count(loose["workload_key"]) == 1  # the one imported into it, not the loose one
    assert [x["result_id"] for x in rows if x["kind"] == "imported"] == [loose["id"]]
    tail = optui(campaign, "journal", "tail", "-n", "20", "--grep", "imported").stdout
    lines = [line for line in tail.splitlines() if " bench.imported " in line]
    out = f"{loose['result']['output_throughput_tok_s']:.1f}"
    assert lines[0].endswith(f"imported 1 result from vllm_0.33_spec.log (in no experiment): #{loose['id']} vllm ok "
                             f"{out} out tok/s"), lines
    assert f"imported 1 result from vllm_0.33_spec.log (into {exp}): #{loose['id'] + 1} vllm ok" in lines[1], lines
    assert "{'" not in tail
    bad = optui(campaign, "bench", "import", str(FIXTURES / "vllm_0.33_spec.log"), "--experiment", "exp-9999")
    assert bad.returncode == 2 and "unknown experiment 'exp-9999'" in bad.stderr
