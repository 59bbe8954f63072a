"""Saved nvidia-smi --query-gpu captures in the field order the user chose (issue 18): by their
header, by a --fields list / a replay host's ``fields``, or by a known layout; the CLI as a real
subprocess, the replay source through a real Session."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optui.config import load_config
from optui.core.gpu import nvsmi
from optui.core.gpu.samples import HostStatus
from optui.session import Session
from tests.helpers.demo import subprocess_env

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"
U0 = "GPU-21849d05-67c8-6f6e-b56a-378040a59435"
U1 = "GPU-9f0c3d2a-1b2c-4d5e-8f90-a1b2c3d4e5f6"


def gpus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optui", "gpus", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, env=subprocess_env(), check=False)


def gpus_json(name: str, *args: str) -> list[dict]:
    done = gpus("--json", "--from-file", str(FIXTURES / name), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", ["custom-order-header.csv", "custom-order-header-nounits.csv"])
def test_header_in_the_users_order_with_and_without_units(name):
    g0, g1 = gpus_json(name)
    assert (g0["index"], g0["name"], g0["power_w"], g0["mem_used_mib"], g0["temp_c"]) == (0, "NVIDIA H200", 683.1, 41971, 56)
    assert (g1["index"], g1["power_w"], g1["mem_used_mib"]) == (1, None, None)  # [N/A]
    # not queried: null, never "" or 0
    for key in ("uuid", "mem_total_mib", "mem_reserved_mib", "util_gpu_pct", "util_mem_pct", "power_limit_w"):
        assert g0[key] is None and g1[key] is None, key


def test_header_table_shows_n_a_for_fields_not_queried():
    done = gpus("--from-file", str(FIXTURES / "custom-order-header.csv"))
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[2].split()
    assert row[:3] == ["0", "NVIDIA", "H200"] and row[3] == "41971" and row[5] == "n/a"  # TOTAL
    assert row[-1] == "683/n/a"


@pytest.mark.parametrize("name", ["ref-layout-noheader-nounits.csv", "ref-layout-noheader-units.csv"])
def test_reference_layout_without_header_is_recognized(name):
    g0, g1 = gpus_json(name)  # nounits: the last of two -lms blocks
    assert (g0["uuid"], g0["mem_used_mib"], g0["util_gpu_pct"], g0["util_mem_pct"], g0["power_w"]) == (U0, 41971, 100, 23, 683.1)
    assert (g1["uuid"], g1["mem_total_mib"], g1["power_limit_w"]) == (U1, 143771, 700)
    assert g0["mem_reserved_mib"] is None  # not in this layout
    if "units" in name and "nounits" not in name:
        assert (g1["mem_used_mib"], g1["util_gpu_pct"]) == (None, None)  # [N/A], [Not Supported]


def test_timestamped_stream_layout_without_header_keeps_the_last_tick():
    g0, g1 = gpus_json("stream-ts-11-nounits.csv")
    assert (g0["mem_used_mib"], g1["mem_used_mib"], g1["util_gpu_pct"]) == (5047, 616, 2)


def test_unknown_layout_names_file_line_and_what_to_pass():
    path = FIXTURES / "custom-noheader-nounits.csv"
    done = gpus("--from-file", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{path}:1: 5 values without a header" in done.stderr and "--fields" in done.stderr
    done = gpus("--json", "--from-file", str(path))
    assert done.returncode == 1 and f"{path}:1:" in json.loads(done.stdout)["error"]


def test_fields_option_reads_a_headerless_capture_in_any_order():
    g0, g1 = gpus_json("custom-noheader-nounits.csv", "--fields", "name,index,memory.used,memory.total,pstate")
    assert (g0["index"], g0["name"], g0["mem_used_mib"], g0["mem_total_mib"]) == (0, "NVIDIA H200", 41971, 143771)
    assert (g1["index"], g1["mem_used_mib"], g1["uuid"], g1["power_w"]) == (1, 5047, None, None)


def test_fields_of_the_wrong_count_name_the_file():
    path = FIXTURES / "custom-noheader-nounits.csv"
    done = gpus("--from-file", str(path), "--fields", "index,name")
    assert done.returncode == 1 and f"{path}:1: expected 2 comma-separated values" in done.stderr
    done = gpus("--fields", "index,name")
    assert done.returncode == 1 and "--from-file" in done.stderr


def test_right_count_wrong_values_is_refused_with_the_layout_it_tried():
    path = FIXTURES / "wrong-order-10-noheader.csv"
    done = gpus("--from-file", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{path}:1: 10 values without a header do not fit" in done.stderr
    assert "index,uuid,name,memory.used,memory.total,utilization.gpu" in done.stderr and "--fields" in done.stderr


def test_several_fitting_layouts_are_ambiguous(monkeypatch):
    twin = ("name", "index", "memory.used", "memory.total", "pstate")
    monkeypatch.setattr(nvsmi, "KNOWN_LAYOUTS", (("a", twin), ("b", twin[:3] + ("memory.reserved", "pstate"))))
    text = (FIXTURES / "custom-noheader-nounits.csv").read_text()
    with pytest.raises(nvsmi.NvidiaSmiError, match=r"^caps.csv:1: 5 values without a header fit several known "
                       r"--query-gpu layouts: name,index,memory.used,memory.total,pstate \(a\); .*\(b\); pass"):
        nvsmi.parse_query_gpu(text, source="caps.csv")


def test_optui_default_stream_and_repeated_headers_keep_working():
    assert [g["mem_used_mib"] for g in gpus_json("stream-2gpu-nounits.csv")] == [41971, 12]
    [gpu] = gpus_json("query-gpu-idle.csv")  # two captures, the header repeated
    assert gpu["uuid"] == U0


# --- the replay host source through a Session ------------------------------------------------


async def replay_snapshot(tmp_path: Path, extra: str, capture: Path):
    cfg = tmp_path / "optui.toml"
    cfg.write_text(f'[hosts.rig]\ngpu_source = "replay"\nreplay_file = "{capture}"\n{extra}interval_s = 60\n')
    session = Session(load_config(cfg))
    await session.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            host = next(h for h in session.snapshot().hosts if h.host == "rig")
            if host.status is not HostStatus.CONNECTING:
                return host
            await asyncio.sleep(0.05)
        raise AssertionError("the replay host never reported")
    finally:
        await session.close()


async def test_replay_host_with_fields(tmp_path):
    host = await replay_snapshot(tmp_path, 'fields = ["name", "index", "memory.used", "memory.total", "pstate"]\n',
                                 FIXTURES / "custom-noheader-nounits.csv")
    assert host.status is HostStatus.LIVE, host.error
    assert [(s.index, s.mem_used_mib, s.uuid) for s in host.samples] == [(0, 41971, None), (1, 5047, None)]


async def test_replay_host_known_layout_and_located_error(tmp_path):
    host = await replay_snapshot(tmp_path, "", FIXTURES / "ref-layout-noheader-nounits.csv")
    assert host.status is HostStatus.LIVE and [s.uuid for s in host.samples] == [U0, U1]
    capture = FIXTURES / "custom-noheader-nounits.csv"
    host = await replay_snapshot(tmp_path, "", capture)
    assert host.status is HostStatus.ERROR and host.error.startswith(f"{capture}:1: 5 values without a header")
    assert "fields = [...]" in host.error


def test_fields_is_only_for_replay_hosts(tmp_path):
    from optui.config import ConfigError

    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.rig]\ngpu_source = "nvml"\nfields = ["index"]\n')
    with pytest.raises(ConfigError, match="fields is for gpu_source = 'replay'"):
        load_config(cfg)


def test_h200_capture_layout_without_header_from_stdin():
    rows = [line for line in (FIXTURES / "query-gpu-load.csv").read_text().splitlines() if not line.startswith("index")]
    done = subprocess.run([sys.executable, "-m", "optui", "gpus", "--json", "--from-file", "-"], input="\n".join(rows) + "\n",
                          capture_output=True, text=True, timeout=60, env=subprocess_env(), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    [gpu] = json.loads(done.stdout)  # the 14 fields of the shared H200 captures, units and all
    assert (gpu["uuid"], gpu["mem_used_mib"], gpu["mem_reserved_mib"], gpu["power_w"]) == (U0, 41971, 616, 683.1)
    done = subprocess.run([sys.executable, "-m", "optui", "gpus", "--from-file", "-"], input="0, 1, 2\n",
                          capture_output=True, text=True, timeout=60, env=subprocess_env(), check=False)
    assert done.returncode == 1 and "<stdin>:1: 3 values without a header" in done.stderr
