"""Reading ``nvidia-smi``'s default table (what plain ``nvidia-smi`` prints), pure.

Operators paste the table far more often than ``--query-gpu`` CSV. Its shape (driver 580 on
B200/H100; drivers 470-575 print the same cells with other column widths)::

    | NVIDIA-SMI 580.82.07              Driver Version: 580.82.07      CUDA Version: 13.0     |
    |=========================================+========================+======================|
    |   0  NVIDIA B200                    On  |   00000000:1B:00.0 Off |                    0 |
    | N/A   32C    P0            140W / 1000W |       0MiB / 183359MiB |      0%      Default |
    ...
    | Processes:                                                                              |
    |    1   N/A  N/A          123456      C   python3                                91220MiB |

Each GPU is two rows of ``|``-separated cells: ``index name persistence | bus-id disp |
ecc`` then ``fan temp perf power/cap | used/total memory | util compute-mode`` (a third row
of MIG mode on newer drivers). Cells are found by the ``|`` separators and read by regex,
never by column. Units: MiB, °C, W, %. The table has no UUID (``uuid`` is None) nor memory
bandwidth utilization. Other tables (``nvidia-smi mig -lgip``, ``topo -m``...) hold no
per-GPU readings and are refused by name (:func:`table_kind`).
"""

from __future__ import annotations

import re

from optui.core.gpu.samples import GpuProcess, GpuSample

_TABLE_LINE = re.compile(r"^\s*(?:\+[-=+]{10,}\+|\|.*\|)\s*$")
_GPU_ROW = re.compile(r"^\s*(\d{1,3})\s+(.+?)\s+(On|Off)\s*$")
_STATE_ROW = re.compile(r"^\s*(N/A|\d{1,3}%)\s+(N/A|\d{1,4})C?\s+(P\d{1,2}|N/A)\s+(N/A|\d{1,6})W?\s*/\s*(N/A|\d{1,6})W?\s*$")
_MEMORY = re.compile(r"^\s*(\d{1,9})MiB\s*/\s*(\d{1,9})MiB\s*$")
_UTIL = re.compile(r"^\s*(N/A|\d{1,3})%?\s")
_PROCESS = re.compile(r"^\s*(\d{1,3})\s+(\S+)\s+(\S+)\s+(\d{1,10})\s+(\S{1,3})\s+(.+?)\s+(\d{1,9})MiB\s*$")

#: Substrings that name a table nvidia-smi prints, and what it is, for the refusal message.
TABLE_KINDS: tuple[tuple[str, str], ...] = (
    ("GPU instance profiles:", "`nvidia-smi mig -lgip` (GPU instance profiles, not per-GPU readings)"),
    ("Compute instance profiles:", "`nvidia-smi mig -lcip` (compute instance profiles, not per-GPU readings)"),
    ("GPU instances:", "`nvidia-smi mig -lgi` (GPU instances, not per-GPU readings)"),
    ("NVIDIA-SMI ", "`nvidia-smi`'s default table"),
)


def looks_like_table(text: str) -> bool:
    """True when the first non-blank line of ``text`` (after a date line) is a box-drawing
    line of an nvidia-smi table: ``+-----+`` or ``| ... |``."""
    for raw in text.split("\n")[:3]:
        line = raw.strip()
        if line and _TABLE_LINE.match(line):
            return True
    return False


def table_kind(text: str) -> str:
    """What table ``text`` is, for a message: one of :data:`TABLE_KINDS`'s descriptions, or
    ``"an nvidia-smi table"``."""
    head = text[:5000]
    for needle, what in TABLE_KINDS:
        if needle in head:
            return what
    return "an nvidia-smi table"


def _cells(line: str) -> list[str]:
    return line.strip().strip("|").split("|")


def parse_smi_table(text: str) -> list[GpuSample] | None:
    """The GPUs of nvidia-smi's default table, in table order, with their processes when the
    ``Processes:`` section is there (``()`` when it says ``No running processes found``).
    None when ``text`` holds no GPU rows of that table (another table: see :func:`table_kind`).
    Raises ValueError naming the line for a GPU row whose readings row does not parse."""
    lines = text.split("\n")
    samples: list[GpuSample] = []
    processes: dict[int, list[GpuProcess]] | None = None
    in_processes = False
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip().startswith("|"):
            continue
        if "Processes:" in line:
            in_processes, processes = True, {}
            continue
        cells = _cells(line)
        if in_processes:
            m = _PROCESS.match(cells[0]) if len(cells) == 1 else None
            if m is not None:
                gpu, pid, name, mib = int(m.group(1)), int(m.group(4)), m.group(6), float(m.group(7))
                processes.setdefault(gpu, []).append(GpuProcess(pid, name, mib))  # type: ignore[union-attr]
            continue
        m = _GPU_ROW.match(cells[0]) if len(cells) >= 3 else None
        if m is None:
            continue
        index, name = int(m.group(1)), m.group(2).strip()
        state = _cells(lines[i]) if i < len(lines) else []
        s = _STATE_ROW.match(state[0]) if len(state) >= 3 else None
        mem = _MEMORY.match(state[1]) if s is not None else None
        util = _UTIL.match(state[2] + " ") if s is not None else None
        if s is None or mem is None or util is None:
            raise ValueError(f"line {i + 1}: GPU {index}'s readings row does not read as "
                             f"'FAN TEMP PERF POWER/CAP | USED/TOTAL | UTIL% MODE': {lines[i][:120] if i < len(lines) else ''!r}")
        i += 1

        def num(text: str) -> float | None:
            return None if text == "N/A" else float(text)

        samples.append(GpuSample(
            index=index, uuid=None, name=name,  # type: ignore[arg-type]  # the table has no UUID
            mem_used_mib=float(mem.group(1)), mem_total_mib=float(mem.group(2)),
            util_gpu_pct=num(util.group(1)), temp_c=num(s.group(2)),
            power_w=num(s.group(4)), power_limit_w=num(s.group(5)),
        ))
    if not samples:
        return None
    if processes is not None:
        from dataclasses import replace

        samples = [replace(g, processes=tuple(processes.get(g.index, ()))) for g in samples]
    return samples
