"""What tests/process/test_vllm_peer.py and tests/process/test_sglang_peer.py do alike against their real engine:
HTTP reads, completions, a crash classified from the log, the load sampled from /metrics while
completions run, and SGLang's ``bench_serving`` client run and its text checked against its JSONL.

Not assert-rewritten (a helper, not a test module): each assert here says what it compared.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from optui.core.bench.parse import parse_any, parse_bench_output
from optui.core.server.log import classify_log
from optui.core.server.metrics_map import Scrape, load_view, parse_scrape
from optui.core.server.state import LoadView


def get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


def complete(url: str, max_tokens: int) -> dict:
    """A /v1/completions of ``max_tokens`` tokens (ignore_eos) from the ``tiny`` model."""
    body = json.dumps({"model": "tiny", "prompt": "def main(argv):\n    return", "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read())


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that a listening socket holds while the block runs."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def classify_crash(launched: AbstractContextManager[Any], kind: str, what: str) -> dict:
    """Start (``launched``: the fixtures' launch with ``wait=False``), and classify the log once the
    process exits or the log shows a crash (SGLang 0.5.23 logs "[Errno 98] error while attempting
    to bind" and then hangs: a crash all the same). ``what`` names the server in the failure."""
    with launched as peer:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            rc = peer.proc.poll()
            result = classify_log(peer.log_path.read_text(errors="replace"), kind, rc)
            if rc is None and result["final"] == "crashed":  # the rest of its traceback is still being written
                time.sleep(5)
                return classify_log(peer.log_path.read_text(errors="replace"), kind, peer.proc.poll())
            if rc is not None:
                return result
            time.sleep(1)
        pytest.fail(f"{what} neither exited nor crashed in 400 s; log {peer.log_path}")


@dataclass
class LoadRun:
    """/metrics scraped before, every 0.5 s during and after 4 concurrent completions."""

    before: Scrape
    views: list[LoadView]  # each scrape during the run against the one before it
    usages: list[dict]  # each completion's "usage"
    last: Scrape  # the last scrape during the run
    after: Scrape
    seconds: float


#: how often :func:`load_during_completions` reads /metrics (s): ci16's vLLM served its 4 x 400
#: tokens within the first 0.5 s, and the one read then found it idle
LOAD_POLL_S = 0.1


def load_during_completions(url: str, max_tokens: int) -> LoadRun:
    """4 completions of ``max_tokens`` at once, /metrics read every :data:`LOAD_POLL_S` while
    they run (300 s at most)."""
    before = parse_scrape(get(f"{url}/metrics"), 0.0)
    views = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(complete, url, max_tokens) for _ in range(4)]
        prev, t = before, 0.0
        while not all(f.done() for f in futures) and t < 300:
            time.sleep(LOAD_POLL_S)
            t += LOAD_POLL_S
            cur = parse_scrape(get(f"{url}/metrics"), t)
            views.append(load_view(cur, prev))
            prev = cur
        usages = [f.result()["usage"] for f in futures]
    after = parse_scrape(get(f"{url}/metrics"), t + 1)
    return LoadRun(before, views, usages, prev, after, t)


def check_sglang_bench_serving(python: Path, backend: str, url: str, model: Path, out: Path, env: dict[str, str],
                               *extra: str) -> None:
    """Run SGLang's client (``python -m sglang.bench_serving``, 8 random-ids prompts of 32 in, 16 out,
    4 at a time) against ``url``: it succeeds, and its printed text is its JSONL ``out``, rounded."""
    proc = subprocess.run(
        [str(python), "-m", "sglang.bench_serving", "--backend", backend, "--base-url", url, "--model", str(model),
         *extra, "--dataset-name", "random-ids", "--random-input-len", "32", "--random-output-len", "16",
         "--num-prompts", "8", "--max-concurrency", "4", "--output-file", str(out)],
        capture_output=True, text=True, env=env, timeout=500, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    [text] = parse_bench_output(proc.stdout + proc.stderr)
    [saved] = parse_any(out.read_text(), out.name)
    seen = (text.tool, saved.tool, text.completed, saved.completed)
    assert seen == ("sglang", "sglang", 8, 8), seen
    assert round(saved.output_throughput_tok_s, 2) == text.output_throughput_tok_s, (saved.output_throughput_tok_s,
                                                                                    text.output_throughput_tok_s)
    for field in ("ttft_ms", "itl_ms", "e2e_ms"):
        for stat in ("mean", "median"):
            saved_value, printed = getattr(saved, field)[stat], getattr(text, field)[stat]
            assert round(saved_value, 2) == printed, (field, stat, saved_value, printed)
