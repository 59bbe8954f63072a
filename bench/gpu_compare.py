#!/usr/bin/env python3
"""Cross-check optui's GPU readings against nvidia-smi on a machine with NVIDIA GPUs.

Usage (from the repository root; optui must be importable, or ``src/`` next to ``bench/``):

    python bench/gpu_compare.py                  # idle: `optui gpus --json` vs nvidia-smi
    python bench/gpu_compare.py --app-headless   # also optui's NVML source read in-process, as the app does
    python bench/gpu_compare.py --load 30        # then again under a PyTorch bf16 matmul load on GPU 0
    python bench/gpu_compare.py --load 30 --load-python /path/to/venv/bin/python --gib 20 --json
    python bench/gpu_compare.py --tui --load 30   # also the real TUI, headless (its GPU panel)

What it does, per phase (idle, then loaded with ``--load``), per optui reader:
  1. one optui reading (``[sys.executable, "-m", "optui", "gpus", "--json"]`` in a subprocess,
     or ``NvmlGpuSource().read()`` in this process with ``--app-headless``), then immediately
  2. ``nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,memory.reserved,
     utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit
     --format=csv,noheader,nounits`` (parsed here with its own few lines, not optui's parser),
  3. a per-GPU (matched by UUID) table of both values and a verdict per field.

Tolerances: name/uuid exact; memory used/reserved/total within 1 MiB (nvidia-smi prints whole
MiB, rounding 615.06 up to 616); temperature 2 °C; power draw 15 % or 30 W, whichever is larger
(it moves between the two reads); utilization 20 points, judged only under load; power limit
1 W (nvidia-smi's ``power.limit`` is the management limit, optui reads the enforced limit: they
differ only under an external cap, so it only warns).

The load child (``--load SECONDS``, needs torch with CUDA in ``--load-python``, default this
interpreter) allocates ``--gib`` GiB on CUDA device 0 (PCI bus order) and runs bf16 8192x8192
matmuls; the comparison starts once nvidia-smi shows the memory, and the child is stopped after
it (it also exits by itself after SECONDS).

Exit status: 0 all stable fields agree; 1 a stable field (name, uuid, memory, GPU set)
disagrees; 2 a reading could not be taken (and nothing disagreed). ``--json`` adds a JSON
summary as the last thing printed. Stdlib only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
SMI_FIELDS = ("index", "uuid", "name", "mem_used_mib", "mem_total_mib", "mem_reserved_mib",
              "util_gpu_pct", "util_mem_pct", "temp_c", "power_w", "power_limit_w")
SMI_ARGV = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total,memory.reserved,utilization.gpu,"
            "utilization.memory,temperature.gpu,power.draw,power.limit", "--format=csv,noheader,nounits"]
# field, tolerance description, stable (a mismatch fails the run), judged only under load
CHECKS = (
    ("uuid", "exact", True, False),
    ("name", "exact", True, False),
    ("mem_total_mib", "±1 MiB", True, False),
    ("mem_reserved_mib", "±1 MiB", True, False),
    ("mem_used_mib", "±1 MiB", True, False),
    ("temp_c", "±2 °C", False, False),
    ("power_w", "±max(15%, 30 W)", False, False),
    ("power_limit_w", "±1 W", False, False),
    ("util_gpu_pct", "±20 pts", False, True),
    ("util_mem_pct", "±20 pts", False, True),
)
LOAD_CHILD = r"""
import sys, time, torch
seconds, gib = float(sys.argv[1]), float(sys.argv[2])
dev = torch.device("cuda:0")
hold = torch.ones(int(gib * 2**30), dtype=torch.uint8, device=dev)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
torch.cuda.synchronize()
print("ready", torch.cuda.get_device_name(0), flush=True)
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""


class ReadError(Exception):
    """A reading could not be taken (tool missing, error output, timeout)."""


def child_env() -> dict:
    env = dict(os.environ)
    if SRC.is_dir():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def timed_run(argv: list[str], timeout: float = 30.0) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env(), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReadError(f"{argv[0]}: {exc}") from exc
    return done, (time.perf_counter() - started) * 1000


def smi_value(cell: str):
    cell = cell.strip()
    if cell in ("", "N/A") or (cell.startswith("[") and cell.endswith("]")):
        return None
    try:
        return float(cell)
    except ValueError:
        return cell


def read_smi() -> tuple[list[dict], float]:
    done, ms = timed_run(SMI_ARGV, timeout=10.0)
    gpus = []
    for line in done.stdout.splitlines():
        cells = line.split(", ")
        if len(cells) != len(SMI_FIELDS):
            raise ReadError(f"nvidia-smi (rc {done.returncode}): {line.strip() or done.stderr.strip()}")
        gpu = {k: smi_value(v) for k, v in zip(SMI_FIELDS, cells)}
        gpu["uuid"], gpu["name"] = cells[1].strip(), cells[2].strip()
        gpu["index"] = int(cells[0]) if cells[0].strip().isdigit() else gpu["index"]
        gpus.append(gpu)
    if done.returncode != 0 or not gpus:
        raise ReadError(f"nvidia-smi rc {done.returncode}: {(done.stdout + done.stderr).strip()[:300]}")
    return gpus, ms


def read_optui_cli() -> tuple[list[dict], float, dict]:
    done, ms = timed_run([sys.executable, "-m", "optui", "gpus", "--json"])
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise ReadError(f"optui gpus --json (rc {done.returncode}): not JSON: {done.stdout[:200]!r} "
                        f"{done.stderr[-300:]!r}") from exc
    if isinstance(data, dict):
        raise ReadError(f"optui gpus --json (rc {done.returncode}): {data.get('error')}")
    return data, ms, {"rc": done.returncode}


def read_optui_headless() -> tuple[list[dict], float, dict]:
    if SRC.is_dir() and str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    from optui.adapters.gpu_nvml import NvmlGpuSource

    async def two_reads():
        source = NvmlGpuSource()
        try:
            t0 = time.perf_counter()
            first = await source.read()
            t1 = time.perf_counter()
            second = await source.read()
            t2 = time.perf_counter()
        finally:
            await source.close()
        return first, second, (t1 - t0) * 1000, (t2 - t1) * 1000

    first, snap, first_ms, ms = asyncio.run(two_reads())
    if str(snap.status) != "live":
        raise ReadError(f"NvmlGpuSource.read(): {snap.status}: {snap.error}")
    info = {"first_read_ms": round(first_ms, 2), "memory_api": snap.extra.get("memory_api"),
            "driver_version": snap.extra.get("driver_version"), "first_status": str(first.status)}
    return [s.to_json(snap.host) for s in snap.samples], ms, info


def read_optui_tui() -> tuple[list[dict], float, dict]:
    """The real TUI, headless (bench/app_headless_gpu.py in a subprocess): what its GPU panel
    and session snapshot show."""
    argv = [sys.executable, str(Path(__file__).resolve().parent / "app_headless_gpu.py")]
    svg = os.environ.get("OPTUI_TUI_SVG")
    if svg:
        argv += ["--svg", svg]
    done, ms = timed_run(argv, timeout=60)
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError) as exc:
        raise ReadError(f"app_headless_gpu.py (rc {done.returncode}): {done.stderr[-400:]!r}") from exc
    if data["status"] != "live":
        raise ReadError(f"TUI GPU panel: {data['status']}: {data.get('error')}")
    missing = [g["name"] for g in data["gpus"] if g["name"].replace("NVIDIA ", "") not in data["panel"]]
    if missing:
        raise ReadError(f"TUI GPU panel does not show {missing}: {data['panel']!r}")
    print("\n-- TUI GPU panel (headless):\n" + data["panel"])
    return data["gpus"], ms, {"ms_to_first_reading": data["ms_to_first_reading"]}


def judge(field: str, ours, theirs, loaded: bool, only_loaded: bool) -> tuple[object, str]:
    """(difference, verdict) with verdict ok / off / skip (see the tolerances in the module doc)."""
    if only_loaded and not loaded:
        return None, "skip"
    if ours is None or theirs is None or isinstance(ours, str) or isinstance(theirs, str):
        return None, "ok" if ours == theirs else "off"
    diff = round(float(ours) - float(theirs), 2)
    limit = {"temp_c": 2.0, "power_limit_w": 1.0, "util_gpu_pct": 20.0, "util_mem_pct": 20.0,
             "power_w": max(0.15 * abs(float(theirs)), 30.0)}.get(field, 1.0)
    return diff, "ok" if abs(diff) <= limit + 1e-9 else "off"


def compare(phase: str, reader: str, ours: list[dict], theirs: list[dict], loaded: bool) -> dict:
    by_uuid = {g["uuid"]: g for g in theirs}
    result = {"phase": phase, "reader": reader, "gpus": [], "failures": [], "warnings": []}
    for uuid in sorted(set(by_uuid) ^ {g["uuid"] for g in ours}):
        result["failures"].append(f"{phase}/{reader}: GPU {uuid} is seen by only one side")
    for gpu in ours:
        other = by_uuid.get(gpu["uuid"])
        if other is None:
            continue
        rows = []
        for field, tolerance, stable, only_loaded in CHECKS:
            diff, verdict = judge(field, gpu.get(field), other.get(field), loaded, only_loaded)
            if verdict == "off":
                verdict = "MISMATCH" if stable else "warn"
                message = f"{phase}/{reader}: GPU {gpu['index']} {field}: optui {gpu.get(field)} vs nvidia-smi {other.get(field)}"
                result["failures" if stable else "warnings"].append(message)
            rows.append({"field": field, "optui": gpu.get(field), "nvidia_smi": other.get(field), "diff": diff,
                         "tolerance": tolerance, "verdict": verdict})
        result["gpus"].append({"index": gpu["index"], "uuid": gpu["uuid"], "name": gpu["name"], "fields": rows})
    return result


def print_comparison(result: dict, timing: dict) -> None:
    print(f"\n== {result['phase']}: {result['reader']} vs nvidia-smi  ({', '.join(f'{k} {v}' for k, v in timing.items())})")
    for gpu in result["gpus"]:
        print(f"GPU {gpu['index']}  {gpu['uuid']}  {gpu['name']}")
        print(f"  {'field':<18}{'optui':>14}{'nvidia-smi':>14}{'diff':>10}  {'tolerance':<17}verdict")
        for r in gpu["fields"]:
            if r["field"] in ("uuid", "name"):
                print(f"  {r['field']:<18}{'(same)' if r['verdict'] == 'ok' else r['optui']!s:>28}{'':>10}  "
                      f"{r['tolerance']:<17}{r['verdict']}")
                continue
            print(f"  {r['field']:<18}{r['optui']!s:>14}{r['nvidia_smi']!s:>14}{'' if r['diff'] is None else r['diff']!s:>10}  "
                  f"{r['tolerance']:<17}{r['verdict']}")
    for line in result["failures"]:
        print(f"  MISMATCH: {line}")


def run_phase(phase: str, readers: list[str], loaded: bool, summary: dict) -> None:
    for reader in readers:
        try:
            ours, ours_ms, info = READERS[reader]()
            theirs, smi_ms = read_smi()
        except ReadError as exc:
            summary["errors"].append(f"{phase}/{reader}: {exc}")
            print(f"\n== {phase}: {reader}: could not read: {exc}")
            continue
        timing = {"optui_ms": round(ours_ms, 1), "nvidia_smi_ms": round(smi_ms, 1), **info}
        result = compare(phase, reader, ours, theirs, loaded)
        result["timing"] = timing
        print_comparison(result, timing)
        summary["comparisons"].append(result)
        summary["failures"] += result["failures"]
        summary["warnings"] += result["warnings"]


READERS = {"optui-cli": read_optui_cli, "optui-nvml-inproc": read_optui_headless, "optui-tui": read_optui_tui}


def start_load(python: str, seconds: float, gib: float, summary: dict) -> subprocess.Popen | None:
    """Start the torch child and wait until nvidia-smi shows its memory; None if impossible."""
    probe = subprocess.run([python, "-c", "import torch; assert torch.cuda.is_available()"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        summary["load"] = {"skipped": f"torch with CUDA not importable by {python}"}
        print(f"\n-- load phase skipped: torch with CUDA not importable by {python}")
        return None
    before = {g["uuid"]: g["mem_used_mib"] or 0.0 for g in read_smi()[0]}
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    child = subprocess.Popen([python, "-c", LOAD_CHILD, str(seconds), str(gib)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    ready = child.stdout.readline().strip()
    deadline = time.monotonic() + 60
    while child.poll() is None and time.monotonic() < deadline:
        grown = [g for g in read_smi()[0] if (g["mem_used_mib"] or 0.0) - before.get(g["uuid"], 0.0) >= 0.9 * gib * 1024]
        if grown:
            time.sleep(3.0)  # utilization is averaged over up to 1 s: let it reach the load
            summary["load"] = {"gpu": grown[0]["uuid"], "child": ready, "gib": gib, "seconds": seconds}
            print(f"\n-- load running on GPU {grown[0]['index']} ({ready})")
            return child
        time.sleep(0.5)
    stop_load(child)
    summary["errors"].append(f"load: the child's memory never showed ({child.stderr.read()[-500:]!r})")
    return None


def stop_load(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=float, metavar="SECONDS", help="also compare under a torch load (>= 10 s)")
    parser.add_argument("--gib", type=float, default=20.0, help="GiB the load child holds on GPU 0 (default 20)")
    parser.add_argument("--load-python", default=sys.executable, help="interpreter with torch for the load child")
    parser.add_argument("--app-headless", action="store_true", help="also read optui's NVML source in-process")
    parser.add_argument("--tui", action="store_true", help="also run the real TUI headless and read its GPU panel")
    parser.add_argument("--json", action="store_true", help="print a JSON summary at the end")
    args = parser.parse_args(argv)
    if args.load is not None and args.load < 10:
        parser.error("--load needs at least 10 seconds")
    readers = ["optui-cli"] + (["optui-nvml-inproc"] if args.app_headless else []) + (["optui-tui"] if args.tui else [])
    summary: dict = {"comparisons": [], "failures": [], "warnings": [], "errors": [], "load": None}
    run_phase("idle", readers, False, summary)
    if args.load is not None:
        try:
            child = start_load(args.load_python, args.load, args.gib, summary)
        except ReadError as exc:
            child, summary["errors"] = None, summary["errors"] + [f"load: {exc}"]
        if child is not None:
            try:
                run_phase("loaded", readers, True, summary)
            finally:
                stop_load(child)
    code = 1 if summary["failures"] else 2 if summary["errors"] else 0
    summary["ok"], summary["exit"] = code == 0, code
    print(f"\n{len(summary['failures'])} mismatch(es), {len(summary['warnings'])} warning(s), "
          f"{len(summary['errors'])} error(s): {'OK' if code == 0 else 'FAIL' if code == 1 else 'INCOMPLETE'}")
    for line in summary["warnings"] + summary["errors"]:
        print(f"  {line}")
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
