"""Tokens, not words (issue 29): the built-in generator's ``input_len`` is the server's
tokens where it has ``/tokenize`` (the demo, SGLang-shaped; llama.cpp), otherwise a stated
approximation in words with the server's own count and the measured ratio shown (32 "in"
became ~97 tokens on llama.cpp). Real demo servers and the real llama.cpp peer."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from optui.adapters.loadgen import PlannedRequest, Tokenizer, describe_server_side, fit_to_tokens, plan_run, run_load
from tests.helpers.demo import start_demo_server
from tests.peers.llama_server import LlamaPeer

pytest_plugins = ["tests.peers.fixtures"]
pytestmark = pytest.mark.timeout(120)


async def test_the_demo_counts_its_prompts_with_its_tokenize(tmp_path):
    with start_demo_server(tmp_path) as srv:
        async with httpx.AsyncClient(base_url=srv.base_url) as client:
            resp = await client.post("/tokenize", json={"prompt": "one two three"})
            assert resp.status_code == 200 and resp.json()["count"] == 3 and len(resp.json()["tokens"]) == 3
        result = await run_load(srv.base_url, input_len=32, output_len=4, num_prompts=4, concurrency=2, warmup=1, seed=3)
    assert result.status == "ok", result.error
    assert result.extra["input_len_unit"] == "tokens" and result.workload.length_unit == "tokens"
    assert result.extra["prompt_tokens_per_request"] == 32  # the demo tokenizer: one word, one token
    assert any("up to 32 tokens per prompt (the server's /tokenize)" in line for line in describe_server_side(result))


async def test_without_tokenize_the_lengths_are_words_and_the_server_s_count_is_shown(tmp_path):
    with start_demo_server(tmp_path, "--skip-tokenizer-init") as srv:
        result = await run_load(srv.base_url, input_len=32, output_len=4, num_prompts=4, concurrency=2, warmup=0, seed=3)
    assert result.status == "ok", result.error
    assert result.extra["input_len_unit"] == "words" and result.workload.length_unit is None
    assert result.extra["prompt_tokens_per_request"] == 32 and result.extra["tokens_per_word"] == 1.0
    line = next(x for x in describe_server_side(result) if x.startswith("Input lengths"))
    assert "32 words per prompt (no /tokenize: an approximation)" in line and "1.00 tokens per word" in line, line
    # 32 tokens and 32 words are different workloads: never compared with each other
    assert result.workload.key() != replace(result.workload, length_unit="tokens").key()


async def test_llama_cpp_prompts_are_input_len_of_its_tokens(llama_server: LlamaPeer):
    url = llama_server.url
    result = await run_load(url, input_len=32, output_len=8, num_prompts=6, concurrency=2, warmup=1, seed=11)
    assert result.status == "ok", result.error
    assert result.extra["input_len_unit"] == "tokens"
    # the server's own count (usage and timings) of what was sent: at most 32 per prompt, and close to it
    per_prompt = result.extra["prompt_tokens_per_request"]
    assert 28 <= per_prompt <= 32, per_prompt  # words alone were ~97 tokens each
    assert result.extra["server_prompt_tokens"] == result.total_input_tokens <= 6 * 32
    # the fit is exact against /tokenize: the most words within the length
    async with httpx.AsyncClient(base_url=url) as client:
        tokenizer = Tokenizer(client, None)
        (req,) = plan_run(1, 32, 8, seed=5).timed
        fitted = await fit_to_tokens(tokenizer, req)
        assert fitted is not None and fitted.input_len <= 32
        assert await tokenizer.count(fitted.prompt) == fitted.input_len
        longer = " ".join(req.prompt.split(" ")[: len(fitted.prompt.split(" ")) + 1])
        assert await tokenizer.count(longer) > 32  # one word more would not fit
        short = PlannedRequest("a b", 32, 8)
        assert (await fit_to_tokens(tokenizer, short)) == PlannedRequest("a b", await tokenizer.count("a b"), 8)
