#!/usr/bin/env python3
"""How long a built-in load-generator run takes to send its first request, and how many
``/tokenize`` calls it makes before it, as the number of prompts grows.

    python bench/loadgen_first_request.py [--server demo|llama] [--src DIR] [--prompts 5000]
                                          [--warmup 0 1] [--input-len 32] [--concurrency 4] [--reps 1]

A demo server (``tests.helpers.demo``, one word one token, ``/tokenize`` SGLang-shaped) or
llama-server (the test peer, ``medium`` model, ``-np 4``: a real BPE tokenizer, ~3 tokens a
word, ``/tokenize`` llama.cpp-shaped) is started once; each run calls ``run_load`` from the optui source tree ``--src`` (default:
this checkout; an old tree: ``git archive REV src | tar -x -C /tmp/old``) and is cancelled
once ``--stop-after`` (20) timed requests have finished (0: never, the whole run). Per run: ``first send`` (from the call to the first
request of any kind, warm-up included), ``timed start`` (to ``on_progress(0, n)``: the
clock's start), the ``/tokenize`` calls made before the first send, and in all (up to the
cancel). Seconds are wall-clock on this machine: compare rows of one invocation or of the
same machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def _server(kind: str, tmp: Path):
    if kind == "demo":
        from tests.helpers.demo import start_demo_server

        with start_demo_server(tmp) as srv:
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


async def _one(url: str, prompts: int, warmup: int, input_len: int, concurrency: int, stop_after: int) -> dict:
    import httpx

    from optui.adapters import loadgen

    marks: dict[str, float | int] = {}
    tokenize = {"n": 0}
    post, send = httpx.AsyncClient.post, loadgen.send_request

    async def counting_post(self, url, *a, **kw):
        if str(url).endswith("/tokenize"):
            tokenize["n"] += 1
        return await post(self, url, *a, **kw)

    async def marking_send(*a, **kw):
        if "first_send" not in marks:
            marks["first_send"] = time.perf_counter() - t0
            marks["tokenize_before"] = tokenize["n"]
        return await send(*a, **kw)

    done = asyncio.Event()

    def on_progress(n: int, total: int) -> None:
        if n == 0:
            marks["timed_start"] = time.perf_counter() - t0
        if stop_after and n >= stop_after:
            done.set()

    httpx.AsyncClient.post = counting_post  # type: ignore[method-assign]
    loadgen.send_request = marking_send  # type: ignore[assignment]
    try:
        t0 = time.perf_counter()
        task = asyncio.create_task(loadgen.run_load(url, input_len=input_len, output_len=4, num_prompts=prompts,
                                                    concurrency=concurrency, warmup=warmup, seed=1, on_progress=on_progress))
        waiter = asyncio.create_task(done.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        task.cancel()
        waiter.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    finally:
        httpx.AsyncClient.post = post  # type: ignore[method-assign]
        loadgen.send_request = send  # type: ignore[assignment]
    marks["tokenize_total"] = tokenize["n"]
    return marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["demo", "llama"], default="demo")
    parser.add_argument("--src", default=str(ROOT / "src"), help="the optui source tree to measure")
    parser.add_argument("--prompts", type=int, nargs="+", default=[5000])
    parser.add_argument("--warmup", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--stop-after", type=int, default=20, help="timed requests before the cancel (0: none)")
    args = parser.parse_args()
    sys.path[:0] = [args.src, str(ROOT)]
    print(f"{args.server}, src {args.src}: input_len {args.input_len}, output_len 4, c={args.concurrency}")
    print(f"{'prompts':>8} {'warmup':>6} {'first send s':>12} {'timed start s':>13} {'/tokenize before':>16} {'/tokenize all':>13}")
    with tempfile.TemporaryDirectory() as tmp, _server(args.server, Path(tmp)) as url:
        for prompts in args.prompts:
            for warmup in args.warmup:
                for _ in range(args.reps):
                    m = asyncio.run(_one(url, prompts, warmup, args.input_len, args.concurrency, args.stop_after))
                    print(f"{prompts:>8} {warmup:>6} {m.get('first_send', float('nan')):>12.2f} "
                          f"{m.get('timed_start', float('nan')):>13.2f} {m.get('tokenize_before', '-'):>16} "
                          f"{m['tokenize_total']:>13}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
