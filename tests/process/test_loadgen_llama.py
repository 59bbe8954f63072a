"""The built-in load generator against a real server: llama.cpp's llama-server (the test
peer, see tests/peers/NOTES.md), whose final stream chunk carries its own ``usage`` and
``timings`` and whose ``/metrics`` and ``/tokenize`` count tokens independently of optui.

Tolerances (also in bench/RESULTS.md), for one request at a time on the 136 MB "medium"
model, where a decode step (~5-15 ms on 2 cores) dwarfs the HTTP/SSE overhead:

- token counts: exact (optui's totals == the server's usage == /metrics deltas == /tokenize);
- TTFT: optui's median minus the server's median ``prompt_ms`` within [-1 ms, +30 ms]
  (optui's clock includes the HTTP round trip and the request parsing the server does not time);
- TPOT: optui's median within 10% of the server's median ``predicted_per_token_ms``;
- output throughput: within 10% of the server's Σ predicted_n / Σ (prompt_ms + predicted_ms).
"""

from __future__ import annotations

import math
import random
import re

import httpx
import pytest

from optui.adapters.loadgen import (
    Tokenizer,
    build_payload,
    describe_server_side,
    fit_to_tokens,
    plan_requests,
    plan_run,
    run_load,
)
from tests.peers.llama_server import LaunchPeer, LlamaPeer

pytest_plugins = ["tests.peers.fixtures"]
pytestmark = pytest.mark.timeout(120)


def metrics(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^llamacpp:(\w+) ([\d.e+-]+)$", text, re.M)}


def tokenized(url: str, text: str) -> int:
    return len(httpx.post(url + "/tokenize", json={"content": text}, timeout=10).json()["tokens"])


async def test_token_counts_match_the_server_exactly(llama_server: LlamaPeer):
    url = llama_server.url
    plan = plan_requests(8, 40, 24, random_lengths=True, seed=7)
    before = metrics(url)
    result = await run_load(url, input_len=40, output_len=24, num_prompts=8, concurrency=3, warmup=2,
                            random_lengths=True, seed=7)
    after = metrics(url)
    assert result.status == "ok" and (result.completed, result.failed) == (8, 0)
    # output: exactly the requested lengths (ignore_eos; the peer's model never samples EOS) ...
    assert result.total_output_tokens == sum(p.output_len for p in plan)
    assert result.extra["server_predicted_tokens"] == result.total_output_tokens
    # ... and the server's own counter agrees, warmup requests (prompts of their own) included
    warm = sum(p.output_len for p in plan_run(8, 40, 24, random_lengths=True, seed=7, warmup=2).warmup)
    assert after["tokens_predicted_total"] - before["tokens_predicted_total"] == result.total_output_tokens + warm
    # input: the server's usage, which /tokenize reproduces prompt by prompt (each prompt cut to
    # at most its length in the server's tokens: issue 29)
    async with httpx.AsyncClient(base_url=url) as client:
        tokenizer = Tokenizer(client, None)
        fitted = [await fit_to_tokens(tokenizer, p) for p in plan]
    # (a length shorter than the prompt's first word, a random 8-hex nonce, keeps that one word)
    assert all(f is not None and (f.input_len <= p.input_len or len(f.prompt.split()) == 1) for f, p in zip(fitted, plan))
    assert result.total_input_tokens == sum(tokenized(url, f.prompt) for f in fitted if f is not None)
    assert result.extra["input_len_unit"] == "tokens"
    assert result.extra["server_prompt_tokens"] == result.total_input_tokens
    assert len({p.input_len for p in plan}) > 1 and len({p.output_len for p in plan}) > 1


async def test_fresh_prompts_miss_the_prompt_cache_and_a_seed_repeats_them(llama_server: LlamaPeer):
    # The old generator sent seed 0's prompts every run (the warm-up reused the first one):
    # llama.cpp's prompt cache then served ~99 % of the prompt tokens of any repeat.
    kw = {"input_len": 48, "output_len": 4, "num_prompts": 8, "concurrency": 4, "warmup": 1}
    first = await run_load(llama_server.url, **kw)
    fresh = await run_load(llama_server.url, **kw)
    for result in (first, fresh):
        assert result.status == "ok" and result.extra["prefix_cache_source"] == "timings"
        assert result.extra["prefix_cache_hit_pct"] < 3.0, result.extra  # at most a shared first token
    assert first.workload.seed != fresh.workload.seed
    lines = describe_server_side(fresh)  # the server's own view beside optui's
    assert lines[1].startswith("Server prefix cache: ") and lines[1].endswith("(streamed timings)")
    assert lines[2].startswith("Server timings (medians): prompt ") and "(client TTFT " in lines[2]
    again = await run_load(llama_server.url, **kw, seed=fresh.workload.seed)  # the same prompts again
    assert again.extra["prefix_cache_hit_pct"] > 50.0, again.extra


async def test_chat_endpoint_counts_from_the_usage_chunk(llama_server: LlamaPeer):
    before = metrics(llama_server.url)
    result = await run_load(llama_server.url, endpoint="chat", input_len=10, output_len=8, num_prompts=3,
                            concurrency=2, warmup=0)
    after = metrics(llama_server.url)
    assert result.status == "ok" and result.total_output_tokens == 24
    assert after["tokens_predicted_total"] - before["tokens_predicted_total"] == 24
    assert result.total_input_tokens == result.extra["server_prompt_tokens"]  # chat template tokens included
    assert result.extra["endpoint"] == "/v1/chat/completions"


@pytest.mark.serial  # timings compared with the server's own: measured alone
async def test_ttft_and_throughput_agree_with_the_servers_timings(launch_llama_server: LaunchPeer, big_gguf):
    with launch_llama_server(model=big_gguf) as peer:
        result = await run_load(peer.url, input_len=32, output_len=24, num_prompts=6, concurrency=1, warmup=1)
    x = result.extra
    assert result.status == "ok" and result.total_output_tokens == 6 * 24
    ttft_gap = result.ttft_ms["median"] - x["server_prompt_ms"]
    assert -1.0 <= ttft_gap <= 30.0, (result.ttft_ms["median"], x["server_prompt_ms"])
    assert result.tpot_ms["median"] == pytest.approx(x["server_tpot_ms"], rel=0.10)
    assert result.output_throughput_tok_s == pytest.approx(x["server_output_tok_s"], rel=0.10)


async def test_server_errors_are_counted_with_the_servers_message(llama_server: LlamaPeer):
    # 600 words is far over the peer's 512-token slot context: llama-server answers 400
    result = await run_load(llama_server.url, input_len=600, output_len=4, num_prompts=3, concurrency=2, warmup=0)
    assert result.status == "failed" and (result.completed, result.failed) == (0, 3)
    assert result.error.startswith("HTTP 400") and "exceeds the available context size" in result.error


async def test_poisson_arrivals_space_the_requests(llama_server: LlamaPeer):
    rate, n, seed = 20.0, 6, 3
    arrivals = random.Random(f"arrivals-{seed}")
    gaps = [arrivals.expovariate(rate) for _ in range(n - 1)]
    result = await run_load(llama_server.url, input_len=4, output_len=2, num_prompts=n, concurrency=0,
                            request_rate=rate, warmup=0, seed=seed)
    assert result.status == "ok" and result.request_rate == rate and result.max_concurrency is None
    assert result.duration_s >= sum(gaps)  # the last request cannot start before its arrival time
    assert not math.isinf(result.workload.request_rate)


def test_payloads_carry_ignore_eos_and_the_requested_length():
    req = plan_requests(1, 8, 5)[0]
    on = build_payload("completions", "m", req, ignore_eos=True)
    off = build_payload("chat", "m", req, ignore_eos=False)
    assert (on["ignore_eos"], on["max_tokens"], on["stream"], on["prompt"]) == (True, 5, True, req.prompt)
    assert off["ignore_eos"] is False and off["messages"][0]["content"] == req.prompt
    assert off["stream_options"] == {"include_usage": True}
