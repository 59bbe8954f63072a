"""A remote host's GPUs: one long-running ``nvidia-smi ... -lms N`` channel over SSH.

The stream (``--query-gpu=timestamp,index,... --format=csv,noheader,nounits -lms N``) prints
one block of rows per tick (rows of a tick share their timestamp); it is parsed as it
arrives (reads never align with lines: bytes go through the chunked line splitter). A tick
is published as soon as it has one row per known GPU (so a change reaches the screen within
one interval), else when the next tick starts. Processes are polled separately every
``procs_every_s`` with a timeout (``--query-compute-apps`` prints nothing when idle, so it is
never streamed), with the host's ``ps -e -o pid=,ppid=`` when there are any, so each process
carries its ancestors (the GPU panel names the server a worker belongs to). Driver errors (``couldn't communicate with the NVIDIA driver``, ``No devices
were found``) become the host's error.

Freshness: ``read()`` reports ``live`` while ticks arrive, ``stale`` (with the age) after 3
intervals without one, ``lost`` while the SSH connection is being re-established, and
``untrusted``/``failed`` connection problems as ``error``. The stream restarts by itself.
Formats: ``../shared/reference/gpu_monitors.md`` section 3; parser: :mod:`optui.core.gpu.nvsmi`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

from optui.adapters.aio import within
from optui.adapters.ssh import SshError, SshHost, SshState
from optui.core.gpu.nvsmi import (
    DEFAULT_APPS_FIELDS,
    DEFAULT_QUERY_FIELDS,
    nvidia_smi_argv,
    parse_compute_apps,
    snapshot_from_nvidia_smi,
)
from optui.core.gpu.samples import GpuProcess, HostSnapshot, HostStatus, ancestors_of, parse_ps_parents
from optui.core.text.textstream import LineSplitter

STALE_AFTER_INTERVALS = 3


class SshNvidiaSmiSource:
    """GpuSource for an SSH host (see module doc). ``nvidia_smi`` is the remote program."""

    def __init__(self, host: str, ssh: SshHost, *, interval_s: float = 1.0, nvidia_smi: str = "nvidia-smi",
                 procs_every_s: float = 5.0) -> None:
        self.host = host
        self.ssh = ssh
        self.interval_s = interval_s
        self.nvidia_smi = nvidia_smi
        self.procs_every_s = procs_every_s
        self.fields = DEFAULT_QUERY_FIELDS
        self._latest: HostSnapshot | None = None
        self._received_at: float | None = None  # monotonic time of the last tick
        self._error: str | None = None
        self._procs: dict | None = None
        self._task: asyncio.Task | None = None
        self._procs_task: asyncio.Task | None = None
        self.ticks = 0
        self.restarts = 0
        #: called after each new tick (the poller reads at once instead of at its interval)
        self.on_fresh: Callable[[], None] | None = None

    def _argv(self) -> list[str]:
        argv = nvidia_smi_argv(self.fields, loop_ms=int(self.interval_s * 1000))
        return [self.nvidia_smi, *argv[1:]]

    # ---------------------------------------------------------- GpuSource
    async def read(self) -> HostSnapshot:
        if self._task is None:
            self.ssh.start()
            self._task = asyncio.create_task(self._stream_forever(), name=f"smi-{self.host}")
            self._procs_task = asyncio.create_task(self._poll_procs(), name=f"smi-procs-{self.host}")
        return self.snapshot()

    def snapshot(self) -> HostSnapshot:
        """The latest tick with its freshness (never blocks)."""
        now = time.time()
        latest = self._latest
        if self.ssh.state in (SshState.UNTRUSTED, SshState.FAILED):
            base = latest or HostSnapshot(self.host, source="nvidia-smi")
            return replace(base, status=HostStatus.ERROR, error=f"ssh {self.ssh.state.value}: {self.ssh.error}", taken_at=base.taken_at)
        if latest is None:
            if self.ssh.state is SshState.LOST:
                return HostSnapshot(self.host, (), now, HostStatus.LOST, self._lost_text(), "nvidia-smi")
            return HostSnapshot(self.host, (), now, HostStatus.CONNECTING, self._error, "nvidia-smi")
        if latest.status is not HostStatus.LIVE:
            return latest
        age = time.monotonic() - (self._received_at or 0.0)
        if self.ssh.state is SshState.LOST:
            return replace(latest, status=HostStatus.LOST, error=f"{self._lost_text()}; data {age:.0f}s old")
        if age > STALE_AFTER_INTERVALS * self.interval_s:
            return replace(latest, status=HostStatus.STALE, error=f"no fresh data for {age:.0f}s")
        return latest

    def _lost_text(self) -> str:
        retry = self.ssh.next_retry_at
        when = f", retry in {max(0.0, retry - time.time()):.0f}s" if retry else ""
        return f"connection lost ({self.ssh.error or 'reconnecting'}){when}"

    async def close(self) -> None:
        for task in (self._task, self._procs_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._task = self._procs_task = None

    # ---------------------------------------------------------- streaming
    async def _stream_forever(self) -> None:
        while True:
            try:
                await self._stream_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure (ssh, parse, channel) restarts the stream
                self._error = str(exc)
            self.restarts += 1
            await asyncio.sleep(min(5.0, max(0.5, self.interval_s)))

    async def _stream_once(self) -> None:
        process = await self.ssh.create_process(self._argv(), timeout_s=max(10.0, 3 * self.interval_s))
        splitter = LineSplitter()
        tick: list[str] = []
        tick_ts: str | None = None
        n_gpus: int | None = None
        try:
            while True:
                data = await process.stdout.read(65536)
                if not data:
                    break
                for line in splitter.feed(data).lines:
                    if not line.strip():
                        continue
                    ts = line.split(",", 1)[0].strip() if "," in line else None
                    if ts is None or not ts[:1].isdigit():  # an error line, not a row
                        self._publish_text(line)
                        tick, tick_ts = [], None
                        continue
                    if tick and ts != tick_ts:
                        n_gpus = len(tick)
                        self._publish_rows(tick)
                        tick = []
                    tick_ts = ts
                    tick.append(line)
                    if n_gpus is not None and len(tick) >= n_gpus:
                        self._publish_rows(tick)
                        tick, tick_ts = [], None
            if tick:
                self._publish_rows(tick)
            await within(process.wait(), 5.0)
            rc = process.exit_status
            self._error = f"nvidia-smi exited (rc {rc})"
        finally:
            process.close()

    def _publish_rows(self, rows: list[str]) -> None:
        self._publish_text("\n".join(rows))

    def _publish_text(self, text: str) -> None:
        snap = snapshot_from_nvidia_smi(self.host, text, self.fields, taken_at=time.time())
        if self._procs is not None and snap.samples:
            procs = self._procs
            snap = replace(snap, samples=tuple(replace(s, processes=procs.get(s.uuid, ())) for s in snap.samples))
        self._latest = replace(snap, source="nvidia-smi")
        if snap.status is HostStatus.LIVE:
            self._received_at = time.monotonic()
            self._error = None
            self.ticks += 1
        if self.on_fresh is not None:
            self.on_fresh()

    async def _poll_procs(self) -> None:
        argv = [self.nvidia_smi, f"--query-compute-apps={','.join(DEFAULT_APPS_FIELDS)}", "--format=csv,noheader,nounits"]
        while True:
            await asyncio.sleep(self.procs_every_s)
            if self.ssh.state is not SshState.LIVE:
                continue
            try:
                done = await self.ssh.run(argv, timeout_s=5.0)
                if done.returncode == 0:
                    self._procs = await self._with_ancestors(parse_compute_apps(done.stdout, DEFAULT_APPS_FIELDS))
            except (SshError, ValueError):
                continue

    async def _with_ancestors(self, procs: dict[str, tuple[GpuProcess, ...]]) -> dict[str, tuple[GpuProcess, ...]]:
        """``procs`` with each process's ancestors from the host's ``ps`` (a server's TP
        workers are its children); as they are when ``ps`` fails."""
        if not any(procs.values()):
            return procs
        try:
            done = await self.ssh.run(["ps", "-e", "-o", "pid=,ppid="], timeout_s=5.0)
        except SshError:
            return procs
        parents = parse_ps_parents(done.stdout) if done.returncode == 0 else {}
        if not parents:
            return procs
        return {uuid: tuple(replace(p, ancestors=ancestors_of(p.pid, parents.get)) for p in listed)
                for uuid, listed in procs.items()}
