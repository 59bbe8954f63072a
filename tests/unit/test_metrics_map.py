"""/metrics → canonical load view for each server, from realistic scrapes (pure)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from optui.core.server.metrics_map import (
    SlotsParseError,
    load_view,
    missing_metrics_hint,
    parse_scrape,
    parse_slots,
    progress_total,
    with_slots,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"

SGLANG = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} {running}
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 4.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.61
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 2210.4
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.25
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.21
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",model_name="qwen"} {prompt}
sglang:prompt_tokens_created{engine_type="unified",model_name="qwen"} 1.7568e+09
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",model_name="qwen"} {gen}
sglang:generation_tokens_created{engine_type="unified",model_name="qwen"} 1.7568e+09
# HELP sglang:cached_tokens_total Number of cached prompt tokens.
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="qwen"} {cached}
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="qwen"} 10.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="qwen"} 812.0
sglang:time_to_first_token_seconds_count{model_name="qwen"} 812.0
sglang:time_to_first_token_seconds_sum{model_name="qwen"} 325.5
"""

VLLM = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 24.0
vllm:num_requests_running{engine="1",model_name="m"} 20.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.375
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} {queries}
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7568e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} {hits}
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} {prompt}
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} {gen}
vllm:generation_tokens_total{engine="1",model_name="m"} {gen}
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} {drafts}
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} {draft_tokens}
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} {accepted}
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1203.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 1500.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 1500.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 90.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="25000"} 1.0
"""

# vLLM ≤ 0.9 names (renamed later): gpu_cache_usage_perc, gpu_prefix_cache_*; V0 throughput gauges
VLLM_LEGACY = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 1.0
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="m"} 0.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="m"} {queries}
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} {hits}
# TYPE vllm:avg_generation_throughput_toks_per_s gauge
vllm:avg_generation_throughput_toks_per_s{model_name="m"} 812.5
# TYPE vllm:avg_prompt_throughput_toks_per_s gauge
vllm:avg_prompt_throughput_toks_per_s{model_name="m"} 1500.0
"""


def fill(template: str, **values: float) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", str(value))
    return template


def test_sglang_scrape_rates_prefix_and_accept_length():
    a = parse_scrape(fill(SGLANG, running=37.0, prompt=10000.0, gen=50000.0, cached=2000.0), 100.0)
    b = parse_scrape(fill(SGLANG, running=36.0, prompt=14000.0, gen=54420.8, cached=4000.0), 102.0)
    view = load_view(b, a)
    assert (view.running, view.waiting) == (36.0, 4.0)
    assert view.kv_cache_pct == pytest.approx(61.0)
    assert view.gen_tok_s == pytest.approx(2210.4) and view.prompt_tok_s == pytest.approx(2000.0)
    assert view.prefix_hit_pct == pytest.approx(50.0)  # 2000 cached of 4000 prompt tokens (the gauge says 25)
    assert view.accept_length == pytest.approx(3.21) and view.generated_total == pytest.approx(54420.8)
    first = load_view(a)  # one scrape: gauges only
    assert first.gen_tok_s == pytest.approx(2210.4) and first.prefix_hit_pct == pytest.approx(25.0) and first.prompt_tok_s is None


def test_vllm_scrape_engines_summed_spec_formula():
    v0 = dict(queries=9.0e6, hits=2.0e6, prompt=1.0e6, gen=4.0e6, drafts=1000.0, draft_tokens=3000.0, accepted=1500.0)
    v1 = dict(queries=9.1e6, hits=2.04e6, prompt=1.02e6, gen=4.01e6, drafts=1500.0, draft_tokens=4500.0, accepted=2700.0)
    a, b = parse_scrape(fill(VLLM, **v0), 0.0), parse_scrape(fill(VLLM, **v1), 10.0)
    view = load_view(b, a)
    assert (view.running, view.waiting) == (44.0, 3.0)
    assert view.kv_cache_pct == pytest.approx(43.75)  # averaged over engines
    assert view.gen_tok_s == pytest.approx(2000.0)  # 2 engines x 10k tokens / 10 s
    assert view.prompt_tok_s == pytest.approx(2000.0)
    assert view.prefix_hit_pct == pytest.approx(40.0)  # 40k of 100k queried tokens
    assert view.accept_length == pytest.approx(1 + 1200 / 500)  # 1 + Δaccepted / Δdrafts


def test_vllm_legacy_names():
    a = parse_scrape(fill(VLLM_LEGACY, queries=1000.0, hits=100.0), 0.0)
    b = parse_scrape(fill(VLLM_LEGACY, queries=2000.0, hits=600.0), 5.0)
    view = load_view(b, a)
    assert (view.running, view.waiting, view.kv_cache_pct) == (5.0, 1.0, 25.0)
    assert view.prefix_hit_pct == pytest.approx(50.0)
    assert view.gen_tok_s == pytest.approx(812.5) and view.prompt_tok_s == pytest.approx(1500.0)


def test_llamacpp_real_scrape():
    text = (FIXTURES / "llamacpp_0.3.36_after_2_requests.txt").read_text()
    first = parse_scrape(text, 0.0)
    view = load_view(first)
    assert (view.running, view.waiting) == (0.0, 0.0)
    # predicted_tokens_seconds (137.285) is one request's decode speed, not a throughput: no rate yet
    assert view.generated_total == 16.0 and view.gen_tok_s is None
    later = parse_scrape(
        text.replace("llamacpp:tokens_predicted_total 16", "llamacpp:tokens_predicted_total 48")
        .replace("llamacpp:prompt_tokens_total 40", "llamacpp:prompt_tokens_total 42")
        .replace("llamacpp:prompt_tokens_cached_total 38", "llamacpp:prompt_tokens_cached_total 76")
        .replace("llamacpp:requests_processing 0", "llamacpp:requests_processing 1"), 2.0)
    view = load_view(later, first)
    assert view.running == 1.0 and view.gen_tok_s == pytest.approx(16.0)
    assert view.prefix_hit_pct == pytest.approx(100 * 38 / 40)  # cached / (processed + cached)


def _busy(name: str, t: float, *, slots: bool = True):
    scrape = parse_scrape((FIXTURES / f"llamacpp_0.3.36_busy_{name}.txt").read_text(), t)
    if not slots:
        return scrape
    return with_slots(scrape, parse_slots((FIXTURES / f"llamacpp_0.3.36_busy_{name}_slots.json").read_text()))


def test_llamacpp_tokens_of_running_requests_count_from_slots():
    """Two requests streaming: llama.cpp's counter stays at 0 until they finish (the live
    tok/s read 0, then a burst at the end); /slots n_decoded moves with every token."""
    a, b = _busy("a", 0.0), _busy("b", 2.24)
    view = load_view(b, a)
    assert view.running == 2.0
    assert view.generated_total == 25.0  # 0 finished + 12 + 13 decoded so far
    assert view.gen_tok_s == pytest.approx(18 / 2.24)  # (12 + 13 - 3 - 4) / 2.24 s
    # the request ends: its tokens move from the slot into the counter, the total does not jump
    done = with_slots(parse_scrape((FIXTURES / "llamacpp_0.3.36_busy_b.txt").read_text()
                                   .replace("llamacpp:tokens_predicted_total 0", "llamacpp:tokens_predicted_total 300"), 4.24),
                      parse_slots('[{"id":0,"is_processing":false},{"id":1,"is_processing":true,'
                                  '"next_token":[{"n_decoded":20}]}]'))
    assert load_view(done, b).gen_tok_s == pytest.approx((300 + 20 - 25) / 2.0)
    # without /slots (--no-slots) the decode-call counter still shows that it works
    plain_a, plain_b = _busy("a", 0.0, slots=False), _busy("b", 2.24, slots=False)
    assert load_view(plain_b, plain_a).generated_total == 0.0
    assert progress_total(plain_b) > progress_total(plain_a)
    assert progress_total(b) > progress_total(a)


def test_llamacpp_live_tok_s_is_the_servers_throughput_not_one_requests_decode_speed():
    """Seen on the H200 (bench/RESULTS.md, "live load"): at c=1 the server made 575 tok/s by its
    own counter while optui showed 804, the gauge predicted_tokens_seconds (Σ tokens / Σ
    per-request generation time: 1/TPOT), whenever the counter-plus-slots pair was not
    comparable; at c=4 it showed a quarter of the throughput."""
    text = (FIXTURES / "llamacpp_0.3.36_after_2_requests.txt").read_text()

    def scrape(t: float, predicted: int, gauge: float, in_flight: int | None):
        s = parse_scrape(text.replace("llamacpp:tokens_predicted_total 16", f"llamacpp:tokens_predicted_total {predicted}")
                         .replace("llamacpp:predicted_tokens_seconds 137.285", f"llamacpp:predicted_tokens_seconds {gauge}"), t)
        return s if in_flight is None else replace(s, in_flight_decoded=float(in_flight))

    # /slots answered for one scrape only (it queues behind busy slots): the counter alone
    assert load_view(scrape(1.0, 1591, 804.0, 60), scrape(0.0, 1016, 804.0, None)).gen_tok_s == pytest.approx(575.0)
    # a request ended between the /slots and the /metrics read: its 128 tokens were in both
    # the previous counter and its slot, so the pair goes down: the counter alone (64 in 0.5 s)
    before = scrape(0.0, 1016, 804.0, 128)
    assert load_view(scrape(0.5, 1080, 804.0, 10), before).gen_tok_s == pytest.approx(128.0)
    # the comparable pair: counter + in-flight
    assert load_view(scrape(1.0, 1591, 804.0, 60), scrape(0.0, 1016, 804.0, 50)).gen_tok_s == pytest.approx(585.0)


def test_parse_slots_idle_and_junk():
    idle = parse_slots('[{"id":0,"n_ctx":512,"speculative":false,"is_processing":false}]')
    assert (idle.processing, idle.decoded) == (0, 0)
    for junk in ("not json", '{"id": 0}', "[1, 2]"):
        with pytest.raises(SlotsParseError):
            parse_slots(junk)


def test_missing_metrics_hints():
    assert "--enable-metrics" in missing_metrics_hint("sglang", 404)
    assert "--metrics" in missing_metrics_hint("llamacpp", 501)
    assert "503" in missing_metrics_hint("vllm", 503)
    assert load_view(parse_scrape("# TYPE http_requests_total counter\nhttp_requests_total 5\n", 1)).hint.startswith("no server series")
