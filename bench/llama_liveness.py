#!/usr/bin/env python3
"""Live load and the hung verdict of optui's load monitor while llama.cpp streams long answers.

    python bench/llama_liveness.py [--src DIR] [--hung-after 5] [--tokens 250,350,450,500]

Starts the llama.cpp test peer (``medium`` model, ``-t 2 -c 2048 -np 4 --metrics``), sends one
streaming completion per ``--tokens`` entry at once (``ignore_eos``), and reads the server's
load once a second through ``LoadMonitor`` of the optui source tree ``--src`` (default: this
checkout; ``git archive REV src | tar -x -C /tmp/old`` for an old one), with the session's
hung confirmation (a 1-token completion, 1 s). Prints every reading's ``gen tok/s`` and the
verdicts. llama.cpp adds a request's tokens to ``tokens_predicted_total`` only when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def _stream(url: str, tokens: int) -> None:
    import httpx

    body = {"prompt": "Hello", "max_tokens": tokens, "ignore_eos": True, "stream": True}
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        async with client.stream("POST", "/v1/completions", json=body) as resp:
            async for _ in resp.aiter_lines():
                pass


async def _measure(url: str, tokens: list[int], hung_after_s: float) -> None:
    from optui.adapters.probe import ServerProbe
    from optui.session.server.load import LoadMonitor

    probe = ServerProbe(url)
    monitor = LoadMonitor("llamacpp", probe, hung_after_s=hung_after_s,
                          confirm=lambda: probe.generate_one(None, timeout_s=1.0))
    started = time.monotonic()
    streams = [asyncio.create_task(_stream(url, n)) for n in tokens]
    rates, events = [], []
    while not all(s.done() for s in streams) and time.monotonic() - started < 300:
        event = await monitor.update(time.monotonic())
        if event:
            events.append(f"{event} at {time.monotonic() - started:.1f} s")
        rates.append(monitor.view.gen_tok_s)
        await asyncio.sleep(1.0)
    await asyncio.gather(*streams, return_exceptions=True)
    await probe.close()
    shown = ", ".join("-" if r is None else f"{r:.0f}" for r in rates)
    print(f"{len(tokens)} streams of {'/'.join(map(str, tokens))} tokens, {time.monotonic() - started:.1f} s")
    print(f"gen tok/s per 1 s reading: {shown}")
    print(f"readings at 0 tok/s while streaming: {sum(1 for r in rates[1:] if not r)} of {len(rates) - 1}")
    print(f"verdicts: {', '.join(events) or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="optui source tree to measure")
    parser.add_argument("--hung-after", type=float, default=5.0, help="hung_after_s of the monitor (s)")
    parser.add_argument("--tokens", default="250,350,450,500", help="max_tokens of each stream (≤ 500: 512 per slot)")
    args = parser.parse_args()
    sys.path[:0] = [str(args.src), str(ROOT)]
    from tests.peers.llama_server import build_llama_server, free_port, start_llama_server, wait_for_health
    from tests.peers.make_tiny_gguf import SIZES, make_tiny_gguf

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        gguf = make_tiny_gguf(tmp / "medium.gguf", **SIZES["medium"]).path
        port = free_port()
        server_args = ("-c", "2048", "-np", "4", "--metrics")
        with start_llama_server(build_llama_server(), gguf, port, server_args, tmp / "server.log") as proc:
            url = f"http://127.0.0.1:{port}"
            wait_for_health(url, proc)
            asyncio.run(_measure(url, [int(t) for t in args.tokens.split(",")], args.hung_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
