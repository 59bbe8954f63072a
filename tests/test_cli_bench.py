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

FIXTURES = Path(__file__).parent / "fixtures" / "bench"
SRC = Path(__file__).resolve().parents[1] / "src"


def run(*args: str):
    return CliRunner().invoke(cli, ["bench", "parse", *args])


def test_json_single_result_is_an_object():
    result = run(str(FIXTURES / "sglang_0.5.23_spec.log"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["tool"], data["completed"], data["failed"], data["request_rate"]) == ("sglang", 498, 2, "inf")
    assert data["ttft_ms"]["p99"] == 910.0 and data["workload"]["num_prompts"] == 500


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


def test_human_table_for_failed_run():
    result = run(str(FIXTURES / "sglang_all_failed.log"))
    assert result.exit_code == 0
    assert result.stdout.startswith("sglang failed") and "IndexError" in result.stdout


def test_no_result_prints_empty_list_and_exits_1(tmp_path):
    path = tmp_path / "empty.log"
    path.write_text("Starting main benchmark run...\n")
    result = run(str(path), "--json")
    assert result.exit_code == 1
    assert result.stdout.strip() == "[]"
    assert result.stderr.startswith(f"optui: error: {path}: no benchmark result found")
    plain = run(str(path))
    assert plain.exit_code == 1 and plain.stdout == ""


def test_malformed_file_exits_2_with_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"completed": 1, "failed": 0}\n{"completed": ]\n')
    result = run(str(path), "--json")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"optui: error: {path}:2: invalid JSON")
    assert "Traceback" not in result.output and result.stdout == ""


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
