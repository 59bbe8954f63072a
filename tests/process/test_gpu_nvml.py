"""NvmlGpuSource and ``optui gpus``: the real no-GPU path of this machine, and the NVML mapping
against a small fake ``pynvml`` put in ``sys.modules`` (the source imports it lazily)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import types
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from optui.adapters.gpu_nvml import NvmlGpuSource
from optui.cli import cli
from optui.core.gpu.samples import GPU_JSON_KEYS, HostStatus

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20
H200_TOTAL = 143771 * MIB
H200_RESERVED = 644_939_776  # measured: 615.06 MiB
CODES = {"NOT_SUPPORTED": 3, "NO_PERMISSION": 4, "DRIVER_NOT_LOADED": 9, "LIBRARY_NOT_FOUND": 12,
         "FUNCTION_NOT_FOUND": 13, "GPU_IS_LOST": 15, "LIB_RM_VERSION_MISMATCH": 18, "UNKNOWN": 999}


def run_optui(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "optui", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=60)


# --- this machine: no NVIDIA driver ------------------------------------------------------------


def _real_nvml_missing() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001
        return True
    pynvml.nvmlShutdown()
    return False


no_gpu_here = pytest.mark.skipif(not _real_nvml_missing(), reason="this machine has a working NVML")


@no_gpu_here
async def test_read_without_driver_is_no_gpu():
    source = NvmlGpuSource()
    snap = await source.read()
    assert snap.status is HostStatus.NO_GPU and snap.samples == () and snap.source == "nvml"
    assert snap.error.startswith("No NVIDIA driver/NVML on this machine (")
    assert (await source.read()).status is HostStatus.NO_GPU  # cached until the retry interval
    await source.close()
    assert (await source.read()).status is HostStatus.LOST


@no_gpu_here
def test_cli_json_without_driver():
    done = run_optui("gpus", "--json")
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["host"] == "local" and out["error"].startswith("No NVIDIA driver/NVML on this machine")
    assert "Traceback" not in done.stderr
    plain = run_optui("gpus", "--host", "box7")
    assert plain.returncode == 1 and "optui: error: No NVIDIA driver" in plain.stderr and "Traceback" not in plain.stderr


def test_imports_stay_light():
    # pynvml only inside the worker; `optui gpus` needs no config, hence no pydantic (a GPU box
    # with only click + nvidia-ml-py installed must still run it)
    code = ("import sys; from click.testing import CliRunner; import optui.adapters.gpu_nvml; from optui.cli import cli; "
            "r = CliRunner().invoke(cli, ['gpus', '--from-file', 'tests/fixtures/gpu/query-gpu-load.csv']); "
            "print(r.exit_code, 'pynvml' in sys.modules, 'pydantic' in sys.modules, 'optui.config' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=60)
    assert done.stdout.split() == ["0", "False", "False", "False"], done.stderr


# --- CLI on saved nvidia-smi output ----------------------------------------------------------------


def test_cli_from_file_json():
    done = run_optui("gpus", "--from-file", "tests/fixtures/gpu/query-gpu-load.csv", "--json")
    assert done.returncode == 0, done.stderr
    [gpu] = json.loads(done.stdout)
    assert tuple(gpu) == GPU_JSON_KEYS
    assert (gpu["mem_used_mib"], gpu["mem_reserved_mib"], gpu["mem_total_mib"]) == (41971, 616, 143771)
    assert (gpu["util_gpu_pct"], gpu["util_mem_pct"], gpu["host"]) == (100, 23, "local")


def test_cli_from_file_errors():
    done = run_optui("gpus", "--from-file", "tests/fixtures/gpu/driver-not-loaded.txt", "--json")
    assert done.returncode == 1 and "couldn't communicate" in json.loads(done.stdout)["error"]
    missing = run_optui("gpus", "--from-file", "no/such.csv", "--json", "--host", "h1")
    assert missing.returncode == 1 and json.loads(missing.stdout) == {
        "error": "cannot read no/such.csv: No such file or directory", "host": "h1"}


def test_cli_from_file_table_with_na_and_fields():
    fields = "index,uuid,name,memory.used,memory.total,utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit"
    result = CliRunner().invoke(cli, ["gpus", "--from-file", "tests/fixtures/gpu/mig-nounits.csv", "--fields", fields])
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()[1:3]
    assert header.split()[:3] == ["GPU", "NAME", "USED"]
    assert row.split() == ["0", "NVIDIA", "H200", "16959", "n/a", "143771", "n/a", "n/a", "36", "295/700"]


# --- fake pynvml ----------------------------------------------------------------------------------


class FakeNvml:
    """Enough of nvidia-ml-py for NvmlGpuSource. ``gpus``: dicts of per-GPU values; a GPU's
    ``fail`` maps a function name to an NVML error name; ``block`` maps one to an Event to wait on."""

    def __init__(self, gpus: list[dict], *, v2: bool = True, procs_v3: bool = True, init_errors=()) -> None:
        self.gpus = gpus
        self.v2 = v2
        self.procs_v3 = procs_v3
        self.init_errors = list(init_errors)
        self.calls: Counter = Counter()

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml")

        class NVMLError(Exception):
            def __init__(self, value: int) -> None:
                super().__init__(value)
                self.value = value

            def __str__(self) -> str:
                return {v: k for k, v in CODES.items()}.get(self.value, "?").replace("_", " ").title()

        mod.NVMLError = NVMLError
        for name, code in CODES.items():
            setattr(mod, f"NVML_ERROR_{name}", code)
        mod.NVML_TEMPERATURE_GPU, mod.NVML_CLOCK_SM, mod.nvmlMemory_v2 = 0, 1, 33554472
        self.error = NVMLError
        for name in dir(self):
            if name.startswith("nvml"):
                setattr(mod, name, getattr(self, name))
        if not self.procs_v3:
            mod.nvmlDeviceGetComputeRunningProcesses = self._missing("nvmlDeviceGetComputeRunningProcesses")
        return mod

    def _missing(self, name):
        def fn(*args):
            self.calls[name] += 1
            raise self.error(CODES["FUNCTION_NOT_FOUND"])
        return fn

    def _gpu(self, fn: str, handle) -> dict:
        self.calls[fn] += 1
        gpu = self.gpus[handle.index]
        if fn in gpu.get("block", {}):
            gpu["block"][fn].wait(10)
        if fn in gpu.get("fail", {}):
            raise self.error(CODES[gpu["fail"][fn]])
        return gpu

    def nvmlInit(self):
        self.calls["nvmlInit"] += 1
        if self.init_errors:
            raise self.error(CODES[self.init_errors.pop(0)])

    def nvmlShutdown(self):
        self.calls["nvmlShutdown"] += 1

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        handle = SimpleNamespace(index=index)
        self._gpu("nvmlDeviceGetHandleByIndex", handle)
        return handle

    def nvmlDeviceGetName(self, h):
        return self._gpu("nvmlDeviceGetName", h).get("name", "NVIDIA H200")

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h.index:08d}"

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        gpu = self._gpu("nvmlDeviceGetMemoryInfo" + ("_v2" if version else ""), h)
        total, used, reserved = gpu.get("total", H200_TOTAL), gpu.get("used", 0), gpu.get("reserved", H200_RESERVED)
        if version:
            if not self.v2:
                raise self.error(CODES["FUNCTION_NOT_FOUND"])
            return SimpleNamespace(version=version, total=total, reserved=reserved, used=used,
                                   free=total - used - reserved)
        return SimpleNamespace(total=total, used=used + reserved, free=total - used - reserved)

    def nvmlDeviceGetUtilizationRates(self, h):
        gpu, mem = self._gpu("nvmlDeviceGetUtilizationRates", h).get("util", (100, 23))
        return SimpleNamespace(gpu=gpu, memory=mem)

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == 0
        return self._gpu("nvmlDeviceGetTemperature", h).get("temp", 56)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._gpu("nvmlDeviceGetPowerUsage", h).get("power_mw", 683_100)

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", h).get("limit_mw", 700_000)

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == 1
        return self._gpu("nvmlDeviceGetClockInfo", h).get("sm_mhz", 1410)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return self._procs("nvmlDeviceGetComputeRunningProcesses", h)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h):
        return self._procs("nvmlDeviceGetComputeRunningProcesses_v2", h)

    def _procs(self, fn, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in self._gpu(fn, h).get("procs", [])]

    def nvmlSystemGetProcessName(self, pid):
        self.calls["nvmlSystemGetProcessName"] += 1
        if pid == 1:
            raise self.error(CODES["NO_PERMISSION"])
        return f"/srv/model/.venv/bin/python3 #{pid}"


@pytest.fixture
def fake_nvml(monkeypatch):
    def install(gpus: list[dict], **kwargs) -> FakeNvml:
        fake = FakeNvml(gpus, **kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", fake.module())
        return fake
    return install


async def test_v2_memory_and_field_mapping(fake_nvml):
    fake = fake_nvml([{"used": 41971 * MIB, "procs": [(474, 41962 * MIB), (1, None)]}])
    source = NvmlGpuSource("gpu-box")
    snap = await source.read()
    await source.close()
    assert snap.status is HostStatus.LIVE and snap.error is None and snap.host == "gpu-box"
    assert snap.extra == {"driver_version": "580.159.04", "memory_api": "v2"}
    [gpu] = snap.samples
    assert (gpu.index, gpu.uuid, gpu.name) == (0, "GPU-00000000", "NVIDIA H200")
    assert (gpu.mem_used_mib, gpu.mem_reserved_mib, gpu.mem_total_mib) == (41971.0, 615.1, 143771.0)
    assert (gpu.util_gpu_pct, gpu.util_mem_pct, gpu.temp_c) == (100.0, 23.0, 56.0)
    assert (gpu.power_w, gpu.power_limit_w, gpu.sm_clock_mhz) == (683.1, 700.0, 1410.0)
    assert [(p.pid, p.name, p.used_mib) for p in gpu.processes] == [
        (474, "/srv/model/.venv/bin/python3 #474", 41962.0), (1, "", None)]
    assert gpu.to_json("gpu-box")["mem_reserved_mib"] == 615.1
    assert fake.calls["nvmlInit"] == 1 and fake.calls["nvmlShutdown"] == 1


async def test_v1_fallback_reports_used_including_reserved(fake_nvml):
    fake = fake_nvml([{}, {"used": 10 * MIB}], v2=False)
    source = NvmlGpuSource()
    for _ in range(3):
        snap = await source.read()
    await source.close()
    assert snap.extra["memory_api"] == "v1"
    assert [(s.mem_used_mib, s.mem_reserved_mib) for s in snap.samples] == [(615.1, None), (625.1, None)]
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 1  # v2 tried once, then never again
    assert fake.calls["nvmlDeviceGetMemoryInfo"] == 6


async def test_not_supported_is_none_and_never_asked_again(fake_nvml):
    fails = {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED", "nvmlDeviceGetClockInfo": "NOT_SUPPORTED",
             "nvmlDeviceGetEnforcedPowerLimit": "NO_PERMISSION"}
    fake = fake_nvml([{"fail": fails}, {}])
    source = NvmlGpuSource()
    for _ in range(4):
        snap = await source.read()
    await source.close()
    unsupported, normal = snap.samples
    assert (unsupported.power_w, unsupported.sm_clock_mhz, unsupported.power_limit_w) == (None, None, None)
    assert unsupported.error is None and unsupported.mem_used_mib == 0.0
    assert (normal.power_w, normal.sm_clock_mhz, normal.power_limit_w) == (683.1, 1410.0, 700.0)
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1 + 4  # GPU 0 once, GPU 1 every read
    assert fake.calls["nvmlDeviceGetClockInfo"] == 1 + 4
    assert fake.calls["nvmlDeviceGetEnforcedPowerLimit"] == 4 + 4  # no permission: asked again


async def test_unified_memory_gpu_has_no_memory_values(fake_nvml):
    fake_nvml([{"name": "NVIDIA GB10", "fail": {"nvmlDeviceGetMemoryInfo_v2": "NOT_SUPPORTED"}}])
    source = NvmlGpuSource()
    [gpu] = (await source.read()).samples
    await source.close()
    assert gpu.mem_used_mib is gpu.mem_reserved_mib is gpu.mem_total_mib is None and gpu.temp_c == 56.0


async def test_one_lost_gpu_does_not_stop_the_others(fake_nvml):
    fake = fake_nvml([{}, {"fail": {"nvmlDeviceGetUtilizationRates": "GPU_IS_LOST"}},
                      {"fail": {"nvmlDeviceGetTemperature": "UNKNOWN"}}, {"fail": {"nvmlDeviceGetHandleByIndex": "GPU_IS_LOST"}}])
    source = NvmlGpuSource(retry_after_s=3600)
    await source.read()
    snap = await source.read()
    await source.close()
    assert snap.status is HostStatus.LIVE
    ok, lost, unknown, no_handle = snap.samples
    assert ok.error is None and ok.mem_used_mib == 0.0
    assert lost.error == "GPU is lost" and lost.uuid == "GPU-00000001" and lost.mem_total_mib == 143771.0
    assert lost.util_gpu_pct is None and lost.mem_used_mib is None
    assert unknown.error.startswith("GPU is lost (")
    assert (no_handle.index, no_handle.error) == (3, "GPU is lost")
    assert fake.calls["nvmlDeviceGetHandleByIndex"] == 4  # the lost handle is retried only after retry_after_s


async def test_every_gpu_lost_is_a_host_error(fake_nvml):
    fake_nvml([{"fail": {"nvmlDeviceGetMemoryInfo_v2": "GPU_IS_LOST"}}])
    source = NvmlGpuSource()
    snap = await source.read()
    await source.close()
    assert snap.status is HostStatus.ERROR and snap.error == "every GPU failed: GPU is lost"


async def test_version_mismatch_is_an_error_retried_with_backoff(fake_nvml):
    fake = fake_nvml([{}], init_errors=["LIB_RM_VERSION_MISMATCH", "LIB_RM_VERSION_MISMATCH"])
    source = NvmlGpuSource(retry_after_s=30)
    first, second = await source.read(), await source.read()
    assert first.status is second.status is HostStatus.ERROR
    assert "version mismatch" in first.error and "reboot or reload the nvidia kernel modules" in first.error
    assert "retrying every 30 s" in first.error
    assert fake.calls["nvmlInit"] == 1 and second.taken_at >= first.taken_at
    source.retry_after_s = 0
    assert (await source.read()).status is HostStatus.ERROR and fake.calls["nvmlInit"] == 2
    assert (await source.read()).status is HostStatus.LIVE and fake.calls["nvmlInit"] == 3
    await source.close()
    assert fake.calls["nvmlShutdown"] == 1


async def test_driver_not_loaded_is_no_gpu(fake_nvml):
    fake = fake_nvml([{}], init_errors=["DRIVER_NOT_LOADED"])
    source = NvmlGpuSource()
    snap = await source.read()
    await source.close()
    assert snap.status is HostStatus.NO_GPU and snap.error == "No NVIDIA driver/NVML on this machine (Driver Not Loaded)"
    assert fake.calls["nvmlShutdown"] == 0  # init never succeeded


async def test_processes_every_third_read_with_v2_fallback(fake_nvml):
    fake = fake_nvml([{"procs": [(474, 5 * MIB)]}], procs_v3=False)
    source = NvmlGpuSource(process_every=3)
    snaps = [await source.read() for _ in range(4)]
    await source.close()
    assert all(s.samples[0].processes[0].pid == 474 for s in snaps)
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 1
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 2  # reads 1 and 4
    assert fake.calls["nvmlSystemGetProcessName"] == 1  # cached per pid


async def test_wedged_call_gives_stale_snapshots_without_piling_up(fake_nvml):
    release = threading.Event()
    fake = fake_nvml([{}])
    source = NvmlGpuSource(stale_after_s=0.2)
    live = await source.read()
    fake.gpus[0]["block"] = {"nvmlDeviceGetTemperature": release}
    # the stuck call is released at 2 s: 10x the 0.2 s stale_after_s, below the 3 s default. A
    # read that waited on the call (no deadline, or the default one) comes back LIVE, not STALE
    unstick = threading.Timer(2.0, release.set)
    unstick.start()
    stale = await source.read()
    assert unstick.is_alive() and not release.is_set(), "read() waited for the stuck NVML call"
    unstick.cancel()
    assert stale.status is HostStatus.STALE and stale.samples == live.samples and stale.taken_at == live.taken_at
    assert "not answered" in stale.error and stale.extra["age_s"] >= 0
    again = await source.read()  # still in flight: no second call queued behind the stuck one
    assert again.status is HostStatus.STALE and fake.calls["nvmlDeviceGetTemperature"] == 2
    release.set()
    for _ in range(100):
        fresh = await source.read()
        if fresh.status is HostStatus.LIVE:
            break
        await asyncio.sleep(0.02)
    assert fresh.status is HostStatus.LIVE
    await source.close()
    assert fake.calls["nvmlShutdown"] == 1


async def test_close_does_not_shut_nvml_down_under_a_stuck_call(fake_nvml):
    release = threading.Event()
    fake = fake_nvml([{"block": {"nvmlDeviceGetTemperature": release}}])
    source = NvmlGpuSource(stale_after_s=0.1, close_timeout_s=0.2)
    assert (await source.read()).status is HostStatus.STALE
    # the stuck call is released at 1.5 s: 7x the 0.2 s close_timeout_s, below the 2 s default.
    # A close() that waited for the worker would see it released and shut NVML down
    unstick = threading.Timer(1.5, release.set)
    unstick.start()
    await source.close()
    assert unstick.is_alive() and not release.is_set(), "close() waited for the stuck NVML call"
    unstick.cancel()
    assert fake.calls["nvmlShutdown"] == 0
    release.set()
    await asyncio.sleep(0.2)
    assert fake.calls["nvmlShutdown"] == 0  # skipped for good, not run late


def test_read_once_sync_and_cli_json(fake_nvml):
    fake = fake_nvml([{}, {"fail": {"nvmlDeviceGetTemperature": "NOT_SUPPORTED"}}])
    source = NvmlGpuSource()
    assert source.read_once_sync().status is HostStatus.LIVE
    assert source.close_sync() is True and fake.calls["nvmlShutdown"] == 1
    result = CliRunner().invoke(cli, ["gpus", "--json", "--host", "rack3"])
    assert result.exit_code == 0, result.output
    gpus = json.loads(result.output)
    assert [tuple(g) for g in gpus] == [GPU_JSON_KEYS] * 2
    assert [(g["host"], g["index"], g["temp_c"]) for g in gpus] == [("rack3", 0, 56.0), ("rack3", 1, None)]


def test_cli_table_with_a_lost_gpu_exits_1(fake_nvml):
    fake_nvml([{}, {"fail": {"nvmlDeviceGetPowerUsage": "GPU_IS_LOST"}}])
    result = CliRunner().invoke(cli, ["gpus"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "local (nvml, driver 580.159.04)"
    assert lines[2].split() == ["0", "NVIDIA", "H200", "0", "615", "143771", "100", "23", "56", "683/700"]
    assert lines[3].split()[-4:] == ["ERROR:", "GPU", "is", "lost"]
    assert "GPU 1: GPU is lost" in lines[-1]
