"""Property-based bad input (hypothesis): the Prometheus mapping, the server log
classifier and the config loader never let an exception escape except their documented
error type, with a clear message. 200 examples each by default, 10,000 with OPTUI_SLOW=1."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optui.config import ConfigError, parse_config_text
from optui.core.server.log import LogClassifier, classify_log
from optui.core.server.metrics_map import MetricsParseError, load_view, parse_scrape

FUZZ = settings(max_examples=10_000 if os.environ.get("OPTUI_SLOW") == "1" else 200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

METRIC_LINES = [
    "# TYPE sglang:num_running_reqs gauge", 'sglang:num_running_reqs{tp_rank="0"} 3.0',
    'sglang:token_usage{tp_rank="0"} 0.5', "sglang:generation_tokens_total 1e6", "vllm:num_requests_waiting 2",
    'vllm:kv_cache_usage_perc{engine="0"} NaN', "vllm:prefix_cache_hits_total +Inf", "llamacpp:requests_processing 1",
    'x_bucket{le="0.5"} 3', "# HELP a b", "garbage{", "}", 'a{b="c\\"} 1', "", "metric 1 2 3 4",
]
LOG_LINES = [
    "[2025-01-15 10:00:05 TP0] Load weight begin. avail mem=78.90 GB", "The server is fired up and ready to roll!",
    "torch.OutOfMemoryError: CUDA out of memory.", "error: unrecognized arguments: --x", "Traceback (most recent call last):",
    "  File \"x\", line 1", "RuntimeError: boom", "INFO 12-20 20:25:46 worker.py:241] x", "[9999-99-99 99:99:99] bad ts",
    "\x1b[31mred\x1b[0m", "Address already in use", "llama_server: listening on http://1", "",
]
CONFIG_LINES = [
    "[servers.q]", "url = 'http://127.0.0.1:1'", "argv = ['x']", "kind = 'vllm'", "control = 'systemd'",
    "[hosts.h]", "ssh = 'h'", "gpu_source = 'replay'", "interval_s = 0", "[benchmarks.b]", "server = 'q'",
    "builtin = { concurrency = [1, 'x'] }", "theme = 3", "[[servers]]", "a.b.c = 1", "x = [1, 2", "= 1", "[servers.q.presets.p]",
    "set = { '--a' = 1 }", 'refresh_s = "fast"', "bogus = true",
]


def mix(lines):
    return st.lists(st.one_of(st.sampled_from(lines), st.text(max_size=40)), max_size=25).map("\n".join)


@FUZZ
@given(mix(METRIC_LINES), mix(METRIC_LINES))
def test_metrics_mapping_raises_only_its_error(a, b):
    try:
        first = parse_scrape(a, 1.0)
        second = parse_scrape(b, 2.0)
    except MetricsParseError as exc:
        assert str(exc).startswith("unparseable /metrics text")
        return
    view = load_view(second, first)
    for pct in (view.kv_cache_pct, view.prefix_hit_pct):
        assert pct is None or isinstance(pct, float)


@FUZZ
@given(mix(LOG_LINES), st.sampled_from(["sglang", "vllm", "llamacpp", "openai"]), st.one_of(st.none(), st.integers(-15, 255)))
def test_log_classifier_never_raises(text, kind, rc):
    out = classify_log(text, kind, returncode=rc)
    assert out["final"] in ("ready", "crashed", "starting")
    assert out["class"] is None or out["final"] == "crashed"
    c = LogClassifier(kind)
    for line in text.split("\n"):
        c.feed(line)
    c.crash_class(rc)


@FUZZ
@given(mix(CONFIG_LINES))
def test_config_loader_raises_only_config_error_with_a_location(text):
    try:
        parse_config_text(text, "optui.toml")
    except ConfigError as exc:
        for line in str(exc).splitlines():
            assert line.startswith("optui.toml:"), line
