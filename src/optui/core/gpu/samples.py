"""GPU samples and host snapshots: the source-agnostic shape every GPU source produces.

Any numeric field may be ``None``: "not available on this GPU / driver / source". The UI
shows ``None`` as "n/a", never as 0 (a passively cooled H200 has no fan speed; MIG hides
utilization; GB10 has no dedicated memory).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

#: Keys of one GPU in ``optui gpus --json`` (and of :meth:`GpuSample.to_json`), in order.
GPU_JSON_KEYS = (
    "host",
    "index",
    "uuid",
    "name",
    "mem_used_mib",
    "mem_reserved_mib",
    "mem_total_mib",
    "util_gpu_pct",
    "util_mem_pct",
    "temp_c",
    "power_w",
    "power_limit_w",
)


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One compute process on a GPU: host PID, name (full path) and GPU memory in MiB;
    ``ancestors``: its parent's PID, the grandparent's... (read where the source runs on the
    GPUs' machine; empty where unknown), so a server's worker maps to the server."""

    pid: int
    name: str
    used_mib: float | None
    ancestors: tuple[int, ...] = ()


def parse_ps_parents(text: str) -> dict[int, int]:
    """``{pid: parent pid}`` from ``ps -e -o pid=,ppid=`` output (two integers a line;
    other lines are skipped)."""
    parents: dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            parents[int(fields[0])] = int(fields[1])
    return parents


def ancestors_of(pid: int, parent_of: Callable[[int], int | None], limit: int = 32) -> tuple[int, ...]:
    """``pid``'s parent, grandparent... as ``parent_of`` (PID → parent PID, None where
    unknown: ``parse_ps_parents(text).get``, a ``/proc`` reader) tells, up to (not including)
    PID 1; at most ``limit`` PIDs (a cycle in a torn read ends the chain)."""
    chain: list[int] = []
    parent = parent_of(pid)
    while parent is not None and parent > 1 and parent not in chain and len(chain) < limit:
        chain.append(parent)
        parent = parent_of(parent)
    return tuple(chain)


def server_of_process(process: GpuProcess, server_pids: Mapping[int, str]) -> str | None:
    """The server ``process`` belongs to: the one whose PID (in ``server_pids``, PID →
    server name, servers of the GPU's host only) is the process's own or an ancestor's;
    None for a process of no known server."""
    for pid in (process.pid, *process.ancestors):
        name = server_pids.get(pid)
        if name is not None:
            return name
    return None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU.

    Units: memory in MiB (``used`` with NVML v2 semantics, i.e. excluding the driver's
    ``reserved`` memory, so it matches ``nvidia-smi``'s ``memory.used``), utilization in %
    (``util_mem_pct`` is memory *bandwidth* utilization, not occupancy), temperature in °C,
    power in W, SM clock in MHz. ``error`` is set for a GPU that answered with an error
    (e.g. "GPU is lost") while other GPUs of the host keep reporting.
    """

    index: int
    uuid: str
    name: str
    mem_used_mib: float | None = None
    mem_reserved_mib: float | None = None
    mem_total_mib: float | None = None
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    processes: tuple[GpuProcess, ...] | None = None
    error: str | None = None

    @property
    def mem_used_pct(self) -> float | None:
        """Memory occupancy in % of total (used + reserved counts as taken), or None."""
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * (self.mem_used_mib + (self.mem_reserved_mib or 0.0)) / self.mem_total_mib

    @property
    def mem_free_mib(self) -> float | None:
        """Free memory in MiB (total - used - reserved), or None when unknown."""
        if self.mem_used_mib is None or self.mem_total_mib is None:
            return None
        return self.mem_total_mib - self.mem_used_mib - (self.mem_reserved_mib or 0.0)

    def to_json(self, host: str) -> dict:
        """The ``optui gpus --json`` object: keys :data:`GPU_JSON_KEYS`, null where unknown."""
        data = asdict(self)
        data["host"] = host
        return {key: data[key] for key in GPU_JSON_KEYS}


class HostStatus(enum.StrEnum):
    """Freshness of a host's GPU data."""

    CONNECTING = "connecting"
    LIVE = "live"
    STALE = "stale"  # no fresh data for 3 intervals
    LOST = "lost"  # source failed; reconnecting
    NO_GPU = "no_gpu"  # no driver / NVML on this host
    ERROR = "error"  # driver error (mismatch, NVML failure)


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """The GPUs of one host at one moment.

    ``taken_at`` is local ``time.time()`` of the reading; ``error`` is a human-readable
    message for the whole host (e.g. "NVML: Driver Not Loaded").
    """

    host: str
    samples: tuple[GpuSample, ...] = ()
    taken_at: float = 0.0
    status: HostStatus = HostStatus.CONNECTING
    error: str | None = None
    source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def mem_used_mib(self) -> float | None:
        """Sum of used MiB over GPUs that report it (None if none does)."""
        values = [s.mem_used_mib for s in self.samples if s.mem_used_mib is not None]
        return sum(values) if values else None

    @property
    def mem_total_mib(self) -> float | None:
        """Sum of total MiB over GPUs that report it (None if none does)."""
        values = [s.mem_total_mib for s in self.samples if s.mem_total_mib is not None]
        return sum(values) if values else None

    @property
    def util_gpu_pct(self) -> float | None:
        """Mean GPU utilization in % over GPUs that report it (None if none does)."""
        values = [s.util_gpu_pct for s in self.samples if s.util_gpu_pct is not None]
        return sum(values) / len(values) if values else None
