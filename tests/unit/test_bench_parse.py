"""Benchmark client output and result-file parsing (optui.core.bench.parse / bench_files)."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optui.core.bench.parse import (
    BenchParseError,
    Progress,
    parse_any,
    parse_bench_output,
    parse_progress,
    parse_result_file_text,
)
from optui.core.bench.result import BenchResult

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bench"
LOGS = sorted(p.name for p in FIXTURES.glob("*.log"))
RESULT_FILES = sorted(p.name for p in FIXTURES.glob("*.json*"))
FUZZ = settings(
    max_examples=10_000 if os.environ.get("OPTUI_SLOW") == "1" else 200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def read(name: str) -> str:
    return (FIXTURES / name).read_bytes().decode("utf-8", errors="replace")


def parse_fixture(name: str) -> list[BenchResult]:
    return parse_any(read(name), name)


def only(name: str) -> BenchResult:
    results = parse_fixture(name)
    assert len(results) == 1, results
    return results[0]


def dumps(results: list[BenchResult]) -> str:
    return json.dumps([r.to_json() for r in results], sort_keys=True)


# --- fixtures are format-exact ---------------------------------------------------------------


@pytest.mark.parametrize("name", LOGS)
def test_fixture_rows_are_padded_like_the_client(name):
    text = read(name).replace("\r\n", "\n")
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    blocks = re.findall(r"= Serving Benchmark Result =+\n(.*?)\n={50}\n", text, re.S)
    assert blocks or name == "sglang_all_failed.log"
    for block in blocks:
        rows = [line for line in block.split("\n") if not line.startswith("-") and not line.endswith(":")]
        for line in rows:
            label, value = line[:40].rstrip(), line[41:].rstrip()
            fmt = "{:<40} {}" if value.endswith("%") else "{:<40} {:<10}"  # "Cache hit rate" is "{:.1f}%"
            assert line == fmt.format(label, value), repr(line)
        assert sum(line.endswith(" ") for line in rows) > len(rows) // 2


# --- text logs -------------------------------------------------------------------------------------


def test_sglang_0_5_2():
    r = only("sglang_0.5.2.log")
    assert (r.tool, r.status, r.tool_version) == ("sglang", "ok", None)
    assert (r.completed, r.failed) == (1000, 0)
    assert r.duration_s == 130.02
    assert (r.request_throughput, r.input_throughput_tok_s) == (7.69, 3940.50)
    assert (r.output_throughput_tok_s, r.total_throughput_tok_s) == (3930.10, 7870.60)
    assert (r.request_rate, r.max_concurrency, r.accept_length) == (8.0, None, None)
    assert (r.total_input_tokens, r.total_output_tokens) == (512345, 511000)
    assert r.e2e_ms == {"mean": 5370.20, "median": 5011.0, "p90": None, "p95": None, "p99": None}
    assert r.ttft_ms == {"mean": 95.30, "median": 80.10, "p90": None, "p95": None, "p99": 310.70}
    assert r.itl_ms == {"mean": 10.40, "median": 9.80, "p90": None, "p95": 14.20, "p99": 30.50}
    assert all(v is None for v in r.tpot_ms.values())  # 0.5.2 prints no TPOT section
    assert r.extra == {
        "backend": "sglang",
        "total_output_tokens_retokenized": 509876,
        "concurrency": 41.30,
        "max_itl_ms": 401.0,
    }
    # ShareGPT: the random lengths in the Namespace are unused defaults
    assert (r.workload.dataset, r.workload.input_len, r.workload.num_prompts) == ("sharegpt", None, 1000)


def test_sglang_0_5_23_spec():
    r = only("sglang_0.5.23_spec.log")
    assert (r.tool, r.completed, r.failed) == ("sglang", 498, 2)  # 500 prompts in the Namespace
    assert math.isinf(r.request_rate) and r.max_concurrency == 64
    assert r.accept_length == 3.21
    assert (r.duration_s, r.request_throughput, r.total_throughput_tok_s) == (123.46, 4.03, 4122.93)
    assert r.e2e_ms == {"mean": 15300.11, "median": 15211.90, "p90": 17000.40, "p95": 17550.0, "p99": 18420.77}
    assert r.ttft_ms["p95"] == 700.25 and r.tpot_ms["p99"] == 35.90 and r.itl_ms["p90"] == 44.0
    assert r.extra["max_itl_ms"] == 950.20
    assert r.extra["peak_output_throughput_tok_s"] == 2811.0
    assert r.extra["peak_concurrent_requests"] == 64 and isinstance(r.extra["peak_concurrent_requests"], int)
    assert r.extra["total_input_text_tokens"] == 255000
    wl = r.workload
    assert (wl.tool, wl.dataset, wl.input_len, wl.output_len, wl.num_prompts, wl.max_concurrency) == (
        "sglang", "random", 512, 512, 500, 64,
    )
    assert math.isinf(wl.request_rate)


def test_sglang_cache_hit_details_and_goodput():
    r = only("sglang_0.5.23_cache_goodput.log")
    assert (r.tool, r.completed, r.failed, r.request_rate, r.max_concurrency) == ("sglang", 300, 0, 4.0, None)
    assert r.accept_length is None
    assert r.extra["backend"] == "sglang-oai"
    assert r.extra["goodput_slos_ms"] == "ttft:500 tpot:50"
    assert r.extra["request_goodput"] == 3.52
    assert r.extra["slo_attainment_pct"] == 89.67
    assert r.extra["ttft_slo_attainment_pct"] == 95.33
    assert r.extra["tpot_slo_attainment_pct"] == 92.0
    # duplicated "  Device:" labels: tokens before "Cache hit rate", percentages after
    assert {k: v for k, v in r.extra.items() if k.startswith("cache_")} == {
        "cache_total_prompt_tokens": 256000,
        "cache_total_cached_tokens": 96000,
        "cache_device_cached_tokens": 64000,
        "cache_host_cached_tokens": 24000,
        "cache_storage_cached_tokens": 8000,
        "cache_storage_backend": "hf3fs",
        "cache_hit_rate_pct": 37.5,
        "cache_device_hit_rate_pct": 66.7,
        "cache_host_hit_rate_pct": 25.0,
        "cache_storage_hit_rate_pct": 8.3,
    }
    assert r.e2e_ms["p99"] == 4622.38 and r.tpot_ms["p95"] == 29.44
    assert (r.workload.dataset, r.workload.input_len) == ("generated-shared-prefix", None)


def test_vllm_0_33_spec():
    r = only("vllm_0.33_spec.log")
    assert (r.tool, r.status, r.completed, r.failed) == ("vllm", "ok", 996, 4)
    assert (r.max_concurrency, r.request_rate, r.duration_s) == (32, 16.0, 70.31)
    assert (r.total_input_tokens, r.total_output_tokens) == (1019904, 127488)
    assert (r.request_throughput, r.output_throughput_tok_s, r.total_throughput_tok_s) == (14.17, 1813.20, 16319.05)
    assert r.input_throughput_tok_s is None
    assert r.ttft_ms == {"mean": 180.40, "median": 171.0, "p90": None, "p95": None, "p99": 402.90}
    assert r.tpot_ms["p99"] == 19.80 and r.itl_ms["median"] == 12.30
    assert all(v is None for v in r.e2e_ms.values())
    assert r.accept_length == 2.88
    assert r.extra == {
        "peak_output_throughput_tok_s": 2304.0,
        "peak_concurrent_requests": 32.0,
        "spec_acceptance_rate_pct": 62.5,
        "spec_drafts": 44000,
        "spec_draft_tokens": 132000,
        "spec_accepted_tokens": 82500,
        "spec_position_0_acceptance_pct": 81.0,
        "spec_position_1_acceptance_pct": 62.3,
        "spec_position_2_acceptance_pct": 44.2,
    }  # the pre-run "Traffic request rate: 16.0" / "Burstiness factor" lines are not rows
    assert (r.workload.dataset, r.workload.input_len, r.workload.output_len, r.workload.num_prompts) == (
        "random", 1024, 128, 1000,
    )


def test_vllm_early_2025_capital_t():
    r = only("vllm_2025.log")
    assert (r.tool, r.completed, r.failed) == ("vllm", 1000, 0)  # failed from num_prompts
    assert r.total_throughput_tok_s == 18863.60  # "Total Token throughput (tok/s)"
    assert r.output_throughput_tok_s == 2095.90
    assert math.isinf(r.request_rate)  # not printed in the block: from the Namespace
    assert r.max_concurrency is None
    assert r.ttft_ms["mean"] == 20011.20 and r.itl_ms["p99"] == 410.80 and r.tpot_ms["median"] == 118.90
    assert r.extra == {}


def test_sweep_gives_one_result_per_block_with_its_own_workload():
    results = parse_fixture("vllm_0.33_sweep.log")
    assert len(results) == 3
    assert [r.max_concurrency for r in results] == [1, 8, 32]
    assert [r.workload.max_concurrency for r in results] == [1, 8, 32]
    assert [(r.completed, r.failed) for r in results] == [(200, 0), (200, 0), (199, 1)]
    assert len({r.workload.key() for r in results}) == 3
    first = results[0]
    assert first.e2e_ms == {"mean": 987.70, "median": 938.31, "p90": 1284.01, "p95": 1481.55, "p99": 1975.40}  # E2EL
    assert first.ttft_ms["p90"] == 29.25 and first.ttft_ms["p95"] == 33.75
    assert first.extra["p99_9_ttft_ms"] == 58.50 and first.extra["p99_9_e2e_ms"] == 2568.02


def test_all_failed_sglang_run_is_a_failed_result_not_a_zero_result():
    r = only("sglang_all_failed.log")
    assert (r.tool, r.status) == ("sglang", "failed")
    assert "All requests failed" in r.error and "IndexError: index -1 is out of bounds" in r.error
    assert (r.completed, r.failed) == (0, 200)
    assert r.request_throughput is None and r.duration_s is None
    assert all(v is None for v in r.ttft_ms.values())
    assert (r.workload.num_prompts, r.workload.max_concurrency) == (200, 16)


def test_crlf_and_ansi_give_the_same_result_as_the_clean_log():
    assert dumps(parse_fixture("sglang_0.5.23_spec_crlf_ansi.log")) == dumps(parse_fixture("sglang_0.5.23_spec.log"))


@pytest.mark.parametrize("name", [n for n in LOGS if n != "sglang_all_failed.log"])
def test_line_ending_and_padding_variants_agree(name):
    text = read(name).replace("\r\n", "\n")
    expected = dumps(parse_bench_output(text))
    assert dumps(parse_bench_output(text.replace("\n", "\r\n"))) == expected
    assert dumps(parse_bench_output(re.sub(r" +\n", "\n", text))) == expected  # trailing spaces
    assert dumps(parse_bench_output(text.replace("\n", "\n\x1b[0m"))) == expected
    assert dumps(parse_bench_output(text.upper())) == dumps(parse_bench_output(text.upper()))  # no crash


def test_e2e_and_e2el_names_land_in_the_same_dict():
    sglang = parse_bench_output(_block(["Backend:", "sglang"], ["Mean E2E Latency (ms):", "12.50"]))[0]
    vllm = parse_bench_output(_block(["Successful requests:", "3"], ["Mean E2EL (ms):", "12.50"]))[0]
    assert sglang.e2e_ms["mean"] == vllm.e2e_ms["mean"] == 12.5
    assert (sglang.tool, vllm.tool) == ("sglang", "vllm")


def test_values_inf_not_set_and_percent():
    r = parse_bench_output(
        _block(
            ["Backend:", "sglang"],
            ["Traffic request rate:", "inf"],
            ["Max request concurrency:", "not set"],
            ["Successful requests:", "10"],
        )
    )[0]
    assert math.isinf(r.request_rate) and r.max_concurrency is None and r.completed == 10
    trace = parse_bench_output(_block(["Backend:", "sglang"], ["Traffic request rate:", "trace"]))[0]
    assert trace.request_rate is None and trace.extra["traffic_request_rate"] == "trace"


def test_vllm_zero_block_after_all_failed_is_failed():
    text = "UserWarning: All requests failed. This is likely due to a misconfiguration.\n" + _block(
        ["Successful requests:", "0"], ["Failed requests:", "100"], ["Benchmark duration (s):", "1.00"]
    )
    [r] = parse_bench_output(text)
    assert (r.tool, r.status, r.completed, r.failed) == ("vllm", "failed", 0, 100)


def test_truncated_block_keeps_what_was_printed():
    text = read("vllm_0.33_spec.log")
    cut = text[: text.index("Mean TPOT")]
    [r] = parse_bench_output(cut)
    assert r.extra["truncated"] is True
    assert r.completed == 996 and r.ttft_ms["p99"] == 402.90 and r.tpot_ms["mean"] is None


@pytest.mark.parametrize(
    "log, tool, status, message",
    [
        ("Namespace(num_prompts=5, warmup_requests=1)\nTraceback (most recent call last):\n  File \"x.py\"\n"
         "ValueError: Warmup failed - Please make sure benchmark arguments are correctly specified. Error: 404\n",
         "sglang", "failed", "Warmup failed"),
        ("Namespace(num_prompts=5, percentile_metrics='ttft')\nStarting initial single prompt test run...\n"
         "ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified.\n",
         "vllm", "failed", "Initial test run failed"),
        ("benchmark_args=Namespace(num_prompts=5, output_file=None)\nServer did not become ready within 60s timeout.\n"
         "Server at http://h:30000 is not ready. Exiting.\n", "sglang", "failed", "Server at http://h:30000"),
        ("Namespace(num_prompts=5)\n 10%|█| 1/10 [00:01<00:09, 1.00it/s]\rTraceback (most recent call last):\n"
         "  File \"/v/vllm/benchmarks/serve.py\", line 3\nKeyboardInterrupt\n", "vllm", "aborted", "KeyboardInterrupt"),
    ],
)
def test_runs_that_died_without_a_block(log, tool, status, message):
    [r] = parse_bench_output(log)
    assert (r.tool, r.status) == (tool, status)
    assert message in r.error and r.workload.num_prompts == 5


def test_nothing_recognisable_gives_empty_list():
    assert parse_bench_output("") == []
    assert parse_bench_output("hello\nworld: 3\n") == []
    assert parse_bench_output(" 45%|████▌     | 450/1000 [00:30<00:36, 15.12it/s]\r") == []
    # arguments but neither block nor failure (still running), a traceback without a run,
    # a server's own Namespace, and a traceback after a finished block
    assert parse_bench_output("Namespace(num_prompts=5)\nStarting main benchmark run...\n") == []
    assert parse_bench_output("Traceback (most recent call last):\nValueError: x\n") == []
    assert parse_bench_output("args: Namespace(port=8000)\nTraceback (most recent call last):\nOSError: x\n") == []
    after = read("sglang_0.5.23_spec.log") + "Traceback (most recent call last):\nConnectionError: refused\n"
    assert [r.status for r in parse_bench_output(after)] == ["ok"]
    assert parse_bench_output("============ Serving Benchmark Result ============\n" + "=" * 50 + "\n") == []


def _block(*rows: list[str]) -> str:
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    lines += [f"{label:<40} {value:<10}" for label, value in rows]
    return "\n".join(lines + ["=" * 50, ""])


# --- progress -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        (" 45%|████▌     | 450/1000 [00:30<00:36, 15.12it/s]", Progress(450, 1000, 45.0, 15.12, 30.0, 36.0)),
        ("  0%|          | 0/1000 [00:00<?, ?it/s]", Progress(0, 1000, 0.0, None, 0.0, None)),
        (" 10%|█         | 1/10 [00:05<00:45,  5.00s/it]", Progress(1, 10, 10.0, 0.2, 5.0, 45.0)),
        ("100%|██████████| 1000/1000 [1:02:03<00:00,  0.27it/s]", Progress(1000, 1000, 100.0, 0.27, 3723.0, 0.0)),
        ("Warmup: 50%|#####     | 2/4 [00:01<00:01,  1.5kit/s]", Progress(2, 4, 50.0, 1500.0, 1.0, 1.0)),
        ("450it [00:30, 15.12it/s]", Progress(450, None, None, 15.12, 30.0, None)),
        ("  0%|          | 0/9 [00:00<?, ?it/s]\r 11%|█         | 1/9 [00:01<00:08,  1.00it/s]",
         Progress(1, 9, 100 / 9, 1.0, 1.0, 8.0)),
    ],
)
def test_parse_progress(line, expected):
    assert parse_progress(line) == expected


@pytest.mark.parametrize("line", ["", "Starting main benchmark run...", "Mean TTFT (ms): 12.0", "45%| |"])
def test_parse_progress_none(line):
    assert parse_progress(line) is None


# --- result files ---------------------------------------------------------------------------------


def test_sglang_jsonl_with_infinity():
    first, second = parse_fixture("sglang.jsonl")
    assert first.tool == second.tool == "sglang"
    assert math.isinf(first.request_rate) and second.request_rate == 8.0
    assert first.failed is None and first.completed == 498  # no num_prompts in SGLang JSONL
    assert (first.max_concurrency, second.max_concurrency) == (64, None)
    assert (first.accept_length, second.accept_length) == (3.2134, None)
    assert first.duration_s == 123.4589 and first.ttft_ms["mean"] == 410.4987
    assert first.e2e_ms["p90"] == pytest.approx(16830.1254)
    assert first.extra["std_ttft_ms"] == pytest.approx(82.09974)
    assert "server_info" not in first.extra and "tag" not in first.extra
    assert second.extra["tag"] == "rate8"
    assert second.extra["cache_hit_rate_pct"] == 37.5 and second.extra["cache_storage_backend"] == "hf3fs"
    assert (first.workload.dataset, first.workload.input_len, first.workload.num_prompts) == ("random", 512, None)


def test_vllm_save_result_json():
    r = only("vllm_save_result.json")
    assert (r.tool, r.completed, r.failed, r.max_concurrency) == ("vllm", 998, 2, None)
    assert math.isinf(r.request_rate)  # the string "inf"
    assert (r.duration_s, r.total_throughput_tok_s, r.accept_length) == (65.1234, 17653.9622, 2.875)
    assert r.ttft_ms == {"mean": 3012.5, "median": 2711.25, "p90": 4518.75, "p95": None, "p99": 6025.0}
    assert r.e2e_ms["mean"] == 8150.75  # mean_e2el_ms
    assert r.extra["p99_9_itl_ms"] == pytest.approx(112.25)
    assert r.extra["spec_position_1_acceptance_pct"] == pytest.approx(62.3)  # stored as a fraction
    assert r.extra["spec_acceptance_rate_pct"] == 62.5
    assert "latencies" not in r.extra and "request_goodput" not in r.extra  # arrays, null
    assert r.workload.num_prompts == 1000 and r.workload.dataset is None


def test_vllm_2025_save_result_goodput_key_with_colon():
    r = only("vllm_2025_save_result.json")
    assert r.extra["request_goodput"] == 12.5
    assert (r.completed, r.failed, r.total_throughput_tok_s) == (1000, 0, 18863.6)
    assert not {"ttfts", "itls", "generated_texts", "errors", "input_lens"} & r.extra.keys()


def test_text_and_file_name_the_same_quantities_alike():
    text, file = only("sglang_0.5.23_spec.log"), parse_fixture("sglang.jsonl")[0]
    shared = {"peak_output_throughput_tok_s", "peak_concurrent_requests", "total_output_tokens_retokenized",
              "concurrency", "total_input_text_tokens", "backend"}
    assert shared <= text.extra.keys() & file.extra.keys()
    vtext, vfile = only("vllm_0.33_spec.log"), only("vllm_save_result.json")
    spec = {k for k in vtext.extra if k.startswith("spec_")}
    assert spec and spec <= vfile.extra.keys()


def test_vllm_append_result_objects_separated_by_newlines():
    one = (FIXTURES / "vllm_save_result.json").read_text()
    results = parse_result_file_text(one + "\n" + one + "\n", "x.json")
    assert [r.completed for r in results] == [998, 998]


@pytest.mark.parametrize("name", LOGS + RESULT_FILES)
def test_optui_json_round_trips(name):
    results = parse_fixture(name)
    back = parse_any(dumps(results), "round.json")
    assert dumps(back) == dumps(results)
    if len(results) == 1:
        assert dumps(parse_any(json.dumps(results[0].to_json()))) == dumps(results)


@pytest.mark.parametrize(
    "text, line, message",
    [
        ('{"completed": 1,,}', 1, "invalid JSON"),
        ('{"completed": 1, "failed": 0}\n{"completed": 2\n', 2, "invalid JSON"),
        ('\n\n{"foo": 1, "bar": 2}\n', 3, "not an SGLang, vLLM or optui benchmark result (keys: bar, foo)"),
        ("[1, 2]", 1, "expected a JSON object, got int"),
        ('{"tool": "x", "status": "ok", "ttft_ms": {}, "workload": {"request_rate": []}, "extra": 5}', 1, "optui"),
    ],
)
def test_malformed_result_files_raise_with_line(text, line, message):
    with pytest.raises(BenchParseError) as info:
        parse_result_file_text(text, "res.json")
    assert info.value.line == line
    assert str(info.value).startswith(f"res.json:{line}: ") and message in str(info.value)
    if text.lstrip().startswith("{"):  # "[1, 2]" does not look like a result file to parse_any
        with pytest.raises(BenchParseError):
            parse_any(text, "res.json")


def test_parse_any_sniffing():
    assert parse_result_file_text("") == [] and parse_any("  \n") == []
    assert parse_any("[2025-01-01 10:00:00] INFO starting\n") == []  # a log line, not JSON
    assert parse_any("[]") == []
    text = '{"level": "info"}\n' + read("vllm_2025.log")  # JSON-looking log with a block
    assert [r.completed for r in parse_any(text)] == [1000]


# --- robustness -----------------------------------------------------------------------------------

FIXTURE_LINES = [line for name in LOGS for line in read(name).splitlines(keepends=True)]
_fragments = st.one_of(
    st.sampled_from(FIXTURE_LINES),
    st.sampled_from(FIXTURE_LINES).flatmap(lambda line: st.integers(0, len(line)).map(lambda i: line[:i])),
    st.sampled_from(["\n", "\r", "\r\n", "\x1b[31m", "\x1b[", ":", "  Device:   ", "Namespace(num_prompts=x",
                     "Traceback (most recent call last):\n", "All requests failed", "-----", "=" * 50 + "\n"]),
    st.text(max_size=60),
)
SPLICED = st.lists(_fragments, max_size=80).map("".join)


@FUZZ
@given(st.one_of(st.text(), SPLICED))
def test_parse_bench_output_never_raises(text):
    results = parse_bench_output(text)
    assert all(isinstance(r, BenchResult) for r in results)
    json.dumps([r.to_json() for r in results], allow_nan=False)


@FUZZ
@given(st.one_of(st.text(), SPLICED, st.text().map(lambda t: "{" + t), st.text().map(lambda t: "[{" + t)))
def test_parse_any_raises_only_bench_parse_error(text):
    try:
        parse_any(text, "f")
    except BenchParseError as exc:
        assert exc.line is None or exc.line >= 1


@FUZZ
@given(st.one_of(st.text(), SPLICED))
def test_parse_progress_never_raises(text):
    progress = parse_progress(text)
    assert progress is None or progress.done >= 0


# ------------------------------------------------------------------ issue 18: older and pasted formats
def test_sglang_2024_rows_typo_and_total_throughput():
    # fixtures/bench/sglang_0.4_2024.log; pasted without its Namespace line the block alone must say it
    text = read("sglang_0.4_2024.log")
    block = text[text.index("\n\n") :]
    for source in (text, block):
        [r] = parse_bench_output(source)
        assert (r.tool, r.status, r.max_concurrency, r.total_throughput_tok_s) == ("sglang", "ok", 16, 6188.06)
        assert "max_reqeuest_concurrency" not in r.extra and "total_throughput_tok_s" not in r.extra


def test_vllm_lines_before_the_block_give_rate_and_concurrency():
    text = read("vllm_2025.log")
    text = text[text.index("\n") + 1 :]  # no Namespace: the printed lines are all there is
    text = text.replace("Traffic request rate: inf", "Traffic request rate: 8.0").replace(
        "Maximum request concurrency: None", "Maximum request concurrency: 64")
    [r] = parse_bench_output(text)
    assert (r.request_rate, r.max_concurrency) == (8.0, 64)
    assert (r.workload.request_rate, r.workload.max_concurrency) == (8.0, 64)
    logged = text.replace("Traffic request rate: 8.0", "INFO 06-02 10:00:00 [serve.py:652] Traffic request rate: 8.0").replace(
        "Maximum request concurrency: 64", "INFO 06-02 10:00:00 [serve.py:654] Maximum request concurrency: 64")
    assert [(r.request_rate, r.max_concurrency) for r in parse_bench_output(logged)] == [(8.0, 64)]
    stray = text.replace("Traffic request rate: 8.0", "note: Traffic request rate: 99")
    assert parse_bench_output(stray)[0].request_rate is None
    [inf] = parse_bench_output(read("vllm_2025.log"))
    assert inf.request_rate == float("inf") and inf.max_concurrency is None


def test_a_cut_block_is_a_partial_result():
    text = read("vllm_0.33_spec.log")
    [r] = parse_bench_output(text[: text.index("Mean TPOT")])
    assert r.partial and r.status == "partial" and r.tpot_ms["mean"] is None and r.ttft_ms["p99"] == 402.90
    out = r.to_json()
    assert out["partial"] is True and out["status"] == "partial"
    assert BenchResult.from_json(out).partial
    [whole] = parse_bench_output(text)
    assert not whole.partial and whole.status == "ok" and "partial" not in whole.to_json()


def test_rows_with_collapsed_padding_keep_the_non_canonical_rows():
    text = read("sglang_0.5.23_spec.log")
    collapsed = re.sub(r"(?m)^([^:\n]+:) {2,}", r"\1 ", text)
    assert collapsed != text
    [padded], [pasted] = parse_bench_output(text), parse_bench_output(collapsed)
    assert pasted.extra == padded.extra and pasted.to_json() == padded.to_json()
