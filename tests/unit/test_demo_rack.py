"""DemoGpuSource: mirroring the demo server's state file, idle and background hosts."""

from __future__ import annotations

import json
import time

from optui.core.gpu.samples import HostStatus
from optui.demo.sim_gpus import DemoGpuSource, gpu_uuid


def _write_state(path, **over):
    state = {"pid": 4242, "phase": "ready", "tp_size": 2, "mem_used_mib_per_gpu": 127000.0, "util_pct": 85.0,
             "running": 5, "queued": 0, "ts": time.time()}
    state.update(over)
    path.write_text(json.dumps(state))


async def test_state_file_drives_first_tp_gpus(tmp_path):
    path = tmp_path / "state.json"
    _write_state(path)
    snap = await DemoGpuSource("gpu-a", gpus=8, state_path=str(path)).read()
    assert snap.status is HostStatus.LIVE and len(snap.samples) == 8
    busy, idle = snap.samples[:2], snap.samples[2:]
    for s in busy:
        assert s.mem_used_mib == 127000.0 and 75 < s.util_gpu_pct <= 100
        assert s.power_w > 300 and s.temp_c > 45 and s.processes[0].pid == 4242
    for s in idle:
        assert s.mem_used_mib == 0.0 and s.util_gpu_pct == 0.0 and s.power_w < 100
    s0 = snap.samples[0]
    assert s0.name == "NVIDIA H200 (demo)" and s0.mem_total_mib == 143771 and s0.mem_reserved_mib == 616
    assert s0.power_limit_w == 700 and s0.uuid == gpu_uuid("gpu-a", 0) != gpu_uuid("gpu-a", 1)


async def test_missing_stale_or_corrupt_state_means_idle(tmp_path):
    path = tmp_path / "state.json"
    source = DemoGpuSource("gpu-a", gpus=4, state_path=str(path))
    _write_state(path, ts=time.time() - 5)
    for content in (None, path.read_text(), "{not json", "[]", '{"ts": "x"}'):
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(content)
        snap = await source.read()
        assert snap.status is HostStatus.LIVE
        assert [s.mem_used_mib for s in snap.samples] == [0.0] * 4
    await source.close()
    await source.close()


async def test_background_host_is_alive_and_deterministic(monkeypatch):
    monkeypatch.setattr("optui.demo.sim_gpus.time.time", lambda: 1_000_000.0)
    a = await DemoGpuSource("rack-1", gpus=8, seed=7).read()
    b = await DemoGpuSource("rack-1", gpus=8, seed=7).read()
    assert a.samples == b.samples
    assert any(s.mem_used_mib > 0 and s.util_gpu_pct > 0 for s in a.samples)
    monkeypatch.setattr("optui.demo.sim_gpus.time.time", lambda: 1_000_060.0)
    later = await DemoGpuSource("rack-1", gpus=8, seed=7).read()
    assert [s.util_gpu_pct for s in later.samples] != [s.util_gpu_pct for s in a.samples]
