"""A Prometheus HTTP API client (``/api/v1/query``) on one reused ``httpx.AsyncClient``.

Every query has a deadline (``timeout_s``, for the whole request, also sent to Prometheus as
its own ``timeout`` so it stops evaluating); a bearer token is read from the environment
variable named in ``[fleet] bearer_token_env`` at each request and is never kept, logged or
put in a message. Failures raise :class:`PrometheusError` with a message the operator can act
on and a ``kind``: ``auth`` (401/403, or the variable unset), ``timeout``, ``connect``
(refused, no route, DNS), ``answer`` (not a Prometheus answer, bad JSON, a refused query),
``http`` (another status).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping

import httpx

from optui.adapters.bounded_read import read_response_bounded
from optui.adapters.tls import client_tls_context
from optui.core.fleet.query import MAX_ANSWER_BYTES, PromAnswerError, PromSample, parse_vector_answer


class PrometheusError(Exception):
    """A query that failed; ``str()`` is the message, ``kind`` one of the module doc's."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class PrometheusClient:
    """Instant queries against the Prometheus at ``base_url`` (``http://prom:9090``, a path
    prefix allowed). ``token_env``: the variable holding a bearer token (None: no auth);
    ``environ``: where it is read (the process environment by default)."""

    def __init__(self, base_url: str, *, token_env: str | None = None, timeout_s: float = 5.0,
                 environ: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_env = token_env
        self.timeout_s = timeout_s
        #: The most bytes of an answer read (more is refused; see :meth:`query_body`).
        self.max_answer_bytes = MAX_ANSWER_BYTES
        #: Seconds the last answered query took (None before one).
        self.last_duration_s: float | None = None
        self._environ = os.environ if environ is None else environ
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=2, max_keepalive_connections=1),
            trust_env=False,
            verify=client_tls_context(),  # the process's one context (https:// Prometheus)
        )

    def __repr__(self) -> str:  # never the token: only where it comes from
        return f"PrometheusClient({self.base_url!r}, token_env={self.token_env!r}, timeout_s={self.timeout_s})"

    def _headers(self) -> dict[str, str]:
        if not self.token_env:
            return {}
        token = self._environ.get(self.token_env)
        if not token:
            raise PrometheusError("auth", f"[fleet] bearer_token_env: the variable {self.token_env} is not set")
        return {"Authorization": f"Bearer {token}"}

    async def query(self, promql: str) -> list[PromSample]:
        """The samples of instant query ``promql`` now (a vector result); raises
        :class:`PrometheusError`."""
        return parse_answer(self.base_url, *await self.query_body(promql))

    async def query_body(self, promql: str) -> tuple[int, bytes]:
        """The HTTP status and body of instant query ``promql``, unparsed (a caller parses a
        large answer off the event loop with :func:`parse_answer`); raises
        :class:`PrometheusError` for a request that got no answer or was refused (401/403),
        and ``answer`` for a body over :attr:`max_answer_bytes` (streamed: the download stops
        there, so a 300 MB answer never sits in memory)."""
        url = f"{self.base_url}/api/v1/query"
        # in whole ms: Prometheus's duration syntax has no fractions ("0.3s" is refused as
        # bad_data: invalid parameter "timeout"), "300ms" is taken
        data = {"query": promql, "timeout": f"{max(1, round(self.timeout_s * 1000))}ms"}
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client.stream("POST", url, data=data, headers=self._headers()) as resp:
                    body = await read_response_bounded(resp, self.max_answer_bytes, self._too_large)
        except (TimeoutError, httpx.TimeoutException):
            raise PrometheusError("timeout", f"Prometheus at {self.base_url} did not answer within "
                                             f"{self.timeout_s:g} s") from None
        except httpx.ConnectError as exc:
            raise PrometheusError("connect", f"cannot connect to Prometheus at {self.base_url}: "
                                             f"{exc or 'connection refused'}") from None
        except httpx.HTTPError as exc:
            raise PrometheusError("connect", f"Prometheus at {self.base_url}: {exc.__class__.__name__}: {exc}") from None
        if resp.status_code in (401, 403):
            how = f"the token in ${self.token_env}" if self.token_env else "no token ([fleet] bearer_token_env)"
            raise PrometheusError("auth", f"Prometheus at {self.base_url} refused the query (HTTP "
                                          f"{resp.status_code}) with {how}")
        self.last_duration_s = time.monotonic() - started
        return resp.status_code, body

    def _too_large(self) -> PrometheusError:
        return PrometheusError("answer", f"Prometheus at {self.base_url}: the answer is over the limit of "
                                         f"{self.max_answer_bytes:,} bytes (not read further)")

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


def parse_answer(base_url: str, status: int, body: bytes) -> list[PromSample]:
    """The samples of an answer of :meth:`PrometheusClient.query_body` (pure; safe on any
    thread); raises :class:`PrometheusError` ``answer`` (not a vector answer, a refused query)
    or ``http`` (another status without the API's error body)."""
    try:
        return parse_vector_answer(body)
    except PromAnswerError as exc:
        if 200 <= status < 300 or status in (400, 422, 503):  # the API's own error answers
            raise PrometheusError("answer", f"Prometheus at {base_url}: {exc}") from None
        raise PrometheusError("http", f"Prometheus at {base_url} answered HTTP {status}") from None
