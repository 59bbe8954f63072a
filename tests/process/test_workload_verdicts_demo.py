"""One verdict per workload on the real demo server (issue 29's done-when): a builtin preset
at concurrency 1 and 16, ``--max-running-requests 2 → 16`` with 3 repeats each (the baseline restarted 3 times: its
restart-to-restart spread): ``bench run
--json``'s ``experiment_summary.workloads`` has both points, c=16 ``better``, c=1 ``same``,
overall ``better``; a change that helps c=16 and hurts c=1 (CUDA graphs off as well: every
decode step pays 14 ms instead of 6 in the demo's cost model) is ``mixed``, and the findings
report names both points' winners with their launch commands. The demo server is a real
subprocess on loopback, the journal a real SQLite file."""

from __future__ import annotations

import json

import pytest

from optui.demo.campaign import write_demo_config
from tests.helpers.demo import free_port
from tests.process.test_cli_headless import kill_demo_server, optui

# serial: its verdicts rest on the demo's throughput ratios, which a busy machine distorts (issue 30)
pytestmark = [pytest.mark.timeout(300), pytest.mark.serial]

#: half real time (not the usual 100x): each decode step sleeps 12 ms, long beside the
#: shared test machine's scheduling jitter, so that c=1's "same" is the cost model's
SPEED = 0.5

#: two points of one length mix: concurrency 1 and 16
SWEEP = """
[benchmarks.pair]
server = "demo"
builtin = { concurrency = [1, 16], input_len = 32, output_len = 16, prompts = 16 }
"""


@pytest.fixture
def demo(tmp_path):
    cfg = write_demo_config(tmp_path, port=free_port(), speed=SPEED)
    cfg.write_text(cfg.read_text() + SWEEP)
    try:
        yield cfg
    finally:
        kill_demo_server(cfg)


def restart(cfg, *sets: str) -> None:
    args = [a for s in sets for a in ("--set", s)]
    res = optui(cfg, "restart", "demo", *args, "--json")
    assert res.returncode == 0, res.stderr + res.stdout


def bench(cfg, *args: str) -> dict:
    res = optui(cfg, "bench", "run", "demo", "pair", "--repeat", "3", "--json", *args, timeout=200)
    assert res.returncode == 0, res.stderr + res.stdout
    return json.loads(res.stdout)


def test_per_workload_verdicts_better_and_mixed(demo):
    restart(demo, "--max-running-requests=2")
    # the baseline restarted and benched 3 times: the restart-to-restart spread (a shared test
    # machine's load moves c=1's level by a few % between experiments) is every later threshold
    spread = bench(demo, "--restarts", "3")
    base = {"experiment": spread["runs"][0]["experiment"]}
    s = spread["experiment_summary"]
    assert s["verdict"] == "same" and {w["verdict"] for w in s["workloads"]} == {"same"}, s  # the baseline's flags
    assert all(w["evidence"]["restart_spread_pct"] is not None for w in s["workloads"]), s

    restart(demo, "--max-running-requests=16")
    more = bench(demo)
    s = more["experiment_summary"]
    by_c = {w["concurrency"]: w for w in s["workloads"]}
    assert sorted(by_c) == [1, 16], s
    assert by_c[16]["verdict"] == "better" and by_c[16]["evidence"]["n"] == 3 and by_c[16]["delta_pct"] > 50, s
    assert by_c[1]["verdict"] == "same", s  # one request at a time never reaches the cap
    assert s["verdict"] == "better", s
    assert by_c[16]["baseline"] == base["experiment"] and by_c[16]["request_rate"] is None
    # one delta per run: each run's against the baseline's median, the summary's the median of them
    deltas = sorted(r["vs_baseline"]["output_throughput_tok_s"]["delta_pct"] for r in more["runs"][0]["results"]
                    if r["workload"]["max_concurrency"] == 16)
    assert len(deltas) == 3 and deltas[1] == pytest.approx(by_c[16]["delta_pct"]), (deltas, by_c[16])

    restart(demo, "--max-running-requests=16", "--cuda-graph-max-bs=0")  # faster at c=16, slower at c=1
    mixed = bench(demo)
    s = mixed["experiment_summary"]
    by_c = {w["concurrency"]: w for w in s["workloads"]}
    assert (by_c[1]["verdict"], by_c[16]["verdict"], s["verdict"]) == ("worse", "better", "mixed"), s

    # the text says each point's verdict under the overall one
    listed = optui(demo, "journal", "experiments", "--json")
    xs = {x["id"]: x for x in json.loads(listed.stdout)}
    assert xs[mixed["experiment"]]["verdict"] == "mixed" and xs[more["experiment"]]["verdict"] == "better"
    report = optui(demo, "journal", "export").stdout
    summary = report.split("## Summary")[1].split("\n## ")[0]
    assert "1 baseline, 1 better, 1 mixed, 2 same" in summary, summary
    # no configuration wins at both points: the report names each point's winner and its command
    best = report.split("## Best configuration")[1].split("\n## ")[0]
    assert f"**demo: {more['experiment']}** (better vs baseline {base['experiment']}: c=1 same " in best, best
    assert f"best at c=1: {base['experiment']} (the baseline" in best, best
    assert f"best at c=16: {more['experiment']} (+" in best, best
    assert best.count("```bash") == 2 and "--max-running-requests 2 " in best, best
