"""Local GPUs through NVML (nvidia-ml-py, ``import pynvml``): a :class:`GpuSource`.

Why it looks like this (reference ``gpu_monitors.md`` §2, §6.2):

- ``pynvml`` is imported and ``nvmlInit`` (~14 ms) runs once, lazily, in one dedicated worker
  thread; the module import stays free of pynvml (~30 ms) so the first frame is not delayed.
- Every NVML call runs on that one thread (``loop.run_in_executor``). Calls take microseconds
  until the driver wedges (GPU off the bus, Xid); then they block in the kernel and cannot be
  cancelled. So :meth:`NvmlGpuSource.read` never waits longer than ``stale_after_s``, never
  queues a second call while one is in flight (it returns the last snapshot marked ``STALE``),
  and the thread is a daemon so a stuck call cannot hold up interpreter exit.
- Memory uses ``nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)``: v2 ``used`` excludes the
  driver's reserved memory (616 MiB on an H200) and matches ``nvidia-smi``'s ``memory.used``.
  Drivers < R510 lack v2 (``FunctionNotFound``): then v1 is used (its ``used`` includes the
  reserved memory), ``mem_reserved_mib`` is None and ``extra["memory_api"]`` says ``"v1"``.
- Capability probe (btop's pattern): a call that raises ``NotSupported`` once for a GPU (fan and
  power on some boards, utilization under MIG, memory on GB10) is never made again; the field
  stays None. ``GpuIsLost``/``Unknown`` on one GPU -> that sample's ``error``; others go on.
- Processes (``nvmlDeviceGetComputeRunningProcesses``, ``_v2`` on old drivers) are refreshed
  every ``process_every`` reads; the previous list is reused in between. Each process carries
  its ancestors' PIDs from psutil (:func:`process_ancestors`): a server's TP workers are its
  children, and the GPU panel names the server they belong to.
- ``close()`` lets the worker finish, then calls ``nvmlShutdown`` on it: shutting NVML down
  under a running call crashed nvitop on exit (nvitop#222). A wedged worker gets no shutdown.

Units: memory MiB (bytes / 2**20, rounded to 0.1), utilization %, temperature °C, power W
(NVML reports mW), SM clock MHz.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from dataclasses import dataclass, field, replace
from typing import Any

from optui.adapters.aio import within
from optui.adapters.worker_thread import SingleThreadExecutor
from optui.core.gpu.samples import GpuProcess, GpuSample, HostSnapshot, HostStatus, ancestors_of

# NVML return codes (nvml.h); the module's NVML_ERROR_* constants win when present.
_CODES = {
    "NOT_SUPPORTED": 3, "NO_PERMISSION": 4, "DRIVER_NOT_LOADED": 9, "LIBRARY_NOT_FOUND": 12,
    "FUNCTION_NOT_FOUND": 13, "GPU_IS_LOST": 15, "LIB_RM_VERSION_MISMATCH": 18, "UNKNOWN": 999,
}
_NOT_AVAILABLE = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE for usedGpuMemory (ULLONG_MAX)
_PROCESS_FUNCTIONS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2")


@dataclass(slots=True)
class _Device:
    """Cached per-GPU state, touched only by the worker thread."""

    index: int
    handle: Any = None
    name: str = ""
    uuid: str = ""
    total_mib: float | None = None
    unsupported: set[str] = field(default_factory=set)
    processes: tuple[GpuProcess, ...] | None = None
    error: str | None = None  # why there is no handle
    retry_at: float = 0.0


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _mib(value: Any) -> float | None:
    if value is None or value >= _NOT_AVAILABLE:
        return None
    return round(value / 2**20, 1)


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000, 2)


def _describe(exc: BaseException) -> str:
    try:
        return str(exc) or type(exc).__name__
    except Exception:  # noqa: BLE001 - pynvml's __str__ calls into the library
        return type(exc).__name__


class NvmlGpuSource:
    """The local machine's GPUs via NVML (see module docstring). Implements ``GpuSource``.

    ``stale_after_s``: longest :meth:`read` waits for the worker before returning a ``STALE``
    snapshot; ``process_every``: process lists are read every Nth read; ``retry_after_s``: wait
    before retrying a failed ``nvmlInit`` (driver/library mismatch, no driver) or a GPU handle.
    """

    source_name = "nvml"

    def __init__(self, host: str = "local", *, stale_after_s: float = 3.0, process_every: int = 3,
                 retry_after_s: float = 30.0, close_timeout_s: float = 2.0) -> None:
        self.host = host
        self.stale_after_s = stale_after_s
        self.process_every = max(1, process_every)
        self.retry_after_s = retry_after_s
        self.close_timeout_s = close_timeout_s
        self._executor = SingleThreadExecutor(f"optui-nvml-{host}")
        self._pending: Any = None  # asyncio or concurrent future of the read in flight
        self._pending_since = 0.0
        self._last: HostSnapshot | None = None
        self._closed = False
        # worker-thread state
        self._nvml: Any = None
        self._ready = False  # nvmlInit succeeded and nvmlShutdown is owed
        self._devices: list[_Device] = []
        self._init_failure: HostSnapshot | None = None
        self._init_failed_at = 0.0
        self._memory_api = "v2"
        self._process_fn = _PROCESS_FUNCTIONS[0]
        self._names: dict[int, str] = {}
        self._reads = 0
        self._extra: dict[str, Any] = {}

    # --- event-loop side ---------------------------------------------------------------------

    async def read(self) -> HostSnapshot:
        """One reading of every GPU; never raises, never blocks the loop (see module doc)."""
        if (early := self._closed_or_busy()) is not None:
            return early
        future = asyncio.get_running_loop().run_in_executor(self._executor, self._read_blocking)
        self._track(future)
        try:
            return await within(asyncio.shield(future), self.stale_after_s)
        except TimeoutError:
            return self._stale()
        except Exception as exc:  # noqa: BLE001 - a source must not raise into the session
            return self._failed(exc)

    async def close(self) -> None:
        """Stop the worker; ``nvmlShutdown`` runs only once the worker's last call returned."""
        future = self._begin_close()
        if future is None:
            return
        try:
            await within(asyncio.wrap_future(future), self.close_timeout_s)
        except TimeoutError:
            pass  # wedged in the driver: the daemon thread is abandoned and NVML left alone

    # --- blocking side (CLI) ---------------------------------------------------------------------

    def read_once_sync(self, timeout_s: float = 10.0) -> HostSnapshot:
        """Blocking :meth:`read` for the CLI: waits up to ``timeout_s`` for the worker."""
        if (early := self._closed_or_busy()) is not None:
            return early
        future = self._executor.submit(self._read_blocking)
        self._track(future)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            return self._stale()
        except Exception as exc:  # noqa: BLE001
            return self._failed(exc)

    def close_sync(self, timeout_s: float | None = None) -> bool:
        """Blocking :meth:`close`; True if the worker finished (and NVML was shut down)."""
        future = self._begin_close()
        if future is None:
            return False
        try:
            future.result(self.close_timeout_s if timeout_s is None else timeout_s)
            return True
        except TimeoutError:
            future.cancel()
            return False

    # --- shared helpers ---------------------------------------------------------------------------

    def _closed_or_busy(self) -> HostSnapshot | None:
        """The answer when no new read may start: closed, or the last read still in flight."""
        if self._closed:
            return self._snapshot(HostStatus.LOST, error="GPU source is closed")
        if self._pending is not None and not self._pending.done():
            return self._stale()
        return None

    def _failed(self, exc: BaseException) -> HostSnapshot:
        return self._snapshot(HostStatus.ERROR, error=f"NVML read failed: {_describe(exc)}")

    def _track(self, future: Any) -> None:
        self._pending, self._pending_since = future, time.monotonic()
        future.add_done_callback(self._remember)

    def _remember(self, future: Any) -> None:
        if not future.cancelled() and future.exception() is None:
            self._last = future.result()

    def _begin_close(self) -> concurrent.futures.Future | None:
        if self._closed:
            return None
        self._closed = True
        # queued behind any read in flight: the single thread guarantees NVML is idle when it runs
        future = self._executor.submit(self._shutdown_nvml)
        self._executor.shutdown(wait=False)
        return future

    def _stale(self) -> HostSnapshot:
        waited = time.monotonic() - self._pending_since
        message = f"NVML has not answered for {waited:.1f} s (driver not responding?)"
        if self._last is None:
            return self._snapshot(HostStatus.STALE, error=message, extra={"age_s": None})
        age = round(time.time() - self._last.taken_at, 1)
        return replace(self._last, status=HostStatus.STALE, error=message, extra={**self._last.extra, "age_s": age})

    def _snapshot(self, status: HostStatus, samples: tuple[GpuSample, ...] = (), error: str | None = None,
                  extra: dict | None = None) -> HostSnapshot:
        return HostSnapshot(self.host, samples, time.time(), status, error, self.source_name, dict(extra or {}))

    # --- worker thread ----------------------------------------------------------------------------

    def _read_blocking(self) -> HostSnapshot:
        try:
            failure = self._ensure_init()
            if failure is not None:
                return failure
            with_processes = self._reads % self.process_every == 0
            self._reads += 1
            samples = tuple(self._read_device(device, with_processes) for device in self._devices)
        except Exception as exc:  # noqa: BLE001 - whatever the driver does, report it
            return self._failed(exc)
        extra = {**self._extra, "memory_api": self._memory_api}
        if not samples:
            return self._snapshot(HostStatus.NO_GPU, error="NVML found no GPUs on this machine", extra=extra)
        if all(s.error for s in samples):
            return self._snapshot(HostStatus.ERROR, samples, f"every GPU failed: {samples[0].error}", extra)
        return self._snapshot(HostStatus.LIVE, samples, extra=extra)

    def _code(self, exc: BaseException, name: str) -> bool:
        """True if ``exc`` is the NVML error ``NVML_ERROR_<name>``."""
        nvml = self._nvml
        return getattr(exc, "value", None) == getattr(nvml, f"NVML_ERROR_{name}", _CODES[name])

    def _ensure_init(self) -> HostSnapshot | None:
        """None once NVML is up; else the (cached, re-dated) failure snapshot."""
        if self._ready:
            return None
        if self._init_failure is not None and time.monotonic() - self._init_failed_at < self.retry_after_s:
            return replace(self._init_failure, taken_at=time.time())
        try:
            import pynvml  # lazily: ~30 ms, and absent on machines without nvidia-ml-py
        except ImportError as exc:
            return self._init_failed(HostStatus.ERROR, f"nvidia-ml-py is not installed (pip install nvidia-ml-py): {exc}")
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001
            return self._init_failed(*self._init_error(exc))
        self._ready = True
        try:
            self._extra = {"driver_version": _text(pynvml.nvmlSystemGetDriverVersion())}
        except Exception:  # noqa: BLE001 - nice to have
            self._extra = {}
        try:
            self._devices = [self._open(_Device(i)) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:  # noqa: BLE001
            self._shutdown_nvml()
            return self._init_failed(HostStatus.ERROR, f"NVML could not list GPUs: {_describe(exc)}")
        self._init_failure = None
        return None

    def _init_error(self, exc: BaseException) -> tuple[HostStatus, str]:
        text = _describe(exc)
        if self._code(exc, "LIBRARY_NOT_FOUND") or self._code(exc, "DRIVER_NOT_LOADED"):
            return HostStatus.NO_GPU, f"No NVIDIA driver/NVML on this machine ({text})"
        retry = f"retrying every {self.retry_after_s:g} s"
        if self._code(exc, "LIB_RM_VERSION_MISMATCH"):
            return HostStatus.ERROR, (f"NVIDIA driver/library version mismatch ({text}): the driver was upgraded "
                                      f"without a reboot; reboot or reload the nvidia kernel modules ({retry})")
        return HostStatus.ERROR, f"NVML initialization failed ({text}; {retry})"

    def _init_failed(self, status: HostStatus, message: str) -> HostSnapshot:
        self._nvml = None
        self._init_failure = self._snapshot(status, error=message)
        self._init_failed_at = time.monotonic()
        return self._init_failure

    def _shutdown_nvml(self) -> None:
        nvml, ready = self._nvml, self._ready
        self._nvml, self._ready, self._devices = None, False, []
        if ready:
            try:
                nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - nothing left to do about it
                pass

    def _device_error(self, exc: BaseException) -> str:
        if self._code(exc, "GPU_IS_LOST"):
            return "GPU is lost"
        if self._code(exc, "UNKNOWN"):
            return f"GPU is lost ({_describe(exc)})"
        return f"NVML: {_describe(exc)}"

    def _open(self, device: _Device) -> _Device:
        """Get the handle and static fields (name, uuid); on failure remember why and when to retry."""
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(device.index)
            device.name = _text(nvml.nvmlDeviceGetName(handle))
            device.uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            device.handle, device.error = handle, None
        except nvml.NVMLError as exc:
            device.error = self._device_error(exc)
            device.retry_at = time.monotonic() + self.retry_after_s
        return device

    def _read_device(self, device: _Device, with_processes: bool) -> GpuSample:
        if device.handle is None and time.monotonic() >= device.retry_at:
            self._open(device)
        if device.handle is None:
            return GpuSample(device.index, device.uuid, device.name, error=device.error)
        nvml, handle = self._nvml, device.handle
        try:
            used, reserved, total = self._memory(device)
            util = self._probe(device, "utilization", nvml.nvmlDeviceGetUtilizationRates, handle)
            temp = self._probe(device, "temperature", nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
            power = self._probe(device, "power", nvml.nvmlDeviceGetPowerUsage, handle)
            limit = self._probe(device, "power_limit", nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            clock = self._probe(device, "sm_clock", nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
            if with_processes:
                device.processes = self._processes(device)
        except nvml.NVMLError as exc:
            return GpuSample(device.index, device.uuid, device.name, mem_total_mib=device.total_mib,
                             error=self._device_error(exc))
        return GpuSample(
            index=device.index, uuid=device.uuid, name=device.name,
            mem_used_mib=used, mem_reserved_mib=reserved, mem_total_mib=total,
            util_gpu_pct=None if util is None else float(util.gpu),
            util_mem_pct=None if util is None else float(util.memory),
            temp_c=None if temp is None else float(temp),
            power_w=_watts(power), power_limit_w=_watts(limit),
            sm_clock_mhz=None if clock is None else float(clock),
            processes=device.processes,
        )

    def _probe(self, device: _Device, key: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, or None when the GPU cannot answer it; raises for a lost GPU."""
        if key in device.unsupported:
            return None
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            return self._absent(device, key, exc)

    def _absent(self, device: _Device, key: str, exc: BaseException) -> None:
        if self._code(exc, "GPU_IS_LOST") or self._code(exc, "UNKNOWN"):
            raise exc
        if self._code(exc, "NOT_SUPPORTED") or self._code(exc, "FUNCTION_NOT_FOUND"):
            device.unsupported.add(key)  # permanent: never asked again
        return None  # NoPermission and transient errors: just no value this time

    def _memory(self, device: _Device) -> tuple[float | None, float | None, float | None]:
        """(used, reserved, total) in MiB; v2 with a one-way fallback to v1 (see module doc)."""
        nvml, info = self._nvml, None
        if "memory" in device.unsupported:
            return None, None, None
        if self._memory_api == "v2":
            try:
                info = nvml.nvmlDeviceGetMemoryInfo(device.handle, version=nvml.nvmlMemory_v2)
            except (AttributeError, TypeError):  # nvidia-ml-py older than 11.510.69
                self._memory_api = "v1"
            except nvml.NVMLError as exc:
                if not self._code(exc, "FUNCTION_NOT_FOUND"):
                    self._absent(device, "memory", exc)
                    return None, None, None
                self._memory_api = "v1"  # driver < R510
        if info is None:
            info = self._probe(device, "memory", nvml.nvmlDeviceGetMemoryInfo, device.handle)
            if info is None:
                return None, None, None
        if not info.total:  # unified memory (GB10, Jetson): no dedicated framebuffer
            device.unsupported.add("memory")
            return None, None, None
        if device.total_mib is None:
            device.total_mib = _mib(info.total)
        reserved = _mib(info.reserved) if self._memory_api == "v2" else None
        return _mib(info.used), reserved, device.total_mib

    def _processes(self, device: _Device) -> tuple[GpuProcess, ...] | None:
        if "processes" in device.unsupported:
            return None
        nvml = self._nvml
        try:
            found = getattr(nvml, self._process_fn)(device.handle)
        except nvml.NVMLError as exc:
            if self._code(exc, "FUNCTION_NOT_FOUND") and self._process_fn != _PROCESS_FUNCTIONS[-1]:
                self._process_fn = _PROCESS_FUNCTIONS[-1]  # driver < 510.39: no _v3 symbol
                return self._processes(device)
            self._absent(device, "processes", exc)
            return None
        return tuple(GpuProcess(p.pid, self._process_name(p.pid), _mib(p.usedGpuMemory), process_ancestors(p.pid))
                     for p in found)

    def _process_name(self, pid: int) -> str:
        """Full path of ``pid`` from NVML, cached; "" when NVML cannot tell (another PID namespace)."""
        name = self._names.get(pid)
        if name is None:
            try:
                name = _text(self._nvml.nvmlSystemGetProcessName(pid))
            except Exception:  # noqa: BLE001 - NotFound / NoPermission: name unknown
                return ""
            if len(self._names) > 4096:
                self._names.clear()
            self._names[pid] = name
        return name


def process_ancestors(pid: int) -> tuple[int, ...]:
    """``pid``'s parent, grandparent... up to (not including) PID 1, from psutil (NVML
    reads the GPUs of this machine, whose PIDs ``/proc`` knows); what cannot be read ends
    the chain (another PID namespace, a process gone)."""
    from optui.adapters.proc import parent_pid

    return ancestors_of(pid, parent_pid)
