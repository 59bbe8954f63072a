"""Benchmark command lines (optui.core.bench.cmd) and sweep plans (optui.core.bench.sweep)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from optui.core.bench.cmd import detect_tool, merge_results, point_argv, result_file_spec, workload_args
from optui.core.bench.parse import parse_any, parse_bench_output
from optui.core.bench.sweep import Point, SweepSpec, parse_sweep, plan_points

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bench"
SGL = ["python", "-m", "sglang.bench_serving", "--backend", "sglang"]


@pytest.mark.parametrize("argv, tool", [
    (SGL, "sglang"),
    (["python3", "-m", "sglang.benchmark.serving"], "sglang"),
    (["python", "/opt/sglang/python/sglang/bench_serving.py"], "sglang"),
    (["python", "-m", "optui.demo.bench_client", "--base-url", "x"], "sglang"),
    (["vllm", "bench", "serve", "--model", "m"], "vllm"),
    (["/usr/bin/vllm", "bench", "serve"], "vllm"),
    (["python", "benchmarks/benchmark_serving.py", "--backend", "vllm"], "vllm"),
    (["python", "-m", "vllm.entrypoints.cli.main", "bench", "serve"], "vllm"),
    (["vllm", "serve", "model"], "unknown"),
    (["my-bench.sh"], "unknown"),
])
def test_detect_tool(argv, tool):
    assert detect_tool(argv) == tool


def test_result_file_spec():
    assert result_file_spec(SGL) is None
    spec = result_file_spec([*SGL, "--output-file", "out/run.jsonl"])
    assert (spec.kind, spec.path) == ("sglang-jsonl", "out/run.jsonl")
    assert result_file_spec([*SGL, "--output-file=a.jsonl"]).path == "a.jsonl"
    vllm = ["vllm", "bench", "serve", "--model", "m"]
    assert result_file_spec(vllm) is None
    assert result_file_spec([*vllm, "--result-dir", "r"]) is None  # no --save-result: nothing written
    spec = result_file_spec([*vllm, "--save-result", "--result-dir", "r", "--result-filename", "x.json"])
    assert (spec.kind, spec.path, spec.directory) == ("vllm-json", "r/x.json", "r")
    spec = result_file_spec([*vllm, "--save-result"])
    assert (spec.path, spec.directory) == (None, ".")
    assert result_file_spec(["wrapper.sh", "--output-file", "o.jsonl"]) is None
    assert result_file_spec(["wrapper.sh", "--output-file", "o.jsonl"], tool="sglang").path == "o.jsonl"


def test_workload_args_reads_flags_like_argparse():
    argv = [*SGL, "--dataset-name", "random-ids", "--random-input", "512", "--random-output-len=128",
            "--num-prompts", "100", "--num-prompts", "200", "--max-concurrency", "8", "--request-rate", "inf"]
    args = workload_args(argv)
    assert args == {"dataset_name": "random-ids", "random_input_len": 512, "random_output_len": 128,
                    "num_prompts": 200, "max_concurrency": 8, "request_rate": math.inf}
    assert workload_args(["vllm", "bench", "serve", "--input-len", "64", "--output-len", "x"]) == {"input_len": 64}


def test_point_argv_replaces_in_place_or_appends():
    argv = [*SGL, "--max-concurrency", "4", "--num-prompts", "10"]
    assert point_argv(argv, concurrency=16) == [*SGL, "--max-concurrency", "16", "--num-prompts", "10"]
    assert point_argv([*SGL, "--request-rate=1"], request_rate=2.5) == [*SGL, "--request-rate=2.5"]
    assert point_argv(SGL, request_rate=math.inf)[-2:] == ["--request-rate", "inf"]
    assert point_argv(argv) == argv


def test_merge_sglang_jsonl_gets_failed_count_and_prompts_from_the_log():
    log = parse_bench_output((FIXTURES / "sglang_0.5.23_spec.log").read_text())
    file_results = parse_any('{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
                             '"max_concurrency": 64, "random_input_len": 512, "random_output_len": 512, '
                             '"duration": 123.4567, "completed": 498, "output_throughput": 2057.4123, '
                             '"mean_ttft_ms": 410.5, "total_throughput": 4122.9}')
    assert file_results[0].failed is None and file_results[0].workload.num_prompts is None
    [merged] = merge_results(file_results, log, {})
    assert merged.output_throughput_tok_s == 2057.4123  # the file's precision wins
    assert merged.failed == 2 and merged.workload.num_prompts == 500
    assert merged.accept_length == log[0].accept_length
    assert merged.extra["source"] == "file"
    assert merged.workload.key() == log[0].workload.key()  # same run, same workload, from either source


def test_merge_vllm_json_takes_lengths_from_the_argv_and_falls_back_without_a_file():
    file_results = parse_any((FIXTURES / "vllm_save_result.json").read_text())
    args = workload_args(["vllm", "bench", "serve", "--dataset-name", "random", "--random-input-len", "1024",
                          "--random-output-len", "128", "--num-prompts", "1000"])
    [merged] = merge_results(file_results, [], args)
    wl = merged.workload
    assert (wl.dataset, wl.input_len, wl.output_len, wl.num_prompts) == ("random", 1024, 128, 1000)
    assert merged.failed == file_results[0].failed
    log = parse_bench_output((FIXTURES / "vllm_0.33_spec.log").read_text())
    assert merge_results([], log, args) == log


def test_merge_drops_unused_lengths_for_sharegpt():
    file_results = parse_any('{"backend": "sglang", "dataset_name": "sharegpt", "completed": 3, "total_throughput": 1,'
                             ' "mean_e2e_latency_ms": 1}')
    [merged] = merge_results(file_results, [], {"random_input_len": 1024, "num_prompts": 3})
    assert merged.workload.input_len is None and merged.failed == 0


@pytest.mark.parametrize("text, spec", [
    ("1,2,4,8,16", SweepSpec("concurrency", (1, 2, 4, 8, 16))),
    ("c=1 2 4", SweepSpec("concurrency", (1, 2, 4))),
    ("concurrency 1, 2 x3", SweepSpec("concurrency", (1, 2), 3)),
    ("rate 0.5,1,inf", SweepSpec("request_rate", (0.5, 1, math.inf))),
    ("rate:2 ×2", SweepSpec("request_rate", (2,), 2)),
])
def test_parse_sweep(text, spec):
    assert parse_sweep(text) == spec
    assert parse_sweep(spec.describe()) == spec


@pytest.mark.parametrize("text, message", [
    ("", "no sweep values"),
    ("size 1,2", "unknown sweep kind"),
    ("1,two", "not a number"),
    ("0,1", "whole numbers >= 1"),
    ("1.5", "whole numbers >= 1"),
    ("rate 0", "> 0 req/s"),
    ("1 x0", "repeats must be"),
    (",".join(["1"] * 65), "at most 64 points"),
])
def test_parse_sweep_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_sweep(text)


def test_plan_points():
    assert plan_points(None) == [Point(0)]
    assert [p.label() for p in plan_points(None, 3)] == ["run 1/3", "run 2/3", "run 3/3"]
    plan = plan_points(SweepSpec("concurrency", (1, 4), 2))
    assert [(p.index, p.repeat, p.concurrency) for p in plan] == [(0, 0, 1), (0, 1, 1), (1, 0, 4), (1, 1, 4)]
    assert plan[3].label() == "c=4 run 2/2"
    assert plan_points(SweepSpec("request_rate", (0.5, math.inf)))[1].label() == "rate=inf"
