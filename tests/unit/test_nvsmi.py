"""nvidia-smi CSV parsing against real H200 captures and crafted rows from the reference."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optui.core.gpu.nvsmi import (
    DEFAULT_APPS_FIELDS,
    DEFAULT_QUERY_FIELDS,
    NvidiaSmiError,
    normalize_fields,
    nvidia_smi_argv,
    parse_compute_apps,
    parse_query_gpu,
    snapshot_from_nvidia_smi,
)
from optui.core.gpu.samples import HostStatus
from optui.core.text.textstream import LineSplitter

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"
H200_UUID = "GPU-21849d05-67c8-6f6e-b56a-378040a59435"
MIG_FIELDS = "index,uuid,name,memory.used,memory.total,utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit"
POWER_FIELDS = ("index", "name", "memory.used", "memory.total", "power.draw", "power.limit")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- real captures -------------------------------------------------------------------------


def test_load_capture_with_header_and_units():
    [gpu] = parse_query_gpu(fixture("query-gpu-load.csv"))
    assert (gpu.index, gpu.uuid, gpu.name) == (0, H200_UUID, "NVIDIA H200")
    assert (gpu.mem_used_mib, gpu.mem_reserved_mib, gpu.mem_total_mib) == (41971, 616, 143771)
    assert (gpu.util_gpu_pct, gpu.util_mem_pct, gpu.temp_c) == (100, 23, 56)
    assert (gpu.power_w, gpu.power_limit_w, gpu.sm_clock_mhz) == (683.10, 700.0, 1410)
    assert gpu.processes is None and gpu.error is None


def test_idle_capture_with_repeated_header_returns_last_tick():
    [gpu] = parse_query_gpu(fixture("query-gpu-idle.csv"))
    # the second block (just after a load ended), not the first (0 %, 37 °C)
    assert (gpu.util_gpu_pct, gpu.util_mem_pct, gpu.temp_c, gpu.power_w) == (43, 5, 43, 193.69)
    assert gpu.mem_used_mib == 0 and gpu.mem_reserved_mib == 616


def test_header_fields_win_over_caller_fields():
    [gpu] = parse_query_gpu(fixture("query-gpu-load.csv"), fields=("index", "name"))
    assert gpu.mem_used_mib == 41971


def test_default_query_capture_with_and_without_header_and_units():
    text = fixture("query-gpu-default-h200.csv")  # optui's own query, captured with --format=csv
    [gpu] = parse_query_gpu(text)
    assert (gpu.uuid, gpu.mem_reserved_mib, gpu.power_w, gpu.sm_clock_mhz) == (
        "GPU-8874584a-188c-a1c5-710c-c74fdff31a94", 616, 77.14, 345)
    row = text.splitlines()[1]
    bare = ", ".join(cell.split(" ")[0] if i > 3 else cell for i, cell in enumerate(row.split(", ")))
    assert bare.startswith("2026/11/29 23:21:31.241, 0, GPU-8874584a") and bare.endswith(", 77.14, 700.00, 345")
    assert parse_query_gpu(bare + "\n") == [gpu]  # noheader,nounits with DEFAULT_QUERY_FIELDS


def test_default_table_is_read():
    """Plain `nvidia-smi` (captured on the H200): its GPU row read, no process (issue 32)."""
    [gpu] = parse_query_gpu(fixture("nvidia-smi.txt"))
    assert (gpu.index, gpu.uuid, gpu.name, gpu.mem_used_mib, gpu.mem_total_mib, gpu.util_gpu_pct, gpu.temp_c,
            gpu.power_w, gpu.power_limit_w, gpu.processes) == (0, None, "NVIDIA H200", 0, 143771, 0, 37, 82, 700, ())


def test_compute_apps_captures():
    assert parse_compute_apps(fixture("query-apps-idle.csv")) == {}
    [(uuid, procs)] = parse_compute_apps(fixture("query-apps-load.csv")).items()
    assert uuid == H200_UUID
    assert [(p.pid, p.name, p.used_mib) for p in procs] == [(474, "/srv/model/.venv/bin/python3", 41962)]


def test_snapshot_joins_processes_by_uuid():
    snap = snapshot_from_nvidia_smi("h200", fixture("query-gpu-load.csv"), apps_text=fixture("query-apps-load.csv"))
    assert snap.status is HostStatus.LIVE and snap.error is None and snap.source == "nvidia-smi"
    assert [p.pid for p in snap.samples[0].processes] == [474]
    idle = snapshot_from_nvidia_smi("h200", fixture("query-gpu-idle.csv"), apps_text=fixture("query-apps-idle.csv"))
    assert idle.samples[0].processes == ()


# --- crafted rows ----------------------------------------------------------------------------


def test_mig_row_has_no_utilization():
    [gpu] = parse_query_gpu(fixture("mig-nounits.csv"), fields=MIG_FIELDS)
    assert gpu.util_gpu_pct is None and gpu.util_mem_pct is None
    assert (gpu.mem_used_mib, gpu.mem_total_mib, gpu.temp_c, gpu.power_w) == (16959, 143771, 36, 295.01)
    assert gpu.mem_reserved_mib is None  # not queried


def test_gb10_row_has_no_memory():
    [gpu] = parse_query_gpu(fixture("gb10.csv"))
    assert (gpu.name, gpu.uuid) == ("NVIDIA GB10", None)  # uuid not queried: None, not ""
    assert gpu.mem_used_mib is gpu.mem_total_mib is gpu.mem_reserved_mib is None
    assert (gpu.util_gpu_pct, gpu.power_w, gpu.temp_c) == (0, 11.17, 35)


def test_not_supported_power():
    gpus = parse_query_gpu(fixture("not-supported-power-nounits.csv"), fields=POWER_FIELDS)
    assert [(g.index, g.name, g.mem_used_mib, g.power_w, g.power_limit_w) for g in gpus] == [
        (0, "NVIDIA GeForce GTX 1080", 4311, None, None),
        (1, "Tesla K80", 0, None, None),
    ]


@pytest.mark.parametrize("token", [
    "[N/A]", "[Not Supported]", "[Insufficient Permissions]", "[Unknown Error]",
    "[Requested functionality has been deprecated]", "N/A", "n/a", "",
])
def test_na_tokens_become_none(token):
    [gpu] = parse_query_gpu(f"0, NVIDIA H200, {token}, 143771, {token}, 700.00\n", fields=POWER_FIELDS)
    assert gpu.mem_used_mib is None and gpu.power_w is None and gpu.mem_total_mib == 143771


def test_wrong_unit_or_garbage_value_names_the_line():
    with pytest.raises(NvidiaSmiError, match=r"line 2: memory.used: expected a number in MiB, got '5 GiB'"):
        parse_query_gpu("index, memory.used [MiB]\n0, 5 GiB\n")
    with pytest.raises(NvidiaSmiError, match=r"line 1: index: expected a non-negative integer"):
        parse_query_gpu("x, 1\n", fields="index,memory.used")


def test_wrong_column_count_names_the_line():
    text = "0, NVIDIA H200, 1, 2, 3, 4\n0, NVIDIA H200, 1, 2\n"
    with pytest.raises(NvidiaSmiError, match=r"^nvidia-smi output line 2: expected 6 comma-separated values"):
        parse_query_gpu(text, fields=POWER_FIELDS)


@pytest.mark.parametrize("name, status, hint", [
    ("driver-not-loaded.txt", HostStatus.NO_GPU, "no NVIDIA driver is loaded"),
    ("no-devices.txt", HostStatus.NO_GPU, "the driver sees no GPU"),
    ("version-mismatch.txt", HostStatus.ERROR, "reboot or reload the nvidia kernel modules"),
])
def test_driver_messages(name, status, hint):
    with pytest.raises(NvidiaSmiError) as info:
        parse_query_gpu(fixture(name))
    assert info.value.line == 1 and info.value.status is status and hint in str(info.value)
    snap = snapshot_from_nvidia_smi("box", fixture(name))
    assert snap.status is status and snap.samples == () and hint in snap.error


def test_lost_gpu_line_is_an_error_but_the_healthy_gpu_is_kept():
    with pytest.raises(NvidiaSmiError, match=r"line 2: Unable to determine the device handle for GPU 0000:0B:00.0"):
        parse_query_gpu(fixture("device-handle-error.txt"))
    snap = snapshot_from_nvidia_smi("rack1", fixture("device-handle-error.txt"))
    assert snap.status is HostStatus.ERROR and "Xid" in snap.error
    assert [(s.index, s.mem_used_mib) for s in snap.samples] == [(0, 5047)]


def test_unknown_field_message():
    text = 'Field "memory.reserved" is not a valid field to query.\n\n'
    assert snapshot_from_nvidia_smi("old", text).status is HostStatus.ERROR


def test_empty_output_means_no_gpus():
    assert parse_query_gpu("") == [] and parse_query_gpu("\n\n") == []
    assert snapshot_from_nvidia_smi("h", "").status is HostStatus.NO_GPU


def test_compute_apps_commas_and_permissions():
    procs = parse_compute_apps(fixture("apps-nounits.csv"))["GPU-2572dd69-e50b-bb80-b185-912b1de919c3"]
    assert [(p.pid, p.name, p.used_mib) for p in procs] == [
        (423, "/opt/my,odd,app/bin/python3", 5038),
        (424, "", None),
    ]
    # header order with the name in the middle (what `--format=csv` of the README query gives)
    text = "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\nGPU-1, 7, /a, b/c, 12 MiB\n"
    assert parse_compute_apps(text)["GPU-1"][0].name == "/a, b/c"
    with pytest.raises(NvidiaSmiError, match="line 1"):
        parse_compute_apps("No devices were found\n")


# --- streaming --------------------------------------------------------------------------------


def test_stream_returns_last_tick():
    gpus = parse_query_gpu(fixture("stream-2gpu-nounits.csv"))
    assert [(g.index, g.mem_used_mib, g.util_gpu_pct, g.sm_clock_mhz) for g in gpus] == [
        (0, 41971, 100, 1410),
        (1, 12, 2, 1980),
    ]


def test_real_single_gpu_stream():
    text = fixture("stream-h200-lms250-nounits.csv")  # each row is its own tick
    assert len(text.splitlines()) == 6
    [gpu] = parse_query_gpu(text)
    assert (gpu.index, gpu.power_w, gpu.mem_reserved_mib, gpu.sm_clock_mhz) == (0, 85.10, 616, 345)


def test_stream_ticks_split_by_timestamp_when_a_gpu_row_is_missing():
    lines = fixture("stream-2gpu-nounits.csv").splitlines(keepends=True)
    # tick 3 lacks GPU 1's row: GPU 0 of tick 3 must not be merged into tick 2
    gpus = parse_query_gpu("".join(lines[:3]) + lines[4])
    assert [(g.index, g.mem_used_mib) for g in gpus] == [(0, 41971)]


def test_stream_without_timestamps_groups_by_index_wrap():
    fields = DEFAULT_QUERY_FIELDS[1:]
    text = "".join(line.split(", ", 1)[1] for line in fixture("stream-2gpu-nounits.csv").splitlines(keepends=True))
    assert [g.mem_used_mib for g in parse_query_gpu(text, fields)] == [41971, 12]


def test_stream_split_mid_line():
    text = fixture("stream-2gpu-nounits.csv")
    whole = parse_query_gpu(text)
    for cut in range(1, len(text)):
        # chunks cut anywhere, reassembled into lines like the SSH reader does
        splitter = LineSplitter()
        lines = splitter.feed(text[:cut].encode()).lines + splitter.feed(text[cut:].encode()).lines
        assert parse_query_gpu("".join(line + "\n" for line in lines)) == whole
        # a buffer that ends inside a row after complete rows: the partial row is skipped
        if cut > text.index("\n"):
            partial = parse_query_gpu(text[:cut])
            assert partial and all(0 <= g.index <= 1 for g in partial)


# --- helpers ------------------------------------------------------------------------------------


def test_normalize_fields_and_argv():
    assert normalize_fields("Index, memory.used [MiB], clocks.current.sm [MHz]") == ("index", "memory.used", "clocks.sm")
    assert normalize_fields(DEFAULT_APPS_FIELDS) == ("uuid", "pid", "used_memory", "process_name")
    with pytest.raises(NvidiaSmiError):
        normalize_fields("index,,name")
    assert nvidia_smi_argv(("index", "name"), loop_ms=1000) == [
        "nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader,nounits", "-lms", "1000"]
    assert nvidia_smi_argv(DEFAULT_APPS_FIELDS, apps=True, header=True, units=True)[1:] == [
        "--query-compute-apps=gpu_uuid,pid,used_memory,process_name", "--format=csv"]


# --- fuzz -------------------------------------------------------------------------------------------

FUZZ_EXAMPLES = 10_000 if os.environ.get("OPTUI_SLOW") == "1" else 200
_TOKENS = ["0", "1", "143771", "616", "5047 MiB", "100 %", "663.72 W", "1980 MHz", "[N/A]", "N/A", "",
           "[Not Supported]", "NVIDIA H200", "GPU-2572dd69", "2026/11/29 21:43:01.684", "99999999999999999999",
           "-1", "1e9", "nan", "index", "memory.used [MiB]", "\r", "٣", "No devices were found"]
_line = st.lists(st.sampled_from(_TOKENS) | st.text(max_size=12), max_size=16).map(", ".join)
_texts = st.text() | st.lists(_line, max_size=8).map("\n".join)
_fields = st.none() | st.sampled_from([DEFAULT_QUERY_FIELDS, POWER_FIELDS, MIG_FIELDS, "index", ("timestamp", "uuid")])
_fuzz = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_fuzz
@given(_texts, _fields)
def test_fuzz_parse_raises_only_nvidia_smi_error(text, fields):
    try:
        gpus = parse_query_gpu(text, fields)
    except NvidiaSmiError:
        return
    assert all(isinstance(g.index, int) for g in gpus)
    try:
        parse_compute_apps(text)
    except NvidiaSmiError:
        pass


@_fuzz
@given(_texts, _fields, st.none() | _texts)
def test_fuzz_snapshot_never_raises(text, fields, apps_text):
    snap = snapshot_from_nvidia_smi("fuzz", text, fields, apps_text=apps_text)
    assert snap.status in (HostStatus.LIVE, HostStatus.ERROR, HostStatus.NO_GPU)
    assert (snap.status is HostStatus.LIVE) == (bool(snap.samples) and snap.error is None)
