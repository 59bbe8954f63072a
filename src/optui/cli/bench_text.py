"""A benchmark result as the CLI prints it (``optui bench parse``, ``bench import``,
``bench run``): status line, throughput line, latency table (ms)."""

from __future__ import annotations

import math

from optui.core.bench.result import LATENCY_METRICS, STATS, BenchResult


def format_result(result: BenchResult, prefix: str = "") -> str:
    """A short human summary of ``result``: status line, throughput line, latency table (ms)."""
    wl = result.workload
    head = [
        f"{prefix}{result.tool} {result.status}",
        f"completed {number_text(result.completed)}",
        f"failed {number_text(result.failed)}",
        f"duration {number_text(result.duration_s)} s",
        f"rate {number_text(result.request_rate)} req/s",
        f"concurrency {number_text(result.max_concurrency)}",
    ]
    if wl.dataset or wl.input_len or wl.num_prompts:
        head.append(f"workload {wl.dataset or '?'} {number_text(wl.input_len)}/{number_text(wl.output_len)} x{number_text(wl.num_prompts)}")
    lines = ["  ".join(head)]
    if result.error:
        lines.append(f"error: {result.error}")
    if result.status == "ok" or result.request_throughput is not None:
        throughput = (
            f"throughput {number_text(result.request_throughput)} req/s  in {number_text(result.input_throughput_tok_s)}"
            f"  out {number_text(result.output_throughput_tok_s)}  total {number_text(result.total_throughput_tok_s)} tok/s"
        )
        if result.accept_length is not None:
            throughput += f"  accept length {number_text(result.accept_length)}"
        lines.append(throughput)
        lines.append(f"{'latency ms':<12}" + "".join(f"{stat:>10}" for stat in STATS))
        for metric in LATENCY_METRICS:
            stats = getattr(result, metric)
            if any(v is not None for v in stats.values()):
                name = metric.removesuffix("_ms")
                lines.append(f"{name:<12}" + "".join(f"{number_text(stats.get(stat)):>10}" for stat in STATS))
    return "\n".join(lines)


def number_text(value) -> str:
    """A number as the bench printouts show it: "-" for none, "inf", floats to 2 decimals."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        return f"{value:.2f}"
    return str(value)
