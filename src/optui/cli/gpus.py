"""``optui gpus``: one reading of the GPUs, as a table or JSON.

Sources: NVML (default; :class:`~optui.adapters.gpu_nvml.NvmlGpuSource`), a one-shot local
``nvidia-smi --query-gpu`` (the query optui streams from remote hosts), or a saved
``nvidia-smi --query-gpu ... --format=csv[,noheader][,nounits]`` file.

``--json`` prints a list of objects with exactly the keys of
:data:`~optui.core.gpu.GPU_JSON_KEYS` (MiB, %, °C, W; null where unavailable). When the host
cannot be read it prints ``{"error": "...", "host": "..."}`` instead; either way the exit code
is 1 when anything is wrong (a GPU with an error included), else 0.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import click

from optui.cli.common import echo, echo_json, fail
from optui.core.gpu import GpuSample, HostSnapshot, HostStatus

NVIDIA_SMI_TIMEOUT_S = 10.0


def _failure(host: str, message: str, source: str, status: HostStatus = HostStatus.ERROR) -> HostSnapshot:
    return HostSnapshot(host, (), time.time(), status, message, source)


def _read_nvidia_smi(host: str) -> HostSnapshot:
    """Run the local nvidia-smi once with optui's default query."""
    from optui.core.nvsmi import DEFAULT_QUERY_FIELDS, nvidia_smi_argv, snapshot_from_nvidia_smi

    try:
        done = subprocess.run(nvidia_smi_argv(), capture_output=True, text=True, errors="replace",
                              timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return _failure(host, "nvidia-smi not found on PATH", "nvidia-smi", HostStatus.NO_GPU)
    except subprocess.TimeoutExpired:
        return _failure(host, f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S:g} s (driver not responding?)",
                        "nvidia-smi")
    except OSError as exc:
        return _failure(host, f"cannot run nvidia-smi: {exc}", "nvidia-smi")
    snapshot = snapshot_from_nvidia_smi(host, done.stdout + done.stderr, DEFAULT_QUERY_FIELDS)  # what we asked for
    if done.returncode != 0 and snapshot.status is HostStatus.LIVE:
        return HostSnapshot(host, snapshot.samples, snapshot.taken_at, HostStatus.ERROR,
                            f"nvidia-smi exited with status {done.returncode}", "nvidia-smi")
    return snapshot


def _read_file(host: str, path: str, fields: str | None) -> HostSnapshot:
    """Parse a saved capture; errors name ``path`` (``<stdin>`` for ``-``) and the line."""
    from optui.core.nvsmi import NvidiaSmiError, normalize_fields, snapshot_from_nvidia_smi

    if fields is not None:
        try:
            normalize_fields(fields)
        except NvidiaSmiError as exc:
            return _failure(host, f"--fields: {exc}", "file")
    try:
        if path == "-":
            text = click.open_file("-").read()  # stdin (click.get_text_stream is deprecated: gone in Click 9)
        else:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return _failure(host, f"cannot read {path}: {exc.strerror or exc}", "file")
    return snapshot_from_nvidia_smi(host, text, fields, source="<stdin>" if path == "-" else path)


def _read_nvml(host: str) -> HostSnapshot:
    from optui.adapters.gpu_nvml import NvmlGpuSource

    source = NvmlGpuSource(host)
    try:
        return source.read_once_sync()
    finally:
        source.close_sync()


def _cell(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _table(snapshot: HostSnapshot) -> list[str]:
    """The human table: one line per GPU, memory in MiB, power draw/limit in W."""
    driver = snapshot.extra.get("driver_version")
    title = f"{snapshot.host} ({snapshot.source}" + (f", driver {driver})" if driver else ")")
    if snapshot.extra.get("memory_api") == "v1":
        title += " (NVML v1 memory: used includes reserved)"
    rows: list[tuple[str, ...]] = [("GPU", "NAME", "USED", "RSVD", "TOTAL MiB", "UTIL%", "MEM-BW%", "TEMP°C", "POWER W")]
    rows += [_row(s) for s in snapshot.samples]
    widths = [max(len(r[i]) for r in rows if len(r) == len(rows[0]) or i < 2) for i in range(len(rows[0]))]
    lines = [title]
    for r in rows:
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])]
        if len(r) == 3:  # a GPU with an error: the message instead of the numbers
            cells.append(r[2])
        else:
            cells += [c.rjust(w) for c, w in zip(r[2:], widths[2:])]
        lines.append("  ".join(cells).rstrip())
    return lines


def _row(s: GpuSample) -> tuple[str, ...]:
    if s.error:
        return (str(s.index), s.name or "n/a", f"ERROR: {s.error}")
    power = f"{_cell(s.power_w)}/{_cell(s.power_limit_w)}"
    return (str(s.index), s.name or "n/a", _cell(s.mem_used_mib), _cell(s.mem_reserved_mib), _cell(s.mem_total_mib),
            _cell(s.util_gpu_pct), _cell(s.util_mem_pct), _cell(s.temp_c), power)


@click.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (or {\"error\": ...} and exit 1).")
@click.option("--from-file", "from_file", metavar="FILE",
              help="Parse saved `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` output ('-': stdin).")
@click.option("--fields", default=None, metavar="LIST",
              help="The --query-gpu= list of a header-less --from-file, in order (default: its header, else a "
                   "known layout such as optui's own query; see README).")
@click.option("--source", type=click.Choice(["nvml", "nvidia-smi"]), default="nvml", show_default=True,
              help="Read the local GPUs through NVML or by running nvidia-smi once.")
@click.option("--host", default="local", show_default=True, help="Host label for the output.")
def gpus(as_json: bool, from_file: str | None, fields: str | None, source: str, host: str) -> None:
    """Show the GPUs once: memory used/reserved/total (MiB), utilization, memory-bandwidth
    utilization (%), temperature (°C), power draw/limit (W)."""
    if fields is not None and from_file is None:
        fail("--fields names the columns of a --from-file capture; give --from-file too")
    try:
        if from_file is not None:
            snapshot = _read_file(host, from_file, fields)
        elif source == "nvidia-smi":
            snapshot = _read_nvidia_smi(host)
        else:
            snapshot = _read_nvml(host)
        _report(snapshot, as_json)
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        message = f"internal error: {exc!r}"
        if as_json:
            echo_json({"error": message, "host": host})
            sys.exit(1)
        fail(message)


def _report(snapshot: HostSnapshot, as_json: bool) -> None:
    """Print the snapshot; exit 1 if the host or any GPU has an error (see module doc)."""
    failed = [f"GPU {s.index}: {s.error}" for s in snapshot.samples if s.error]
    if snapshot.status is not HostStatus.LIVE:
        message = snapshot.error or f"GPU data is {snapshot.status}"
        if as_json:
            echo_json({"error": message, "host": snapshot.host})
            sys.exit(1)
        if snapshot.samples:
            echo("\n".join(_table(snapshot)))
        fail(message)
    if as_json:
        echo_json([s.to_json(snapshot.host) for s in snapshot.samples])
    else:
        echo("\n".join(_table(snapshot)))
    if failed:
        echo("optui: error: " + "; ".join(failed), err=True)
        sys.exit(1)
