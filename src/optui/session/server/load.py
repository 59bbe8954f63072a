"""Live load of one server and its hung verdict.

Source: ``/metrics`` (prometheus text → :func:`~optui.core.server.metrics_map.load_view`, rates
between scrapes); when it is missing (SGLang without ``--enable-metrics``: 404, llama.cpp
without ``--metrics``: 501) a hint is shown and the server's own stats log lines
(:class:`~optui.core.server.log_load.LogLoad`: SGLang ``Decode batch``, vLLM ``Engine 000``) take
over, with ``source="log"``.

llama.cpp counts a request's tokens only when it finishes, so for it ``/slots`` is read too
(``n_decoded`` of every busy slot, :func:`~optui.core.server.metrics_map.with_slots`): live tok/s
and the hung verdict follow each token, and a long generation is never taken for a hang.
Where ``/slots`` is off (``--no-slots``: 501) the decode-call counter still shows progress.

When the server does not answer a read, the last view is kept and marked ``stale``.

Hung: requests running or waiting while the server's progress counter (generated tokens,
in-flight ones included, and llama.cpp's decode calls; or, from the log, the
count of lines reporting generated tokens) has not moved for ``hung_after_s``. Because
SGLang refreshes its gauges and prints batch lines only while it works, a stale "busy" can
outlive the last request; so before declaring ``hung`` a 1-token generation is tried
(``confirm``): if the server answers it is not hung.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from optui.adapters.probe import ServerProbe
from optui.core.server.fsm import HungDetector
from optui.core.server.log_load import LogLoad
from optui.core.server.metrics_map import (
    MetricsParseError,
    Scrape,
    SlotsParseError,
    SlotsProgress,
    load_view,
    missing_metrics_hint,
    parse_scrape,
    parse_slots,
    progress_total,
    with_slots,
)
from optui.core.server.state import LoadView


class LoadMonitor:
    """Scrapes, maps and judges the load of one server (see module doc)."""

    def __init__(self, kind: str, probe: ServerProbe, hung_after_s: float,
                 confirm: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.kind = kind
        self.probe = probe
        self.detector = HungDetector(hung_after_s)
        self.confirm = confirm
        self.log = LogLoad()
        self.view = LoadView()
        self.hung = False
        self.message = ""
        self.metrics_status: int | None = None  # last non-200 answer of /metrics
        self.slots_status: int | None = None  # /slots answered 404/501: not asked again
        self._last: Scrape | None = None
        self._progress: float | None = None  # what the hung verdict watches (see module doc)

    def reset(self) -> None:
        """Forget everything (a new start of the server)."""
        self.detector.reset()
        self.log = LogLoad()
        self.view = LoadView()
        self.hung = False
        self.message = ""
        self.metrics_status = None
        self.slots_status = None
        self._last = None
        self._progress = None

    def feed_log(self, line: str) -> bool:
        """A server log line; True when it carried stats."""
        return self.log.feed(line)

    @property
    def hint(self) -> str | None:
        """Why /metrics is not used, or None."""
        return None if self.metrics_status is None else missing_metrics_hint(self.kind, self.metrics_status)

    async def update(self, now: float) -> str | None:
        """Read the load once (``now`` monotonic seconds). Returns "hung" when the server
        just became hung, "recovered" when it just recovered, else None."""
        view = await self._read(now)
        self.view = view
        busy = None if view.running is None else (view.running or 0.0) + (view.waiting or 0.0)
        progress = self._progress if view.source == "metrics" else view.generated_total
        verdict = self.detector.update(now, None if view.stale else progress, busy)
        if verdict and not self.hung:
            if self.confirm is not None and await self.confirm():
                # it generated: the busy count was stale (no batch line since the last request)
                self.detector.reset()
                if view.source == "log":
                    self.log.idle()
                    self.view = self.log.view(self.hint)
                return None
            self.hung = True
            self.message = f"{busy:.0f} requests running/waiting but no token generated for {self.detector.stalled_s:.0f} s"
            return "hung"
        if self.hung and not verdict:
            self.hung = False
            self.message = ""
            return "recovered"
        return None

    async def _read(self, now: float) -> LoadView:
        if self.metrics_status is None:
            code, text = await self.probe.metrics()
            if code == 200:
                try:
                    scrape = parse_scrape(text, now)
                except MetricsParseError as exc:
                    return LoadView(hint=str(exc))
                scrape = with_slots(scrape, await self._slots())
                view = load_view(scrape, self._last)
                self._last = scrape
                self._progress = progress_total(scrape)
                if scrape.has_server_metrics:
                    return view
                # /metrics without server series (vLLM --disable-log-stats): try the log
                if self.log.lines:
                    return self.log.view(view.hint)
                return view
            if code is None:  # no answer (timeout, refused): the last numbers, marked as such
                return replace(self.view, stale=True) if self.view.source else self.view
            if code not in (401, 403, 404, 501):  # transient: try /metrics again next time
                return self.log.view(missing_metrics_hint(self.kind, code))
            self.metrics_status = code
        return self.log.view(self.hint)

    async def _slots(self) -> SlotsProgress | None:
        """llama.cpp's in-flight progress from ``/slots``; None for other servers, when it
        is off (404/501, then never asked again) or unreadable this time."""
        if self.kind != "llamacpp" or self.slots_status is not None:
            return None
        code, text = await self.probe.slots()
        if code in (404, 501):
            self.slots_status = code
            return None
        if code != 200:
            return None
        try:
            return parse_slots(text)
        except SlotsParseError:
            return None
