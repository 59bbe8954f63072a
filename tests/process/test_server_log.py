"""Crash classes from real-format log lines (every class of the issue), kind detection,
llama.cpp timestamps, phase durations, the log-line load fallback and ``optui log classify``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optui.cli import cli
from optui.core.server.log import (
    LogClassifier,
    classify_log,
    detect_kind,
    exit_description,
    is_probe_line,
    line_timestamp,
    phase_durations,
)
from optui.core.server.log_load import LogLoad, parse_batch_line
from optui.core.server.state import CrashClass, PhaseMark

TB = "Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py\", line 3012, in run\n    x()\n"

# (kind, log text, exit status, expected class). Strings: servers_and_bench.md section 4
# (SGLang 0.5.2/0.5.23, vLLM 0.33) and tests/peers/NOTES.md (llama-server, observed).
CASES = [
    # ---- oom
    ("sglang", TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.20 GiB is free.", 1, "oom"),
    ("sglang", "[2025-01-15 10:00:49 TP0] Scheduler hit an exception: " + TB
     + "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.2", 1, "oom"),
    ("sglang", "[2025-01-15 10:03:00 TP0] Decode out of memory. Try to lower your batch size.", 1, "oom"),
    ("vllm", "(EngineCore_DP0 pid=812) ERROR 09-01 12:00:00 [core.py:708] EngineCore failed to start.\n" + TB
     + "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.", 1, "oom"),
    ("vllm", "ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (9.5 GiB). Based on the available memory, the estimated maximum "
     "model length is 77824. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", 1, "oom"),
    ("vllm", "(EngineCore_DP0 pid=9) ERROR 09-01 12:00:00 [gpu_model_runner.py:2] Failed to load model - not enough GPU memory. "
     "Try lowering --gpu-memory-utilization to free memory for weights, increasing --tensor-parallel-size, or using --quantization.", 1, "oom"),
    ("llamacpp", "0.00.500.000 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: out of memory", 1, "oom"),
    # ---- bad_flag
    ("sglang", "usage: launch_server.py [-h] --model-path MODEL_PATH\nlaunch_server.py: error: unrecognized arguments: --no-such-flag 1", 2, "bad_flag"),
    ("sglang", "launch_server.py: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill", 2, "bad_flag"),
    ("sglang", "launch_server.py: error: argument --tp-size/--tensor-parallel-size: invalid int value: 'x'", 2, "bad_flag"),
    ("sglang", "launch_server.py: error: argument --enable-metrics: ignored explicit argument '1'", 2, "bad_flag"),
    ("vllm", "vllm serve: error: unrecognized arguments: --max-modle-len 4096", 2, "bad_flag"),
    ("vllm", "ValueError: `model` should be provided as the first positional argument when using `vllm serve`.", 1, "bad_flag"),
    ("llamacpp", "error: invalid argument: --no-such-flag", 1, "bad_flag"),
    ("llamacpp", 'error while handling argument "-c": stoi\n\nusage:\n-c,    --ctx-size N   size of the prompt context', 1, "bad_flag"),
    ("sglang", "", 2, "bad_flag"),  # argparse's exit status alone
    # ---- port_in_use
    ("sglang", "[2025-01-15 10:01:12] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use", 1, "port_in_use"),
    ("vllm", "OSError: [Errno 98] Address already in use", 1, "port_in_use"),
    ("vllm", "(APIServer pid=1) ERROR 09-01 12:00:00 [launcher.py:99] port 8000 is used by process psutil.Process(pid=77) launched with command:", 1, "port_in_use"),
    ("llamacpp", "0.00.007.741 E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 18099\n"
     "0.00.013.409 E srv  llama_server: exiting due to HTTP server error", 1, "port_in_use"),
    # ---- load_failed
    ("sglang", "[2025-01-15 10:01:14] Initialization failed. warmup error: " + TB + "RuntimeError: boom", 1, "load_failed"),
    ("sglang", TB + "OSError: /models/qwen does not appear to have a file named config.json.", 1, "load_failed"),
    ("llamacpp", "0.00.006.664 E gguf_init_from_file: failed to open GGUF file '/nonexistent.gguf' (No such file or directory)\n"
     "0.00.007.419 E srv  llama_server: exiting due to model loading error", 1, "load_failed"),
    # ---- nccl
    ("sglang", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error", 1, "nccl"),
    ("vllm", "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, "
     "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600049 milliseconds before timing out.", -6, "nccl"),
    # ---- killed
    ("sglang", "[2025-01-15 10:00:30 TP0] Load weight begin. avail mem=78.90 GB", -9, "killed"),
    ("sglang", "[2025-01-15 10:00:30 TP0] Load weight begin. avail mem=78.90 GB", 137, "killed"),
    ("sglang", "[2025-01-15 10:00:40] Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), "
     "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.", 1, "killed"),
    ("vllm", "(APIServer pid=1) ERROR 09-01 12:00:00 [multiproc_executor.py:1] Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.", 1, "killed"),
    # ---- timeout (the ready gate produces it too; this is SGLang's own watchdog)
    ("sglang", "[2025-01-15 11:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", -3, "timeout"),
    # ---- unknown
    ("sglang", "[2025-01-15 10:00:00] server_args=ServerArgs(model_path='m')", 1, "unknown"),
    # vLLM's wrappers of any startup failure, without the exception below them (issue 18)
    ("vllm", "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}", 1, "unknown"),
    ("vllm", "(EngineCore_DP0 pid=812) ERROR 09-01 12:00:00 [core.py:708] EngineCore failed to start.", 1, "unknown"),
]


@pytest.mark.parametrize(("kind", "text", "rc", "expected"), CASES, ids=[f"{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_every_crash_class_from_real_lines(kind, text, rc, expected):
    out = classify_log(text, kind, returncode=rc)
    assert out["final"] == "crashed"
    assert out["class"] == expected
    if expected not in ("unknown", "killed", "bad_flag") or text:
        assert out["lines"], "the relevant lines are kept"


def test_every_class_is_covered():
    assert {c[3] for c in CASES} == {str(c) for c in CrashClass}


def test_benign_lines_are_not_crashes():
    c = LogClassifier("sglang")
    for line in [
        "[2025-01-15 10:00:05 TP0] Port 5000 is already in use, trying port 5001",
        "[2025-01-15 10:02:00] Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.",
        "(APIServer pid=1) WARNING 09-01 12:00:00 [x.py:1] With `vllm serve`, you should provide the model as a positional argument",
    ]:
        c.feed(line)
    assert c.hints == [] and c.crash_class(0) is CrashClass.UNKNOWN


def test_relevant_lines_show_the_traceback_end():
    c = LogClassifier("sglang")
    for line in (TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.").splitlines():
        c.feed(line)
    assert c.relevant_lines()[-1].startswith("torch.OutOfMemoryError")


def test_llamacpp_timestamps_and_kind_detection():
    assert line_timestamp("0.01.657.265 I slot get_availabl: id  3") == pytest.approx(1.657265)
    log = "0.00.010.143 I srv  llama_server: initializing ...\n0.00.156.775 I srv  llama_server: listening on http://127.0.0.1:1\n"
    out = classify_log(log)
    assert out["kind"] == "llamacpp" and out["final"] == "ready"
    assert out["phases"] == [{"phase": "launching", "t": 0.0}, {"phase": "ready", "t": 0.147}]
    assert detect_kind("(APIServer pid=3) INFO 09-01 12:00:00 [api_server.py:1] x") == "vllm"
    assert detect_kind("[2025-01-15 10:00:00] server_args=ServerArgs()") == "sglang"


def test_phase_durations():
    marks = [PhaseMark("launching", 0.0), PhaseMark("loading_weights", 1.5), PhaseMark("kv_cache", 4.0), PhaseMark("ready", 5.25)]
    assert phase_durations(marks) == [
        {"phase": "launching", "t": 0.0, "dur": 1.5}, {"phase": "loading_weights", "t": 1.5, "dur": 2.5},
        {"phase": "kv_cache", "t": 4.0, "dur": 1.25}, {"phase": "ready", "t": 5.25, "dur": None}]
    assert phase_durations(marks[:2], end_t=3.0)[-1]["dur"] == 1.5
    assert phase_durations([PhaseMark("x", float("nan"))]) == [{"phase": "x", "t": None, "dur": None}]


# ------------------------------------------------------------------ log-line load fallback
SGLANG_STATS = [
    "[2025-01-15 10:01:13 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ",
    "[2025-01-15 10:01:20 TP0] Decode batch. #running-req: 37, #token: 12345, token usage: 0.61, accept len: 3.21, cuda graph: True, "
    "gen throughput (token/s): 2210.40, #queue-req: 3, ",
]


def test_sglang_decode_lines_give_a_load_view():
    load = LogLoad()
    for line in SGLANG_STATS:
        assert load.feed(line)
    assert not load.feed("[2025-01-15 10:01:21] INFO:     127.0.0.1:1 - \"POST /generate HTTP/1.1\" 200 OK")
    view = load.view(hint="no /metrics: add --enable-metrics")
    assert (view.running, view.waiting, view.kv_cache_pct, view.gen_tok_s, view.accept_length) == (37, 3, 61.0, 2210.4, 3.21)
    assert view.source == "log" and view.hint.startswith("no /metrics") and load.progress == 1 and load.busy == 40


def test_sglang_0523_dp_ranks_are_summed_and_vllm_engine_lines():
    lines = [
        "[2025-09-01 10:00:00 DP0 TP0] Decode batch, #running-req: 10, #token: 900, token usage: 0.20, cuda graph: True, gen throughput (token/s): 500.00, #queue-req: 1",
        "[2025-09-01 10:00:00 DP1 TP1] Decode batch, #running-req: 6, #token: 700, token usage: 0.40, cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0",
    ]
    load = LogLoad()
    for line in lines:
        load.feed(line)
    view = load.view()
    assert (view.running, view.waiting, view.gen_tok_s) == (16, 1, 800) and view.kv_cache_pct == pytest.approx(30.0)
    v = parse_batch_line("(APIServer pid=9) INFO 09-01 12:00:10 [loggers.py:1] Engine 000: Avg prompt throughput: 120.5 tokens/s, "
                         "Avg generation throughput: 0.0 tokens/s, Running: 2 reqs, Waiting: 3 reqs, GPU KV cache usage: 4.5%, "
                         "Prefix cache hit rate: 10.0%")
    assert (v.running, v.waiting, v.kv_cache_pct, v.gen_tok_s, v.prefix_hit_pct, v.prompt_tok_s) == (2, 3, 4.5, 0.0, 10.0, 120.5)
    spec = parse_batch_line("(APIServer pid=9) INFO 09-01 12:00:10 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: 2.50, "
                            "Accepted throughput: 10.00 tokens/s")
    assert spec.accept_length == 2.5


def test_log_progress_stands_still_when_hung_and_idle_resets_busy():
    load = LogLoad()
    load.feed(SGLANG_STATS[1])
    before = load.progress
    load.feed("(APIServer pid=9) INFO 09-01 12:00:10 [x.py:1] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
              "Avg generation throughput: 0.0 tokens/s, Running: 2 reqs, Waiting: 3 reqs, GPU KV cache usage: 4.5%")
    assert load.progress == before  # a zero-rate line is no progress
    load.idle()
    assert load.busy == 0


# ------------------------------------------------------------------ CLI
def test_cli_log_classify_json(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2025-01-15 10:00:00] server_args=ServerArgs()\n[2025-01-15 10:00:07 TP0] Load weight begin. avail mem=78.90 GB\n"
                   + TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    result = CliRunner().invoke(cli, ["log", "classify", str(log), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["final"] == "crashed" and data["class"] == "oom"
    assert data["phases"] == [{"phase": "launching", "t": 0.0}, {"phase": "loading_weights", "t": 7.0}]
    assert any("CUDA out of memory" in line for line in data["lines"])
    human = CliRunner().invoke(cli, ["log", "classify", str(log)])
    assert "crashed (oom)" in human.output and "loading_weights" in human.output
    ready = tmp_path / "ready.log"
    ready.write_text("[2025-01-15 10:00:00] server_args=x\n[2025-01-15 10:01:14] The server is fired up and ready to roll!\n")
    assert json.loads(CliRunner().invoke(cli, ["log", "classify", str(ready), "--json"]).output)["final"] == "ready"
    assert json.loads(CliRunner().invoke(cli, ["log", "classify", str(ready), "--json", "--returncode", "-9"]).output)["class"] == "killed"


def test_cli_log_classify_missing_file_is_a_clean_error(tmp_path):
    result = CliRunner().invoke(cli, ["log", "classify", str(tmp_path / "nope.log")])
    assert result.exit_code == 2 and "cannot read" in result.output and "Traceback" not in result.output


# ------------------------------------------------------------------ cause lines
LLAMA_LOGS = Path(__file__).parents[1] / "fixtures" / "llamacpp_logs"  # captured from the real llama-server 0.3.36 peer


@pytest.mark.parametrize(("name", "cause"), [
    ("bad_magic.log", "gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'"),
    ("missing_model.log", "gguf_init_from_file: failed to open GGUF file '/nonexistent.gguf' (No such file or directory)"),
])
def test_llamacpp_load_failure_names_its_cause_line(name, cause):
    classifier = LogClassifier("llamacpp")
    for line in (LLAMA_LOGS / name).read_text().splitlines():
        classifier.feed(line)
    assert classifier.crash_class(1) is CrashClass.LOAD_FAILED
    # the first line naming the cause, not "exiting due to model loading error"
    assert classifier.cause(1).endswith(cause)
    assert any(line.endswith(cause) for line in classifier.relevant_lines())
    # a flag error's cause is its own signature line
    bad_flag = LogClassifier("llamacpp")
    bad_flag.feed("error: invalid argument: --no-such-flag")
    assert bad_flag.cause(1) == "error: invalid argument: --no-such-flag"
    assert LogClassifier("llamacpp").cause(-9) is None  # a bare kill -9 prints nothing


@pytest.mark.parametrize(("rc", "text"), [
    (-9, "killed by SIGKILL (rc=-9)"), (-15, "killed by SIGTERM (rc=-15)"), (137, "killed by SIGKILL (rc=137)"),
    (1, "exited rc=1"), (0, "exited rc=0"), (None, "exit status unknown"),
])
def test_exit_description_names_the_signal(rc, text):
    assert exit_description(rc) == text


# ------------------------------------------------------------------ issue 18: real endings
SERVER_LOGS = Path(__file__).parents[1] / "fixtures" / "server_logs"  # see fixtures/server_logs/README.md


def _log(name: str) -> str:
    return (SERVER_LOGS / name).read_text()


def test_an_uncaught_argument_check_traceback_is_a_bad_flag_crash_not_starting():
    # vLLM 0.8.5 raises its max_model_len check at the top level: no crash signature, no rc
    out = classify_log(_log("vllm_bad_max_model_len.log"))
    assert out["kind"] == "vllm"
    assert (out["final"], out["class"]) == ("crashed", "bad_flag")
    assert out["lines"][-1].startswith("ValueError: User-specified max_model_len (200000)")


@pytest.mark.parametrize(("exception", "expected"), [
    ("torch.OutOfMemoryError: Tried to allocate 20.00 MiB", "oom"),
    ("huggingface_hub.errors.GatedRepoError: 401 Client Error.", "load_failed"),
    ("argparse.ArgumentTypeError: invalid choice", "bad_flag"),
    ("AssertionError", "unknown"),
    ("KeyError: 'qwen3_moe'", "unknown"),
])
def test_a_final_traceback_is_classified_by_its_exception(exception, expected):
    text = "INFO 05-06 09:14:05 [api_server.py:1044] args: Namespace(model='m')\n" + TB + exception + "\n"
    out = classify_log(text)
    assert (out["final"], out["class"]) == ("crashed", expected)
    live = LogClassifier("vllm")
    for line in text.splitlines():
        live.feed(line)
    assert live.crash_class(1) is CrashClass(expected) and live.cause(1) == exception


def test_a_traceback_followed_by_progress_is_not_the_end():
    text = TB + "ValueError: a retried download\n[2025-01-15 10:00:07 TP0] Load weight begin. avail mem=78.90 GB\n"
    assert classify_log(text, "sglang")["final"] == "starting"


def test_a_prefixed_engine_core_traceback_gives_its_exception_not_the_wrappers():
    # vLLM repeats the record prefix on every traceback line; the API server's
    # "Engine core initialization failed" traceback that follows is only a wrapper
    out = classify_log(_log("vllm_engine_core_validation.log"), returncode=1)
    assert out["class"] == "bad_flag"
    c = LogClassifier("vllm")
    for line in _log("vllm_engine_core_validation.log").splitlines():
        c.feed(line)
    assert c.cause(1).startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig")


@pytest.mark.parametrize("rc", [None, -9, 137])
def test_sglang_killing_itself_after_a_child_failed_shows_the_childs_assertion(rc):
    out = classify_log(_log("sglang_sigquit_cuda_graph_assert.log"), returncode=rc)
    assert (out["final"], out["class"]) == ("crashed", "unknown")
    assert "AssertionError" in out["lines"]
    c = LogClassifier("sglang")
    for line in _log("sglang_sigquit_cuda_graph_assert.log").splitlines():
        c.feed(line)
    assert c.self_killed and c.cause(rc) == "AssertionError"


@pytest.mark.parametrize("rc", [None, -9, 137])
def test_sglang_watchdog_timeout_wins_over_the_shells_killed(rc):
    out = classify_log(_log("sglang_sigquit_watchdog.log"), returncode=rc)
    assert (out["final"], out["class"]) == ("crashed", "timeout")


def test_killed_from_outside_stays_killed():
    text = "[2025-01-15 10:00:30 TP0] Load weight begin. avail mem=78.90 GB\nKilled\n"
    assert classify_log(text, returncode=137)["class"] == "killed"
    assert classify_log(text)["class"] == "killed"


@pytest.mark.parametrize("name", ["llamacpp_b4000_text.log", "llamacpp_2024_json.log"])
def test_older_llamacpp_logs_are_detected_and_reach_ready(name):
    out = classify_log(_log(name))
    assert (out["kind"], out["final"]) == ("llamacpp", "ready")
    assert out["phases"][-1]["phase"] == "ready"


def test_json_lines_alone_are_llamacpp():
    json_only = "\n".join(line for line in _log("llamacpp_2024_json.log").splitlines() if line.startswith("{"))
    assert detect_kind(json_only) == "llamacpp"
    assert classify_log(json_only)["final"] == "ready"
    # late-2024 text: "main: HTTP server is listening" comes before the model is loaded
    assert classify_log("main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 15\nmain: loading model\n")["final"] == "starting"


def _run_python(code: str) -> tuple[str, int]:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr, proc.returncode


def test_a_real_uncaught_valueerror_is_classified_from_the_interpreters_own_traceback():
    # the real interpreter prints the traceback (stderr) after the server's lines (stdout)
    code = (
        "import sys\n"
        "print('INFO 05-06 09:14:05 [api_server.py:1043] vLLM API server version 0.8.5', flush=True)\n"
        "def _get_and_verify_max_len():\n"
        "    raise ValueError('User-specified max_model_len (200000) is greater than the derived max_model_len')\n"
        "_get_and_verify_max_len()\n"
    )
    text, rc = _run_python(code)
    assert rc == 1 and text.rstrip().splitlines()[-1].startswith("ValueError: User-specified")
    assert (classify_log(text)["final"], classify_log(text)["class"]) == ("crashed", "bad_flag")
    live = LogClassifier("vllm")
    for line in text.splitlines():
        live.feed(line)
    assert live.crash_class(rc) is CrashClass.BAD_FLAG and live.cause(rc).startswith("ValueError: User-specified")


def test_a_real_self_kill_after_the_childs_traceback_is_not_killed():
    # SGLang's parent SIGKILLs its own tree after "Received sigquit": the status is -9
    log = _log("sglang_sigquit_cuda_graph_assert.log").split("Killed")[0]
    code = f"import os, signal, sys\nsys.stdout.write({log!r})\nsys.stdout.flush()\nos.kill(os.getpid(), signal.SIGKILL)\n"
    text, rc = _run_python(code)
    assert rc == -9
    live = LogClassifier("sglang")
    for line in text.splitlines():
        live.feed(line)
    assert live.crash_class(rc) is CrashClass.UNKNOWN and live.cause(rc) == "AssertionError"
    # the same status without SGLang's sigquit line is a kill from outside
    outside = LogClassifier("sglang")
    outside.feed("[2025-03-10 08:12:32 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=11.35 GB")
    assert outside.crash_class(rc) is CrashClass.KILLED


def test_a_valueerror_while_serving_is_no_bad_flag():
    c = LogClassifier("vllm")
    for line in ["INFO:     Application startup complete.", *(TB + "ValueError: prompt too long").splitlines()]:
        c.feed(line)
    assert c.ready and c.crash_class(1) is CrashClass.UNKNOWN and c.cause(1) == "ValueError: prompt too long"


@pytest.mark.parametrize("line, probe", [
    ('[2025-01-15 10:01:13] INFO:     127.0.0.1:50000 - "GET /health HTTP/1.1" 200 OK', True),  # SGLang
    ('INFO:     127.0.0.1:41234 - "GET /metrics HTTP/1.1" 200 OK', True),  # vLLM
    ('INFO:     127.0.0.1:41234 - "GET /health?x=1 HTTP/1.1" 503 Service Unavailable', True),
    ("srv  log_server_r: request: GET /slots 127.0.0.1 200", True),  # llama-server
    ("srv  log_server_r: done request: GET /health 127.0.0.1 503", True),
    ('INFO:     127.0.0.1:41234 - "POST /generate HTTP/1.1" 200 OK', False),
    ('INFO:     127.0.0.1:41234 - "GET /v1/models HTTP/1.1" 200 OK', False),  # a client's request
    ("srv  log_server_r: request: POST /completion 127.0.0.1 200", False),
    ("GET /health answered slowly", False),
])
def test_probe_access_lines_are_recognised(line, probe):
    assert is_probe_line(line) is probe
