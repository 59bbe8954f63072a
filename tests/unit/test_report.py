"""Exports: the Markdown findings report, JSONL events, CSV experiments, atomic writes."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex

import pytest

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.core.journal import events as ev
from optui.core.journal.report import CSV_COLUMNS, ReportInput, render_csv, render_jsonl, render_markdown
from optui.session.journal.export import default_export_path, export, report_input, write_atomic
from tests.helpers.campaign import T0, CampaignWriter, flags, result, standard_campaign

CONFIG = '''
[hosts.local]
gpu_source = "none"

[servers.qwen]
url = "http://127.0.0.1:30000"
kind = "sglang"
argv = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
env = { HF_TOKEN = "secret-value", CUDA_VISIBLE_DEVICES = "0,1" }
'''


@pytest.fixture
def campaign(tmp_path):
    cfg = tmp_path / "qwen-tuning" / "optui.toml"
    cfg.parent.mkdir()
    cfg.write_text(CONFIG)
    loaded = load_config(cfg)
    j = Journal(loaded.journal_path)
    ids = standard_campaign(j)
    j.append(ev.HOSTS_SEEN, "gpu-node-1", {"gpus_by_name": [{"name": "NVIDIA H200", "count": 8, "mem_total_mib": 143771.0}],
                                          "driver_version": "580.159.04"}, ts=T0)
    j.append(ev.NOTE, None, {"text": "rack maintenance at 16:00"}, ts=T0 + 10)
    j.add_todo("Try --chunked-prefill-size 4096", priority="high", status="in_progress")
    j.add_todo("Done already", status="completed")
    j.add_todo("Measure TTFT at c1", priority="low")
    yield loaded, j, ids
    j.close()


def section(md: str, title: str) -> str:
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start:end if end > 0 else None]


def test_markdown_findings_report(campaign):
    loaded, j, ids = campaign
    md = render_markdown(report_input(j, loaded, "md"))
    assert md.startswith("# Findings: qwen-tuning\n")
    assert "- 5 experiments on qwen: 1 baseline, 1 better, 1 worse, 1 failed, 1 untested." in md
    setup = section(md, "Setup")
    assert "| gpu-node-1 | 8× NVIDIA H200 (140 GiB) | 580.159.04 |" in setup
    assert "| qwen | local | sglang | Qwen/Qwen3-8B | 0.5.23 | process |" in setup
    baseline = section(md, "Baseline")
    assert "**qwen: exp-0001**" in baseline and shlex.join(flags()) in baseline
    table = section(md, "Experiments")
    row = next(line for line in table.splitlines() if line.startswith("| exp-0002 "))
    assert "`~ --max-running-requests: 16 → 64`" in row and "+28.9%" in row and "better" in row
    # every verdict with its evidence, and the statistic named
    assert "| 3/3 runs, 192/192 ok |" in row and "n=3 vs 3, ±0.4 % / ±0.5 %, p=0.10, vs exp-0001 |" in row
    assert "- Verdicts: median of the repeats; exact two-sided Mann-Whitney U test" in section(md, "Summary")
    assert "- Verdict: **better** (+28.9% out tok/s; n=3 vs 3, ±0.4 % / ±0.5 %, p=0.10, vs exp-0001)." in md
    assert "### exp-0003 (qwen):" in md and "**failed, oom**: torch.OutOfMemoryError: CUDA out of memory" in md
    assert "- Rolled back to the last good flags." in md
    # how long each phase lasted (marks at 2.0 and 20.0 s, ready at 31.5 s), not when it began
    assert "- Outcome: ready in 31.5 s (phases: loading_weights 18.0 s, cuda_graph 11.5 s)." in md
    assert "- Note: 64 looks better; check p99 TTFT" in md
    # the runs' spread as the TUI and the evidence say it (a new user found 'CV 1.8%' beside '±1.4%'),
    # and a unit said once
    assert ", 3/3 comparable runs, requests 192/192 ok, out tok/s ±0.4 % over its runs:" in md, md
    assert "CV" not in md and "(tok/s)" not in md and "| out tok/s | 1,005.00 | 1,295.00 | +28.9% |" in md
    failures = section(md, "Failures")
    assert "| exp-0003 | qwen | oom |" in failures
    best = section(md, "Best configuration")
    command = best.split("```bash\n")[1].split("\n```")[0]
    # one pasteable line with the environment that decides the result (issue 20); a secret only named
    assert "\n" not in command and shlex.split(command) == ["CUDA_VISIBLE_DEVICES=0,1", *flags(max_running_requests=64)]
    assert "also sets: HF_TOKEN." in best and "secret-value" not in md
    assert "```bash\nCUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server" in section(md, "Baseline")
    todo = section(md, "Open todo items")
    assert "- [ ] **high** Try --chunked-prefill-size 4096 (in progress)" in todo
    assert "Measure TTFT at c1" in todo and "Done already" not in todo
    assert "rack maintenance at 16:00" in section(md, "Notes")


def test_markdown_since_and_server_filters(campaign):
    loaded, j, ids = campaign
    chunk_ts = j.events(types=[ev.EXPERIMENT_STARTED], experiment=ids["chunk"])[0].ts
    md = render_markdown(report_input(j, loaded, "md", since_ts=chunk_ts))
    table = section(md, "Experiments")
    assert "| exp-0004 " in table and "| exp-0002 " not in table
    assert "**qwen: exp-0001**" in section(md, "Baseline")  # the baseline still anchors the deltas
    empty = render_markdown(report_input(j, loaded, "md", server="nope"))
    assert "No experiments in this period" in empty


def test_csv_one_row_per_experiment(campaign):
    loaded, j, ids = campaign
    rows = list(csv.DictReader(io.StringIO(render_csv(report_input(j, loaded, "csv")))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [r["experiment"] for r in rows] == list(ids.values())
    big = rows[1]
    assert big["verdict"] == "better" and float(big["output_throughput_tok_s"]) == pytest.approx(1295.0)
    assert float(big["output_throughput_tok_s_delta_pct"]) == pytest.approx(28.86, abs=0.01)
    assert (big["n"], big["baseline_n"], big["p"], big["requests_ok"], big["requests_total"]) == ("3", "3", "0.1", "192", "192")
    assert big["evidence"] == "n=3 vs 3, ±0.4 % / ±0.5 %, p=0.10, vs exp-0001" and rows[0]["evidence"] == ""
    assert big["runs_ok"] == "3" and shlex.split(big["argv"]) == flags(max_running_requests=64)
    assert rows[2]["crash_class"] == "oom" and rows[2]["output_throughput_tok_s"] == ""


def test_jsonl_every_event_in_order(campaign):
    loaded, j, _ = campaign
    lines = render_jsonl(report_input(j, loaded, "jsonl")).splitlines()
    objs = [json.loads(line) for line in lines]
    assert len(objs) == j.count_events()
    assert [o["seq"] for o in objs] == sorted(o["seq"] for o in objs)
    assert {"seq", "ts", "time", "type", "target", "actor", "experiment", "data"} <= set(objs[0])
    only = [json.loads(line) for line in render_jsonl(report_input(j, loaded, "jsonl", server="qwen")).splitlines()]
    assert all(o["target"] == "qwen" or o["experiment"] for o in only)
    assert not any(o["data"].get("text") == "rack maintenance at 16:00" for o in only)


def test_report_of_an_empty_journal(tmp_path):
    md = render_markdown(ReportInput(title="empty", events=[]))
    assert "No experiments in this period" in md and "## Open todo items" in md
    assert render_csv(ReportInput(title="empty", events=[])).count("\n") == 1
    assert render_jsonl(ReportInput(title="empty", events=[])) == ""


def test_export_writes_atomically(campaign, tmp_path):
    loaded, j, _ = campaign
    path = export(j, loaded, "md")
    assert path.parent == loaded.path.parent and re.fullmatch(r"findings-\d{8}-\d{4}\.md", path.name)
    assert default_export_path(loaded, "csv").suffix == ".csv"
    assert path.read_text().startswith("# Findings")
    target = tmp_path / "out" / "report.md"
    target.parent.mkdir()
    target.write_text("old")
    write_atomic(target, "new text")
    assert target.read_text() == "new text"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]  # no temp file left

    with pytest.raises(TypeError):
        write_atomic(target, 42)  # a failed write leaves the old file and no temp file
    assert target.read_text() == "new text"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]


def test_a_mostly_failed_run_is_never_compared_in_the_report(tmp_path):
    """Issue 16: after kill -9 of the server mid-run, 15/400 was reported ok and +13.1 %;
    the report shows its counts, never a delta, and picks no best configuration from it."""
    j = Journal(tmp_path / "optui.db")
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1001.0), result(999.0))
    killed = w.restart(flags(max_running_requests=64))
    dead = result(1131.0)
    dead.completed, dead.failed = 15, 385
    w.bench(killed, dead)
    one = w.restart(flags(max_running_requests=32))
    w.bench(one, result(1500.0))  # one run: untested noise, whatever its +50 %
    md = render_markdown(ReportInput("t", j.events(), j.results(limit=None)))
    j.close()
    row = next(line for line in section(md, "Experiments").splitlines() if line.startswith(f"| {killed} "))
    assert "| 0/1 run, 15/400 ok |" in row and "+13.1%" not in row and "| untested |" in row
    assert "- Run #" in md and "degraded, 15/400 ok" in md and "never compared" in md
    single = next(line for line in section(md, "Experiments").splitlines() if line.startswith(f"| {one} "))
    assert "| untested noise | n=1 vs 3, ±? / ±0.1 %, vs exp-0001 |" in single
    assert f"nothing beat the baseline {base} outside the noise yet" in md
    assert f"**qwen: {base}** (the baseline itself: nothing beat it outside the noise" in section(md, "Best configuration")


def test_a_configuration_started_again_is_one_row_and_one_verdict_in_the_report(tmp_path):
    """Issue 20: a rollback to tuned flags that measured again was a second ``better``
    experiment in the summary and the table (the same pooled numbers twice), an unmeasured
    one a new ``untested``. One row per configuration, its starts counted; each start keeps
    its section, a folded one saying which row counts it. The baseline's flags measured again
    keep their row (``same``: the restart spread's evidence)."""
    j = Journal(tmp_path / "optui.db")
    w = CampaignWriter(j)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    big = w.restart(flags(max_running_requests=64))
    w.bench(big, result(1300.0), result(1290.0), result(1295.0))
    again = w.restart(flags(), reason="baseline again")
    w.bench(again, result(1072.0), result(1068.0), result(1070.0))
    measured = w.restart(flags(max_running_requests=64), reason="rollback")
    w.bench(measured, result(1301.0), result(1291.0), result(1296.0))
    unmeasured = w.restart(flags(max_running_requests=64), reason="rollback")
    md = render_markdown(ReportInput("t", j.events(), j.results(limit=None)))
    csv_rows = list(csv.DictReader(io.StringIO(render_csv(ReportInput("t", j.events(), j.results(limit=None))))))
    j.close()
    assert "- 3 experiments on qwen (5 starts: a configuration started again is counted with its first experiment): " \
           "1 baseline, 1 better, 1 same." in md, section(md, "Summary")
    rows = [line for line in section(md, "Experiments").splitlines() if line.startswith("| exp-")]
    assert [line.split()[1] for line in rows] == [base, big, again], rows
    assert f"| ready · 3 starts: 3 ok ({measured}, {unmeasured}) |" in rows[1] and "| n=6 vs 3," in rows[1], rows[1]
    assert f"| same flags as {base} |" in rows[2] and "| same |" in rows[2], rows[2]
    assert f"- Counted with {big} (same flags; its 3 runs judged with that configuration's): verdict **better**" in md
    assert f"- Counted with {big} (same flags; no benchmark of its own): verdict **better**" in md
    assert "**untested**" not in md
    # the CSV keeps a row per start (data for scripts), each naming its configuration's first
    assert {r["experiment"]: r["same_config_as"] for r in csv_rows} == {
        base: "", big: "", again: base, measured: big, unmeasured: big}
