"""Rendering results the way SGLang's ``bench_serving`` prints them.

Format strings are SGLang 0.5.23's (``python/sglang/benchmark/serving.py``; reference:
``servers_and_bench.md`` section 3.1): a leading blank line, 50-wide centred headers,
rows ``"{:<40} {:<10}"`` (strings and ints) and ``"{:<40} {:<10.2f}"`` (floats), so every
row ends with padding spaces. Values BenchResult lacks come from ``result.extra`` when a
producer recorded them (``peak_output_throughput_tok_s``, ``peak_concurrent_requests``,
``concurrency``, ``max_itl_ms``) and are derived otherwise.
"""

from __future__ import annotations

import math

from optui.core.bench.result import BenchResult

_WIDTH = 50
_SECTIONS = (
    ("End-to-End Latency", "e2e_ms", "E2E Latency"),
    ("Time to First Token", "ttft_ms", "TTFT"),
    ("Time per Output Token (excl. 1st token)", "tpot_ms", "TPOT"),
    ("Inter-Token Latency", "itl_ms", "ITL"),
)
_STAT_LABELS = (("mean", "Mean"), ("median", "Median"), ("p90", "P90"), ("p95", "P95"), ("p99", "P99"))


def _row(label: str, value) -> str:
    """One result row: floats with two decimals, anything else as ``str``."""
    if isinstance(value, float):
        return f"{label:<40} {value:<10.2f}"
    return f"{label:<40} {value:<10}"


def _num(value: float | int | None) -> float:
    """A float for a ``.2f`` row; unknown values print as ``nan`` like numpy's empty mean."""
    return math.nan if value is None else float(value)


def _int(value: int | None) -> int:
    return 0 if value is None else int(value)


def format_sglang_block(result: BenchResult, backend: str = "sglang") -> str:
    """The "Serving Benchmark Result" block of SGLang 0.5.23 for ``result`` (no trailing
    newline; ``print`` it). Label order follows 0.5.23 for a random-text dataset."""
    extra = result.extra
    duration = _num(result.duration_s)
    completed = _int(result.completed)
    total_in = _int(result.total_input_tokens)
    total_out = _int(result.total_output_tokens)
    concurrency = extra.get("concurrency")
    mean_e2e_ms = result.e2e_ms.get("mean")
    if concurrency is None and mean_e2e_ms is not None and result.duration_s:
        concurrency = mean_e2e_ms / 1000.0 * completed / result.duration_s
    rate = result.request_rate if result.request_rate is not None else math.inf
    lines = [
        "\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=_WIDTH, c="="),
        _row("Backend:", backend),
        _row("Traffic request rate:", rate),
        _row("Max request concurrency:", result.max_concurrency or "not set"),
        _row("Successful requests:", completed),
        _row("Benchmark duration (s):", duration),
        _row("Total input tokens:", total_in),
        _row("Total input text tokens:", total_in),
        _row("Total generated tokens:", total_out),
        _row("Total generated tokens (retokenized):", total_out),
        _row("Request throughput (req/s):", _num(result.request_throughput)),
        _row("Input token throughput (tok/s):", _num(result.input_throughput_tok_s)),
        _row("Output token throughput (tok/s):", _num(result.output_throughput_tok_s)),
        _row(
            "Peak output token throughput (tok/s):",
            _num(extra.get("peak_output_throughput_tok_s", result.output_throughput_tok_s)),
        ),
        _row("Peak concurrent requests:", _int(extra.get("peak_concurrent_requests", result.max_concurrency))),
        _row("Total token throughput (tok/s):", _num(result.total_throughput_tok_s)),
        _row("Concurrency:", _num(concurrency)),
    ]
    if result.accept_length:
        lines.append(_row("Accept length:", float(result.accept_length)))
    for title, key, short in _SECTIONS:
        lines.append("{s:{c}^{n}}".format(s=title, n=_WIDTH, c="-"))
        stats = getattr(result, key)
        for stat, prefix in _STAT_LABELS:
            lines.append(_row(f"{prefix} {short} (ms):", _num(stats.get(stat))))
        if key == "itl_ms":
            lines.append(_row("Max ITL (ms):", _num(extra.get("max_itl_ms"))))
    lines.append("=" * _WIDTH)
    return "\n".join(lines)


def format_namespace(args: dict) -> str:
    """``args`` as argparse's ``Namespace(...)`` repr: ``key=repr(value)`` in dict order;
    keys that are not identifiers go into a trailing ``**{...}`` like argparse does."""
    parts = [f"{key}={value!r}" for key, value in args.items() if key.isidentifier()]
    odd = {key: value for key, value in args.items() if not key.isidentifier()}
    if odd:
        parts.append(f"**{odd!r}")
    return f"Namespace({', '.join(parts)})"
