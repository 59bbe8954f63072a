#!/usr/bin/env python3
"""optui's built-in load generator against a real llama-server: its numbers next to the
server's own ``timings`` (final stream chunk) and ``/metrics`` counters.

    python bench/loadgen_vs_llama.py [--model tiny|medium] [--concurrency 1 4] [--prompts 8] [--json]

Uses the test peer (``tests/peers``: llama-server built from the llama-cpp-python sdist,
a generated random GGUF). Per concurrency it prints: optui's input/output token totals and
the server's (usage, /metrics delta), TTFT p50 (optui) vs median prompt_ms (server), TPOT p50
vs median predicted_per_token_ms, out tok/s vs Σ predicted_n / Σ (prompt_ms + predicted_ms).
At concurrency > 1 the server's prompt_ms excludes queueing, so only counts and TPOT compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import httpx  # noqa: E402

from optui.adapters.loadgen import run_load  # noqa: E402
from tests.peers.llama_server import (  # noqa: E402
    DEFAULT_ARGS,
    build_llama_server,
    free_port,
    start_llama_server,
    wait_for_health,
)
from tests.peers.make_tiny_gguf import SIZES, make_tiny_gguf  # noqa: E402


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^llamacpp:(\w+) ([\d.e+-]+)$", text, re.M)}


def measure(model: str, concurrencies: list[int], prompts: int, input_len: int, output_len: int) -> list[dict]:
    binary = build_llama_server()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        gguf = make_tiny_gguf(Path(tmp) / f"{model}.gguf", **SIZES[model]).path
        port = free_port()
        with start_llama_server(binary, gguf, port, DEFAULT_ARGS, Path(tmp) / "server.log") as proc:
            url = f"http://127.0.0.1:{port}"
            wait_for_health(url, proc)
            for conc in concurrencies:
                before = _metrics(url)
                r = asyncio.run(run_load(url, input_len=input_len, output_len=output_len, num_prompts=prompts,
                                         concurrency=conc, warmup=0, seed=conc))
                after = _metrics(url)
                x = r.extra
                rows.append({
                    "model": model, "concurrency": conc, "status": r.status,
                    "out_tokens": r.total_output_tokens, "server_out_tokens": x.get("server_predicted_tokens"),
                    "metrics_out_delta": after["tokens_predicted_total"] - before["tokens_predicted_total"],
                    "in_tokens": r.total_input_tokens, "server_in_tokens": x.get("server_prompt_tokens"),
                    "ttft_p50_ms": round(r.ttft_ms["median"], 2), "server_prompt_ms_p50": round(x["server_prompt_ms"], 2),
                    "ttft_gap_ms": round(r.ttft_ms["median"] - x["server_prompt_ms"], 2),
                    "tpot_p50_ms": round(r.tpot_ms["median"], 3), "server_tpot_ms_p50": round(x["server_tpot_ms"], 3),
                    "tpot_ratio": round(r.tpot_ms["median"] / x["server_tpot_ms"], 3),
                    "out_tok_s": round(r.output_throughput_tok_s, 1), "server_out_tok_s": round(x["server_output_tok_s"], 1),
                    "throughput_ratio": round(r.output_throughput_tok_s / x["server_output_tok_s"], 3),
                })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["tiny", "medium"], default="medium")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    rows = measure(opts.model, opts.concurrency, opts.prompts, opts.input_len, opts.output_len)
    for row in rows:
        print(json.dumps(row) if opts.json else "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
