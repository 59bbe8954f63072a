"""HTTP probes of one inference server with a reused ``httpx.AsyncClient``.

Readiness facts (``../shared/reference/servers_and_bench.md`` 1.4): SGLang ``/health`` runs a
real 1-token generation and can take up to 20 s (timeout ≥ 25 s; we never poll faster than
the previous answer because probes are awaited one after another); ``/v1/models`` answers
before SGLang is ready, so it is only used for the model name. The API key (from the
environment variable named in the config) is sent as ``Authorization: Bearer`` and never
stored or logged.

Stopping: llama.cpp's ``llama-server`` (b6xxx, tests/peers/NOTES.md) never exits on SIGTERM
while a ``/slots``, ``/metrics`` or completion request is in flight (the request's task waits
on a queue that shutdown has stopped). :meth:`ServerProbe.paused` holds new probes back and
waits for the running ones before the controller signals the server, so optui's own polling
does not turn a clean stop into a SIGKILL after ``stop_timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from optui.adapters.bounded_read import read_response_bounded
from optui.adapters.tls import client_tls_context
from optui.core.server.effective_config import RunningConfig, llamacpp_config, sglang_config, vllm_config
from optui.core.text.bounded_json import loads_bounded

#: The most bytes of one answer a probe reads (vLLM's ``/metrics`` with every histogram is
#: ~1 MB); past it the answer is refused as :class:`AnswerTooLarge` (issue 30).
MAX_ANSWER_BYTES = 16 * 1024 * 1024
#: The deepest nesting of a JSON answer (``/server_info``, ``/v1/models``) a probe decodes.
MAX_JSON_DEPTH = 64


class AnswerTooLarge(httpx.HTTPError):
    """A server's answer over :data:`MAX_ANSWER_BYTES` (not read further)."""


def _json(resp: httpx.Response):
    """The JSON of ``resp`` nested at most :data:`MAX_JSON_DEPTH` levels (never a
    RecursionError); raises ValueError (:class:`~optui.core.text.bounded_json.JsonBoundError`)."""
    return loads_bounded(resp.content, what=str(resp.request.url), max_bytes=MAX_ANSWER_BYTES, max_depth=MAX_JSON_DEPTH)


def port_taken(port: int, host: str = "0.0.0.0") -> bool:
    """True when a TCP listener on this machine holds ``port`` (a bind of ``host:port`` with
    SO_REUSEADDR fails with EADDRINUSE: a socket in TIME_WAIT does not count). Other bind
    errors (a host that is not this machine's, no permission for a low port) give False:
    only a port known to be taken is reported."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


@dataclass(frozen=True, slots=True)
class HealthResult:
    """Outcome of one health probe: ``status`` is the HTTP code or None when no answer;
    ``error`` is "refused", "timeout" or another short reason; ``latency_ms``."""

    status: int | None
    error: str | None
    latency_ms: float

    @property
    def ok(self) -> bool:
        """HTTP 200."""
        return self.status == 200

    @property
    def answered(self) -> bool:
        """The HTTP server answered (any status)."""
        return self.status is not None


class ProbesPaused(httpx.TransportError):
    """Raised inside the probe for a request made while :meth:`ServerProbe.paused` holds;
    every probe method maps it to "no answer" like any other transport error."""


class ServerProbe:
    """Probes for one server at ``base_url`` (e.g. ``http://127.0.0.1:30000``): ``/health``
    waits up to ``health_timeout_s`` seconds, every other request up to 5 s (or
    ``health_timeout_s`` when shorter)."""

    def __init__(self, base_url: str, *, api_key_env: str | None = None, health_timeout_s: float = 25.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.health_timeout_s = health_timeout_s
        headers = {}
        key = os.environ.get(api_key_env) if api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            # the other probes wait at most 5 s, or the health timeout when the operator set a
            # shorter one: a stopped (SIGSTOP) server's /metrics held each poll 5 s, so a
            # `health_timeout_s = 0.5` server showed DEGRADED ~6 s and HUNG ~12 s late
            timeout=httpx.Timeout(min(5.0, health_timeout_s), connect=min(2.0, health_timeout_s)),
            limits=httpx.Limits(max_connections=4, max_keepalive_connections=2),
            trust_env=False,
            verify=client_tls_context(),
        )
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._paused = 0

    async def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One request through the pool, counted while in flight; raises ProbesPaused
        while :meth:`paused` holds, else what ``httpx`` raises."""
        if self._paused:
            raise ProbesPaused(f"{method} {path}: probes paused while the server stops")
        self._in_flight += 1
        self._idle.clear()
        try:
            async with self._client.stream(method, path, **kwargs) as resp:
                body = await read_response_bounded(resp, MAX_ANSWER_BYTES, lambda: AnswerTooLarge(
                    f"{method} {path}: answer over the limit of {MAX_ANSWER_BYTES:,} bytes (not read further)"))
            return httpx.Response(resp.status_code, headers=resp.headers, content=body, request=resp.request)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def paused(self, wait_s: float = 3.0) -> AsyncIterator[int]:
        """No new request while inside (they fail at once as "no answer"); on entry waits
        up to ``wait_s`` seconds for the requests already in flight. Yields how many are
        still in flight after that wait (0 normally). Use around a stop (see module doc)."""
        self._paused += 1
        try:
            if self._in_flight:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._idle.wait()
            yield self._in_flight
        finally:
            self._paused -= 1

    async def close(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def health(self, path: str = "/health") -> HealthResult:
        """GET ``path`` with the long health timeout; never raises."""
        t0 = time.monotonic()
        try:
            resp = await self._send("GET", path, timeout=httpx.Timeout(self.health_timeout_s, connect=2.0))
            return HealthResult(resp.status_code, None, (time.monotonic() - t0) * 1000)
        except httpx.ConnectError:
            return HealthResult(None, "refused", (time.monotonic() - t0) * 1000)
        except httpx.TimeoutException:
            return HealthResult(None, "timeout", (time.monotonic() - t0) * 1000)
        except ProbesPaused:
            return HealthResult(None, "paused", (time.monotonic() - t0) * 1000)
        except httpx.HTTPError as exc:
            return HealthResult(None, type(exc).__name__, (time.monotonic() - t0) * 1000)

    async def model_name(self) -> str | None:
        """The first model id from ``/v1/models`` (SGLang, vLLM, llama.cpp shapes), or None."""
        try:
            resp = await self._send("GET", "/v1/models")
            if resp.status_code != 200:
                return None
            data = _json(resp).get("data") or []
            return str(data[0].get("id")) if data else None
        except (httpx.HTTPError, ValueError, AttributeError, IndexError, TypeError):
            return None

    async def metrics(self) -> tuple[int | None, str]:
        """GET ``/metrics``: ``(status, text)``; status None when unreachable."""
        try:
            resp = await self._send("GET", "/metrics")
            return resp.status_code, resp.text if resp.status_code == 200 else ""
        except httpx.HTTPError:
            return None, ""

    async def slots(self) -> tuple[int | None, str]:
        """GET llama.cpp's ``/slots``: ``(status, text)``; status None when unreachable
        (501 with ``--no-slots``)."""
        try:
            resp = await self._send("GET", "/slots")
            return resp.status_code, resp.text if resp.status_code == 200 else ""
        except httpx.HTTPError:
            return None, ""

    async def server_info(self) -> dict | None:
        """SGLang ``/server_info`` (falls back to ``/get_server_info``), vLLM ``/version``;
        None when neither answers."""
        for path in ("/server_info", "/get_server_info", "/version"):
            try:
                resp = await self._send("GET", path)
            except httpx.HTTPError:
                return None
            if resp.status_code == 200:
                try:
                    data = _json(resp)
                    return data if isinstance(data, dict) else None
                except ValueError:
                    return None
        return None

    async def _get_json(self, path: str) -> tuple[int | None, object]:
        """``(status, JSON body or None)`` of GET ``path``; status None when unreachable."""
        try:
            resp = await self._send("GET", path)
        except httpx.HTTPError:
            return None, None
        try:
            return resp.status_code, _json(resp) if resp.status_code == 200 else None
        except ValueError:
            return resp.status_code, None

    async def running_config(self, kind: str) -> RunningConfig | None:
        """What the server of ``kind`` says it runs (see :mod:`optui.core.server.effective_config`):
        SGLang ``/server_info`` (``/get_server_info`` when that is 404), vLLM ``/v1/models``
        + ``/metrics`` + ``/version``, llama.cpp ``/props`` + ``/v1/models``; None when it
        reports nothing (unreachable, another kind). Never raises."""
        if kind == "sglang":
            status, body = await self._get_json("/server_info")
            if status == 404:
                status, body = await self._get_json("/get_server_info")
                return sglang_config(body, "/get_server_info")
            return sglang_config(body)
        if kind == "llamacpp":
            _, props = await self._get_json("/props")
            if props is None:
                return None
            _, models = await self._get_json("/v1/models")
            return llamacpp_config(props, models)
        if kind == "vllm":
            _, models = await self._get_json("/v1/models")
            _, text = await self.metrics()
            _, version = await self._get_json("/version")
            version = version.get("version") if isinstance(version, dict) else None
            return vllm_config(models, text, str(version) if version is not None else None)
        return None

    async def generate_one(self, model: str | None = None, *, timeout_s: float = 30.0) -> bool:
        """A 1-token ``/v1/completions`` request (the "really ready" probe; also confirms
        a hung verdict); True on HTTP 200 within ``timeout_s``."""
        body = {"prompt": "Hello", "max_tokens": 1, "temperature": 0}
        if model:
            body["model"] = model
        try:
            resp = await self._send("POST", "/v1/completions", json=body, timeout=httpx.Timeout(timeout_s, connect=2.0))
            return resp.status_code == 200
        except httpx.HTTPError:
            return False
