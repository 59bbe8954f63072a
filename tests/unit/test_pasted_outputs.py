"""Outputs operators paste, one test per defect class of issue 32 (by class, not by case).

Each fixture in ``tests/fixtures/pasted/`` is written from the format's source (named in the
test) in the shape of a public thread's paste; the asserts name what the old code got wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optui.cli import cli
from optui.core.bench.files import parse_result_file_text
from optui.core.bench.parse import parse_bench_output
from optui.core.gpu.nvsmi import NvidiaSmiError, parse_query_gpu, snapshot_from_nvidia_smi
from optui.core.server.log import LogClassifier, classify_log, detect_kind
from optui.core.todo.formats import TodoFormatError, parse_todo_json

PASTED = Path(__file__).parents[1] / "fixtures" / "pasted"


def text(name: str) -> str:
    return (PASTED / name).read_text()


# --- server logs ---------------------------------------------------------------------------------

def test_vllm_engine_core_fatal_error_is_a_crash_even_when_other_workers_go_on():
    """vllm/v1/engine/core.py run_engine_core logs the exception, then multiprocessing prints
    ``Process EngineCore_0:`` and the traceback; a TP worker's later progress line must not
    make it read "starting" (a ready-waiter then sits until its timeout)."""
    result = classify_log(text("vllm_engine_core_fatal.log"))
    assert result["kind"] == "vllm"
    assert result["final"] == "crashed"
    assert any("no kernel image is available" in line for line in result["lines"])


@pytest.mark.parametrize("prefix", ["", "(EngineCore_DP0 pid=77) "])
def test_a_logged_engine_core_exception_alone_is_the_cause(prefix):
    """The exception line of a logged traceback pasted without the rest, then the process line."""
    log = (f"{prefix}INFO 01-02 03:04:05 [core.py:90] Starting to load model m...\n"
           f"{prefix}ERROR 01-02 03:04:09 [core.py:712] RuntimeError: CUDA error: an illegal memory access was encountered\n"
           f"{prefix}Process EngineCore_DP0:\n"
           "INFO 01-02 03:04:10 [api_server.py:1900] Starting vLLM API server 0 on http://0.0.0.0:8000\n")
    result = classify_log(log)
    assert result["final"] == "crashed"
    assert any("illegal memory access" in line for line in result["lines"])


def test_vllm_route_list_log_is_vllm_and_gives_the_http_phase():
    result = classify_log(text("vllm_routes_only.log"))
    assert result["kind"] == "vllm"
    assert [p["phase"] for p in result["phases"]] == ["http_up"]
    assert detect_kind("(APIServer pid=9) INFO 01-01 00:00:00 [api_server.py:1] Starting vLLM API server 0 on http://h:1\n") == "vllm"


def test_llamacpp_model_load_after_the_early_listener_opens_the_weights_phase():
    """llama.cpp late 2024 (tools/server/server.cpp): ``main: HTTP server is listening`` comes
    before ``main: loading model``; loading and the KV cache still open their phases."""
    phases = [p["phase"] for p in classify_log(text("llamacpp_listen_then_load.log"))["phases"]]
    assert phases == ["launching", "http_up", "loading_weights", "kv_cache", "ready"]


def test_a_late_loading_line_after_a_real_http_phase_still_does_not_reopen_loading():
    """The exception is only right after http_up: after a KV phase, going back stays refused."""
    c = LogClassifier("vllm")
    for line in ("Starting to load model m", "GPU KV cache size: 10 tokens", "Starting vLLM server on http://h:1",
                 "Capturing CUDA graphs", "Loading safetensors checkpoint shards: 100%"):
        c.feed(line, 0.0)
    assert [p.phase for p in c.phases] == ["loading_weights", "kv_cache", "http_up", "cuda_graph"]


def test_sglang_child_ended_by_sigterm_is_a_stop_not_a_crash():
    """sglang's watchdog after ``kill -TERM``: ``Subprocess scheduler_0 (pid=…) crashed with exit
    code -15. Triggering SIGQUIT for cleanup...`` (observed on the real 0.5.23, see
    tests/process/test_sglang_peer.py)."""
    log = ("[2026-12-05 21:00:00] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n"
           "[2026-12-05 21:00:03] The server is fired up and ready to roll!\n"
           "[2026-12-05 21:01:00] Subprocess scheduler_0 (pid=4242) crashed with exit code -15. Triggering SIGQUIT for cleanup...\n"
           "[2026-12-05 21:01:00] Received sigquit from a child process. It usually means the child failed.\n"
           "Killed\n")
    assert classify_log(log)["final"] == "stopped"
    assert classify_log(log, returncode=-15)["final"] == "stopped"
    # SGLang 0.5.23 ends its own tree with SIGKILL after the SIGTERM (kill_process_tree): still the stop
    assert classify_log(log, returncode=-9)["final"] == "stopped"
    assert classify_log(log, returncode=1)["final"] == "crashed"
    crash = log.replace("exit code -15", "exit code -9")
    assert classify_log(crash)["final"] == "crashed"
    alone = ("[2026-12-05 21:53:20] The server is fired up and ready to roll!\n"
             "[2026-12-05 21:53:25] SIGTERM received. signum=None frame=None. Draining requests and shutting down...\n"
             "[2026-12-05 21:53:27] INFO:     Shutting down\n")
    assert classify_log(alone, returncode=0)["final"] == "stopped"


def test_vllm_cpu_kv_memory_and_block_size_classes_with_caret_lines_dropped():
    """vllm/v1/worker/cpu_worker.py and v1/worker/utils.py messages (0.32.0, read from the wheel)."""
    kv = ("(EngineCore pid=9) ERROR 12-05 21:00:00 [core.py:1000] Traceback (most recent call last):\n"
          "(EngineCore pid=9) ERROR 12-05 21:00:00 [core.py:1000]   File \"/v/vllm/v1/worker/cpu_worker.py\", line 220, in x\n"
          "(EngineCore pid=9) ERROR 12-05 21:00:00 [core.py:1000]     raise RuntimeError(\n"
          "(EngineCore pid=9) ERROR 12-05 21:00:00 [core.py:1000]     ^^^^^^^^^^^^^^^^^^^\n"
          "(EngineCore pid=9) ERROR 12-05 21:00:00 [core.py:1000] RuntimeError: Available memory (3.2 GiB) for KV cache "
          "allocation is less than requested memory for kv (40.0 GiB).\n")
    result = classify_log(kv)
    assert (result["final"], result["class"]) == ("crashed", "oom")
    assert any("less than requested memory for kv" in line for line in result["lines"])
    assert not any(set(line.split("]")[-1].strip()) <= set("^~ ") for line in result["lines"])
    block = "ValueError: No common block size for 16 (supported: [32, 64]).\n"
    assert classify_log("INFO 12-05 21:00:00 [core.py:1] x\n" + block)["class"] == "bad_flag"


# --- benchmark output --------------------------------------------------------------------------------

def test_sglang_2024_jsonl_key_set_is_read():
    """sglang python/sglang/bench_serving.py (2024) ``--output-file``, one line per ``--multi`` rate."""
    first, second = parse_result_file_text(text("sglang_2024_multi.jsonl"), "m.jsonl")
    assert (first.tool, first.request_rate, second.request_rate) == ("sglang", 1.0, 4.0)
    assert (first.total_input_tokens, first.total_output_tokens, first.completed) == (51200, 6400, 50)
    assert (first.ttft_ms["median"], first.itl_ms["median"], first.e2e_ms["mean"], first.e2e_ms["median"]) == (
        38.42, 7.9, 1043.81, 1012.37)
    assert (first.output_throughput_tok_s, first.duration_s) == (122.58, 52.21)
    assert first.workload.input_len == 1024


def test_values_with_a_unit_or_a_paste_annotation_are_kept():
    [result] = parse_bench_output(text("vllm_bench_annotated.txt"))
    assert result.request_rate == 15.0  # "Traffic request rate: 15.0 RPS."
    assert result.failed == 0  # "0         <<<<<<< no failures this time"
    assert result.request_throughput == 13.80
    assert result.ttft_ms["median"] == 88.02  # "88.02     # was 140"
    assert result.max_concurrency == 64
    assert not any(isinstance(v, str) and v[:1].isdigit() for v in result.extra.values())


def test_a_parse_refusal_exits_4_not_the_usage_code(tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"total_input": 1,\n')
    result = CliRunner().invoke(cli, ["bench", "parse", str(bad)])
    assert result.exit_code == 4, result.output
    assert "broken.jsonl:1" in result.output


# --- todo lists ----------------------------------------------------------------------------------

@pytest.mark.parametrize("wrap", [
    lambda block: block,
    lambda block: [{"type": "text", "text": "Updating the plan."}, block],
    lambda block: {"role": "assistant", "content": [block]},
    lambda block: {"type": "assistant", "message": {"role": "assistant", "content": [block]}},
])
def test_todowrite_tool_use_block_is_read_as_its_list(wrap):
    block = json.loads(text("todowrite_tool_use.json"))
    items = parse_todo_json(json.dumps(wrap(block)), "paste.json")
    assert [(t.content, str(t.status)) for t in items] == [
        ("Baseline vllm bench serve at c=64", "completed"),
        ("Try --max-num-batched-tokens 16384", "in_progress"),
        ("Compare TTFT p99 against baseline", "pending")]


def test_a_broken_todowrite_block_names_its_field():
    block = json.loads(text("todowrite_tool_use.json"))
    del block["input"]["todos"][1]["content"]
    with pytest.raises(TodoFormatError, match=r"TodoWrite\.input\.todos\[1\]\.content: missing"):
        parse_todo_json(json.dumps(block), "paste.json")


# --- nvidia-smi ----------------------------------------------------------------------------------

def test_nvidia_smi_default_table_is_read_with_processes():
    gpus = parse_query_gpu(text("nvidia_smi_table_b200.txt"))
    assert [(g.index, g.name, g.mem_used_mib, g.mem_total_mib, g.util_gpu_pct, g.temp_c, g.power_w, g.power_limit_w)
            for g in gpus] == [(0, "NVIDIA B200", 0, 183359, 0, 31, 141, 1000), (1, "NVIDIA B200", 171402, 183359, 97, 38, 612, 1000)]
    assert gpus[0].processes == () and [(p.pid, p.used_mib) for p in gpus[1].processes or ()] == [(2749113, 171390)]
    snap = snapshot_from_nvidia_smi("h", text("nvidia_smi_table_b200.txt"))
    assert str(snap.status) == "live" and len(snap.samples) == 2


def test_nvidia_smi_mig_profile_table_is_refused_saying_it_is_a_table():
    with pytest.raises(NvidiaSmiError, match=r"nvidia-smi mig -lgip.*a table, not --query-gpu CSV"):
        parse_query_gpu(text("nvidia_smi_mig_lgip.txt"))


# --- vLLM 0.32 CPU `bench serve`, captured from the real peer (tests/process/test_vllm_peer.py) ---------------

BENCH = Path(__file__).parents[1] / "fixtures" / "bench"


def test_vllm_bench_serve_text_and_save_result_agree_and_e2e_comes_from_latencies():
    """`vllm bench serve ... --save-result` with the default --percentile-metrics (no e2el):
    the JSON's per-request ``latencies`` give E2E (it was null), the printed block equals the
    file to its 2 decimals, and the triton/nanobind exit report is no result."""
    [printed] = parse_bench_output((BENCH / "vllm_0.32_cpu_bench_serve.txt").read_text())
    [saved] = parse_result_file_text((BENCH / "vllm_0.32_cpu_save_result.json").read_text(), "r.json")
    latencies = json.loads((BENCH / "vllm_0.32_cpu_save_result.json").read_text())["latencies"]
    assert saved.e2e_ms["mean"] == pytest.approx(1000 * sum(latencies) / len(latencies))
    assert saved.e2e_ms["p99"] <= 1000 * max(latencies) and saved.e2e_ms["median"] is not None
    for field in ("ttft_ms", "tpot_ms", "itl_ms"):
        for stat in ("mean", "median", "p99"):
            assert round(getattr(saved, field)[stat], 2) == getattr(printed, field)[stat]
    assert (printed.completed, saved.completed, printed.failed, saved.failed) == (20, 20, 0, 0)


def test_nanobind_exit_report_is_noise_and_the_block_is_not():
    from optui.core.bench.stream import is_exit_noise

    lines = (BENCH / "vllm_0.32_cpu_bench_serve.txt").read_text().splitlines()
    noise = [line for line in lines if is_exit_noise(line)]
    assert noise and noise[0].startswith("nanobind: leaked") and noise[-1].startswith("See https://nanobind")
    first = lines.index(noise[0])
    assert lines[first:] == noise  # the whole tail after the result block, nothing before it
    assert not any(is_exit_noise(line) for line in lines[:first])


def test_real_vllm_032_kv_memory_crash_log_is_oom_with_its_line_and_no_caret_lines():
    """The log of the real peer started with VLLM_CPU_KVCACHE_SPACE=4000 (tests/process/test_vllm_peer.py
    reproduces it): the old code called it unknown."""
    log = (Path(__file__).parents[1] / "fixtures" / "server_logs" / "vllm_0.32_cpu_kv_memory.log").read_text()
    result = classify_log(log, "vllm", 1)
    assert (result["final"], result["class"]) == ("crashed", "oom")
    assert any("less than requested memory for kv" in line for line in result["lines"])
    assert not any(set(line.rsplit("] ", 1)[-1].strip()) <= set("^~ ") for line in result["lines"])


def test_real_vllm_032_block_size_crash_log_is_bad_flag():
    """``--block-size 8`` on the real CPU peer: ``No common block size for 8 (CPU_ATTN:
    [MultipleOf(32)])``; the old code called it unknown."""
    log = (Path(__file__).parents[1] / "fixtures" / "server_logs" / "vllm_0.32_cpu_block_size.log").read_text()
    result = classify_log(log, "vllm", 1)
    assert (result["final"], result["class"]) == ("crashed", "bad_flag")
    assert any("No common block size" in line for line in result["lines"])


def test_real_sglang_sigterm_stop_log_is_stopped():
    """The real 0.5.23 peer's log after SIGTERM to its process group (tests/process/test_sglang_peer.py;
    UserWarning, /health and nanobind lines left out): the old code read "crashed"."""
    log = (Path(__file__).parents[1] / "fixtures" / "server_logs" / "sglang_0.5.23_cpu_sigterm_stop.log").read_text()
    assert "crashed with exit code -15" in log
    for rc in (None, -9, -15):
        result = classify_log(log, "sglang", rc)
        assert (result["final"], result["class"]) == ("stopped", None), rc


# --- issue 32's "Done when": one sample per defect class that the tests above never saw -------------
# tests/fixtures/pasted/unseen/, each written from the format's source (named) in another shape
# than the fixture of its class above: another version, prefix, wording or layout.

UNSEEN = PASTED / "unseen"


def unseen(name: str) -> str:
    return (UNSEEN / name).read_text()


def test_unseen_engine_core_fatal_error_while_serving_is_a_crash_with_its_cause():
    """vllm/v1/engine/core.py run_engine_core "EngineCore encountered a fatal error." after
    "Application startup complete.", then AsyncLLM's EngineDeadError (a wrapper)."""
    result = classify_log(unseen("vllm_0.11_engine_dead_after_ready.log"))
    assert (result["kind"], result["final"]) == ("vllm", "crashed")
    assert any("illegal memory access" in line for line in result["lines"]), result["lines"]
    assert not any(set(line.rsplit("] ", 1)[-1].strip()) <= set("^~ ") for line in result["lines"])


def test_unseen_sglang_2024_jsonl_with_an_infinite_rate_and_a_refusal_code(tmp_path):
    """python/sglang/bench_serving.py (2024) writes ``request_rate`` with json.dumps: inf is
    ``Infinity``; a sharegpt run's ``random_*_len`` are not its lengths."""
    [row] = parse_result_file_text(unseen("sglang_2024_inf_rate.jsonl"), "r.jsonl")
    assert (row.tool, row.request_rate, row.completed, row.total_output_tokens) == ("sglang", float("inf"), 1000, 198240)
    assert (row.ttft_ms["median"], row.itl_ms["median"], row.e2e_ms["median"]) == (9120.77, 21.4, 47011.2)
    assert (row.workload.dataset, row.workload.input_len) == ("sharegpt", None)
    bad = tmp_path / "odd.jsonl"
    bad.write_text('{"total_input": 12, "median_ttft": "fast"}\n')
    result = CliRunner().invoke(cli, ["bench", "parse", str(bad)])
    assert result.exit_code == 4 and "odd.jsonl:1" in result.output, result.output


def test_unseen_units_and_annotations_on_values_are_kept():
    """vllm/benchmarks/serve.py's block with "Traffic request rate: 4 RPS." and annotations of
    another kind (←, <--, a parenthesis, !!, //)."""
    [result] = parse_bench_output(unseen("vllm_bench_rate_units_annotated.txt"))
    assert (result.completed, result.failed, result.request_rate) == (198, 2, 4.0)
    assert (result.request_throughput, result.output_throughput_tok_s, result.ttft_ms["median"]) == (3.85, 492.21, 121.55)
    assert result.max_concurrency is None  # "Maximum request concurrency: None"


def test_unseen_llamacpp_json_log_listening_before_the_model_loads():
    """llama.cpp 2024 JSON-lines server log (examples/server/server.cpp): "HTTP server
    listening" before the loader's plain lines, "all slots are idle" when ready."""
    phases = [p["phase"] for p in classify_log(unseen("llamacpp_2024_json_listen_then_load.log"))["phases"]]
    assert phases == ["http_up", "loading_weights", "kv_cache", "ready"]


def test_unseen_claude_transcript_pasted_reads_its_latest_todowrite():
    """A piece of a Claude Code transcript (one message a line) pasted to ``optui todo import -``:
    two TodoWrite calls, the later wins (was "invalid JSON: Extra data")."""
    paste = unseen("claude_transcript_two_todowrites.jsonl")
    items = parse_todo_json(paste, "<stdin>")
    assert [(t.content, str(t.status)) for t in items] == [("Baseline at c=8", "completed"),
                                                           ("Try --max-num-seqs 512", "in_progress")]
    result = CliRunner().invoke(cli, ["todo", "import", "-", "--dry-run", "--json"], input=paste)
    assert result.exit_code == 0 and [t["status"] for t in json.loads(result.output)] == ["completed", "in_progress"]
    with pytest.raises(TodoFormatError, match=r"<stdin>:2: invalid JSON: Extra data"):  # lines, no TodoWrite
        parse_todo_json('{"type": "user"}\n{"type": "user"}\n', "<stdin>")


def test_unseen_nvidia_smi_470_table_and_mig_instance_table():
    """nvidia-smi 470's narrower table (name cut to "NVIDIA A100-SXM...", "Perf  Pwr" columns)
    and ``nvidia-smi mig -lgi`` (instances, not readings)."""
    gpus = parse_query_gpu(unseen("nvidia_smi_470_a100_table.txt"))
    assert [(g.index, g.mem_used_mib, g.mem_total_mib, g.util_gpu_pct, g.temp_c, g.power_w, g.power_limit_w)
            for g in gpus] == [(0, 38123, 40536, 97, 30, 62, 400), (1, 3, 40536, 0, 27, 51, 400)]
    with pytest.raises(NvidiaSmiError, match=r"mig -lgi.*a table, not --query-gpu CSV"):
        parse_query_gpu(unseen("nvidia_smi_mig_lgi.txt"))


def test_unseen_vllm_route_list_from_the_launcher_gives_the_http_phase():
    """vllm/entrypoints/launcher.py "Available routes are:" without "Starting vLLM API server"."""
    result = classify_log(unseen("vllm_launcher_routes_only.log"))
    assert (result["kind"], [p["phase"] for p in result["phases"]]) == ("vllm", ["http_up"])


def test_unseen_vllm_gpu_startup_names_compile_kv_cache_and_cuda_graphs():
    """vLLM 0.10 on a GPU: Dynamo/torch.compile lines, "Available KV cache memory", the CUDA
    graph capture bar."""
    phases = [p["phase"] for p in classify_log(unseen("vllm_0.10_gpu_phases.log"))["phases"]]
    assert phases == ["launching", "init_dist", "loading_weights", "compile", "kv_cache", "cuda_graph", "http_up", "ready"]


@pytest.mark.parametrize(("name", "crash_class", "needle"), [
    ("vllm_0.6_kv_tokens.log", "oom", "maximum number of tokens that can be stored in KV cache"),  # was bad_flag
    ("vllm_gpu_kv_needed.log", "oom", "larger than the available KV cache memory"),
    ("vllm_no_cache_blocks.log", "oom", "No available memory for the cache blocks"),
    ("vllm_block_size_gpu.log", "bad_flag", "No common block size for 48"),
])
def test_unseen_kv_memory_and_block_size_classes(name, crash_class, needle):
    """vllm/v1/core/kv_cache_utils.py, v1/worker/utils.py (0.32) and vllm/worker/worker.py (0.6)."""
    result = classify_log(unseen(name))
    assert (result["final"], result["class"]) == ("crashed", crash_class), result["lines"]
    assert any(needle in line for line in result["lines"])
    assert not any(set(line.rsplit("] ", 1)[-1].strip()) <= set("^~ ") for line in result["lines"])


def test_unseen_vllm_stats_lines_give_the_gpu_kv_cache_not_the_cpu_swap():
    """vllm/engine/metrics.py (v0: GPU and CPU KV cache, CPU being swap space) and
    v1/metrics/loggers.py (CPU build: "CPU KV cache usage" is the KV cache)."""
    from optui.core.server.log_load import parse_batch_line

    v0, v1 = (parse_batch_line(line) for line in unseen("vllm_stats_lines.txt").splitlines())
    assert v0 is not None and (v0.running, v0.waiting, v0.kv_cache_pct, v0.gen_tok_s) == (3, 1, 7.9, 52.7)
    assert v1 is not None and (v1.running, v1.kv_cache_pct, v1.prompt_tok_s) == (4, 1.4, 12.4)


def test_unseen_vllm_save_results_e2e_from_its_keys_and_never_from_failed_latencies():
    """--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 gives *_e2el_ms keys;
    a file with a failed request has zeros in ``latencies``: no E2E rather than a wrong one."""
    [keys] = parse_result_file_text(unseen("vllm_save_result_e2el_percentiles.json"), "a.json")
    assert (keys.e2e_ms["mean"], keys.e2e_ms["median"], keys.e2e_ms["p90"], keys.e2e_ms["p99"]) == (
        5850.3, 5801.7, 6110.0, 6400.8)
    [failed] = parse_result_file_text(unseen("vllm_save_result_failed_latencies.json"), "b.json")
    assert (failed.completed, failed.failed, failed.e2e_ms["mean"]) == (3, 1, None)


def test_unseen_nanobind_report_with_keep_alive_records_is_all_noise():
    """nanobind src/nb_internals.cpp also prints "leaked N keep_alive records!" (kept before)."""
    from optui.core.bench.stream import is_exit_noise

    lines = unseen("vllm_bench_nanobind_keepalive.txt").splitlines()
    first = next(n for n, line in enumerate(lines) if line.startswith("nanobind:"))
    assert [line for line in lines[first:] if not is_exit_noise(line)] == []
    assert not any(is_exit_noise(line) for line in lines[:first])
    [result] = parse_bench_output("\n".join(lines))
    assert (result.completed, result.output_throughput_tok_s) == (32, 170.10)


def test_real_vllm_032_help_all_types_and_wording():
    """The real 0.32 ``vllm serve --help=all`` (tests/fixtures/help/): flags defaulting to None,
    human-readable ints (``32k``, ``16k``, ``4G``), ``--max-model-len auto`` (was refused:
    "invalid int value"), and the help command messages cite."""
    from optui.core.flags.argv import Flags
    from optui.core.flags.help_parse import parse_help

    help_text = (Path(__file__).parents[1] / "fixtures" / "help" / "vllm_0.32_cpu_help_all.txt").read_text()
    catalog = parse_help(help_text, kind="vllm", program=("vllm", "serve"))

    def problems(*args: str) -> list[str]:
        return [i.message for i in catalog.check(Flags.parse(["vllm", "serve", "m", *args], catalog.booleans()))]

    assert problems("--max-model-len", "auto") == problems("--max-model-len", "-1") == []
    assert problems("--max-model-len", "32k", "--max-num-batched-tokens", "16k", "--kv-cache-memory-bytes", "4G") == []
    assert problems("--max-model-len", "automatic") == ["invalid int value: 'automatic'"]
    assert problems("--block-size", "auto") == ["invalid int value: 'auto'"]
    assert any("vllm serve --help=all" in message for message in problems("--no-such-flag", "1"))
    # --max-num-seqs prints no type: a word is refused once a number was seen
    seen = [Flags.parse(["vllm", "serve", "m", "--max-num-seqs", "256"], catalog.booleans())]
    [refused] = catalog.check_seen_forms(Flags.parse(["vllm", "serve", "m", "--max-num-seqs", "many"]), seen)
    assert refused.level == "error"


def test_unseen_sglang_gpu_start_then_sigterm_is_stopped_with_its_phases():
    """SGLang 0.4 with TP=2 on GPUs (rank-prefixed lines, CUDA graph capture), ready at "fired
    up and ready to roll", then the SIGTERM stop that ends a TP child with -15."""
    result = classify_log(unseen("sglang_0.4_gpu_tp2_start_then_sigterm.log"), returncode=-9)
    assert (result["final"], result["class"]) == ("stopped", None)
    assert [p["phase"] for p in result["phases"]] == [
        "launching", "init_dist", "loading_weights", "kv_cache", "cuda_graph", "http_up", "warmup", "ready"]


@pytest.mark.parametrize("returncode", [None, 137])
def test_unseen_sglang_kv_memory_on_a_tp_rank_is_oom(returncode):
    """sglang model_runner.py init_memory_pool's RuntimeError on a TP rank, then the parent's
    self-kill ("Killed", rc 137): oom, not killed."""
    result = classify_log(unseen("sglang_tp_not_enough_memory.log"), returncode=returncode)
    assert (result["final"], result["class"]) == ("crashed", "oom")
    assert any("Not enough memory" in line for line in result["lines"])


def test_real_vllm_032_kv_cache_memory_bytes_too_small_is_oom():
    """The real peer with ``--kv-cache-memory-bytes 1M --max-model-len 2048`` (and no
    VLLM_CPU_KVCACHE_SPACE, which overrides the flag on CPU): bench/real_gpu/vllm.sh's ``oom``
    preset, captured by hand (2026-12-06) — "... larger than the available KV cache memory"."""
    log = (Path(__file__).parents[1] / "fixtures" / "server_logs" / "vllm_0.32_cpu_kv_cache_memory_bytes_1M.log").read_text()
    result = classify_log(log, "vllm", 1)
    assert (result["final"], result["class"]) == ("crashed", "oom")
    assert any("larger than the available KV cache memory" in line for line in result["lines"])
