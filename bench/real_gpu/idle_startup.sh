#!/usr/bin/env bash
# Idle CPU beside nvitop and the first frame beside a bare Textual app, on a GPU machine without
# network (issue 33's "H200 figures"), in one device call:
#
#   OUT=$OUT bench/real_gpu/idle_startup.sh      (the device tool: carry [".device"])
#
# Installs the carried wheels (.device/whl: optui's runtime deps + nvitop 1.7.2, from
# bench/real_gpu/prepare.sh plus `pip download nvitop==1.7.2`) into a target dir, byte-compiles
# everything (as a pip install would), then runs
#   python3 bench/idle_cpu.py --pair optui-nvml 'python3 -m nvitop --interval 1' --runs $IDLE_RUNS
#   python3 bench/startup.py --runs $STARTUP_RUNS
# and writes both outputs to $OUT (idle.txt, startup.txt, versions.txt).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/bench/results/real_gpu_idle}
WORK=${WORK:-/tmp/optui-idle}
IDLE_RUNS=${IDLE_RUNS:-3}
STARTUP_RUNS=${STARTUP_RUNS:-10}
. bench/real_gpu/carried_site.sh
{
    git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "revision unknown"
    "$PYTHON" -VV; nproc; uptime
    nvidia-smi -L 2>&1 | head -2
    "$PYTHON" -c 'import textual, nvitop; print("textual", textual.__version__, "nvitop", nvitop.__version__)'
} >"$OUT/versions.txt" 2>&1
timeout 330 "$PYTHON" bench/idle_cpu.py --pair optui-nvml "$PYTHON -m nvitop --interval 1" --runs "$IDLE_RUNS" >"$OUT/idle.txt" 2>&1
echo "rc $?" >>"$OUT/idle.txt"
timeout 200 "$PYTHON" bench/startup.py --runs "$STARTUP_RUNS" >"$OUT/startup.txt" 2>&1
echo "rc $?" >>"$OUT/startup.txt"
uptime >>"$OUT/versions.txt"
