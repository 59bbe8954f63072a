"""Pure core pieces: text stream splitting, log classifier, metrics mapping, state machine."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optui.core.server.fsm import HungDetector, Observation, next_state, unhealthy_reason
from optui.core.server.log import LogClassifier, classify_log
from optui.core.server.metrics_map import MetricsParseError, load_view, parse_scrape
from optui.core.server.state import CrashClass, ServerState
from optui.core.text.textstream import LineSplitter, strip_ansi


def test_splitter_collapses_carriage_returns_and_strips_ansi():
    s = LineSplitter()
    out = s.feed(b"start\n 10%|#  | 1/10\r 50%|##")
    assert out.lines == ["start"] and out.progress == " 10%|#  | 1/10"
    out = s.feed(b"### | 5/10\r100%|#### | 10/10\n\x1b[32mgreen\x1b[0m\r\n")
    assert out.lines == ["100%|#### | 10/10", "green"]
    assert s.close().lines == []


def test_splitter_handles_split_utf8_long_lines_and_invalid_bytes():
    s = LineSplitter(max_line=100)
    data = "é".encode()
    assert s.feed(data[:1]).lines == [] and s.feed(data[1:] + b"\n").lines == ["é"]
    out = s.feed(b"x" * 1000 + b"\n\xff\xfe\n")
    assert out.lines[0].startswith("x" * 100) and "900 more characters cut" in out.lines[0]
    assert out.lines[1] == "\ufffd\ufffd"
    assert strip_ansi("\x1b]0;title\x07a\x1b[1;31mb") == "ab"


_PIECES = st.sampled_from(["a", "é", "xyz" * 7, "\n", "\r", "\r\n", "\x1b[31m", "\x1b]0;t\x07", "\t", "\x07", "\n\n"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40), st.lists(st.integers(0, 400), max_size=6), st.sampled_from([4, 16, 1000]))
def test_splitter_lines_do_not_depend_on_chunk_boundaries(pieces, cuts, max_line):
    """Whole lines in one chunk take a fast path; byte by byte they take the general one:
    both give the same lines, redraws and progress."""
    data = "".join(pieces).encode() + b"\xff"

    def split(chunks):
        s = LineSplitter(max_line=max_line)
        lines, last_progress = [], None
        for chunk in chunks:
            out = s.feed(chunk)
            lines += out.lines
            last_progress = out.progress if out.progress is not None else (None if out.lines else last_progress)
        redraw = s.pending_redraw()
        return lines + s.close().lines, redraw, last_progress

    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    whole = split([data])
    assert split([data[a:b] for a, b in zip(bounds, bounds[1:])]) == whole
    assert split([data[i:i + 1] for i in range(len(data))]) == whole


SGLANG_LOG = """[2025-01-15 10:00:00] server_args=ServerArgs(model_path='m', tp_size=2)
[2025-01-15 10:00:05 TP0] Init torch distributed begin.
[2025-01-15 10:00:07 TP0] Load weight begin. avail mem=78.90 GB
Loading safetensors checkpoint shards: 100% Completed | 8/8 [00:40<00:00,  5.00s/it]
[2025-01-15 10:00:48 TP0] KV Cache is allocated. #tokens: 600000, K size: 14.00 GB, V size: 14.00 GB
[2025-01-15 10:00:50 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=15.90 GB
[2025-01-15 10:01:12] INFO:     Application startup complete.
[2025-01-15 10:01:12] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2025-01-15 10:01:14] The server is fired up and ready to roll!
"""


def test_classify_sglang_startup_phases_with_times():
    out = classify_log(SGLANG_LOG, "sglang")
    assert out["final"] == "ready" and out["class"] is None
    assert [p["phase"] for p in out["phases"]] == ["launching", "init_dist", "loading_weights", "kv_cache", "cuda_graph", "http_up", "ready"]
    assert out["phases"][-1]["t"] == 74.0


def test_vllm_ready_is_application_startup_but_not_for_sglang():
    c = LogClassifier("sglang")
    c.feed("INFO:     Application startup complete.")
    assert not c.ready
    v = LogClassifier("vllm")
    v.feed("(APIServer pid=1) INFO 09-01 12:00:00 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000")
    v.feed("INFO:     Application startup complete.")
    assert v.ready and v.phase == "ready"


@pytest.mark.parametrize(
    "lines, rc, expected",
    [
        (["launch_server.py: error: unrecognized arguments: --foo"], 2, CrashClass.BAD_FLAG),
        (["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."], 1, CrashClass.OOM),
        (["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."], 1, CrashClass.OOM),
        (["ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use"], 1, CrashClass.PORT_IN_USE),
        (["torch.distributed.DistBackendError: NCCL error in: x"], 1, CrashClass.NCCL),
        (["EngineCore failed to start."], 1, CrashClass.UNKNOWN),  # a wrapper: the exception below decides (issue 18)
        (["some line"], -9, CrashClass.KILLED),
        (["some line"], 1, CrashClass.UNKNOWN),
    ],
)
def test_crash_classes(lines, rc, expected):
    c = LogClassifier("sglang")
    for line in lines:
        c.feed(line)
    assert c.crash_class(rc) is expected


def test_classify_log_crashed_has_lines():
    text = SGLANG_LOG.split("[2025-01-15 10:00:50")[0] + "Traceback (most recent call last):\n  File x\ntorch.OutOfMemoryError: CUDA out of memory.\n"
    out = classify_log(text)
    assert out["final"] == "crashed" and out["class"] == "oom" and any("CUDA out of memory" in l for l in out["lines"])


METRICS_1 = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{tp_rank="0"} 3.0
sglang:num_queue_reqs{tp_rank="0"} 1.0
sglang:token_usage{tp_rank="0"} 0.5
sglang:token_usage{tp_rank="1"} 0.3
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 1000.0
"""


def test_metrics_mapping_rates_and_fractions():
    a = parse_scrape(METRICS_1, 10.0)
    b = parse_scrape(METRICS_1.replace("1000.0", "3000.0"), 12.0)
    view = load_view(b, a)
    assert view.running == 3 and view.waiting == 1 and view.kv_cache_pct == pytest.approx(40.0)
    assert view.gen_tok_s == pytest.approx(1000.0) and view.generated_total == 3000
    vllm = parse_scrape('vllm:num_requests_running{engine="0"} 2\nvllm:gpu_cache_usage_perc 0.25\n', 1)
    assert load_view(vllm).kv_cache_pct == 25.0
    assert load_view(parse_scrape("http_requests_total 5\n", 1)).hint
    with pytest.raises(MetricsParseError):
        parse_scrape("not { valid", 1)


def test_state_machine_transitions():
    S = ServerState
    assert next_state(S.STARTING, Observation("running", None), 1) is S.STARTING
    assert next_state(S.STARTING, Observation("running", 503), 1) is S.WARMING
    assert next_state(S.WARMING, Observation("running", 200), 0) is S.READY
    assert next_state(S.READY, Observation("running", 503), 1) is S.DEGRADED
    assert next_state(S.READY, Observation("exited"), 1) is S.CRASHED
    assert next_state(S.READY, Observation("running", stopping=True), 1) is S.STOPPING
    assert next_state(S.STOPPING, Observation("exited", stopping=True), 1) is S.DOWN
    assert next_state(S.DOWN, Observation("unknown", None), 1) is S.DOWN
    assert next_state(S.READY, Observation("unknown", None), 3) is S.DOWN


def test_degraded_says_why_and_escalates_to_hung_after_the_limit():
    S = ServerState
    stuck = Observation("running", None, unhealthy_s=5.0, hung_by_load=False)
    assert next_state(S.READY, stuck, 1, escalate_after_s=30) is S.DEGRADED  # one slow probe is not a hang
    assert next_state(S.DEGRADED, stuck, 2, escalate_after_s=30) is S.DEGRADED
    late = Observation("running", None, unhealthy_s=31.0, hung_by_load=False)
    assert next_state(S.DEGRADED, late, 4, escalate_after_s=30) is S.HUNG  # was DEGRADED for ever
    assert next_state(S.DEGRADED, Observation("running", 503, unhealthy_s=31.0), 9, escalate_after_s=30) is S.HUNG
    assert next_state(S.HUNG, late, 5, escalate_after_s=30) is S.HUNG
    assert next_state(S.HUNG, Observation("running", 200, hung_by_load=False), 0, escalate_after_s=30) is S.READY
    assert next_state(S.HUNG, Observation("running", 200, hung_by_load=True), 0, escalate_after_s=30) is S.HUNG
    assert next_state(S.DEGRADED, Observation("exited", unhealthy_s=99.0), 4, escalate_after_s=30) is S.CRASHED
    assert next_state(S.DEGRADED, Observation("unknown", None, unhealthy_s=99.0), 3, escalate_after_s=30) is S.DOWN
    assert unhealthy_reason(None, "timeout", 3, 12.4) == "health: timeout (3 probes failing for 12 s)"
    assert unhealthy_reason(503, None, 1, 0.0) == "health: HTTP 503 (1 probe failing for 0 s)"
    assert unhealthy_reason(None, "refused", 2, 4.0).startswith("health: connection refused")


def test_hung_detector():
    h = HungDetector(after_s=30)
    assert not h.update(0, 100, 2)
    assert not h.update(20, 100, 2)
    assert h.update(31, 100, 2)
    assert not h.update(32, 101, 2)
    assert not h.update(100, 101, 0)


LLAMA_LOG = """0.00.010.143 I srv  llama_server: initializing ...
0.00.060.801 I srv    load_model: loading model 'tiny.gguf'
0.00.142.805 I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 512, kv_unified = 'false'
0.00.154.966 I srv  llama_server: model loaded
0.00.156.775 I srv  llama_server: listening on http://127.0.0.1:18093
"""


def test_llamacpp_ready_and_failures():
    assert classify_log(LLAMA_LOG, "llamacpp")["final"] == "ready"
    assert [p["phase"] for p in classify_log(LLAMA_LOG, "llamacpp")["phases"]] == ["launching", "loading_weights", "kv_cache", "ready"]
    assert classify_log("error: invalid argument: --no-such-flag\n", "llamacpp", returncode=1)["class"] == "bad_flag"
    bind = "E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080\n"
    assert classify_log(bind, "llamacpp", returncode=1)["class"] == "port_in_use"


def test_changed_flags_fit_a_cell_with_their_names_whole_or_abbreviated_alike():
    """Issue 20: a narrow cell cut the flag name the row is read by (``--max-``,
    ``--max-run… 64``). Names stay whole, or every name of the column is abbreviated by the
    same rule; flags that do not fit are counted; only a value is ever cut."""
    from optui.core.flags.abbrev import abbreviate, fit_flag_column, fit_flags

    assert [abbreviate("--max-running-requests", level) for level in (0, 1, 2)] == [
        "--max-running-requests", "--max-run-req", "--mrr"]
    assert abbreviate("<positional 0>", 2) == "<positional 0>" and abbreviate("-np", 1) == "-np"
    rows = [["--max-running-requests 64"], ["--max-running-requests 64", "--chunked-prefill-size 512"], []]
    assert fit_flag_column(rows, 30) == ["--max-running-requests 64", "--max-running-requests 64 +1", ""]
    assert fit_flag_column(rows, 24) == ["--max-run-req 64", "--max-run-req 64 +1", ""]  # one level for the column
    assert fit_flag_column(rows, 18) == ["--mrr 64", "--mrr 64 --cps 512", ""]
    assert fit_flags(["-(--enable-metrics)"], 12) == "-(--ena-met)"
    # a row that fits at no level puts the whole column at the last one: never --dis-cud-gra
    # on one row and --dcg on the next
    assert fit_flag_column([["--disable-cuda-graph"], ["--mem-fraction-static 0.912345678"]], 14) == [
        "--dcg", "--mfs 0.91234…"]
    assert fit_flags(["--mem-fraction-static 0.912345678"], 12) == "--mfs 0.912…"  # the value cut, not the name
    # the first flag (the change from the previous configuration) stays whole while there is room
    # for it (issue 34: --mrr 16 at 50 columns); the others abbreviated, counted, or said to follow
    two = ["--mem-fraction-static 0.99", "--disable-cuda-graph"]
    assert fit_flags(two, 29) == "--mem-fraction-static 0.99 +1"
    assert fit_flags(two, 28) == "--mem-fraction-static 0.99 …"
    assert fit_flags(two, 20) == "--mfs 0.99 --dcg"  # no room for it whole: abbreviated, as before
    assert fit_flag_column([two, ["--max-running-requests 64"]], 29) == [
        "--mem-fraction-static 0.99 +1", "--max-running-requests 64"]
