"""A server that accepts connections and never answers (a SIGSTOPped process, a wedged
event loop): every probe gives up within the server's ``health_timeout_s`` when that is
shorter than the 5 s default, so DEGRADED / HUNG are not shown seconds late."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import pytest

from optui.adapters.probe import ServerProbe

pytestmark = pytest.mark.timeout(30)


@contextlib.contextmanager
def silent_listener() -> Iterator[str]:
    """A socket on 127.0.0.1 whose backlog accepts connections that nobody ever reads."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


async def test_every_probe_gives_up_within_a_short_health_timeout() -> None:
    with silent_listener() as url:
        probe = ServerProbe(url, health_timeout_s=0.5)
        try:
            async with asyncio.timeout(3.0):  # the old fixed 5 s on /metrics, /slots, /props ran past this
                health = await probe.health()
                assert (health.status, health.error) == (None, "timeout")
                assert await probe.metrics() == (None, "")
                assert await probe.slots() == (None, "")
                assert await probe.running_config("llamacpp") is None
        finally:
            await probe.close()


async def test_the_default_leaves_slow_answers_five_seconds() -> None:
    with silent_listener() as url:
        probe = ServerProbe(url, health_timeout_s=25.0)
        try:
            task = asyncio.create_task(probe.metrics())
            await asyncio.sleep(1.5)
            assert not task.done()  # a busy server's /metrics is not given up on after 0.5 s
            assert await task == (None, "")
        finally:
            await probe.close()


async def test_probes_and_load_runs_share_one_tls_context(monkeypatch):
    """Every HTTP client of a session loads the CA bundle once per process, not once each
    (~40-90 ms of CPU per client: the probes of a rack's servers at startup, every load run)."""
    import ssl

    from optui.adapters import tls
    from optui.adapters.loadgen import run_load

    tls.client_tls_context.cache_clear()
    loads = []
    load_verify_locations = ssl.SSLContext.load_verify_locations
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations",
                        lambda self, *a, **kw: loads.append(1) or load_verify_locations(self, *a, **kw))
    probes = [ServerProbe(f"http://127.0.0.1:{9 + n}") for n in range(5)]
    result = await run_load("http://127.0.0.1:9", input_len=4, output_len=2, num_prompts=1, concurrency=1,
                            model="m", warmup=0, timeout_s=2)
    assert result.status != "ok"  # nothing listens on port 9: the run's client was made all the same
    for probe in probes:
        await probe.close()
    assert len(loads) == 1, len(loads)
