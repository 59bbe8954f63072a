"""Results stored with ``optui bench import`` that no experiment of the campaign ran appear
in the findings report and in ``journal experiments``, with their workload (the CLI as a
real subprocess on a real journal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from optui.demo.campaign import write_demo_config

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bench"


def run_cli(cfg: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "NO_COLOR": "1"})


def test_imported_results_are_in_the_report_and_the_experiments_listing(tmp_path):
    cfg = write_demo_config(tmp_path, port=1)  # its servers are never started: no experiment exists
    r = run_cli(cfg, "bench", "import", str(FIXTURES / "vllm_save_result.json"), "--bench", "nightly", "--json")
    assert r.returncode == 0, r.stderr
    stored = json.loads(r.stdout)[0]
    result = stored["result"]
    out = result["output_throughput_tok_s"]

    report = run_cli(cfg, "journal", "export", "--format", "md")
    assert report.returncode == 0, report.stderr
    section = report.stdout.split("## Imported results", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| #{stored['id']} "))
    assert "vllm_save_result.json" in row and "| nightly |" in row and f"{out:,.1f}" in row
    wl = result["workload"]
    assert (wl.get("dataset") or result["tool"]) in row and f"x{wl['num_prompts']}" in row

    listing = run_cli(cfg, "journal", "experiments")
    assert listing.returncode == 0, listing.stderr
    assert "no experiments yet" not in listing.stdout
    line = next(line for line in listing.stdout.splitlines() if line.strip().startswith(f"#{stored['id']}"))
    assert f"x{wl['num_prompts']}" in line and "nightly" in line
    rows = json.loads(run_cli(cfg, "journal", "experiments", "--json").stdout)
    assert rows == [{**rows[0], "kind": "imported", "result_id": stored["id"], "bench": "nightly"}]
    assert rows[0]["workloads"][0]["key"] == stored["workload_key"]
