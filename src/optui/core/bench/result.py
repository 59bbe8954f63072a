"""The canonical benchmark result every bench source maps to.

Units are in the names: ``*_ms`` milliseconds, ``*_tok_s`` tokens per second,
``request_throughput`` requests per second, ``duration_s`` seconds.

Latency definitions (they differ between tools; we keep each tool's own numbers):
- TTFT: time from sending the request to the first streamed output (client clock), ms.
- TPOT ("time per output token, excl. 1st token"): per request,
  ``(e2e - ttft) / (output_tokens - 1)`` for requests with more than one token, then
  mean/percentiles over requests, ms. All three tools below agree on the formula; they
  differ in ``output_tokens`` (see per tool).
- ITL ("inter-token latency"): gaps between consecutive streamed chunks, pooled over all
  requests, then mean/percentiles, ms (per tool: what a gap is when a chunk carries
  several tokens, e.g. with speculative decoding).
- E2E: request latency from send to last token, ms (SGLang "E2E Latency", vLLM "E2EL").

Per tool (sources: ``servers_and_bench.md`` section 3; the tools' request functions):
- SGLang ``bench_serving`` 0.5.x: ``output_tokens`` is the server's completion token count
  (``meta_info`` / ``usage``), "retokenized" totals are printed beside it. ITL with the native
  ``/generate`` backend splits a chunk's gap evenly over the tokens it carried (so one
  2-token chunk after 20 ms counts as two 10 ms gaps); OpenAI-compatible backends record one
  gap per chunk. 0.5.2 prints no TPOT section (TPOT only in its JSONL). No failed count:
  ``failed = num_prompts - completed``.
- vLLM ``bench serve`` 0.33 / ``benchmark_serving.py``: ``output_tokens`` from ``usage``
  when the server sends it, else the tokenizer's count of the generated text. ITL is one gap
  per chunk (a multi-token chunk counts once, so ITL > TPOT under speculative decoding).
  Percentiles are configurable (``--metric-percentiles``); the ones outside mean/median/
  p90/p95/p99 (e.g. ``p99_9``) are kept in ``extra``.
- optui's load generator (``tool = "optui-loadgen"``): ``output_tokens`` is the server's
  ``usage.completion_tokens`` (else the number of text chunks); ITL one gap per text chunk,
  like vLLM. Against llama.cpp it also records the server's own ``timings`` in ``extra``
  (``server_prompt_ms``, ``server_tpot_ms``, ``server_output_tok_s``...) for comparison.
  ``extra["prefix_cache_hit_pct"]`` is the share of the run's prompt tokens the server
  served from its prefix cache (0..100 %), ``extra["prefix_cache_source"]`` where it came
  from (``"timings"``: llama.cpp's per-request ``cache_n``; ``"metrics"``: ``/metrics``
  counter deltas over the timed run).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache

#: The statistics kept for every latency metric.
STATS = ("mean", "median", "p90", "p95", "p99")
#: The latency metrics, each a dict of :data:`STATS` (values in ms or None).
LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
#: Scalar result keys of ``optui bench parse --json`` in order (before the latency dicts).
SCALAR_KEYS = (
    "tool",
    "completed",
    "failed",
    "duration_s",
    "request_throughput",
    "input_throughput_tok_s",
    "output_throughput_tok_s",
    "total_throughput_tok_s",
    "max_concurrency",
    "request_rate",
    "accept_length",
)
#: For comparisons: +1 when a higher value is better, -1 when lower is better.
DIRECTION = {
    "request_throughput": +1,
    "input_throughput_tok_s": +1,
    "output_throughput_tok_s": +1,
    "total_throughput_tok_s": +1,
    "accept_length": +1,
    "failed": -1,
    "ttft_ms": -1,
    "tpot_ms": -1,
    "itl_ms": -1,
    "e2e_ms": -1,
}


def empty_stats() -> dict[str, float | None]:
    """A latency dict with every statistic None."""
    return {stat: None for stat in STATS}


@dataclass(frozen=True, slots=True)
class Workload:
    """What a benchmark measured: comparisons only pair results of equal workloads.

    ``request_rate`` is req/s (``math.inf`` = all at once); lengths are tokens.
    ``prefix`` is the intended prefix sharing of the prompts (optui's load generator:
    ``"none"``, ``"shared:N"`` for a shared system prompt of N tokens, ``"dataset"`` for a
    prompt file named in ``dataset``; None: not stated). ``seed`` drew the prompts (None: unknown). The key leaves ``seed``
    out (runs with fresh prompts are the same workload), ``prefix`` when it is None or
    ``"none"`` and ``length_unit`` when it is None (results stored before these fields
    existed keep their key).
    """

    tool: str = ""
    dataset: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    num_prompts: int | None = None
    max_concurrency: int | None = None
    request_rate: float | None = None
    prefix: str | None = None
    seed: int | None = None
    #: what ``input_len`` counts: "tokens" (the server's, optui's load generator fitted its
    #: prompts with the server's ``/tokenize``); None: as the tool says (a client's
    #: tokenizer), or words for optui's generator without ``/tokenize`` and before issue 29
    length_unit: str | None = None

    def key(self) -> str:
        """A short stable hash of the workload (equal workloads share it)."""
        return _workload_key(self)


#: Workload fields outside the key, or in it only when set (see :class:`Workload`).
_UNKEYED = ("prefix", "seed", "length_unit")


@lru_cache(maxsize=8192)
def _workload_key(wl: Workload) -> str:
    # the fields of asdict(wl), without its deep copy (comparisons hash thousands of these)
    data = {name: getattr(wl, name) for name in Workload.__slots__ if name not in _UNKEYED}
    if wl.prefix not in (None, "none"):
        data["prefix"] = wl.prefix
    if wl.length_unit is not None:  # 32 tokens is another workload than 32 words (3x the prompt on llama.cpp)
        data["length_unit"] = wl.length_unit
    if data["request_rate"] is not None and math.isinf(data["request_rate"]):
        data["request_rate"] = "inf"
    blob = json.dumps(data, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass(slots=True)
class BenchResult:
    """One benchmark result in canonical form (see module docstring for units).

    ``status`` is "ok" for a run with a result block, "failed" for a run that produced
    none (e.g. SGLang's ``IndexError`` when every request failed), "degraded" for one whose
    failed requests exceed the threshold (:func:`apply_failure_threshold`; its numbers are
    kept but never compared), "partial" for a block cut short (``partial`` True), "stalled"/"aborted" for runs optui stopped,
    "invalid" for one measured while its server was HUNG or DEGRADED or whose largest token gap exceeded the stall
    watchdog (:mod:`optui.core.bench.validity`; never compared, never a baseline). ``extra`` holds tool-specific values (goodput, spec decoding...).
    """

    tool: str = "unknown"
    tool_version: str | None = None
    status: str = "ok"
    completed: int | None = None
    failed: int | None = None
    duration_s: float | None = None
    request_throughput: float | None = None
    input_throughput_tok_s: float | None = None
    output_throughput_tok_s: float | None = None
    total_throughput_tok_s: float | None = None
    max_concurrency: int | None = None
    request_rate: float | None = None
    accept_length: float | None = None
    ttft_ms: dict[str, float | None] = field(default_factory=empty_stats)
    tpot_ms: dict[str, float | None] = field(default_factory=empty_stats)
    itl_ms: dict[str, float | None] = field(default_factory=empty_stats)
    e2e_ms: dict[str, float | None] = field(default_factory=empty_stats)
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    workload: Workload = field(default_factory=Workload)
    extra: dict = field(default_factory=dict)
    error: str | None = None
    #: The result block was cut short (client killed, output truncated): the fields printed
    #: before the cut are set, the rest None; ``status`` is then "partial".
    partial: bool = False

    def to_json(self) -> dict:
        """The ``optui bench parse --json`` object: :data:`SCALAR_KEYS`, then the four
        latency dicts, then ``status``, ``workload``, ``extra``. ``inf`` rates become the
        string "inf" so the output is strict JSON."""
        out: dict = {}
        for key in SCALAR_KEYS:
            out[key] = _json_number(getattr(self, key))
        for key in LATENCY_METRICS:
            out[key] = {stat: _json_number(v) for stat, v in getattr(self, key).items()}
        out["total_input_tokens"] = self.total_input_tokens
        out["total_output_tokens"] = self.total_output_tokens
        out["status"] = self.status
        out["tool_version"] = self.tool_version
        workload = asdict(self.workload)
        workload["request_rate"] = _json_number(workload["request_rate"])
        out["workload"] = workload
        out["extra"] = {k: _json_number(v) for k, v in self.extra.items()}
        if self.error:
            out["error"] = self.error
        if self.partial:
            out["partial"] = True
        return out

    @classmethod
    def from_json(cls, data: dict) -> BenchResult:
        """Inverse of :meth:`to_json` (used by the journal)."""
        result = cls()
        for key in SCALAR_KEYS:
            setattr(result, key, _from_json_number(data.get(key)))
        for key in LATENCY_METRICS:
            stats = empty_stats()
            stats.update({k: _from_json_number(v) for k, v in (data.get(key) or {}).items()})
            setattr(result, key, stats)
        result.total_input_tokens = data.get("total_input_tokens")
        result.total_output_tokens = data.get("total_output_tokens")
        result.status = data.get("status", "ok")
        result.tool_version = data.get("tool_version")
        wl = dict(data.get("workload") or {})
        if "request_rate" in wl:
            wl["request_rate"] = _from_json_number(wl["request_rate"])
        result.workload = Workload(**{k: v for k, v in wl.items() if k in Workload.__slots__})
        result.extra = dict(data.get("extra") or {})
        result.error = data.get("error")
        result.partial = data.get("partial") is True
        return result

    def metric(self, name: str) -> float | None:
        """A scalar (``output_throughput_tok_s``) or a dotted stat (``ttft_ms.p99``)."""
        if "." in name:
            base, _, stat = name.partition(".")
            return getattr(self, base, {}).get(stat)
        value = getattr(self, name, None)
        return value if isinstance(value, (int, float)) else None


#: ``extra`` key of an imported result (``optui bench import``): the file it was read from.
#: Such a result belongs to no experiment unless imported into one (``--experiment``).
IMPORTED_KEY = "imported_from"
#: ``extra`` key of the server's prefix-cache hit share of a run's prompt tokens (0..100 %).
CACHE_HIT_KEY = "prefix_cache_hit_pct"
#: Percentage points of cache share by which a run may differ from its baseline before the
#: comparison is flagged: beyond it the two runs measured different amounts of prefill.
CACHE_SHARE_TOLERANCE_PTS = 10.0


def cache_hit_pct(result: BenchResult) -> float | None:
    """The server's prefix-cache hit share of ``result``'s prompt tokens in % (0..100), or
    None when the run did not measure it (external clients, a server without metrics)."""
    value = result.extra.get(CACHE_HIT_KEY)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cache_share_note(result: BenchResult, baseline: BenchResult,
                     tolerance_pts: float = CACHE_SHARE_TOLERANCE_PTS) -> str | None:
    """A warning when ``result`` and its ``baseline`` had prefix-cache hit shares more than
    ``tolerance_pts`` percentage points apart (``"prefix cache 97% vs 0% in the baseline"``):
    their throughput and TTFT then compare different amounts of prefill work. None when
    they agree or either share is unknown."""
    cur, base = cache_hit_pct(result), cache_hit_pct(baseline)
    if cur is None or base is None or abs(cur - base) <= tolerance_pts:
        return None
    return f"prefix cache {cur:.0f}% vs {base:.0f}% in the baseline"


#: Failed requests above this share (in %) make a run "degraded" (``max_failed_pct``).
DEFAULT_MAX_FAILED_PCT = 1.0


def request_counts(result: BenchResult) -> tuple[int, int] | None:
    """``(ok, total)`` requests of one run (``completed``, ``completed + failed``); None
    when the tool counted neither."""
    if result.completed is None and result.failed is None:
        return None
    ok, failed = int(result.completed or 0), int(result.failed or 0)
    return ok, ok + failed


def request_totals(results) -> tuple[int, int] | None:
    """:func:`request_counts` summed over ``results``; None when no run counted them."""
    counts = [c for r in results if (c := request_counts(r)) is not None]
    if not counts:
        return None
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def requests_text(counts: tuple[int, int] | None) -> str:
    """``"15/400 ok"`` (``"-"`` when not counted)."""
    return "-" if counts is None else f"{counts[0]}/{counts[1]} ok"


def failed_pct(result: BenchResult) -> float | None:
    """Failed requests in % of all sent (None when not counted or none sent)."""
    counts = request_counts(result)
    if counts is None or counts[1] == 0:
        return None
    return 100.0 * (counts[1] - counts[0]) / counts[1]


def comparable(result: BenchResult) -> bool:
    """The run may be compared: status "ok" and failed requests within its threshold
    (``extra["max_failed_pct"]`` as stored, else :data:`DEFAULT_MAX_FAILED_PCT`, so results
    stored before the threshold existed are judged too)."""
    if result.status != "ok":
        return False
    share = failed_pct(result)
    limit = result.extra.get("max_failed_pct")
    limit = DEFAULT_MAX_FAILED_PCT if not isinstance(limit, (int, float)) else float(limit)
    return share is None or share <= limit


def apply_failure_threshold(result: BenchResult, max_failed_pct: float = DEFAULT_MAX_FAILED_PCT) -> BenchResult:
    """Mark ``result`` (in place; returned) "degraded" when its failed requests exceed
    ``max_failed_pct`` % of those sent, with ``error`` giving the count (``"385 of 400
    requests failed (96.2 % > 1 %)"``); records the threshold in ``extra["max_failed_pct"]``."""
    result.extra["max_failed_pct"] = float(max_failed_pct)
    share, counts = failed_pct(result), request_counts(result)
    if result.status == "ok" and share is not None and share > max_failed_pct and counts is not None:
        ok, total = counts
        result.status = "degraded"
        result.error = f"{total - ok} of {total} requests failed ({share:.1f} % > {max_failed_pct:g} %)"
    return result


def _json_number(value):
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _from_json_number(value):
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return value
