"""Pure helpers: percentiles, the SGLang result block, Namespace repr, tqdm text."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optui.core.bench.format import format_namespace, format_sglang_block
from optui.core.bench.result import BenchResult
from optui.core.stats import percentile, summarize
from optui.demo.tqdm_text import tqdm_line


def test_percentile_matches_numpy_linear():
    values = [15.0, 1.0, 7.0, 3.0]
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 15.0
    assert percentile(values, 50) == 5.0  # numpy.percentile([1,3,7,15], 50)
    assert percentile(values, 90) == pytest.approx(12.6)  # 7 + 0.7 * 8
    assert percentile([4.0], 99) == 4.0
    with pytest.raises(ValueError):
        percentile([], 50)
    assert summarize([]) == {"mean": None, "median": None, "p90": None, "p95": None, "p99": None}
    assert summarize([1.0, 2.0, 3.0])["mean"] == 2.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40),
       st.sampled_from([0.0, 1.0, 10.0, 25.0, 50.0, 62.5, 90.0, 95.0, 99.0, 99.9, 100.0]))
def test_percentile_is_numpy_linear_for_any_sample(values, q):
    """core/stats.py uses statistics.quantiles(method="inclusive"): the same numbers as numpy."""
    numpy = pytest.importorskip("numpy")
    assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)), rel=1e-9, abs=1e-6)


def test_sglang_block_format():
    r = BenchResult(completed=10, duration_s=2.5, request_throughput=4.0, input_throughput_tok_s=400.0,
                    output_throughput_tok_s=200.0, total_throughput_tok_s=600.0, max_concurrency=None,
                    request_rate=math.inf, total_input_tokens=1000, total_output_tokens=500,
                    ttft_ms={"mean": 10.0, "median": 9.0, "p90": 12.0, "p95": 13.0, "p99": 14.0})
    lines = format_sglang_block(r).split("\n")
    assert lines[0] == "" and lines[1] == "============ Serving Benchmark Result ============"
    assert lines[2] == "Backend:                                 sglang    "
    assert "Traffic request rate:                    inf       " in lines
    assert "Max request concurrency:                 not set   " in lines
    assert "Benchmark duration (s):                  2.50      " in lines
    assert "-----Time per Output Token (excl. 1st token)------" in lines
    assert "Mean TTFT (ms):                          10.00     " in lines
    assert "Mean TPOT (ms):                          nan       " in lines
    assert lines[-1] == "=" * 50 and all(len(line) == 50 for line in lines[1:] if line.startswith(("=", "-")))


def test_namespace_matches_argparse():
    args = {"backend": "sglang", "request_rate": math.inf, "model": None, "n": 3}
    assert format_namespace(args) == repr(argparse.Namespace(**args))
    assert format_namespace({"a-b": 1}) == repr(argparse.Namespace(**{"a-b": 1}))


def test_tqdm_line_like_tqdm():
    assert tqdm_line(450, 1000, 30.0) == " 45%|████▌     | 450/1000 [00:30<00:36, 15.00it/s]"
    assert tqdm_line(0, 8, 0.0) == "  0%|          | 0/8 [00:00<?, ?it/s]"
    assert tqdm_line(1, 4, 5.0, "x") == "x:  25%|██▌       | 1/4 [00:05<00:15,  5.00s/it]"
