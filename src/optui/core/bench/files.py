"""Parsing saved benchmark result files into :class:`BenchResult`.

Formats (``../shared/reference/servers_and_bench.md`` sections 3.1, 3.2):

- SGLang ``--output-file`` JSONL (``python/sglang/benchmark/serving.py`` 0.5.23,
  ``python/sglang/bench_serving.py`` 0.5.2): one object per line, appended per run;
  ``request_rate`` inf is written as the bare token ``Infinity``; ``server_info`` may be a
  large dict; there is no ``failed`` nor ``num_prompts`` key, so ``failed`` stays None.
  ``cache_report`` (``--cache-report``) is flattened into ``extra["cache_*"]``.
- SGLang 2024 ``--output-file`` JSONL (``python/sglang/bench_serving.py`` 0.2-0.3, also what
  ``--multi`` appends per rate): ``total_input``, ``total_output``,
  ``total_output_retokenized``, ``mean_e2e_latency``, ``median_e2e_latency``, ``median_ttft``,
  ``median_itl`` (ms, without a ``_ms`` suffix), ``output_token_throughput``, ``duration`` or
  ``benchmark_duration``, ``completed`` (:data:`_SGLANG_2024_KEYS`).
- vLLM ``--save-result`` JSON (``vllm/benchmarks/serve.py`` 0.33): one single-line object,
  several separated by newlines with ``--append-result``; ``request_rate`` may be the
  string ``"inf"``; ``spec_decode_*`` keys (acceptance rate in %, per-position rates as
  fractions, stored here as ``spec_position_N_acceptance_pct`` like the printed block).
  Early-2025 ``benchmarks/benchmark_serving.py`` wrote the key ``"request_goodput:"`` (sic).
- optui's own :meth:`BenchResult.to_json` output (an object or a list), so results round-trip.

Per-request arrays (``ttfts``, ``itls``...) are dropped, except that a vLLM file without
``*_e2el_ms`` keys (``--percentile-metrics`` left at its default ``ttft,tpot,itl``) gets its E2E
statistics from ``latencies`` (seconds per request, ``vllm/benchmarks/serve.py``) when every
request succeeded, computed as vLLM does (``np.mean``/``np.median``/``np.percentile``). Malformed input
raises :class:`~optui.core.bench.canon.BenchParseError` naming the line.
"""

from __future__ import annotations

import json
import re

from optui.core.bench.canon import BenchParseError, apply_value, finish, snake
from optui.core.bench.result import LATENCY_METRICS, BenchResult

# Run arguments: they go to the workload (via finish), not to extra.
_WORKLOAD_KEYS = frozenset({"num_prompts", "dataset_name", "random_input_len", "random_output_len"})
_VLLM_MARKERS = ("failed", "endpoint_type", "model_id", "burstiness", "request_goodput:")
_SGLANG_MARKERS = ("mean_e2e_latency_ms", "total_output_tokens_retokenized", "random_range_ratio", "total_throughput",
                   "total_output_retokenized", "median_e2e_latency", "output_token_throughput")
# SGLang 2024's JSONL names (see module doc) -> the names of the current files.
_SGLANG_2024_KEYS = {
    "total_input": "total_input_tokens",
    "total_output": "total_output_tokens",
    "total_output_retokenized": "total_output_tokens_retokenized",
    "mean_e2e_latency": "mean_e2e_latency_ms",
    "median_e2e_latency": "median_e2e_latency_ms",
    "median_ttft": "median_ttft_ms",
    "median_itl": "median_itl_ms",
    "output_token_throughput": "output_throughput",
    "benchmark_duration": "duration",
}
_JSON_START_RE = re.compile(r"\s*(?:\{|\[\s*[{\]])")
_SPACE_RE = re.compile(r"\s*")


def looks_like_json(text: str) -> bool:
    """True when ``text`` starts (after a BOM / blank space) like a result file: ``{`` or
    ``[`` followed by ``{`` or ``]`` (a log line such as ``[2025-01-01 ...`` does not)."""
    return _JSON_START_RE.match(text.lstrip("\ufeff")) is not None


def parse_result_file_text(text: str, name: str = "") -> list[BenchResult]:
    """Every result in a saved result file's text (see module doc), in file order.
    ``name`` (the file path) prefixes error messages: ``name:LINE: ...``. Empty text -> []."""
    results = []
    for value, line in _json_values(text, name):
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                raise BenchParseError(f"expected a JSON object, got {type(item).__name__}", source=name, line=line)
            results.append(_from_object(item, name, line))
    return results


def _json_values(text: str, name: str):
    """Yield ``(value, line)`` for each top-level JSON value (JSON, JSONL or several
    objects separated by whitespace); Python's decoder accepts ``Infinity``/``NaN``."""
    decoder = json.JSONDecoder()
    text = text.lstrip("\ufeff")
    pos = _SPACE_RE.match(text).end()  # type: ignore[union-attr]  # \s* always matches
    line, counted = 1, 0
    while pos < len(text):
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(text.rstrip()):  # ran off the end: blame the value's first line
                raise BenchParseError(f"invalid JSON: unterminated value ({exc.msg})", source=name, line=line) from None
            raise BenchParseError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=name, line=exc.lineno) from None
        except (RecursionError, ValueError) as exc:  # too deep; an integer over 4300 digits
            raise BenchParseError(f"invalid JSON: {exc}", source=name, line=line) from None
        yield value, line
        pos = _SPACE_RE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches


def _from_object(obj: dict, name: str, line: int) -> BenchResult:
    if "tool" in obj and "status" in obj and any(isinstance(obj.get(m), dict) for m in LATENCY_METRICS):
        try:
            return BenchResult.from_json(obj)
        except (TypeError, ValueError, AttributeError) as exc:
            raise BenchParseError(f"bad optui result object: {exc}", source=name, line=line) from None
    if any(key in obj for key in _VLLM_MARKERS) or any(key.endswith("_e2el_ms") for key in obj):
        tool = "vllm"
    elif any(key in obj for key in _SGLANG_MARKERS):
        tool = "sglang"
    else:
        keys = ", ".join(sorted(obj)[:8]) or "none"
        raise BenchParseError(
            f"JSON object is not an SGLang, vLLM or optui benchmark result (keys: {keys})", source=name, line=line
        )
    result = BenchResult(tool=tool)
    for key, value in obj.items():
        if key in _WORKLOAD_KEYS or value is None:
            continue
        if key == "cache_report" and isinstance(value, dict):
            for sub, sub_value in value.items():
                if sub_value is not None and not isinstance(sub_value, (dict, list)):
                    sub = snake(sub)
                    result.extra[sub if sub.startswith("cache_") else f"cache_{sub}"] = sub_value
        elif key == "spec_decode_per_position_acceptance_rates" and isinstance(value, list):
            for position, rate in enumerate(value):
                if isinstance(rate, (int, float)):
                    result.extra[f"spec_position_{position}_acceptance_pct"] = 100.0 * rate
        elif not isinstance(value, (dict, list)):  # per-request arrays, server_info
            if tool == "sglang":
                key = _SGLANG_2024_KEYS.get(key, key)
            apply_value(result, snake(key), value)
    if tool == "vllm" and result.e2e_ms.get("mean") is None:
        _e2e_from_latencies(result, obj)
    return finish(result, obj)


def _e2e_from_latencies(result: BenchResult, obj: dict) -> None:
    """Fill ``result.e2e_ms`` (ms) from vLLM's per-request ``latencies`` (s): only when their
    count is the completed count and nothing failed (failed requests' entries are zeros)."""
    latencies = obj.get("latencies")
    completed = obj.get("completed")
    if not isinstance(latencies, list) or not latencies or len(latencies) != completed or obj.get("failed"):
        return
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in latencies):
        return
    ms = sorted(1000.0 * x for x in latencies)
    result.e2e_ms.update(mean=sum(ms) / len(ms), median=_percentile(ms, 50), p90=_percentile(ms, 90),
                         p95=_percentile(ms, 95), p99=_percentile(ms, 99))


def _percentile(ordered: list[float], q: float) -> float:
    """numpy's default (linear) percentile ``q`` (0-100) of sorted ``ordered``."""
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
