#!/usr/bin/env bash
# Where optui's idle CPU on NVML goes, and how long the unit tests take alone, on a GPU
# machine without network (issue 33), in one device call:
#
#   OUT=$OUT bench/real_gpu/idle_profile.sh      (the device tool: carry [".device"])
#
# 1. threads.txt: bench/idle_cpu.py --target optui-nvml --threads (each thread's % of
#    one core, 5-65 s after the start, by thread name);
# 2. yappi.txt: the same app with yappi_idle/sitecustomize.py (yappi, CPU clock, every thread,
#    5-65 s): the functions by own CPU time, each thread's total. yappi's hooks make
#    everything slower: read the shares, not the sums;
# 3. unit.txt: pytest tests/unit alone in one process (--durations=15).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/bench/results/real_gpu_profile}
WORK=${WORK:-/tmp/optui-profile}
. bench/real_gpu/carried_site.sh
{ "$PYTHON" -VV; nproc; uptime; nvidia-smi -L 2>&1 | head -2; } >"$OUT/versions.txt" 2>&1
timeout 200 "$PYTHON" bench/idle_cpu.py --target optui-nvml --threads --runs 1 >"$OUT/threads.txt" 2>&1
echo "rc $?" >>"$OUT/threads.txt"
PYTHONPATH=$ROOT/bench/real_gpu/yappi_idle:$PYTHONPATH timeout 120 "$PYTHON" bench/idle_cpu.py --target optui-nvml \
    --threads --env OPTUI_YAPPI_OUT="$OUT/yappi.txt" --env OPTUI_YAPPI_END=60 >"$OUT/yappi_run.txt" 2>&1
echo "rc $?" >>"$OUT/yappi_run.txt"
timeout 150 "$PYTHON" -m pytest tests/unit -q -p no:cacheprovider --durations=15 >"$OUT/unit.txt" 2>&1
echo "rc $?" >>"$OUT/unit.txt"
uptime >>"$OUT/versions.txt"
