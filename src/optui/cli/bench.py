"""``optui bench``: benchmark results from the command line.

``optui bench parse FILE [--json]`` reads a client log (SGLang ``bench_serving`` / vLLM
``bench serve`` stdout) or a saved result file (SGLang JSONL, vLLM JSON, optui JSON) and
prints the canonical results. Exit status: 0 results found, 1 none found, 2 unreadable or
malformed file (``optui: error: FILE:LINE: ...`` on stderr).
"""

from __future__ import annotations

import math

import click

from optui.cli.common import echo_json, fail
from optui.core.bench_parse import BenchParseError, parse_any
from optui.core.bench_result import LATENCY_METRICS, STATS, BenchResult


@click.group()
def bench() -> None:
    """Benchmark results: parse logs and result files."""


@bench.command()
@click.argument("file", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object, or a list for several results.")
def parse(file: str, as_json: bool) -> None:
    """Parse FILE (a client log or a saved result file) into canonical results."""
    try:
        with open(file, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
    except OSError as exc:
        fail(f"{file}: {exc.strerror or exc}", code=2)
    try:
        results = parse_any(text, file)
    except BenchParseError as exc:
        fail(str(exc), code=2)
    if as_json:
        echo_json(results[0].to_json() if len(results) == 1 else [r.to_json() for r in results])
    else:
        for index, result in enumerate(results):
            if index:
                click.echo()
            click.echo(format_result(result, f"[{index + 1}/{len(results)}] " if len(results) > 1 else ""))
    if not results:
        fail(f"{file}: no benchmark result found", code=1)


def format_result(result: BenchResult, prefix: str = "") -> str:
    """A short human summary of ``result``: status line, throughput line, latency table (ms)."""
    wl = result.workload
    head = [
        f"{prefix}{result.tool} {result.status}",
        f"completed {_num(result.completed)}",
        f"failed {_num(result.failed)}",
        f"duration {_num(result.duration_s)} s",
        f"rate {_num(result.request_rate)} req/s",
        f"concurrency {_num(result.max_concurrency)}",
    ]
    if wl.dataset or wl.input_len or wl.num_prompts:
        head.append(f"workload {wl.dataset or '?'} {_num(wl.input_len)}/{_num(wl.output_len)} x{_num(wl.num_prompts)}")
    lines = ["  ".join(head)]
    if result.error:
        lines.append(f"error: {result.error}")
    if result.status == "ok" or result.request_throughput is not None:
        throughput = (
            f"throughput {_num(result.request_throughput)} req/s  in {_num(result.input_throughput_tok_s)}"
            f"  out {_num(result.output_throughput_tok_s)}  total {_num(result.total_throughput_tok_s)} tok/s"
        )
        if result.accept_length is not None:
            throughput += f"  accept length {_num(result.accept_length)}"
        lines.append(throughput)
        lines.append(f"{'latency ms':<12}" + "".join(f"{stat:>10}" for stat in STATS))
        for metric in LATENCY_METRICS:
            stats = getattr(result, metric)
            if any(v is not None for v in stats.values()):
                name = metric.removesuffix("_ms")
                lines.append(f"{name:<12}" + "".join(f"{_num(stats.get(stat)):>10}" for stat in STATS))
    return "\n".join(lines)


def _num(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        return f"{value:.2f}"
    return str(value)


import optui.cli.bench_run_cmd  # noqa: E402,F401  registers `optui bench run` (issue 7)
