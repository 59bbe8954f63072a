"""Liveness against the real llama.cpp peer (issue 16): a long generation is progress, not a hang.

llama.cpp adds a request's tokens to ``llamacpp:tokens_predicted_total`` only when it
finishes; the load monitor reads ``/slots`` ``n_decoded`` too. The monitor's clock is given
(``update(now)``), so "longer than hung_after_s" needs no waiting: between two readings the
test waits only for the stream to show new tokens.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from optui.adapters.probe import ServerProbe
from optui.session.server.load import LoadMonitor
from tests.peers.llama_server import LaunchPeer

pytest_plugins = ["tests.peers.fixtures"]

# One slot, so the hung verdict's 1-token confirmation queues behind the long request, as
# it did on the operator's server (-np 4, four long requests).
ONE_SLOT_ARGS = ("-c", "2048", "-np", "1", "--metrics", "-a", "m")


async def _stream(url: str, chunks: list[str]) -> None:
    body = {"prompt": "Hello", "max_tokens": 1500, "ignore_eos": True, "stream": True}
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(60.0)) as client:
        async with client.stream("POST", "/v1/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {"):
                    text = json.loads(line[6:])["choices"][0].get("text")
                    if text:
                        chunks.append(text)


async def _more_than(chunks: list[str], n: int, task: asyncio.Task) -> None:
    for _ in range(600):  # ≤ 60 s on a loaded 2-core machine; the model makes ~5-50 tok/s
        if len(chunks) > n or task.done():
            break
        await asyncio.sleep(0.1)
    assert not task.done(), task  # the stream must still be running
    assert len(chunks) > n, f"no new token in 60 s (still {n})"


async def test_a_long_llamacpp_generation_is_never_called_hung(launch_llama_server: LaunchPeer, big_gguf) -> None:
    with launch_llama_server(model=big_gguf, args=ONE_SLOT_ARGS) as peer:
        probe = ServerProbe(peer.url)
        confirmations: list[bool] = []

        async def confirm() -> bool:  # the real confirmation: a 1-token generation
            ok = await probe.generate_one("m", timeout_s=1.0)
            confirmations.append(ok)
            return ok

        monitor = LoadMonitor("llamacpp", probe, hung_after_s=5.0, confirm=confirm)
        chunks: list[str] = []
        stream = asyncio.create_task(_stream(peer.url, chunks))
        try:
            await _more_than(chunks, 0, stream)
            events, rates = [], []
            for step in range(6):  # 6 readings 3 s apart on the monitor's clock: 15 s > hung_after_s
                await _more_than(chunks, len(chunks), stream)
                events.append(await monitor.update(3.0 * step))
                rates.append(monitor.view.gen_tok_s)
                assert monitor.view.running == 1.0
            assert "hung" not in events and not monitor.hung, (events, confirmations, monitor.message)
            assert confirmations == []  # progress was seen: no verdict to confirm
            # live tok/s follows the stream (was 0 until the request finished)
            assert all(rate and rate > 0 for rate in rates[1:]), rates
            assert not stream.done()
        finally:
            stream.cancel()
            await asyncio.gather(stream, return_exceptions=True)
            await probe.close()
