"""Mapping a server's Prometheus ``/metrics`` text to one canonical :class:`LoadView`.

Names per server (``../shared/reference/servers_and_bench.md`` section 2,
``../shared/reference/llamacpp_peer.md``): ``sglang:*`` (needs ``--enable-metrics``),
``vllm:*`` (including the renamed legacy ``vllm:gpu_cache_usage_perc`` and
``vllm:gpu_prefix_cache_*``) and ``llamacpp:*`` (needs ``--metrics``). Counters become rates
between two scrapes; several series of one metric (TP/DP ranks, engines) are summed, except
fractions, which are averaged. Parsing uses prometheus_client's text parser.

llama.cpp adds ``tokens_predicted_total`` only when a request *finishes*, so between
scrapes it says nothing about requests still streaming (a 40 s generation reads as 40 s of
zero tok/s, then one burst). Its ``/slots`` endpoint (on by default; ``--no-slots`` turns it
off) has ``next_token[0].n_decoded`` per processing slot: :func:`parse_slots` sums it, and
:func:`with_slots` folds it into the scrape, so the generated-token count is "finished +
decoded so far" and moves with every token. Without ``/slots`` the decode-call counter
``llamacpp:n_decode_total`` still shows progress (:func:`progress_total`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace

from prometheus_client.parser import text_string_to_metric_families

from optui.core.server.state import LoadView

# canonical field -> candidate sample names, first present wins
_GAUGES_SUM = {
    "running": ("sglang:num_running_reqs", "vllm:num_requests_running", "llamacpp:requests_processing"),
    "waiting": ("sglang:num_queue_reqs", "vllm:num_requests_waiting", "llamacpp:requests_deferred"),
}
_FRACTIONS = {  # 0..1, averaged over series, shown as %
    "kv_cache_pct": ("sglang:token_usage", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "llamacpp:kv_cache_usage_ratio"),
}
_COUNTERS = {
    "generated": ("sglang:generation_tokens_total", "vllm:generation_tokens_total", "llamacpp:tokens_predicted_total"),
    "prompt": ("sglang:prompt_tokens_total", "vllm:prompt_tokens_total", "llamacpp:prompt_tokens_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    # SGLang: cached prompt tokens of all prompt tokens
    "sglang_cached": ("sglang:cached_tokens_total",),
    "sglang_prompt": ("sglang:prompt_tokens_total",),
    # llama.cpp: prompt_tokens_total *excludes* cached tokens (its HELP text, checked on the peer)
    "llama_cached": ("llamacpp:prompt_tokens_cached_total",),
    "llama_prompt": ("llamacpp:prompt_tokens_total",),
    "spec_accepted": ("vllm:spec_decode_num_accepted_tokens_total", "llamacpp:spec_decode_num_accepted_tokens_total"),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_drafts_total"),
}
_GAUGE_FALLBACKS = {
    # (not llama.cpp's ``predicted_tokens_seconds``: Σ tokens / Σ per-request generation time of
    # the requests finished since the previous scrape, i.e. one request's decode speed, 1/TPOT,
    # not the server's throughput: 804 tok/s on the H200 at c=1 where the server made 575, and a
    # quarter of the throughput at c=4; bench/RESULTS.md, "live load")
    "gen_tok_s": ("sglang:gen_throughput", "vllm:avg_generation_throughput_toks_per_s"),
    "prompt_tok_s": ("vllm:avg_prompt_throughput_toks_per_s",),
    "prefix_hit_frac": ("sglang:cache_hit_rate",),
    "accept_length": ("sglang:spec_accept_length",),
}


class MetricsParseError(ValueError):
    """``/metrics`` text that the Prometheus text parser rejects."""


@dataclass(frozen=True, slots=True)
class Scrape:
    """One parsed scrape: summed and averaged sample values by name, and its time (s).

    ``in_flight_decoded``: tokens generated so far by requests still running that the
    counters do not include yet (llama.cpp ``/slots``, see :func:`with_slots`); None when
    not known."""

    t: float
    sums: dict[str, float] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)
    in_flight_decoded: float | None = None

    def first(self, names: tuple[str, ...], *, mean: bool = False) -> float | None:
        """The value of the first name present (mean over series when ``mean``)."""
        table = self.means if mean else self.sums
        for name in names:
            if name in table:
                return table[name]
        return None

    @property
    def has_server_metrics(self) -> bool:
        """True when any sglang:/vllm:/llamacpp: series is present."""
        return any(n.startswith(("sglang:", "vllm:", "llamacpp:")) for n in self.sums)


def parse_scrape(text: str, t: float) -> Scrape:
    """Parse Prometheus text taken at ``t`` (seconds). Raises MetricsParseError.

    Histogram buckets and ``_created`` series are skipped (not needed for the load view).
    """
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if name.endswith(("_bucket", "_created")):
                    continue
                value = float(sample.value)
                if value != value:  # NaN
                    continue
                sums[name] += value
                counts[name] += 1
    except Exception as exc:  # the parser raises ValueError/TypeError/IndexError on junk
        raise MetricsParseError(f"unparseable /metrics text: {exc}") from exc
    means = {name: sums[name] / counts[name] for name in sums}
    return Scrape(t, dict(sums), means)


class SlotsParseError(ValueError):
    """A llama.cpp ``/slots`` answer that is not a JSON list of slot objects."""


@dataclass(frozen=True, slots=True)
class SlotsProgress:
    """What llama.cpp's ``/slots`` says about requests in flight: ``processing`` slots
    busy, ``decoded`` tokens generated so far by them (Σ ``next_token[0].n_decoded``)."""

    processing: int
    decoded: int


def parse_slots(text: str) -> SlotsProgress:
    """Parse a ``GET /slots`` body (a JSON list, one object per slot; an idle slot has no
    ``next_token``). Raises SlotsParseError for anything else."""
    try:
        slots = json.loads(text)
    except ValueError as exc:
        raise SlotsParseError(f"/slots is not JSON: {exc}") from exc
    if not isinstance(slots, list) or not all(isinstance(s, dict) for s in slots):
        raise SlotsParseError("/slots is not a list of slot objects")
    processing = decoded = 0
    for slot in slots:
        if not slot.get("is_processing"):
            continue
        processing += 1
        tokens = slot.get("next_token")
        first = tokens[0] if isinstance(tokens, list) and tokens and isinstance(tokens[0], dict) else {}
        n = first.get("n_decoded")
        if isinstance(n, int | float) and not isinstance(n, bool) and n >= 0:
            decoded += int(n)
    return SlotsProgress(processing, decoded)


def with_slots(scrape: Scrape, slots: SlotsProgress | None) -> Scrape:
    """``scrape`` with the in-flight decoded tokens of ``slots`` (None: unchanged)."""
    return scrape if slots is None else replace(scrape, in_flight_decoded=float(slots.decoded))


def generated_total(scrape: Scrape) -> float | None:
    """Generated tokens so far: the server's counter plus, where known, the tokens of
    requests still running (llama.cpp counts a request only when it finishes)."""
    total = scrape.first(_COUNTERS["generated"])
    if total is None or scrape.in_flight_decoded is None:
        return total
    return total + scrape.in_flight_decoded


def progress_total(scrape: Scrape) -> float | None:
    """A number that grows whenever the server makes progress (for the hung verdict, not a
    count of anything): generated tokens (in-flight ones included) plus llama.cpp's
    decode-call counter, which moves with every decode step even without ``/slots``."""
    total = generated_total(scrape)
    decodes = scrape.first(("llamacpp:n_decode_total",))
    if total is None or decodes is None:
        return total if decodes is None else decodes
    return total + decodes


def _generated_rate(prev: Scrape | None, cur: Scrape) -> float | None:
    """Generated tok/s between two scrapes: the counter plus the in-flight tokens of
    ``/slots`` where both scrapes have them; else (in-flight tokens known in one scrape only,
    or a request that finished between a ``/slots`` and a ``/metrics`` read, counted twice in
    one of them) the counter alone, which counts a llama.cpp request only once it ends but
    never twice. None without a previous scrape or after a counter reset."""
    if prev is None or cur.t <= prev.t:
        return None
    if (prev.in_flight_decoded is None) == (cur.in_flight_decoded is None):
        a, b = generated_total(prev), generated_total(cur)
        if a is not None and b is not None and b >= a:
            return (b - a) / (cur.t - prev.t)
    return _rate(prev, cur, _COUNTERS["generated"])


def _rate(prev: Scrape | None, cur: Scrape, names: tuple[str, ...]) -> float | None:
    if prev is None or cur.t <= prev.t:
        return None
    a, b = prev.first(names), cur.first(names)
    if a is None or b is None or b < a:  # counter reset (server restarted)
        return None
    return (b - a) / (cur.t - prev.t)


def _delta(prev: Scrape | None, cur: Scrape, names: tuple[str, ...]) -> float | None:
    if prev is None:
        return None
    a, b = prev.first(names), cur.first(names)
    if a is None or b is None or b < a:
        return None
    return b - a


def load_view(cur: Scrape, prev: Scrape | None = None) -> LoadView:
    """The canonical load view from the current scrape and the previous one (for rates).

    Percentages are 0..100; tok/s from counter deltas, else from the server's own
    throughput gauge. A scrape without server series gives a hint instead of numbers
    (vLLM with ``--disable-log-stats`` has only ``http_*``/``process_*`` series).
    """
    if not cur.has_server_metrics:
        return LoadView(source="metrics", hint="no server series in /metrics (stats disabled?)")
    kv = cur.first(_FRACTIONS["kv_cache_pct"], mean=True)
    gen = _generated_rate(prev, cur)
    if gen is None:
        gen = cur.first(_GAUGE_FALLBACKS["gen_tok_s"])
    prefix = _prefix_hit_pct(prev, cur)
    accepted, drafts = _delta(prev, cur, _COUNTERS["spec_accepted"]), _delta(prev, cur, _COUNTERS["spec_drafts"])
    accept: float | None
    if accepted is not None and drafts:
        accept = 1.0 + accepted / drafts
    else:
        accept = cur.first(_GAUGE_FALLBACKS["accept_length"], mean=True)
    return LoadView(
        running=cur.first(_GAUGES_SUM["running"]),
        waiting=cur.first(_GAUGES_SUM["waiting"]),
        kv_cache_pct=None if kv is None else 100.0 * kv,
        gen_tok_s=gen,
        prompt_tok_s=_first_not_none(_rate(prev, cur, _COUNTERS["prompt"]), cur.first(_GAUGE_FALLBACKS["prompt_tok_s"])),
        prefix_hit_pct=prefix,
        accept_length=accept,
        generated_total=generated_total(cur),
        source="metrics",
    )


def _first_not_none(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _prefix_hit_pct(prev: Scrape | None, cur: Scrape) -> float | None:
    """Prefix-cache hit rate in % between two scrapes (vLLM hits/queries, SGLang
    cached/prompt tokens, llama.cpp cached/(processed + cached)); else SGLang's gauge of the
    last prefill batch; None without traffic in between."""
    hits, queries = _delta(prev, cur, _COUNTERS["prefix_hits"]), _delta(prev, cur, _COUNTERS["prefix_queries"])
    if hits is not None and queries:
        return 100.0 * hits / queries
    cached, prompt = _delta(prev, cur, _COUNTERS["sglang_cached"]), _delta(prev, cur, _COUNTERS["sglang_prompt"])
    if cached is not None and prompt:
        return 100.0 * cached / prompt
    cached, processed = _delta(prev, cur, _COUNTERS["llama_cached"]), _delta(prev, cur, _COUNTERS["llama_prompt"])
    if cached is not None and processed is not None and cached + processed > 0:
        return 100.0 * cached / (cached + processed)
    frac = cur.first(_GAUGE_FALLBACKS["prefix_hit_frac"], mean=True)
    return None if frac is None else 100.0 * frac


def missing_metrics_hint(kind: str, status: int) -> str:
    """What to tell the operator when ``/metrics`` answers ``status`` (404, 501...)."""
    if kind == "sglang" and status == 404:
        return "no /metrics: add --enable-metrics (using log lines instead)"
    if kind == "llamacpp" and status == 501:
        return "no /metrics: add --metrics"
    return f"/metrics answered HTTP {status}"
