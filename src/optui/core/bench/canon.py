"""Mapping benchmark-tool names onto :class:`~optui.core.bench.result.BenchResult`.

Shared by the text-block parser (:mod:`optui.core.bench.parse`) and the result-file parser
(:mod:`optui.core.bench.files`) so that one run read from its log and from its saved file
lands on the same fields. Both sides first reduce a name to snake_case with :func:`snake`
(``"Mean E2E Latency (ms):"`` and ``"mean_e2e_latency_ms"`` both become
``mean_e2e_latency_ms``; ``"Total Token throughput (tok/s)"`` becomes
``total_token_throughput_tok_s``), then :func:`apply_value` files the value:

- a canonical scalar (``completed``, ``output_throughput_tok_s``...) via :data:`FIELD_ALIASES`;
- a latency statistic ``<stat>_<metric>_ms``: mean/median/p90/p95/p99 of TTFT, TPOT, ITL,
  E2E (SGLang ``e2e_latency``, vLLM ``e2el``) go to the latency dicts, every other statistic
  (``std``, ``max``, ``p99_9``, ``p50``) and every other metric to ``extra``;
- anything else to ``extra`` under its snake name (renamed by :data:`EXTRA_ALIASES` where
  the text label and the JSON key differ).

Name sources: ``../shared/reference/servers_and_bench.md`` section 3 (SGLang
``python/sglang/benchmark/serving.py`` 0.5.23 and ``python/sglang/bench_serving.py`` 0.5.2;
vLLM ``vllm/benchmarks/serve.py`` 0.33 and ``benchmarks/benchmark_serving.py`` early 2025).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache

from optui.core.bench.result import STATS, BenchResult, Workload


class BenchParseError(ValueError):
    """A malformed benchmark result *file*; ``str()`` is ``SOURCE:LINE: message``."""

    def __init__(self, message: str, *, source: str = "", line: int | None = None) -> None:
        self.message = message
        self.source = source
        self.line = line
        where = source or "<input>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")


#: snake name (from a text label or a JSON key) -> BenchResult scalar field.
FIELD_ALIASES: dict[str, str] = {
    "successful_requests": "completed",
    "completed": "completed",
    "failed_requests": "failed",
    "failed": "failed",
    "benchmark_duration_s": "duration_s",
    "duration": "duration_s",
    "total_input_tokens": "total_input_tokens",
    "total_generated_tokens": "total_output_tokens",
    "total_output_tokens": "total_output_tokens",
    "request_throughput_req_s": "request_throughput",
    "request_throughput": "request_throughput",
    "input_token_throughput_tok_s": "input_throughput_tok_s",
    "input_throughput": "input_throughput_tok_s",
    "output_token_throughput_tok_s": "output_throughput_tok_s",
    "output_throughput": "output_throughput_tok_s",
    "total_token_throughput_tok_s": "total_throughput_tok_s",
    "total_throughput": "total_throughput_tok_s",
    "total_token_throughput": "total_throughput_tok_s",
    "total_throughput_tok_s": "total_throughput_tok_s",  # SGLang 2024 blocks "Total throughput (tok/s):"
    "max_request_concurrency": "max_concurrency",
    "max_reqeuest_concurrency": "max_concurrency",  # the typo SGLang 0.4.x printed
    "maximum_request_concurrency": "max_concurrency",
    "max_concurrency": "max_concurrency",
    "traffic_request_rate": "request_rate",
    "request_rate_configured_rps": "request_rate",
    "request_rate": "request_rate",
    "accept_length": "accept_length",
    "spec_acceptance_length": "accept_length",
    "spec_decode_acceptance_length": "accept_length",
}
INT_FIELDS = frozenset({"completed", "failed", "max_concurrency", "total_input_tokens", "total_output_tokens"})

#: snake name -> ``extra`` key, where the text label and the JSON key name one quantity.
EXTRA_ALIASES: dict[str, str] = {
    "total_generated_tokens_retokenized": "total_output_tokens_retokenized",
    "peak_output_token_throughput_tok_s": "peak_output_throughput_tok_s",
    "max_output_tokens_per_s": "peak_output_throughput_tok_s",
    "max_concurrent_requests": "peak_concurrent_requests",
    "request_goodput_req_s": "request_goodput",
    "slos_ms": "goodput_slos_ms",
    "spec_decode_acceptance_rate": "spec_acceptance_rate_pct",
    "spec_decode_num_drafts": "spec_drafts",
    "spec_decode_draft_tokens": "spec_draft_tokens",
    "spec_decode_accepted_tokens": "spec_accepted_tokens",
}

_LATENCY_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e_latency": "e2e", "e2el": "e2e"}
_LATENCY_RE = re.compile(r"(mean|median|std|max|min|p\d+(?:_\d+)?)_(.+)_ms")
_SNAKE_RE = re.compile(r"[^a-z0-9]+")
_NONE_WORDS = frozenset({"", "not set", "none", "null", "n/a"})
# A number, then a unit or a note after white space: "15.0 RPS." (vLLM's preamble, some
# versions), "0   <<<<<<< note" (an annotated paste), "1.23 ms".
_LEADING_NUMBER_RE = re.compile(r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf)%?\s+\S")


def snake(name: str) -> str:
    """``"P99.9 TTFT (ms):"`` -> ``"p99_9_ttft_ms"``; ``%`` becomes ``pct``."""
    return _SNAKE_RE.sub("_", name.lower().replace("%", " pct ")).strip("_")


@lru_cache(maxsize=4096)
def classify(key: str) -> tuple[str, str, str]:
    """Where the value of snake name ``key`` goes: ``("int"|"float", field, "")`` for a
    scalar field, ``("latency", "ttft_ms", "p99")`` or ``("extra", extra_key, "")``."""
    field = FIELD_ALIASES.get(key)
    if field is not None:
        return ("int" if field in INT_FIELDS else "float", field, "")
    m = _LATENCY_RE.fullmatch(key)
    if m:
        stat, metric = m.groups()
        base = _LATENCY_METRICS.get(metric)
        if base is not None:
            if stat in STATS:
                return ("latency", f"{base}_ms", stat)
            return ("extra", f"{stat}_{base}_ms", "")
    return ("extra", EXTRA_ALIASES.get(key, key), "")


def parse_value(text: str) -> int | float | str | None:
    """A printed value: ``"498"`` -> 498, ``"4.03"`` -> 4.03, ``"inf"`` -> inf,
    ``"37.5%"`` -> 37.5, ``"not set"`` -> None; anything else stays a string (``"sglang"``,
    ``"trace"``, ``"ttft:500 tpot:50"``)."""
    if len(text) < 19 and (text.isdecimal() or (text[:1] in "+-" and text[1:].isdecimal())):
        return int(text)
    try:
        return float(text)  # also "inf", "1e5"
    except ValueError:
        pass
    if text.lower() in _NONE_WORDS:
        return None
    if text.endswith("%"):
        try:
            return float(text[:-1])
        except ValueError:
            pass
    return text


def leading_number(text: str) -> int | float | None:
    """The number that starts ``text`` when white space and other text follow it (a unit
    or a note: ``"15.0 RPS."`` -> 15.0, ``"0   <<<<<<< note"`` -> 0), else None."""
    m = _LEADING_NUMBER_RE.match(text.strip())
    if m is None:
        return None
    number = parse_value(m.group(1))
    return number if isinstance(number, (int, float)) else None


def as_int(value) -> int | None:
    """``value`` as an int when it is a whole number (498, 498.0, "498"), else None."""
    if type(value) is int:
        return value
    number = as_float(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def as_float(value) -> float | None:
    """``value`` as a float (numbers, numeric strings, "inf"), else None."""
    if type(value) is float:
        return value
    if isinstance(value, str):
        value = parse_value(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an int too large for a float
        return None


def apply_value(result: BenchResult, key: str, value) -> None:
    """File ``value`` (already typed: number, string or None) under snake name ``key``.
    A non-numeric value for a numeric field (SGLang ``Traffic request rate: trace``) leaves
    the field None and keeps the text in ``extra`` under ``key``."""
    store(result, classify(key), key, value)


def store(result: BenchResult, target: tuple[str, str, str], key: str, value) -> None:
    """:func:`apply_value` with ``target = classify(key)`` already looked up (hot loops)."""
    kind, name, stat = target
    if kind == "extra":
        if value is not None:
            result.extra[name] = value
        return
    number = as_int(value) if kind == "int" else as_float(value)
    if number is None and isinstance(value, str):
        lead = leading_number(value)  # a unit or a note after the number
        number = (as_int(lead) if kind == "int" else as_float(lead)) if lead is not None else None
        if number is None:
            result.extra[key] = value
    if kind == "latency":
        getattr(result, name)[stat] = number
    else:
        setattr(result, name, number)


def finish(result: BenchResult, args: Mapping) -> BenchResult:
    """Complete ``result`` from the run's arguments ``args`` (a parsed ``Namespace(...)``
    or a saved-result object: ``num_prompts``, ``dataset_name``, ``random_input_len``,
    ``random_output_len``, ``max_concurrency``, ``request_rate``; all optional).

    - ``failed`` = ``num_prompts - completed`` when the tool printed no failed count (SGLang).
    - ``max_concurrency`` / ``request_rate`` fall back to the arguments (vLLM prints the
      rate only when finite, the concurrency only when set).
    - The workload keeps input/output lengths only for ``random*`` datasets (or when the
      dataset is unknown): for ShareGPT they are unused defaults and would split equal runs.
    - A run where no request succeeded is ``status="failed"`` (vLLM prints a zero block).
    """
    num_prompts = as_int(args.get("num_prompts"))
    if result.failed is None and num_prompts is not None and result.completed is not None:
        if num_prompts >= result.completed:
            result.failed = num_prompts - result.completed
    if result.max_concurrency is None:
        result.max_concurrency = as_int(args.get("max_concurrency"))
    if result.request_rate is None:
        result.request_rate = as_float(args.get("request_rate"))
    dataset = args.get("dataset_name")
    dataset = dataset if isinstance(dataset, str) and dataset else None
    keep_lengths = dataset is None or dataset.startswith("random")
    result.workload = Workload(
        tool=result.tool,
        dataset=dataset,
        input_len=as_int(args.get("random_input_len", args.get("input_len"))) if keep_lengths else None,
        output_len=as_int(args.get("random_output_len", args.get("output_len"))) if keep_lengths else None,
        num_prompts=num_prompts,
        max_concurrency=result.max_concurrency,
        request_rate=result.request_rate,
    )
    if result.completed == 0 and result.status == "ok":
        result.status = "failed"
        result.error = result.error or "no request succeeded"
    return result
