"""The GPU inventory of each host, journaled as ``hosts.seen`` when first seen or changed,
so a findings report can name the hardware long after the session ended."""

from __future__ import annotations

from collections.abc import Iterable

from optui.adapters.journal import Journal
from optui.core.gpu.samples import HostSnapshot, HostStatus
from optui.core.journal import events as ev


def inventory(snap: HostSnapshot) -> dict | None:
    """What a report needs of a live host: ``{"gpus": [{"index", "name", "mem_total_mib"}],
    "gpus_by_name": [{"name", "count", "mem_total_mib"}], "driver_version", "source"}``;
    None while the host has no live reading. Memory in MiB."""
    if snap.status is not HostStatus.LIVE or not snap.samples:
        return None
    gpus = [{"index": s.index, "name": s.name, "mem_total_mib": s.mem_total_mib} for s in snap.samples]
    by_name: dict[tuple, int] = {}
    for g in gpus:
        key = (g["name"], g["mem_total_mib"])
        by_name[key] = by_name.get(key, 0) + 1
    return {
        "gpus": gpus,
        "gpus_by_name": [{"name": n, "count": c, "mem_total_mib": m} for (n, m), c in by_name.items()],
        "driver_version": snap.extra.get("driver_version"),
        "source": snap.source,
    }


class InventoryRecorder:
    """Remembers the last inventory journaled per host (read back from the journal, so a
    restarted optui does not repeat it) and says which hosts changed."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._last: dict[str, dict | None] = {}

    def may_change(self, snapshots: Iterable[HostSnapshot]) -> bool:
        """True when :meth:`changes` could find something in ``snapshots``: a live host not
        looked up yet, or one whose inventory differs from the last journaled. No journal
        read (safe on the event loop while :meth:`changes` runs on the journal thread: at
        worst it says True once too often)."""
        last = self._last
        return any((data := inventory(snap)) is not None and (snap.host not in last or last[snap.host] != data)
                   for snap in snapshots)

    def changes(self, snapshots: Iterable[HostSnapshot]) -> list[tuple[str, dict]]:
        """``(host, inventory)`` pairs to journal now (new or different from the last one)."""
        out = []
        for snap in snapshots:
            data = inventory(snap)
            if data is None:
                continue
            if snap.host not in self._last:
                last = self.journal.events(types=[ev.HOSTS_SEEN], target=snap.host, newest_first=True, limit=1)
                self._last[snap.host] = last[0].data if last else None
            if self._last[snap.host] != data:
                self._last[snap.host] = data
                out.append((snap.host, data))
        return out
