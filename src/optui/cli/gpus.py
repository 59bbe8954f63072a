"""``optui gpus``: one reading of the GPUs, as a table or JSON.

Sources: NVML (default; :class:`~optui.adapters.gpu_nvml.NvmlGpuSource`), a one-shot local
``nvidia-smi --query-gpu`` (the query optui streams from remote hosts), or a saved
``nvidia-smi --query-gpu ... --format=csv[,noheader][,nounits]`` file.

``--json`` prints a list of objects with exactly the keys of
:data:`~optui.core.gpu.samples.GPU_JSON_KEYS` (MiB, %, °C, W; null where unavailable). When the host
cannot be read it prints ``{"error": "...", "host": "..."}`` instead; either way the exit code
is 1 when anything is wrong (a GPU with an error included), else 0.

With a config that configures GPUs (``[hosts.NAME]`` or ``[fleet]``: docs/fleet.md) and
neither ``--from-file`` nor ``--source``: one reading of every configured host through its
``gpu_source`` (``demo``, ``nvml``, ``nvidia-smi`` over SSH...; ``none`` left out) and of every
GPU the fleet knows, each JSON object with its ``source``; a host or a fleet query that fails is
one entry with its ``error`` in the list (:func:`configured_json`), and the exit code is 1.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import click

from optui.cli.common import echo, echo_json, fail
from optui.core.gpu.samples import GpuSample, HostSnapshot, HostStatus

if TYPE_CHECKING:
    from optui.core.fleet.readings import FleetSnapshot

NVIDIA_SMI_TIMEOUT_S = 10.0


def _failure(host: str, message: str, source: str, status: HostStatus = HostStatus.ERROR) -> HostSnapshot:
    return HostSnapshot(host, (), time.time(), status, message, source)


def _read_nvidia_smi(host: str) -> HostSnapshot:
    """Run the local nvidia-smi once with optui's default query."""
    from optui.core.gpu.nvsmi import DEFAULT_QUERY_FIELDS, nvidia_smi_argv, snapshot_from_nvidia_smi

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
    from optui.adapters.bounded_read import MAX_CAPTURE_BYTES, InputTooLarge, read_text_bounded
    from optui.core.gpu.nvsmi import NvidiaSmiError, normalize_fields, snapshot_from_nvidia_smi

    if fields is not None:
        try:
            normalize_fields(fields)
        except NvidiaSmiError as exc:
            return _failure(host, f"--fields: {exc}", "file")
    try:
        if path == "-":  # stdin's bytes, bounded
            text = read_text_bounded(sys.stdin.buffer, MAX_CAPTURE_BYTES, name="<stdin>")
        else:
            text = read_text_bounded(path, MAX_CAPTURE_BYTES)
    except InputTooLarge as exc:
        return _failure(host, str(exc), "file")
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


def _campaign_config(ctx: click.Context):
    """The config when its file configures GPUs (a ``[hosts.NAME]`` or ``[fleet]`` table), else
    None: then ``optui gpus`` reads the local GPUs (``--source``) and never loads the file
    (nor pydantic)."""
    import re

    from optui.config_file import ConfigError, find_config

    try:
        path = find_config((ctx.find_root().obj or {}).get("config_path"))
        text = path.read_text(encoding="utf-8", errors="replace") if path else ""
    except (ConfigError, OSError):
        return None
    if not re.search(r"(?m)^\s*\[(fleet\]|hosts\.)", text):
        return None
    from optui.cli.common import load_config_or_exit

    return load_config_or_exit(ctx).config


#: how long one reading waits for a host still connecting (SSH) before it reports what it has
CONNECT_WAIT_S = 15.0


async def read_configured(config) -> tuple[list[HostSnapshot], FleetSnapshot | None]:
    """One reading of the configured hosts' GPUs (their ``gpu_source``, as the TUI reads them;
    hosts with ``gpu_source = "none"`` left out) and of the ``[fleet]`` (None without one), at
    once. A host still CONNECTING is read again until it answers or :data:`CONNECT_WAIT_S`;
    every failure is the host's snapshot's ``error`` (never raised)."""
    import asyncio

    from optui.session.gpu.fleet import read_fleet_once
    from optui.session.session import make_gpu_source
    from optui.session.ssh_hosts import make_ssh_hosts

    ssh = make_ssh_hosts(config)
    names = [h for h in config.host_names() if config.host(h).source != "none"]
    sources = [make_gpu_source(h, config.host(h), ssh.get(h)) for h in names]

    async def read(source) -> HostSnapshot:
        deadline = time.monotonic() + CONNECT_WAIT_S
        while True:
            try:
                snapshot = await source.read()
            except Exception as exc:  # noqa: BLE001 - one host's failure is its entry, not the answer
                return _failure(source.host, f"cannot read its GPUs: {exc!r}", "?")
            if snapshot.status is not HostStatus.CONNECTING or time.monotonic() > deadline:
                return snapshot
            await asyncio.sleep(0.2)

    try:
        fleet = asyncio.ensure_future(read_fleet_once(config.fleet)) if config.fleet is not None else None
        hosts = list(await asyncio.gather(*(read(src) for src in sources)))
        return hosts, (await fleet if fleet is not None else None)
    finally:
        for src in sources:
            await src.close()
        for host in ssh.values():
            await host.close()


def _host_problem(snapshot: HostSnapshot) -> str | None:
    if snapshot.status is not HostStatus.LIVE:
        return snapshot.error or f"GPU data is {snapshot.status}"
    return None


def configured_json(config, hosts: list[HostSnapshot], fleet) -> list[dict]:
    """``optui gpus --json`` with a config: every configured host's GPUs
    (:data:`~optui.core.gpu.samples.GPU_JSON_KEYS` + ``source``: ``demo``, ``nvml``, ``nvidia-smi``...),
    then the fleet's (:data:`~optui.core.fleet.readings.FLEET_GPU_JSON_KEYS` + ``source`` ``fleet``); a
    host that could not be read is one ``{"host", "source", "status", "error"}`` entry, a failed
    fleet query one ``{"host": null, "source": "fleet", "prometheus", "error"}``."""
    out: list[dict] = []
    for snapshot in hosts:
        problem = _host_problem(snapshot)
        if problem is not None and not snapshot.samples:
            out.append({"host": snapshot.host, "source": snapshot.source, "status": str(snapshot.status),
                        "error": problem})
        out += [{**s.to_json(snapshot.host), "source": snapshot.source} for s in snapshot.samples]
    if fleet is not None:
        if fleet.error:
            out.append({"host": None, "source": "fleet", "prometheus": config.fleet.prometheus, "error": fleet.error})
        out += [{**gpu.to_json(), "source": "fleet"} for gpu in fleet.gpus]
    return out


def _configured_report(config, as_json: bool) -> None:
    """Print :func:`read_configured`'s reading; exit 1 when a host, a GPU or the fleet failed."""
    import asyncio

    hosts, fleet = asyncio.run(read_configured(config))
    problems = [f"{h.host}: {_host_problem(h)}" for h in hosts if _host_problem(h)]
    problems += [f"{h.host} GPU {s.index}: {s.error}" for h in hosts for s in h.samples if s.error]
    if fleet is not None and fleet.error:
        problems.append(f"fleet: {fleet.error}")
    if as_json:
        echo_json(configured_json(config, hosts, fleet))
    else:
        for snapshot in hosts:
            if snapshot.samples:
                echo("\n".join(_table(snapshot)))
            else:
                echo(f"{snapshot.host} ({snapshot.source}): {_host_problem(snapshot)}")
        if fleet is not None and not fleet.error:
            _fleet_table(config.fleet, fleet)
    if problems:
        if not as_json:
            echo("optui: error: " + "; ".join(problems), err=True)
        sys.exit(1)


def _fleet_table(cfg, snapshot) -> None:
    """The fleet's GPUs, host by host, one line each."""
    source = cfg.prometheus or f"simulated: {cfg.demo_hosts} hosts x 8 GPUs"
    echo(f"fleet ({source}): {len(snapshot.gpus)} GPUs on {len(snapshot.hosts())} hosts")
    rows = [("HOST", "GPU", "NAME", "USED", "RSVD", "FREE MiB", "UTIL%", "MEM-BW%", "TEMP°C", "POWER W", "AGE s")]
    rows += [(g.host, "n/a" if g.index is None else str(g.index), g.model or "n/a", _cell(g.mem_used_mib),
              _cell(g.mem_reserved_mib), _cell(g.mem_free_mib), _cell(g.util_gpu_pct), _cell(g.util_mem_pct),
              _cell(g.temp_c), _cell(g.power_w), _cell(g.age_s, 1) + (" stale" if g.stale else ""))
             for g in snapshot.gpus]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [c.ljust(w) if i in (0, 2) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        echo("  ".join(cells).rstrip())


@click.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (or {\"error\": ...} and exit 1).")
@click.option("--from-file", "from_file", metavar="FILE",
              help="Parse saved `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` output ('-': stdin).")
@click.option("--fields", default=None, metavar="LIST",
              help="The --query-gpu= list of a header-less --from-file, in order (default: its header, else a "
                   "known layout such as optui's own query; see docs/cli.md).")
@click.option("--source", type=click.Choice(["nvml", "nvidia-smi"]), default="nvml", show_default=True,
              help="Read the local GPUs through NVML or by running nvidia-smi once.")
@click.option("--host", default="local", show_default=True, help="Host label for the output.")
@click.pass_context
def gpus(ctx: click.Context, as_json: bool, from_file: str | None, fields: str | None, source: str, host: str) -> None:
    """Show the GPUs once: memory used/reserved/total (MiB), utilization, memory-bandwidth
    utilization (%), temperature (°C), power draw/limit (W). With [hosts.NAME] or [fleet] in
    the config (and no --from-file / --source): every configured host's GPUs and the fleet's."""
    if fields is not None and from_file is None:
        fail("--fields names the columns of a --from-file capture; give --from-file too")
    explicit_source = ctx.get_parameter_source("source") is not click.core.ParameterSource.DEFAULT
    config = None if from_file is not None or explicit_source else _campaign_config(ctx)
    try:
        if config is not None:
            return _configured_report(config, as_json)
        if from_file is not None:
            snapshot = _read_file(host, from_file, fields)
        elif source == "nvidia-smi":
            snapshot = _read_nvidia_smi(host)
        else:
            snapshot = _read_nvml(host)
        _report(snapshot, as_json)
    except BrokenPipeError:
        raise  # stdout closed early (`| head`): the CLI's entry point exits quietly
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
