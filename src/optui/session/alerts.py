"""Alerts: the transitions an operator must not miss, derived from session snapshots.

Kinds: ``crashed`` (a server became crashed), ``oom`` (its crash class is oom), ``hung``
(requests waiting, no tokens), ``gpu_memory`` (a GPU above ``mem_alert_pct`` %, re-armed
when it drops 5 points below), ``gpu_error`` (one GPU answers with an error, e.g. NVML's
"GPU is lost", while the others keep reporting; re-armed when it reads again),
``bench_stalled`` (the watchdog stopped a benchmark), ``host_lost`` (a rack host lost or
untrusted). Each alert fires once per transition; the
session journals it as an ``alert`` event and says it once in its event stream
(``AlertRaised``), which the UI shows as a notification (and rings the terminal bell when
``bell = true``). A server's transitions during a restart whose caller tells the operator
how it ended (the TUI's restart sequence: ``told_by_caller``) are not alerts: that caller
says it once (the crash is still journaled as its alert).
"""

from __future__ import annotations

from optui.core.gpu.samples import HostStatus
from optui.core.server.log import line_of_class
from optui.core.server.state import CrashClass, ServerState
from optui.session.snapshot_types import Alert

REARM_BELOW_PCT = 5.0


class AlertWatcher:
    """Remembers what was already reported; :meth:`check` returns only new alerts."""

    def __init__(self, mem_alert_pct: float = 95.0) -> None:
        self.mem_alert_pct = mem_alert_pct
        self._server_states: dict[str, ServerState] = {}
        self._hot_gpus: set[tuple[str, int]] = set()
        self._failed_gpus: set[tuple[str, int]] = set()
        self._lost_hosts: set[str] = set()
        self._bench_seen: tuple[str, float] | None = None

    def check(self, state) -> list[Alert]:
        """New alerts in ``state`` (a SessionState) compared with earlier calls."""
        alerts: list[Alert] = []
        alerts += self._servers(state.servers)
        alerts += self._gpus(state.hosts)
        alerts += self._bench(state.bench)
        return alerts

    def seen(self, status) -> None:
        """Server ``status`` (a ServerStatus) is known: its state is no transition to alert
        at the next :meth:`check` (the session's restart reported how it ended)."""
        self._server_states[status.name] = status.state

    @staticmethod
    def crash_alert(status) -> Alert | None:
        """The ``crashed`` / ``oom`` alert of a crashed server ``status`` (None when it did not crash)."""
        if status.state is not ServerState.CRASHED:
            return None
        line = line_of_class(status.crash_lines, status.crash_class) or status.message or ""
        if status.crash_class is CrashClass.OOM:
            return Alert("oom", status.name, f"{status.name}: out of memory — {line}")
        return Alert("crashed", status.name, f"{status.name} crashed ({status.crash_class or 'unknown'}): {line}")

    def _servers(self, servers) -> list[Alert]:
        out = []
        for s in servers:
            prev = self._server_states.get(s.name)
            self._server_states[s.name] = s.state
            if prev is None or prev is s.state:
                continue
            crash = self.crash_alert(s)
            if crash is not None:
                out.append(crash)
            elif s.state is ServerState.HUNG:
                out.append(Alert("hung", s.name, f"{s.name} is hung: requests waiting but no tokens generated"))
        return out

    def _gpus(self, hosts) -> list[Alert]:
        out = []
        for h in hosts:
            bad = h.status in (HostStatus.LOST, HostStatus.ERROR)
            if bad and h.host not in self._lost_hosts:
                self._lost_hosts.add(h.host)
                out.append(Alert("host_lost", h.host, f"{h.host}: {h.status.value}: {h.error or ''}", "warning"))
            elif not bad and h.status is HostStatus.LIVE:
                self._lost_hosts.discard(h.host)
            if h.status is not HostStatus.LIVE:
                continue
            for s in h.samples:
                pct = s.mem_used_pct
                key = (h.host, s.index)
                if s.error and key not in self._failed_gpus:
                    self._failed_gpus.add(key)
                    out.append(Alert("gpu_error", f"{h.host}:{s.index}", f"{h.host} GPU {s.index}: {s.error}"))
                elif not s.error:
                    self._failed_gpus.discard(key)
                if pct is None:
                    continue
                if pct >= self.mem_alert_pct and key not in self._hot_gpus:
                    self._hot_gpus.add(key)
                    out.append(Alert("gpu_memory", f"{h.host}:{s.index}",
                                     f"{h.host} GPU {s.index}: memory {pct:.0f}% used (alert at {self.mem_alert_pct:.0f}%)", "warning"))
                elif pct < self.mem_alert_pct - REARM_BELOW_PCT:
                    self._hot_gpus.discard(key)
        return out

    def _bench(self, bench) -> list[Alert]:
        if bench is None or bench.status != "stalled":
            return []
        key = (bench.name, bench.started_at)
        if self._bench_seen == key:
            return []
        self._bench_seen = key
        return [Alert("bench_stalled", bench.name, f"benchmark {bench.name} stalled and was stopped: {bench.error or ''}")]
