"""The probe holds its requests back while a server stops (adapters/probe.py).

llama.cpp's ``llama-server`` never exits on SIGTERM while a ``/slots`` or ``/metrics``
request is in flight (tests/peers/NOTES.md): optui's own load polling made a clean stop a
SIGKILL after ``stop_timeout_s`` (CI, 2026-12-01: ``how == "kill"`` after 5 s). These tests
use a real HTTP server on 127.0.0.1 that answers slowly, and the real llama-server peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from optui.adapters.probe import ServerProbe
from tests.peers.llama_server import LaunchPeer

pytest_plugins = ["tests.peers.fixtures"]
pytestmark = pytest.mark.timeout(60)


@contextlib.contextmanager
def slow_server(delay_s: float) -> Iterator[tuple[str, list[str]]]:
    """A server on 127.0.0.1 answering every GET after ``delay_s``; yields (url, paths seen)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append(self.path)
            time.sleep(delay_s)
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_pause_waits_for_the_request_in_flight_and_refuses_new_ones() -> None:
    with slow_server(0.5) as (url, seen):
        probe = ServerProbe(url)
        try:
            in_flight = asyncio.create_task(probe.metrics())
            while not seen:
                await asyncio.sleep(0.01)
            t0 = time.monotonic()
            async with probe.paused() as still:
                entered = time.monotonic() - t0
                assert in_flight.done() and await in_flight == (200, "ok")
                assert still == 0 and 0.2 < entered < 3.0  # waited for the answer, not the whole wait_s
                health = await probe.health()
                assert (health.status, health.error) == (None, "paused")
                assert await probe.slots() == (None, "") and not await probe.generate_one()
                assert seen == ["/metrics"]  # nothing new reached the server while paused
            assert (await probe.health()).ok and seen == ["/metrics", "/health"]
        finally:
            await probe.close()


async def test_pause_gives_up_waiting_after_wait_s_and_says_how_many_are_left() -> None:
    with slow_server(3.0) as (url, seen):
        probe = ServerProbe(url)
        try:
            in_flight = asyncio.create_task(probe.slots())
            while not seen:
                await asyncio.sleep(0.01)
            async with probe.paused(wait_s=0.3) as still:
                # gave up waiting: the 3 s request is still in flight, and it says so
                assert still == 1 and not in_flight.done()
            assert await in_flight == (200, "ok")
        finally:
            await probe.close()


async def test_llama_server_exits_on_sigterm_while_the_probe_polls(launch_llama_server: LaunchPeer) -> None:
    with launch_llama_server() as peer:
        probe = ServerProbe(peer.url)
        polls = 0

        async def poll() -> None:  # the load monitor at its fastest: /metrics and /slots back to back
            nonlocal polls
            while True:
                await asyncio.gather(probe.metrics(), probe.slots(), probe.slots())
                polls += 1

        poller = asyncio.create_task(poll())
        try:
            while polls < 20:
                await asyncio.sleep(0.02)
            async with probe.paused():
                t0 = time.monotonic()
                os.killpg(peer.proc.pid, signal.SIGTERM)
                for _ in range(100):  # ≤ 5 s; it exits in ~50 ms when nothing is in flight
                    if peer.proc.poll() is not None:
                        break
                    await asyncio.sleep(0.05)
            assert peer.proc.returncode == 0, f"no clean exit {time.monotonic() - t0:.1f} s after SIGTERM"
        finally:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
            await probe.close()
