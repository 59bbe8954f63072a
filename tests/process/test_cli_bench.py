"""``optui bench parse``: output formats, exit statuses, error messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optui.cli import cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bench"
SRC = Path(__file__).resolve().parents[2] / "src"


def run(*args: str):
    return CliRunner().invoke(cli, ["bench", "parse", *args])


def test_json_single_result_is_an_object():
    result = run(str(FIXTURES / "sglang_0.5.23_spec.log"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["tool"], data["completed"], data["failed"], data["request_rate"]) == ("sglang", 498, 2, "inf")
    assert data["ttft_ms"]["p99"] == 910.0 and data["workload"]["num_prompts"] == 500


def test_a_cut_block_is_printed_as_partial(tmp_path):
    # issue 18: a client killed mid-block never reads as a whole run
    text = (FIXTURES / "vllm_0.33_spec.log").read_text()
    cut = tmp_path / "cut.log"
    cut.write_text(text[: text.index("Mean TPOT")])
    data = json.loads(run(str(cut), "--json").stdout)
    assert (data["partial"], data["status"], data["completed"], data["tpot_ms"]["mean"]) == (True, "partial", 996, None)
    human = run(str(cut))
    assert human.exit_code == 0 and human.output.startswith("vllm partial") and "cut short" in human.output
    assert "partial" not in json.loads(run(str(FIXTURES / "vllm_0.33_spec.log"), "--json").stdout)


def test_json_several_results_are_a_list():
    result = run(str(FIXTURES / "vllm_0.33_sweep.log"), "--json")
    assert result.exit_code == 0
    assert [r["max_concurrency"] for r in json.loads(result.stdout)] == [1, 8, 32]


def test_json_result_file():
    result = run(str(FIXTURES / "sglang.jsonl"), "--json")
    assert result.exit_code == 0
    assert [r["completed"] for r in json.loads(result.stdout)] == [498, 500]


def test_human_table():
    result = run(str(FIXTURES / "vllm_0.33_spec.log"))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("vllm ok  completed 996  failed 4")
    assert "accept length 2.88" in result.stdout
    assert any(line.split()[:2] == ["ttft", "180.40"] for line in lines)


def test_human_table_for_failed_run_exits_3_saying_why():
    # issue 20: an all-failed log exited 0, as a good run does
    path = FIXTURES / "sglang_all_failed.log"
    result = run(str(path))
    assert result.exit_code == 3
    assert result.stdout.startswith("sglang failed") and "IndexError" in result.stdout
    assert result.stderr.startswith(f"optui: error: {path}: the benchmark run failed (200 of 200 requests failed): "
                                    "All requests failed.")
    as_json = run(str(path), "--json")
    assert as_json.exit_code == 3 and json.loads(as_json.stdout)["status"] == "failed"


def test_no_result_prints_empty_list_and_exits_1(tmp_path):
    path = tmp_path / "empty.log"
    path.write_text("Starting main benchmark run...\n")
    result = run(str(path), "--json")
    assert result.exit_code == 1
    assert result.stdout.strip() == "[]"
    assert result.stderr.startswith(f"optui: error: {path}: no benchmark result found")
    plain = run(str(path))
    assert plain.exit_code == 1 and plain.stdout == ""


def test_malformed_file_exits_4_not_the_usage_code_with_file_and_line(tmp_path):
    """A parse refusal is not a usage error (2, click's and argparse's code): issue 32."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"completed": 1, "failed": 0}\n{"completed": ]\n')
    result = run(str(path), "--json")
    assert result.exit_code == 4
    assert result.stderr.startswith(f"optui: error: {path}:2: invalid JSON")
    assert "Traceback" not in result.output
    assert json.loads(result.stdout) == {"error": result.stderr.strip().removeprefix("optui: error: "), "exit_code": 4}


@pytest.mark.parametrize("make", [lambda p: p / "missing.log", lambda p: p])
def test_unreadable_file_exits_2(tmp_path, make):
    path = make(tmp_path)
    result = run(str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"optui: error: {path}: ")
    assert "Traceback" not in result.output


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    path = tmp_path / "mixed.log"
    path.write_bytes(b"\xff\xfe garbage\n" + (FIXTURES / "vllm_2025.log").read_bytes())
    result = run(str(path), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["completed"] == 1000


def test_real_subprocess():
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-m", "optui", "bench", "parse", str(FIXTURES / "vllm_save_result.json"), "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["tool"], data["completed"], data["failed"], data["request_rate"]) == ("vllm", 998, 2, "inf")
    missing = subprocess.run(
        [sys.executable, "-m", "optui", "bench", "parse", "/nonexistent/x.log"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert missing.returncode == 2
    assert missing.stderr == "optui: error: /nonexistent/x.log: No such file or directory\n"


# --- optui bench import ------------------------------------------------------------------------


def import_(tmp_path, *args: str):
    (tmp_path / "optui.toml").write_text('[hosts.local]\ngpu_source = "none"\n'
                                         '[servers.qwen]\nurl = "http://127.0.0.1:1"\ncontrol = "none"\n')
    return CliRunner().invoke(cli, ["--config", str(tmp_path / "optui.toml"), "bench", "import", *args])


def stored(tmp_path):
    from optui.adapters.journal import Journal

    journal = Journal(tmp_path / ".optui" / "optui.db")
    try:
        return journal.results(), journal.events(types=["bench.imported"])
    finally:
        journal.close()


def test_import_stores_results_with_their_workloads(tmp_path):
    result = import_(tmp_path, str(FIXTURES / "vllm_0.33_sweep.log"), str(FIXTURES / "sglang.jsonl"),
                     "--server", "qwen", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["id"] for d in data] == [1, 2, 3, 4, 5]
    assert [d["bench"] for d in data] == ["vllm_0.33_sweep"] * 3 + ["sglang"] * 2
    assert [d["result"]["max_concurrency"] for d in data[:3]] == [1, 8, 32]
    results, events = stored(tmp_path)
    by_id = {r.id: r for r in results}
    assert by_id[2].server == "qwen" and by_id[2].result.workload.key() == data[1]["workload_key"]
    assert by_id[2].result.workload.num_prompts == data[1]["result"]["workload"]["num_prompts"]
    assert [e.data["result_ids"] for e in events] == [[1, 2, 3], [4, 5]]
    assert not any(r.baseline for r in results)


def test_import_human_output_and_baseline(tmp_path):
    result = import_(tmp_path, str(FIXTURES / "sglang_0.5.23_spec.log"), "--bench", "c64", "--baseline")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("stored 1 result(s) in ")
    assert "#1 c64 sglang ok" in lines[1] and "x500 c=64" in lines[1] and lines[1].endswith("[baseline]")
    results, _ = stored(tmp_path)
    assert results[0].baseline and results[0].bench == "c64"


@pytest.mark.parametrize("content, code, message", [
    ('{"completed": 3', 4, "bad.json:1: invalid JSON"),
    ("just a log line\n", 1, "no benchmark result found; nothing imported"),
])
def test_import_bad_file_stores_nothing(tmp_path, content, code, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = import_(tmp_path, str(FIXTURES / "sglang.jsonl"), str(bad))
    assert result.exit_code == code and message in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / ".optui" / "optui.db").exists() or stored(tmp_path)[0] == []


def test_import_unknown_server_and_missing_file(tmp_path):
    result = import_(tmp_path, str(FIXTURES / "sglang.jsonl"), "--server", "nope")
    assert result.exit_code == 2 and "unknown server 'nope' (known: qwen)" in result.stderr
    result = import_(tmp_path, str(tmp_path / "missing.log"))
    assert result.exit_code == 2 and "missing.log: No such file or directory" in result.stderr
