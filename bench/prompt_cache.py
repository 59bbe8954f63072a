#!/usr/bin/env python3
"""How much of a benchmark the server's prefix cache served: a sweep and a repeat with the
built-in load generator, the cache share of each run read from the server's own counters.

    python bench/prompt_cache.py [--server demo|llama|both] [--src DIR] [--prompts 16] [--input-len 96]
                                 [--shared-tokens N]

Runs c=1, c=2, c=4, then c=4 again (a "warm" repeat), each with ``run_load``'s defaults
(one warm-up request) from the optui source tree ``--src`` (default: this checkout; give an
old tree, ``git archive REV src | tar -x -C /tmp/old``, to measure the old generator). The
cache share is Δcached / Δprompt tokens of the server's ``/metrics`` around the whole call,
warm-up included: the demo server (``--enable-metrics``, prefix cache on) counts
``sglang:cached_tokens_total`` of ``sglang:prompt_tokens_total``; llama-server (the test peer,
``medium`` model, ``-np 4``) ``llamacpp:prompt_tokens_cached_total`` of it plus
``llamacpp:prompt_tokens_total`` (which excludes cached tokens). ``optui`` is the share the
generator itself reported (``extra["prefix_cache_hit_pct"]``; the old one reported none).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _counters(url: str, kind: str) -> tuple[float, float]:
    import httpx

    text = httpx.get(url + "/metrics", timeout=10).text
    if kind == "demo":
        vals = {m.group(1): float(m.group(2)) for m in re.finditer(r"^sglang:(\w+_total)\{[^}]*\} (\S+)$", text, re.M)}
        return vals["cached_tokens_total"], vals["prompt_tokens_total"]
    vals = {m.group(1): float(m.group(2)) for m in re.finditer(r"^llamacpp:(\w+) ([\d.e+-]+)$", text, re.M)}
    cached = vals.get("prompt_tokens_cached_total", 0.0)
    return cached, cached + vals["prompt_tokens_total"]


@contextlib.contextmanager
def _server(kind: str, tmp: Path):
    if kind == "demo":
        from tests.helpers.demo import start_demo_server

        with start_demo_server(tmp, "--enable-metrics") as srv:
            yield srv.base_url
        return
    from tests.peers.llama_server import DEFAULT_ARGS, build_llama_server, free_port, start_llama_server, wait_for_health
    from tests.peers.make_tiny_gguf import SIZES, make_tiny_gguf

    gguf = make_tiny_gguf(tmp / "medium.gguf", **SIZES["medium"]).path
    port = free_port()
    with start_llama_server(build_llama_server(), gguf, port, DEFAULT_ARGS, tmp / "server.log") as proc:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, proc)
        yield url


def measure(kind: str, prompts: int, input_len: int, output_len: int, shared_tokens: int = 0) -> list[dict]:
    from optui.adapters.loadgen import run_load

    rows = []
    with tempfile.TemporaryDirectory() as tmp, _server(kind, Path(tmp)) as url:
        for label, conc in (("c=1", 1), ("c=2", 2), ("c=4", 4), ("c=4 again", 4)):
            before = _counters(url, kind)
            kw = {"shared_tokens": shared_tokens} if shared_tokens else {}  # the old generator has no such option
            r = asyncio.run(run_load(url, input_len=input_len, output_len=output_len, num_prompts=prompts,
                                     concurrency=conc, **kw))
            after = _counters(url, kind)
            d_cached, d_prompt = after[0] - before[0], after[1] - before[1]
            rows.append({"server": kind, "run": label, "status": r.status, "out_tok_s": r.output_throughput_tok_s,
                         "in_tok_s": r.input_throughput_tok_s, "ttft_p50_ms": r.ttft_ms["median"],
                         "cache_pct": 100.0 * d_cached / d_prompt if d_prompt else None,
                         "optui_pct": r.extra.get("prefix_cache_hit_pct"), "seed": getattr(r.workload, "seed", None),
                         "error": r.error})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["demo", "llama", "both"], default="both")
    parser.add_argument("--src", default=str(ROOT / "src"), help="the optui source tree to measure")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--input-len", type=int, default=96, help="words (llama peer: ~3 tokens each, 512-token slots)")
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--shared-tokens", type=int, default=0, help="a shared system prompt (new generator only)")
    args = parser.parse_args()
    sys.path[:0] = [args.src, str(ROOT)]
    kinds = ["demo", "llama"] if args.server == "both" else [args.server]
    shared = f", shared_tokens {args.shared_tokens}" if args.shared_tokens else ""
    print(f"src {args.src}: {args.prompts} prompts, {args.input_len} in / {args.output_len} out{shared}")
    print(f"{'server':6} {'run':10} {'out tok/s':>10} {'in tok/s':>10} {'TTFT p50 ms':>12} {'cache %':>8} {'optui %':>8}  seed")
    for kind in kinds:
        for row in measure(kind, args.prompts, args.input_len, args.output_len, args.shared_tokens):
            def pct(v):
                return "-" if v is None else f"{v:.1f}"
            if row["status"] != "ok":
                print(f"{row['server']:6} {row['run']:10} {row['status']}: {row['error']}")
                continue
            print(f"{row['server']:6} {row['run']:10} {row['out_tok_s']:10.1f} {row['in_tok_s']:10.1f} "
                  f"{row['ttft_p50_ms']:12.2f} {pct(row['cache_pct']):>8} {pct(row['optui_pct']):>8}  {row['seed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
