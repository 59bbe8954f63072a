"""The llama.cpp test peer works: the endpoints, stream shape, flags and log lines other tests rely on.

Observed values are written up in tests/peers/NOTES.md; if one of these fails after a
llama.cpp bump, update NOTES.md together with the test.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from tests.peers.llama_server import LOADING_ARGS, LaunchPeer, LlamaPeer, wait_for_log

pytest_plugins = ["tests.peers.fixtures"]

LOADING_BODY = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}


def stream_events(url: str, path: str, body: dict) -> list[dict]:
    """POST with stream=true; the decoded ``data:`` events, checking the stream ends in [DONE]."""
    events: list[str] = []
    with httpx.stream("POST", url + path, json={**body, "stream": True}, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in resp.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_health_and_models_list_the_alias(llama_server: LlamaPeer) -> None:
    health = httpx.get(llama_server.url + "/health")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    models = httpx.get(llama_server.url + "/v1/models").json()
    [model] = models["data"]
    assert model["id"] == "tiny"
    assert model["meta"]["n_vocab"] == 512
    assert model["meta"]["n_params"] == 147_776


def test_streaming_completion_has_one_chunk_per_token_then_usage_and_timings(llama_server: LlamaPeer) -> None:
    events = stream_events(llama_server.url, "/v1/completions", {"prompt": "Hello", "max_tokens": 16})
    *tokens, final = events
    assert len(tokens) == 16
    assert all(e["choices"][0]["text"] and e["choices"][0]["finish_reason"] is None for e in tokens)
    assert {e["model"] for e in events} == {"tiny"}
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["choices"][0]["text"] == ""
    assert final["usage"]["completion_tokens"] == 16
    assert final["timings"]["predicted_n"] == 16
    assert final["timings"]["predicted_per_second"] > 0


def test_token_mask_gives_exactly_max_tokens_printable_chunks(llama_server: LlamaPeer) -> None:
    # Without the generator's mask, random weights sample EOS or lone bytes >= 0x80
    # (empty chunks): the stream would end early or have fewer text chunks.
    for i in range(8):
        *tokens, final = stream_events(llama_server.url, "/v1/completions", {"prompt": f"req {i}:", "max_tokens": 64})
        text = "".join(e["choices"][0]["text"] for e in tokens)
        assert len(tokens) == 64 and final["usage"]["completion_tokens"] == 64
        assert text.isascii() and all(c == "\n" or c.isprintable() for c in text), repr(text)


def test_streaming_chat_sends_role_first_and_usage_when_asked(llama_server: LlamaPeer) -> None:
    events = stream_events(
        llama_server.url,
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream_options": {"include_usage": True}},
    )
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    content = [e for e in events if e["choices"] and e["choices"][0]["delta"].get("content")]
    assert len(content) == 4
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 4


def test_metrics_are_prometheus_with_llamacpp_prefix(llama_server: LlamaPeer) -> None:
    stream_events(llama_server.url, "/v1/completions", {"prompt": "x", "max_tokens": 16})
    text = httpx.get(llama_server.url + "/metrics").text
    samples = dict(line.split(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert all(name.startswith("llamacpp:") for name in samples)
    assert float(samples["llamacpp:tokens_predicted_total"]) >= 16
    assert float(samples["llamacpp:requests_processing"]) == 0
    assert "# TYPE llamacpp:prompt_tokens_total counter" in text


def test_props_and_slots_show_per_slot_context(llama_server: LlamaPeer) -> None:
    # -c 2048 -np 4: each slot gets 2048 / 4 = 512 (also tiny's n_ctx_train).
    props = httpx.get(llama_server.url + "/props").json()
    assert props["total_slots"] == 4
    assert props["default_generation_settings"]["n_ctx"] == 512
    slots = httpx.get(llama_server.url + "/slots").json()
    assert [(s["id"], s["n_ctx"], s["is_processing"]) for s in slots] == [(i, 512, False) for i in range(4)]


@pytest.mark.parametrize(
    ("args", "n_slots", "n_ctx_slot"),
    [
        (["-c", "256", "-np", "1"], 1, 256),
        (["-c", "1024", "-np", "2"], 2, 512),
        (["-c", "4096", "-np", "2"], 2, 512),  # 2048 per slot, capped at n_ctx_train 512
    ],
)
def test_ctx_and_parallel_flags_change_props_and_slots(
    launch_llama_server: LaunchPeer, args: list[str], n_slots: int, n_ctx_slot: int
) -> None:
    with launch_llama_server(args=[*args, "-a", "tiny"]) as peer:
        props = httpx.get(peer.url + "/props").json()
        slots = httpx.get(peer.url + "/slots").json()
        wait_for_log(peer.log_path, r"load_model: initializing, n_slots = \d+, n_ctx_slot = \d+")
        log_text = peer.log_path.read_text()
    assert (props["total_slots"], props["default_generation_settings"]["n_ctx"]) == (n_slots, n_ctx_slot)
    assert [s["n_ctx"] for s in slots] == [n_ctx_slot] * n_slots
    assert f"n_slots = {n_slots}, n_ctx_slot = {n_ctx_slot}, kv_unified = 'false'" in log_text


def test_log_shows_load_then_ready(llama_server: LlamaPeer) -> None:
    port = llama_server.url.rsplit(":", 1)[1]
    wait_for_log(llama_server.log_path, rf"llama_server: listening on http://127\.0\.0\.1:{port}$")
    lines = llama_server.log_path.read_text().splitlines()
    # Each line: "<min>.<s>.<ms>.<us> <I|W|E> <module> <function>: message"
    prefix = re.compile(r"^\d+\.\d{2}\.\d{3}\.\d{3} [IWE] ")
    assert all(prefix.match(line) for line in lines), lines
    order = [
        r"I srv  llama_server: initializing \.\.\.$",
        r"I srv    load_model: loading model '.*tiny\.gguf'$",
        r"I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 512, kv_unified = 'false'$",
        r"I srv  llama_server: model loaded$",
        rf"I srv  llama_server: listening on http://127\.0\.0\.1:{port}$",
    ]
    found = [next(i for i, line in enumerate(lines) if re.search(rx, line)) for rx in order]
    assert found == sorted(found)


def test_bad_flag_exits_1_at_once_with_one_error_line(launch_llama_server: LaunchPeer) -> None:
    with launch_llama_server(args=["--no-such-flag"], wait=False) as peer:
        rc = peer.proc.wait(timeout=10)  # "did not hang" only: it exits in ~50 ms
    assert rc == 1
    # at once: the flag is refused before anything starts (a late exit logs the model load)
    assert peer.log_path.read_text() == "error: invalid argument: --no-such-flag\n"


@pytest.mark.serial  # a ~300 ms loading window polled every 5 ms: a busy machine's client missed it whole
def test_health_is_503_loading_model_until_loaded(launch_llama_server: LaunchPeer, big_gguf: Path) -> None:
    # big_gguf keeps the window >= 300 ms on the 2-core reference VM; asserting its length
    # would be flaky on faster runners, so only its presence and shape are checked.
    with launch_llama_server(model=big_gguf, args=[*LOADING_ARGS, "-a", "tiny"], wait=False) as peer:
        started = time.monotonic()
        saw_503 = False
        resp: httpx.Response | None = None
        with httpx.Client(base_url=peer.url, timeout=5) as client:
            while time.monotonic() - started < 60 and peer.proc.poll() is None:
                try:
                    resp = client.get("/health")
                except httpx.TransportError:  # not listening yet
                    time.sleep(0.005)
                    continue
                if resp.status_code == 200:
                    break
                assert resp.status_code == 503
                assert resp.json() == LOADING_BODY
                assert resp.headers["connection"] == "close"
                if not saw_503:
                    saw_503 = True
                    # every endpoint answers the same while loading
                    for path in ("/v1/models", "/slots", "/metrics"):
                        other = client.get(path)
                        assert (other.status_code, other.json()) == (503, LOADING_BODY), path
                time.sleep(0.005)
        assert resp is not None and resp.status_code == 200, peer.log_path.read_text()[-2000:]
        assert resp.json() == {"status": "ok"}
        wait_for_log(peer.log_path, r"llama_server: model loaded$")
    assert saw_503, "never saw the 503 loading window"

