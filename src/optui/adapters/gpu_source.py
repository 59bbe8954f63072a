"""The interface every GPU source implements (NVML, nvidia-smi stream, demo rack).

A source belongs to one host. The session calls :meth:`GpuSource.read` once per refresh
interval; ``read`` never raises for GPU or driver trouble: it returns a
:class:`~optui.core.gpu.samples.HostSnapshot` whose ``status``/``error`` (or a sample's ``error``)
say what is wrong, so one broken host never stops the others.
"""

from __future__ import annotations

from typing import Protocol

from optui.core.gpu.samples import HostSnapshot


class GpuSource(Protocol):
    """A host's GPU reader (see module docstring)."""

    host: str

    async def read(self) -> HostSnapshot:
        """One reading of every GPU of the host. Must not block the event loop (blocking
        calls go to a thread) and must not raise for GPU/driver errors."""
        ...

    async def close(self) -> None:
        """Release the source (threads, subprocesses, NVML). Idempotent."""
        ...


class NoGpuSource:
    """A host configured with ``gpu_source = "none"``: always an empty NO_GPU snapshot."""

    def __init__(self, host: str, reason: str = "no GPU source configured") -> None:
        self.host = host
        self.reason = reason

    async def read(self) -> HostSnapshot:
        import time

        from optui.core.gpu.samples import HostStatus

        return HostSnapshot(self.host, (), time.time(), HostStatus.NO_GPU, self.reason, "none")

    async def close(self) -> None:
        return None
