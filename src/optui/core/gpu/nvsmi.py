"""Parsing ``nvidia-smi --query-gpu`` and ``--query-compute-apps`` CSV output (pure, no I/O).

Format (measured with driver 580.159.04 on H200; docs: ``nvidia-smi --help-query-gpu``;
reference ``gpu_monitors.md`` §3):

- ``--format=csv``: a header line (``index, uuid, memory.used [MiB], ...``), then one row per
  GPU in index order. Values carry units: ``5047 MiB``, ``100 %``, ``663.72 W``, ``1980 MHz``
  (``temperature.gpu`` is printed bare, in °C). ``noheader`` drops the header, so the caller
  must say which fields were queried, or the text must have the field count of exactly one
  fitting :data:`KNOWN_LAYOUTS` entry; ``nounits`` drops the units (in the header too).
- Separator ``", "``; no quoting. Only ``process_name`` (workload-controlled) may contain commas.
- Unavailable values: ``[N/A]``, ``[Not Supported]``, ``[Insufficient Permissions]``,
  ``[Unknown Error]``, ``[Requested functionality has been deprecated]`` (any ``[...]``), bare
  ``N/A`` and the empty string. They survive ``nounits``. All become ``None``.
- ``-lms N`` streaming repeats one block of rows per tick (the header once, with ``csv``); rows of
  a tick share the ``timestamp`` within a few ms. Several ticks in one text are split into ticks.
- Driver trouble is printed as plain text lines instead of rows (see :data:`_DRIVER_ERRORS`).
- Plain ``nvidia-smi``'s default table is read too (:mod:`optui.core.gpu.nvsmi_table`); its other
  tables (``nvidia-smi mig -lgip``...) are refused, saying which table it is.

Units produced (as in :class:`~optui.core.gpu.samples.GpuSample`): memory MiB, utilization %,
temperature °C, power W, SM clock MHz. ``memory.used`` has NVML v2 semantics (excludes the
driver's ``memory.reserved``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime

from optui.core.gpu.nvsmi_table import looks_like_table, parse_smi_table, table_kind
from optui.core.gpu.samples import GpuProcess, GpuSample, HostSnapshot, HostStatus

#: Fields optui queries when it runs ``nvidia-smi`` itself (``--format=csv,noheader,nounits``),
#: and the field list assumed for header-less text when the caller gives none. ``timestamp``
#: comes first so a ``-lms`` stream can be grouped into ticks; ``memory.reserved`` needs a
#: driver >= R510 (older ones reject the query with rc 2: 'Field ... is not a valid field').
DEFAULT_QUERY_FIELDS: tuple[str, ...] = (
    "timestamp",
    "index",
    "uuid",
    "name",
    "memory.used",
    "memory.total",
    "memory.reserved",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
)

#: ``--query-compute-apps`` fields optui asks for: ``process_name`` last, since it may contain
#: commas. With ``--format=csv`` nvidia-smi names ``used_memory`` ``used_gpu_memory [MiB]``.
DEFAULT_APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "used_memory", "process_name")

#: Field lists of header-less captures that are read without being told the fields: optui's
#: own query and the layouts NVIDIA's documentation and the project's GPU-monitor reference
#: (``gpu_monitors.md`` §0.5, §3, §6.3) show, with where each comes from. A header-less text whose
#: first row has the field count of exactly one layout whose values fit (an ``index`` is an
#: integer, a ``uuid`` starts with ``GPU-``/``MIG-``, a number carries that field's unit...)
#: is read with it; any other needs the queried fields (:func:`parse_query_gpu` ``fields``).
KNOWN_LAYOUTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("optui's own query (DEFAULT_QUERY_FIELDS)", DEFAULT_QUERY_FIELDS),
    ("gpu_monitors.md §3.1", ("index", "uuid", "name", "memory.used", "memory.total", "utilization.gpu",
                              "utilization.memory", "temperature.gpu", "power.draw", "power.limit")),
    ("gpu_monitors.md §0.5 (-lms 1000 stream)",
     ("timestamp", "index", "uuid", "name", "memory.used", "memory.total", "utilization.gpu",
      "utilization.memory", "temperature.gpu", "power.draw", "power.limit")),
    ("gpu_monitors.md §6.3 (-lms 1000 stream with memory.reserved)",
     ("timestamp", "index", "uuid", "name", "memory.used", "memory.total", "memory.reserved",
      "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw", "power.limit")),
    ("gpu_monitors.md §3 H200 captures",
     ("index", "uuid", "name", "memory.used", "memory.total", "memory.reserved", "utilization.gpu",
      "utilization.memory", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "clocks.mem", "pstate")),
    ("gpu_monitors.md §3.1 (extra fields)",
     ("memory.reserved", "memory.free", "fan.speed", "clocks.sm", "pcie.link.gen.current",
      "ecc.errors.uncorrected.volatile.total", "mig.mode.current", "power.draw.instant")),
    ("NVIDIA's 'Useful nvidia-smi Queries' (logging example)",
     ("timestamp", "name", "pci.bus_id", "driver_version", "pstate", "pcie.link.gen.max",
      "pcie.link.gen.current", "temperature.gpu", "utilization.gpu", "utilization.memory",
      "memory.total", "memory.free", "memory.used")),
)

# query field -> (GpuSample attribute, unit nvidia-smi prints without ``nounits``)
_GPU_FIELDS: dict[str, tuple[str, str | None]] = {
    "index": ("index", None),
    "uuid": ("uuid", None),
    "name": ("name", None),
    "memory.used": ("mem_used_mib", "MiB"),
    "memory.reserved": ("mem_reserved_mib", "MiB"),
    "memory.total": ("mem_total_mib", "MiB"),
    "utilization.gpu": ("util_gpu_pct", "%"),
    "utilization.memory": ("util_mem_pct", "%"),
    "temperature.gpu": ("temp_c", "C"),
    "power.draw": ("power_w", "W"),
    "power.limit": ("power_limit_w", "W"),
    "clocks.sm": ("sm_clock_mhz", "MHz"),
}
# header spelling -> query spelling (nvidia-smi prints the long names in the header)
_ALIASES = {
    "clocks.current.sm": "clocks.sm",
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "used_gpu_memory": "used_memory",
}
_APPS_KNOWN = {"uuid", "pid", "used_memory", "process_name", "gpu_bus_id", "gpu_serial", "gpu_name"}
_KNOWN_NAMES = set(_GPU_FIELDS) | _APPS_KNOWN | {"timestamp", "pstate", "clocks.mem", "clocks.current.memory"}

# (lowercase substring, host status, what to do about it)
_DRIVER_ERRORS: tuple[tuple[str, HostStatus, str], ...] = (
    ("couldn't communicate with the nvidia driver", HostStatus.NO_GPU,
     "no NVIDIA driver is loaded on this machine"),
    ("no devices were found", HostStatus.NO_GPU, "the driver sees no GPU"),
    ("nvidia-smi: command not found", HostStatus.NO_GPU, "nvidia-smi is not installed"),
    ("unable to determine the device handle", HostStatus.ERROR,
     "a GPU hung or fell off the bus; check `dmesg` for Xid errors"),
    ("driver/library version mismatch", HostStatus.ERROR,
     "the driver was upgraded without a reboot; reboot or reload the nvidia kernel modules"),
    ("failed to initialize nvml", HostStatus.ERROR, "NVML could not start"),
    ("is not a valid field to query", HostStatus.ERROR,
     "this driver does not know a queried field; drop it from the query"),
)

_CELL_NAME_RE = re.compile(r"[a-z][a-z0-9_.]*(?: \[[^\]]*\])?", re.ASCII)
_UNIT_SUFFIX_RE = re.compile(r"\s*\[[^\]]*\]$")
# digit counts are bounded so a garbage value can neither overflow to inf nor hit int()'s limit
_NUMBER_RE = re.compile(r"([-+]?[0-9]{1,15}(?:\.[0-9]{1,9})?)(?:\s*(MiB|%|W|MHz|C))?", re.ASCII)
_INT_RE = re.compile(r"[0-9]{1,10}", re.ASCII)
_TIMESTAMP_FORMAT = "%Y/%m/%d %H:%M:%S.%f"
#: Rows whose timestamps differ by more than this belong to different ticks (measured: ±2 ms).
TICK_JITTER_S = 0.1


class NvidiaSmiError(ValueError):
    """nvidia-smi printed something that is not the queried CSV.

    ``line`` is the 1-based line number in the parsed text (None when not tied to a line);
    ``status`` is what the host is: ``NO_GPU`` for "no driver / no devices", else ``ERROR``.
    """

    def __init__(self, message: str, line: int | None = None, status: HostStatus = HostStatus.ERROR,
                 source: str | None = None) -> None:
        if source is not None:
            where = source if line is None else f"{source}:{line}"
            super().__init__(f"{where}: {message}")
        else:
            super().__init__(message if line is None else f"nvidia-smi output line {line}: {message}")
        self.detail = message
        self.line = line
        self.status = status
        self.source = source

    def at(self, source: str | None) -> NvidiaSmiError:
        """The same error located in ``source`` (a file name: ``FILE:LINE: ...``); self if None."""
        return self if source is None else NvidiaSmiError(self.detail, self.line, self.status, source)


def normalize_fields(fields: str | Sequence[str]) -> tuple[str, ...]:
    """``"index, memory.used [MiB]"`` or a sequence of names -> canonical query names
    (lowercase, unit suffix dropped, header aliases such as ``clocks.current.sm`` resolved)."""
    items = fields.split(",") if isinstance(fields, str) else list(fields)
    names = tuple(_ALIASES.get(n, n) for n in (_UNIT_SUFFIX_RE.sub("", str(i).strip()).lower() for i in items))
    if not names or any(not n for n in names):
        raise NvidiaSmiError(f"empty field name in field list {fields!r}")
    return names


def nvidia_smi_argv(fields: Sequence[str] = DEFAULT_QUERY_FIELDS, *, apps: bool = False,
                    header: bool = False, units: bool = False, loop_ms: int | None = None) -> list[str]:
    """The argv of an nvidia-smi CSV query (``--query-compute-apps`` when ``apps``), e.g.
    ``nvidia-smi --query-gpu=timestamp,index,... --format=csv,noheader,nounits [-lms 1000]``."""
    fmt = "csv" + ("" if header else ",noheader") + ("" if units else ",nounits")
    query = "--query-compute-apps" if apps else "--query-gpu"
    argv = ["nvidia-smi", f"{query}={','.join(fields)}", f"--format={fmt}"]
    if loop_ms is not None:
        argv += ["-lms", str(int(loop_ms))]
    return argv


def _driver_error(line: str, lineno: int) -> NvidiaSmiError | None:
    lowered = line.lower()
    for needle, status, hint in _DRIVER_ERRORS:
        if needle in lowered:
            return NvidiaSmiError(f"{line[:200]} ({hint})", lineno, status)
    return None


def _header(line: str) -> tuple[str, ...] | None:
    """The field names if ``line`` is a CSV header (``index, memory.used [MiB], ...``)."""
    cells = [c.strip() for c in line.split(",")]
    if not all(_CELL_NAME_RE.fullmatch(c) for c in cells):
        return None
    names = normalize_fields(cells)
    return names if any(n in _KNOWN_NAMES for n in names) else None


def _split(line: str, fields: tuple[str, ...]) -> list[str] | None:
    """The cells of a data row, or None if the column count is wrong. Extra commas are given
    to ``process_name`` (the only value a workload controls), wherever it stands."""
    parts = line.split(",")
    n = len(fields)
    if len(parts) > n and "process_name" in fields:
        k = fields.index("process_name")
        tail = n - k - 1
        name = ",".join(parts[k:len(parts) - tail])
        parts = parts[:k] + [name] + parts[len(parts) - tail:]
    if len(parts) != n:
        return None
    return [p.strip() for p in parts]


def _rows(text: str, fields: str | Sequence[str] | None,
          default: tuple[str, ...]) -> Iterator[tuple[str, int, object]]:
    """Classify the lines of ``text``: yields ``("header", n, fields)``, ``("row", n, {field:
    cell})`` or ``("error", n, NvidiaSmiError)``. A header line (re)sets the fields. An
    unterminated last line that is too short after earlier data is a partial read and skipped."""
    current = normalize_fields(fields) if fields is not None else default
    lines = text.split("\n")
    seen_data = False
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        error = _driver_error(line, n)
        if error is not None:
            yield "error", n, error
            continue
        header = _header(line)
        if header is not None:
            current, seen_data = header, True
            yield "header", n, header
            continue
        cells = _split(line, current)
        if cells is None:
            got = line.count(",") + 1
            if n == len(lines) and seen_data and got < len(current):
                continue  # the rest of this line has not arrived yet
            yield "error", n, NvidiaSmiError(
                f"expected {len(current)} comma-separated values ({', '.join(current)}), "
                f"got {got}: {line[:200]!r}", n)
            continue
        seen_data = True
        yield "row", n, dict(zip(current, cells))


def _absent(cell: str) -> bool:
    """True for the tokens nvidia-smi prints instead of a value (see module docstring)."""
    return cell.lower() in ("", "n/a") or (cell.startswith("[") and cell.endswith("]"))


def _number(field: str, cell: str, unit: str | None, lineno: int) -> float | None:
    if _absent(cell):
        return None
    match = _NUMBER_RE.fullmatch(cell)
    if match is None or (match.group(2) is not None and match.group(2) != unit):
        expected = f"a number in {unit}" if unit else "a number"
        raise NvidiaSmiError(f"{field}: expected {expected}, got {cell[:80]!r}", lineno)
    return float(match.group(1))


def _integer(field: str, cell: str, lineno: int) -> int:
    if _INT_RE.fullmatch(cell) is None:
        raise NvidiaSmiError(f"{field}: expected a non-negative integer, got {cell[:80]!r}", lineno)
    return int(cell)


def _timestamp(cell: str | None) -> float | None:
    """Seconds of a ``2026/11/29 21:43:01.684`` timestamp (remote local time: only for grouping)."""
    if cell is None or _absent(cell):
        return None
    try:
        return datetime.strptime(cell, _TIMESTAMP_FORMAT).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _sample(row: dict[str, str], lineno: int, position: int) -> GpuSample:
    # a GPU's place is its index (nvidia-smi lists GPUs in index order); a uuid or name that
    # was not queried, or that nvidia-smi printed as [N/A], is None ("n/a"), never ""
    values: dict[str, object] = {"index": position, "uuid": None, "name": None}
    for field, cell in row.items():
        target = _GPU_FIELDS.get(field)
        if target is None:
            continue  # timestamp, pstate, ...: not part of a sample
        attr, unit = target
        if attr == "index":
            values[attr] = _integer(field, cell, lineno)
        elif attr in ("uuid", "name"):
            values[attr] = None if _absent(cell) else cell
        else:
            values[attr] = _number(field, cell, unit, lineno)
    return GpuSample(**values)  # type: ignore[arg-type]


_UUID_RE = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z-]{1,80}", re.ASCII)
# shapes of fields optui does not model, so that a layout whose columns they are can be told apart
_SHAPES: dict[str, re.Pattern[str]] = {
    "pstate": re.compile(r"P[0-9]{1,2}", re.ASCII),
    "pci.bus_id": re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]", re.ASCII),
    "driver_version": re.compile(r"[0-9]{2,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?", re.ASCII),
}


def _fits(row: dict[str, str], lineno: int) -> bool:
    """True if every cell of ``row`` has the shape of its field (numbers in the field's unit,
    an integer index, a ``GPU-``/``MIG-`` uuid, a parseable timestamp, a ``P0`` pstate...)."""
    try:
        _sample(row, lineno, 0)
    except NvidiaSmiError:
        return False
    for field, cell in row.items():
        if _absent(cell):
            continue
        if field == "uuid" and _UUID_RE.fullmatch(cell) is None:
            return False
        if field == "name" and _NUMBER_RE.fullmatch(cell) is not None:
            return False
        if field == "timestamp" and _timestamp(cell) is None:
            return False
        shape = _SHAPES.get(field)
        if shape is not None and shape.fullmatch(cell) is None:
            return False
    return True


def infer_fields(text: str) -> tuple[str, ...] | None:
    """The field list of a header-less ``--query-gpu`` capture, from :data:`KNOWN_LAYOUTS`.

    Returns None when no inference is needed (the first non-blank, non-driver-error line is a
    header, or there is no data line at all). Raises :class:`NvidiaSmiError` naming the first
    data line when no known layout, or more than one, has its field count and fits its values;
    the message says which field list to pass.
    """
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or _driver_error(line, n) is not None:
            continue
        if _header(line) is not None:
            return None
        count = line.count(",") + 1
        sized = [(where, layout) for where, layout in KNOWN_LAYOUTS if len(layout) == count]
        fitting = [(where, layout) for where, layout in sized
                   if _fits(dict(zip(layout, (c.strip() for c in line.split(",")))), n)]
        if len(fitting) == 1:
            return fitting[0][1]
        how = ("pass the --query-gpu= list it was captured with (`optui gpus --fields LIST`; "
               "a replay host: fields = [...])")
        if len(fitting) > 1:
            options = "; ".join(f"{','.join(layout)} ({where})" for where, layout in fitting)
            raise NvidiaSmiError(f"{count} values without a header fit several known --query-gpu layouts: "
                                 f"{options}; {how}", n)
        known = ", ".join(sorted({str(len(layout)) for _, layout in KNOWN_LAYOUTS}, key=int))
        seen = f"{count} value{'s' if count != 1 else ''} without a header"
        if sized:
            options = "; ".join(f"{','.join(layout)} ({where})" for where, layout in sized)
            raise NvidiaSmiError(f"{seen} do not fit the known --query-gpu layout(s) of that count ({options}): "
                                 f"{line[:120]!r}; {how}", n)
        raise NvidiaSmiError(f"{seen} and no known --query-gpu layout has {count} field{'s' if count != 1 else ''} "
                             f"(known counts: {known}): {line[:120]!r}; {how}", n)
    return None


def _ticks(text: str, fields: str | Sequence[str] | None) -> tuple[list[list[GpuSample]], list[NvidiaSmiError]]:
    """All ticks of ``--query-gpu`` output and every problem line (parsing goes on past them).

    A new tick starts at a header line, when a GPU (index, else uuid) repeats, or when the
    ``timestamp`` moves by more than :data:`TICK_JITTER_S`."""
    ticks: list[list[GpuSample]] = []
    errors: list[NvidiaSmiError] = []
    current: list[GpuSample] = []
    keys: set[object] = set()
    first_ts: float | None = None
    if looks_like_table(text):  # plain `nvidia-smi` (or another of its tables), pasted
        what = table_kind(text)
        try:
            table = parse_smi_table(text)
        except ValueError as exc:
            return [], [NvidiaSmiError(f"{what}: {exc}")]
        if table is None:
            return [], [NvidiaSmiError(
                f"this is {what}, a table, not --query-gpu CSV: it holds no per-GPU readings; paste plain "
                f"`nvidia-smi` or `nvidia-smi --query-gpu={','.join(DEFAULT_QUERY_FIELDS)} --format=csv`")]
        return [table], []
    if fields is None:
        try:
            fields = infer_fields(text)
        except NvidiaSmiError as exc:
            # a driver message in the text says more than "unknown layout": it comes first
            driver = [e for n, raw in enumerate(text.split("\n"), 1)
                      if (e := _driver_error(raw.strip(), n)) is not None]
            return [], sorted([*driver, exc], key=lambda e: e.line or 0)

    def close_tick() -> None:
        nonlocal current, first_ts
        if current:
            ticks.append(current)
        current, first_ts = [], None
        keys.clear()

    for kind, lineno, payload in _rows(text, fields, DEFAULT_QUERY_FIELDS):
        if kind == "error":
            errors.append(payload)  # type: ignore[arg-type]
            continue
        if kind == "header":
            close_tick()
            continue
        row: dict[str, str] = payload  # type: ignore[assignment]
        try:
            sample = _sample(row, lineno, len(current))
        except NvidiaSmiError as exc:
            errors.append(exc)
            continue
        key = sample.index if "index" in row else (sample.uuid or None) if "uuid" in row else None
        ts = _timestamp(row.get("timestamp"))
        moved = ts is not None and first_ts is not None and abs(ts - first_ts) > TICK_JITTER_S
        if current and (moved or (key is not None and key in keys)):
            close_tick()
        if first_ts is None:
            first_ts = ts
        keys.add(key)
        current.append(sample)
    close_tick()
    return ticks, errors


def parse_query_gpu(text: str, fields: str | Sequence[str] | None = None, *,
                    source: str | None = None) -> list[GpuSample]:
    """The GPUs of the last tick in ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``
    output (one-shot, or a ``-lms`` stream: earlier ticks are dropped).

    ``fields``: the queried field names for header-less text; without them the layout is
    inferred from the first row (:func:`infer_fields`, :data:`KNOWN_LAYOUTS`); a header line in
    the text takes precedence. Fields optui does not model (``pstate``, ``clocks.mem``...) are
    ignored; modelled fields that were not queried are None. Empty text gives ``[]``.
    Raises :class:`NvidiaSmiError` (naming the line, and ``source`` - a file name - if given) on
    a driver error message, a header-less capture of no single known layout, a row with the
    wrong number of values, or a value that is neither a number (in the field's unit) nor an
    N/A token.
    """
    ticks, errors = _ticks(text, fields)
    if errors:
        raise errors[0].at(source)
    return ticks[-1] if ticks else []


def parse_compute_apps(text: str, fields: str | Sequence[str] | None = None) -> dict[str, tuple[GpuProcess, ...]]:
    """``nvidia-smi --query-compute-apps=... --format=csv[,noheader][,nounits]`` output ->
    processes per GPU UUID (MIG: the parent GPU's UUID). Needs ``gpu_uuid`` and ``pid`` among
    the fields (default :data:`DEFAULT_APPS_FIELDS`); ``process_name`` may contain commas
    anywhere in the row. Empty text (no processes, with ``noheader``) gives ``{}``.
    Raises :class:`NvidiaSmiError` like :func:`parse_query_gpu`."""
    result: dict[str, list[GpuProcess]] = {}
    for kind, lineno, payload in _rows(text, fields, normalize_fields(DEFAULT_APPS_FIELDS)):
        if kind == "error":
            raise payload  # type: ignore[misc]
        if kind != "row":
            continue
        row: dict[str, str] = payload  # type: ignore[assignment]
        if "uuid" not in row or "pid" not in row:
            raise NvidiaSmiError("compute-apps rows need the gpu_uuid and pid fields", lineno)
        name = row.get("process_name", "")
        process = GpuProcess(
            pid=_integer("pid", row["pid"], lineno),
            name="" if _absent(name) else name,
            used_mib=_number("used_memory", row.get("used_memory", ""), "MiB", lineno),
        )
        result.setdefault(row["uuid"], []).append(process)
    return {uuid: tuple(procs) for uuid, procs in result.items()}


def snapshot_from_nvidia_smi(host: str, text: str, fields: str | Sequence[str] | None = None, *,
                             apps_text: str | None = None, taken_at: float | None = None,
                             source: str | None = None) -> HostSnapshot:
    """A :class:`HostSnapshot` (``source="nvidia-smi"``) from ``--query-gpu`` output; never raises.

    - rows parsed, no problem: ``LIVE``;
    - rows parsed but also problem lines (e.g. "Unable to determine the device handle for GPU
      0000:0B:00.0: Unknown Error" next to the healthy GPUs): ``ERROR`` with the GPUs that did
      answer and the problem text in ``error``, so a lost GPU is not silently dropped;
    - no rows: ``NO_GPU`` (driver missing, "No devices were found", empty output) or ``ERROR``.

    ``apps_text`` (optional ``--query-compute-apps`` output with :data:`DEFAULT_APPS_FIELDS` or a
    header) fills each sample's ``processes`` (``()`` = none); if it does not parse, processes
    stay ``None`` and the problem is noted in ``extra["apps_error"]``. ``fields`` and
    ``source`` (the file a capture was read from, named in error messages) are as in
    :func:`parse_query_gpu`.
    """
    when = time.time() if taken_at is None else taken_at
    try:
        ticks, errors = _ticks(text, fields)
        errors = [e.at(source) for e in errors]
        samples = ticks[-1] if ticks else []
        extra: dict[str, object] = {}
        if apps_text is not None and samples:
            try:
                procs = parse_compute_apps(apps_text)
                samples = [replace(s, processes=procs.get(s.uuid, ())) for s in samples]
            except NvidiaSmiError as exc:
                extra["apps_error"] = str(exc)
        if errors:
            more = len(errors) - 1
            message = str(errors[0]) + (f" (+{more} more problem line{'s' if more > 1 else ''})" if more else "")
            status = HostStatus.ERROR if samples else errors[0].status
            return HostSnapshot(host, tuple(samples), when, status, message, "nvidia-smi", extra)
        if not samples:
            return HostSnapshot(host, (), when, HostStatus.NO_GPU, "nvidia-smi reported no GPUs (empty output)",
                                "nvidia-smi", extra)
        return HostSnapshot(host, tuple(samples), when, HostStatus.LIVE, None, "nvidia-smi", extra)
    except Exception as exc:  # noqa: BLE001 - a UI source must never raise; say what broke instead
        return HostSnapshot(host, (), when, HostStatus.ERROR, f"could not parse nvidia-smi output: {exc!r}",
                            "nvidia-smi")
