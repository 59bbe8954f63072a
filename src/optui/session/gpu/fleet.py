"""The fleet in the session: one source read every ``interval_s`` seconds, its newest
:class:`~optui.core.fleet.readings.FleetSnapshot` kept for the screen, ``status --json`` and ``gpus``.

:class:`PrometheusFleetSource` sends the one query a tick (core/fleet/readings.py's ``fleet_query``);
the answer (4,096 series for 512 GPUs) is parsed and merged on a worker thread, so the event
loop only waits on the socket. A failed read (Prometheus down, slow, 401) becomes the
snapshot's ``error`` with the last known GPUs aging; the loop goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from optui.adapters.prometheus import PrometheusClient, PrometheusError, parse_answer
from optui.adapters.worker_thread import SingleThreadExecutor
from optui.config import FleetConfig
from optui.core.fleet.readings import FleetSnapshot, FleetState, configured_server, fleet_query, fleet_server_at
from optui.core.server.state import ServerStatus


class FleetSource(Protocol):
    """Where fleet readings come from (Prometheus, or the demo's simulation)."""

    interval_s: float

    async def read(self) -> FleetSnapshot:
        """One reading now; failures are the snapshot's ``error``, never raised."""
        ...

    async def close(self) -> None:
        """Release connections / threads."""
        ...


class PrometheusFleetSource:
    """The fleet from the Prometheus of ``cfg`` (``[fleet]``)."""

    def __init__(self, cfg: FleetConfig) -> None:
        assert cfg.prometheus is not None
        self.interval_s = cfg.interval_s
        self.client = PrometheusClient(cfg.prometheus, token_env=cfg.bearer_token_env, timeout_s=cfg.timeout_s)
        self.query = fleet_query(cfg.selector)
        self._state = FleetState(cfg.interval_s)
        self._worker = SingleThreadExecutor("optui-fleet")

    async def read(self) -> FleetSnapshot:
        try:
            status, body = await self.client.query_body(self.query)
        except PrometheusError as exc:
            return self._state.failed(str(exc), time.time())
        return await asyncio.wrap_future(self._worker.submit(self._merge, status, body))

    def _merge(self, status: int, body: bytes) -> FleetSnapshot:
        try:
            samples = parse_answer(self.client.base_url, status, body)
            return self._state.update(samples, time.time())
        except PrometheusError as exc:
            return self._state.failed(str(exc), time.time())
        except Exception as exc:  # noqa: BLE001 - a reading that fails is the snapshot's error, never the poller's end
            return self._state.failed(unexpected_failure(self.client.base_url, exc), time.time())

    async def close(self) -> None:
        await self.client.aclose()
        self._worker.shutdown(wait=False)


def unexpected_failure(where: str, exc: BaseException) -> str:
    """The message of a reading that failed in a way no adapter foresaw (a bug or an answer
    past every check): the exception's type and its first 200 characters, with ``where``."""
    return f"{where}: reading failed: {exc.__class__.__name__}: {str(exc)[:200]}"


#: The longest wait between two failed readings, in multiples of ``interval_s``.
MAX_BACKOFF_INTERVALS = 8


class FleetPoller:
    """Reads ``source`` every ``source.interval_s`` seconds (the next read starts that long
    after the previous one ended) and calls ``on_change`` after each; :attr:`snapshot` is the
    newest reading (an empty one before the first). A reading that fails (its ``error``, or
    any exception the source raised) keeps the last GPUs aging, with the reason as the
    snapshot's ``error``; the next reading waits twice as long each time (up to
    :data:`MAX_BACKOFF_INTERVALS` intervals) and the poller never stops on its own."""

    def __init__(self, source: FleetSource, on_change: Callable[[], None]) -> None:
        self.source = source
        self.on_change = on_change
        self.snapshot = FleetSnapshot()
        #: Readings so far (a test waits for one more).
        self.readings = 0

    async def read_once(self) -> FleetSnapshot:
        """One reading now (kept as :attr:`snapshot`); never raises but for cancellation."""
        try:
            self.snapshot = await self.source.read()
        except Exception as exc:  # noqa: BLE001 - a source's bug must not end the watching (issue 30)
            aged = [replace(g, stale=True) for g in self.snapshot.gpus]
            self.snapshot = replace(self.snapshot, gpus=tuple(aged), taken_at=time.time(),
                                    error=unexpected_failure("fleet", exc))
        self.readings += 1
        self.on_change()
        return self.snapshot

    def next_wait_s(self, failures: int) -> float:
        """Seconds before the next reading after ``failures`` failed ones in a row."""
        return self.source.interval_s * min(2 ** failures, MAX_BACKOFF_INTERVALS) if failures else self.source.interval_s

    async def run(self) -> None:
        """Read forever (cancel to stop), backing off while readings fail."""
        failures = 0
        while True:
            snapshot = await self.read_once()
            failures = failures + 1 if snapshot.error else 0
            await asyncio.sleep(self.next_wait_s(failures))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.source.close()


def fleet_source(cfg: FleetConfig) -> FleetSource:
    """The source of a ``[fleet]`` table: its Prometheus, or ``demo_hosts`` simulated hosts."""
    if cfg.demo_hosts is not None:
        from optui.demo.sim_fleet import SimFleetSource

        return SimFleetSource(cfg.demo_hosts, cfg.interval_s)
    return PrometheusFleetSource(cfg)


async def read_fleet_once(cfg: FleetConfig) -> FleetSnapshot:
    """One reading of the ``[fleet]`` of ``cfg`` (``optui gpus``); failures are its ``error``."""
    source = fleet_source(cfg)
    try:
        return await source.read()
    except Exception as exc:  # noqa: BLE001 - the answer of `optui gpus`, never a traceback
        return FleetSnapshot(taken_at=time.time(), error=unexpected_failure("fleet", exc))
    finally:
        await source.close()


def fleet_json(cfg: FleetConfig, snapshot: FleetSnapshot, server_urls: dict[str, str] | None = None) -> dict:
    """``status --json``'s ``fleet``: ``{"prometheus", "error", "taken_at", "series", "gpus":
    [FleetGpu.to_json()...], "servers": [FleetServer.to_json() + "configured": the
    [servers.NAME] at that address (``server_urls``: name → url) or null]}``."""
    return {"prometheus": cfg.prometheus, "error": snapshot.error, "taken_at": snapshot.taken_at or None,
            "series": snapshot.series, "gpus": [gpu.to_json() for gpu in snapshot.gpus],
            "servers": [{**server.to_json(), "configured": configured_server(server, server_urls or {})}
                        for server in snapshot.servers]}


def with_fleet_series(servers: tuple[ServerStatus, ...], snapshot: FleetSnapshot | None) -> tuple[ServerStatus, ...]:
    """The configured servers' statuses, each with its series in the fleet ``snapshot``
    (``ServerStatus.fleet``: the fleet server whose instance is the host:port of its url;
    None without ``[fleet]`` or when Prometheus does not scrape it): a server optui controls
    and Prometheus scrapes joins both views."""
    fleet = snapshot.servers if snapshot is not None else ()
    out = []
    for status in servers:
        found = fleet_server_at(status.url, fleet) if fleet else None
        out.append(status if found == status.fleet else replace(status, fleet=found))
    return tuple(out)
