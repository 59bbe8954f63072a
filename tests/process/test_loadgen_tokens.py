"""Tokens, not words (issue 29): the built-in generator's ``input_len`` is the server's
tokens where it has ``/tokenize`` (the demo, SGLang-shaped; llama.cpp), otherwise a stated
approximation in words with the server's own count and the measured ratio shown (32 "in"
became ~97 tokens on llama.cpp). Real demo servers and the real llama.cpp peer."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from optui.adapters.loadgen import (
    FIT_AHEAD,
    FIT_AHEAD_MAX,
    FIT_TASKS,
    PlannedRequest,
    Tokenizer,
    describe_server_side,
    fit_to_tokens,
    plan_run,
    run_load,
)
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


class _CountingServer(ThreadingHTTPServer):
    """A real loopback HTTP server with an SGLang-shaped ``/tokenize`` whose tokens are not
    words (a BOS token, then 1 + len // 4 per word: ~2 a word), counting its calls; every
    completion is answered 503 after its prompt and the ``/tokenize`` calls made so far are
    noted. Nothing else exists (404)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CountingHandler)
        self.lock = threading.Lock()
        self.tokenize_calls = 0
        self.sent: list[tuple[int, str]] = []  # (/tokenize calls before it, prompt) of each completion

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away (a run that ended with /tokenize calls in flight)

    @staticmethod
    def tokens(text: str) -> int:
        return 1 + sum(1 + len(word) // 4 for word in text.split())


class _CountingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _CountingServer

    def log_message(self, format, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._reply(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if self.path == "/tokenize":
            with self.server.lock:
                self.server.tokenize_calls += 1
            return self._reply(200, {"count": self.server.tokens(body["prompt"]), "tokens": []})
        if self.path == "/v1/completions":
            with self.server.lock:
                self.server.sent.append((self.server.tokenize_calls, body["prompt"]))
            return self._reply(503, {"error": "busy"})
        self._reply(404, {"detail": "Not Found"})


@pytest.fixture
def counting_server():
    srv = _CountingServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


@pytest.mark.parametrize("warmup", [0, 1])
async def test_a_large_run_sends_its_first_request_after_a_bounded_number_of_tokenize_calls(counting_server, warmup):
    """5,000 prompts were all fitted (each a few /tokenize calls) before the first request:
    ~40 s on this machine, minutes for 100,000. Now the first request goes out after the
    warm-up's fits and at most a bounded number ahead, whatever the number of prompts; the
    rest are fitted on the way, and a run the server ends (a streak of 503s here) fits no
    more than it reached. Every prompt sent is the most words within 32 of the server's tokens."""
    prompts, in_len = 5000, 32
    url = f"http://127.0.0.1:{counting_server.server_address[1]}"
    result = await run_load(url, input_len=in_len, output_len=4, num_prompts=prompts, concurrency=4, warmup=warmup, seed=9)
    assert result.status == "failed" and result.workload.length_unit == "tokens"
    if warmup:
        assert result.extra["failed_phase"] == "warmup"
    else:
        assert "in a row failed" in (result.error or "") and "not sent" in (result.error or ""), result.error
    fits_ahead = 1 + warmup + min(FIT_AHEAD_MAX, max(FIT_AHEAD, 2 * 4)) + FIT_TASKS  # before the first send
    first_calls = counting_server.sent[0][0]
    assert 0 < first_calls <= 3 * fits_ahead < prompts // 10, first_calls
    # the prompts it reached and a bounded number ahead: not 5,000 of them
    fitted_at_most = len(counting_server.sent) + fits_ahead
    assert counting_server.tokenize_calls <= 3 * fitted_at_most, (counting_server.tokenize_calls, len(counting_server.sent))
    # the lengths are exact in the server's tokens: the most words of the planned prompt within 32
    plan = plan_run(prompts, in_len, 4, seed=9, warmup=warmup)
    planned = {p.prompt.split(" ")[0]: p.prompt.split(" ") for p in (*plan.timed, *plan.warmup)}
    for _, prompt in counting_server.sent:
        words = prompt.split(" ")
        whole = planned[words[0]]
        assert whole[: len(words)] == words and counting_server.tokens(prompt) <= in_len
        assert len(words) == len(whole) or counting_server.tokens(" ".join(whole[: len(words) + 1])) > in_len
