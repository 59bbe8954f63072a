#!/usr/bin/env bash
# A real GPU campaign through optui, start to end, in one call (see bench/real_gpu/README.md):
# build llama-server with CUDA, generate a 505M-parameter model, drive the tuning loop through
# the CLI and the headless TUI, and write what happened to ${OUT:-bench/results/real_gpu}:
#
#   campaign.txt     every step: UTC time, seconds since start, the command, its output, rc
#   pytest-pyXY.txt  $PYTEST_ARGS run under this Python (only when PYTEST_ARGS is set)
#   findings.md      `optui journal export --format md` at the end
#   tui-*.svg        the TUI headless at 200x50: ready, after a benchmark, re-attached
#   summary.json     the key figures (probe.py summary)
#   artifacts.tar.gz every step's output, the journal, server logs, config, nvidia-smi timeline, build log
#
# Run from anywhere: bench/real_gpu/run.sh. Everything comes from .device/ (prepare.sh): no network.
# Knobs (environment): LLAMA_SERVER=path (skip the build), MODEL_ARGS (make_tiny_gguf.py sizes),
# SERVER_ARGS, NO_GPU=1 (no nvidia-smi parts), PYTHON, INSTALL_WHEELS=0 (use PYTHON's packages),
# PYTEST_ARGS / PYTEST_TIMEOUT_S, BUDGET_S (default 540: the whole script), BENCH_IN/OUT/PROMPTS,
# BIGKV_NP/BIGKV_CTX (the -np/-c restart), OOM_CTX (the launch that cannot fit), CUDA_ARCH, JOBS, WORK.
#
# No `set -e`: a failing step is logged and the next one runs; every wait is bounded.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
HERE=$ROOT/bench/real_gpu
OUT=${OUT:-$ROOT/bench/results/real_gpu}
WORK=${WORK:-/tmp/optui-real-gpu}
BUDGET_S=${BUDGET_S:-540}
RESERVE_S=${RESERVE_S:-25}          # kept for the findings export, packing and cleanup
PYTHON=${PYTHON:-python3}
# Absolute, not resolved (a venv's python is a symlink that must keep its path): steps run elsewhere.
if [[ $PYTHON == */* ]]; then PYTHON=$(realpath -s "$PYTHON"); else PYTHON=$(command -v "$PYTHON"); fi
INSTALL_WHEELS=${INSTALL_WHEELS:-1}
LLAMA_SERVER=${LLAMA_SERVER:-}
MODEL_ARGS=${MODEL_ARGS:---layers 8 --embd 2048 --heads 16 --kv-heads 8 --ff 8192 --ctx 8192}
SERVER_ARGS=${SERVER_ARGS:--ngl 99 -c 16384 -np 4}
BIGKV_NP=${BIGKV_NP:-16}
BIGKV_CTX=${BIGKV_CTX:-65536}
OOM_CTX=${OOM_CTX:-8388608}         # 8M cells x 32 KiB/cell (8 layers, 8 KV heads x 128, f16) = 256 GiB
BENCH_IN=${BENCH_IN:-512}
BENCH_OUT=${BENCH_OUT:-128}
BENCH_PROMPTS=${BENCH_PROMPTS:-24}  # 48 before every benchmark ran 3 repeats: the 2026-12-05 run spent its budget by the second sweep
NO_GPU=${NO_GPU:-}
PYTEST_ARGS=${PYTEST_ARGS:-}
PYTEST_TIMEOUT_S=${PYTEST_TIMEOUT_S:-300}
export TERM=${TERM:-xterm-256color} PYTHONUNBUFFERED=1

T0=$SECONDS
START=$(date +%s.%N)
STEPS=$WORK/steps
CAMP=$WORK/campaign
CAMPAIGN=$OUT/campaign.txt
rm -rf "$WORK"
mkdir -p "$STEPS" "$CAMP" "$WORK/bin" "$WORK/art" "$OUT"
rm -f "$OUT"/campaign.txt "$OUT"/pytest-py*.txt "$OUT"/findings.md "$OUT"/tui-*.svg "$OUT"/summary.json "$OUT"/artifacts.tar.gz

elapsed() { awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
left() { echo $((BUDGET_S - (SECONDS - T0))); }
log() { printf '[%s UTC +%ss] %s\n' "$(date -u +%H:%M:%S)" "$(elapsed)" "$*" | tee -a "$CAMPAIGN"; }

N=0
BG_PIDS=()
_stepfile() { printf '%s/%02d-%s.txt' "$STEPS" "$N" "$1"; }  # after N=$((N + 1)) in the caller
_limit() {  # the step's limit, cut to the budget left (minus the reserve); 0 = skip
    local want=$1 avail=$(($(left) - RESERVE_S))
    if ((avail < 5)); then echo 0; elif ((want > avail)); then echo "$avail"; else echo "$want"; fi
}

# step NAME LIMIT_S CMD...: run CMD (bounded), its output into steps/NN-NAME.txt and campaign.txt.
step() {
    local name=$1 want=$2 limit f rc t
    shift 2
    N=$((N + 1))
    f=$(_stepfile "$name")
    limit=$(_limit "$want")
    if ((limit == 0)); then log "== $name: SKIPPED (budget spent)"; echo skipped >"$f"; return 99; fi
    log "== $name (limit ${limit}s)"
    log "\$ $*"
    t=$SECONDS
    timeout -k 5 "$limit" "$@" >"$f" 2>&1 </dev/null
    rc=$?
    cat "$f" >>"$CAMPAIGN"
    ((rc == 124)) && log "-- $name: TIMED OUT after ${limit}s"
    log "-- $name: rc=$rc in $((SECONDS - t))s"
    return $rc
}

# step_bg NAME LIMIT_S CMD...: the same, in the background; step_wait collects it (one at a time).
BG_STEP=() BG_STEP_PID=
step_bg() {
    local name=$1 want=$2 limit f
    shift 2
    N=$((N + 1))
    f=$(_stepfile "$name")
    limit=$(_limit "$want")
    BG_STEP=("$name" "$f" "$SECONDS")
    if ((limit == 0)); then log "== $name: SKIPPED (budget spent)"; echo skipped >"$f"; BG_STEP_PID=; return 99; fi
    log "== $name (background, limit ${limit}s)"
    log "\$ $* &"
    (timeout -k 5 "$limit" "$@" >"$f" 2>&1 </dev/null; echo $? >"$f.rc") &
    BG_STEP_PID=$!
}
step_wait() {
    local name=${BG_STEP[0]} f=${BG_STEP[1]} rc
    [[ -n $BG_STEP_PID ]] && wait "$BG_STEP_PID"
    rc=$(cat "$f.rc" 2>/dev/null || echo skipped)
    rm -f "$f.rc"
    log "-- $name (background) output:"
    cat "$f" >>"$CAMPAIGN"
    log "-- $name: rc=$rc in $((SECONDS - BG_STEP[2]))s"
    BG_STEP_PID=
}

# A background job in its own process group, killed (group) at exit.
start_bg() {  # start_bg LOGFILE CMD...
    local logf=$1
    shift
    setsid "$@" >"$logf" 2>&1 </dev/null &
    BG_PIDS+=($!)
}

server_pid() { "$PYTHON" "$HERE/probe.py" pid "$CAMP/.optui" llama 2>/dev/null; }
stop_server() {  # the group optui's pidfile names: TERM, up to 15 s, KILL
    local pid
    pid=$(server_pid) || return 0
    kill -TERM -- "-$pid" 2>/dev/null || return 0
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null
}
cleanup() {
    stop_server
    for pid in "${BG_PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
}
trap cleanup EXIT

log "optui real-GPU campaign: root=$ROOT out=$OUT work=$WORK budget=${BUDGET_S}s"
log "revision: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || cat "$ROOT/.device/REVISION" 2>/dev/null || echo unknown)"

# ---- 1. Python packages: the carried wheels, optui from the tree ----------------------------
SITE=$WORK/site
if [[ $INSTALL_WHEELS == 1 ]]; then
    if ! step install-wheels 120 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
        "$ROOT"/.device/whl/*.whl; then
        # A Python without pip: a wheel is a zip whose top level is the site-packages layout.
        step unzip-wheels 60 "$PYTHON" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
            "$SITE" "$ROOT"/.device/whl/*.whl
    fi
    export PYTHONPATH=$SITE:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
else
    export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
fi
printf '#!/bin/sh\nexec %q -m optui "$@"\n' "$(command -v "$PYTHON")" >"$WORK/bin/optui"
chmod +x "$WORK/bin/optui"
export PATH=$WORK/bin:$PATH
step versions 60 bash -c "$(printf '%q' "$PYTHON") -VV; optui --version; $(printf '%q' "$PYTHON") -c 'import textual, pydantic, httpx, numpy, gguf; print(\"textual\", textual.__version__, \"pydantic\", pydantic.VERSION, \"numpy\", numpy.__version__)'; uname -srm; nproc; free -g | head -2; nvidia-smi -L 2>&1 | head -4; nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>&1 | head -2; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -1; cmake --version | head -1; ninja --version"

# ---- 2. llama-server with CUDA (background), model, pytest meanwhile --------------------------
BUILD_PID=
if [[ -z $LLAMA_SERVER ]]; then
    log "== build llama-server (background; log in artifacts: build.log)"
    start_bg "$WORK/art/build.log" "$HERE/build_llama.sh" "$ROOT/.device/llama.cpp.tar.gz" "$WORK/llama"
    BUILD_PID=${BG_PIDS[-1]}
    LLAMA_SERVER=$WORK/llama/llama-server
fi
if [[ -z $NO_GPU ]]; then  # the GPU over the whole campaign, every 250 ms
    start_bg "$WORK/art/nvidia-smi-timeline.csv" timeout "$BUDGET_S" nvidia-smi \
        --query-gpu=timestamp,index,memory.used,memory.total,memory.reserved,utilization.gpu,power.draw \
        --format=csv,nounits -lms 250
fi
MODEL=$WORK/model.gguf
# shellcheck disable=SC2086  # MODEL_ARGS is a list of options
step make-model 120 "$PYTHON" "$ROOT/tests/peers/make_tiny_gguf.py" "$MODEL" $MODEL_ARGS
ls -la "$MODEL" >>"$CAMPAIGN" 2>&1

PYVER=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
PYTEST_PID=
if [[ -n $PYTEST_ARGS ]]; then
    log "== pytest (background, limit ${PYTEST_TIMEOUT_S}s) -> pytest-py$PYVER.txt"
    log "\$ $PYTHON -m pytest $PYTEST_ARGS -p no:cacheprovider"
    # No peer build without network: tests needing the CPU llama-server peer skip at once.
    # shellcheck disable=SC2086
    start_bg "$OUT/pytest-py$PYVER.txt" env PIP_NO_INDEX=1 OPTUI_PEER_CACHE="${OPTUI_PEER_CACHE:-$WORK/peer-cache}" \
        timeout -k 10 "$PYTEST_TIMEOUT_S" "$PYTHON" -m pytest $PYTEST_ARGS -p no:cacheprovider
    PYTEST_PID=${BG_PIDS[-1]}
fi

if [[ -n $BUILD_PID ]]; then
    limit=$(_limit 400)
    log "== wait for the build (limit ${limit}s)"
    t=$SECONDS
    while kill -0 "$BUILD_PID" 2>/dev/null && ((SECONDS - t < limit)); do sleep 1; done
    kill -0 "$BUILD_PID" 2>/dev/null && { log "-- build: TIMED OUT"; kill -TERM -- "-$BUILD_PID" 2>/dev/null; }
    tail -5 "$WORK/art/build.log" >>"$CAMPAIGN"
    log "-- build: $([[ -x $LLAMA_SERVER ]] && echo "ok, $LLAMA_SERVER" || echo FAILED) after $((SECONDS - t))s waiting"
fi

# ---- 3. the campaign: optui.toml --------------------------------------------------------------
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
# shellcheck disable=SC2086
"$PYTHON" - "$CAMP/optui.toml" "$LLAMA_SERVER" "$MODEL" "$PORT" $SERVER_ARGS <<EOF
import json, sys
path, server, model, port, *extra = sys.argv[1:]
argv = [server, "-m", model, "--host", "127.0.0.1", "--port", port, "--metrics", "-a", "tiny", "--no-ui",
        "--load-mode", "none", *extra]
q = json.dumps
bench = "input_len = $BENCH_IN, output_len = $BENCH_OUT"
open(path, "w").write(f"""# written by bench/real_gpu/run.sh
refresh_s = 1.0

[hosts.local]
gpu_source = "nvml"

[servers.llama]
host = "local"
kind = "llamacpp"
control = "process"
url = "http://127.0.0.1:{port}"
argv = {q(argv)}
ready_timeout_s = 120
stop_timeout_s = 15
rollback = "auto"

[servers.llama.presets.bigkv]
description = "more slots and context: a bigger KV cache"
set = {{ "-np" = "$BIGKV_NP", "-c" = "$BIGKV_CTX" }}

[servers.llama.presets.oom]
description = "a KV cache that cannot fit in GPU memory"
set = {{ "-np" = "1", "-c" = "$OOM_CTX", "--fit" = "off" }}

# first: the TUI's b + Enter runs it
[benchmarks.gen]
server = "llama"
builtin = {{ concurrency = [4], {bench}, prompts = $BENCH_PROMPTS }}

[benchmarks.sweep]
server = "llama"
builtin = {{ concurrency = [1, 4, 16], {bench}, prompts = $BENCH_PROMPTS }}

[benchmarks.long]
server = "llama"
builtin = {{ concurrency = [4], input_len = $BENCH_IN, output_len = 256, prompts = 100000 }}
stall_s = 20
silent_s = 60
""")
EOF
cp "$CAMP/optui.toml" "$WORK/art/"
log "== optui.toml"
cat "$CAMP/optui.toml" >>"$CAMPAIGN"
cd "$CAMP" || exit 1
PROBE=("$PYTHON" "$HERE/probe.py")
step status-before 30 optui status --json
step gpus-before 30 "${PROBE[@]}" gpu-pair --url "$URL" --optui optui

# Start: the GPU, as optui and nvidia-smi see it, sampled side by side while the model loads.
step_bg loading-gpus 150 "${PROBE[@]}" gpu-pair --url "$URL" --until-ready --max 200 --optui optui
step start 150 optui restart llama --json
step_wait
step status-ready 30 optui status --json
step gpus-serving-idle 30 "${PROBE[@]}" gpu-pair --url "$URL" --optui optui
step restart-same 150 optui restart llama --json
step journal-tail-1 30 optui journal tail -n 12

# Baseline sweep c=1,4,16; meanwhile optui's live load against the server's own counters.
step_bg bench-sweep-baseline 240 optui bench run llama sweep --json
step serve-watch 240 "${PROBE[@]}" serve-watch --url "$URL" --while-pid "$BG_STEP_PID" --samples 8 --optui optui
step_wait
step bench-gen 120 optui bench run llama gen --json

# -np / -c changed: the KV cache's GPU memory must move.
PROPS=("$PYTHON" -c 'import json, sys, urllib.request as u; p = json.load(u.urlopen(sys.argv[1] + "/props", timeout=5)); print(json.dumps({"total_slots": p.get("total_slots"), "n_ctx_per_slot": p.get("default_generation_settings", {}).get("n_ctx")}))' "$URL")
step kv-mem-before 30 "${PROBE[@]}" smi-mem
step kv-props-before 10 "${PROPS[@]}"
step restart-bigkv 150 optui restart llama --preset bigkv --json
step kv-mem-after 30 "${PROBE[@]}" smi-mem
step kv-props-after 10 "${PROPS[@]}"
step kv-log 10 grep -nE 'KV buffer size|n_slots =|CUDA0 (model|compute|KV) buffer' "$CAMP/.optui/logs/llama.log.1" "$CAMP/.optui/logs/llama.log"
step bench-sweep-bigkv 240 optui bench run llama sweep --json
step experiments-1 30 optui journal experiments

# A bad flag (exit 1 from llama.cpp's parser), rolled back automatically (rollback = "auto").
step bad-flag 150 optui restart llama --set --no-such-flag --json
step status-after-bad-flag 30 optui status --json
step failures-bad-flag 30 bash -c "optui journal tail -n 4 --type failures && optui journal tail -n 2 --type failures --json"

# A launch that cannot fit: cudaMalloc fails, classified oom, rolled back.
step oom 180 optui restart llama --preset oom --json
# optui keeps the previous start's log as llama.log.1: the failed launch's, after the rollback's start.
step oom-log 10 grep -nE 'cudaMalloc|out of memory|failed to allocate|exiting due to' "$CAMP/.optui/logs/llama.log.1"
step failures-oom 30 bash -c "optui journal tail -n 4 --type failures && optui journal tail -n 2 --type failures --json"
step status-after-oom 30 optui status --json

# kill -9 of the server during a benchmark: once 2+ requests run (past the 1-request warmup), +2 s.
# The run is bounded at 75 s: on the CPU rehearsal a builtin run killed this way never ended.
step_bg bench-during-kill 75 optui bench run llama long --json
step kill-9 40 bash -c 'for i in $(seq 300); do "$0" "$1" metrics "$2" --window 0.1 | grep -q "\"llamacpp:requests_processing\": [2-9]" && break; sleep 0.1; done; sleep 2; pid=$("$0" "$1" pid "$3" llama) && echo "kill -9 $pid ($("$0" "$1" metrics "$2" --window 0.1 | grep -o "\"llamacpp:requests_processing\": [0-9.]*"))" && kill -9 "$pid"' \
    "$PYTHON" "$HERE/probe.py" "$URL" "$CAMP/.optui"
step_wait
step status-after-kill 30 optui status --json
step journal-after-kill 30 optui journal tail -n 10
step restart-after-kill 150 optui restart llama --json
step failures-kill 30 bash -c "optui journal tail -n 3 --type failures && optui journal tail -n 3 --type failures --json"

# The TUI headless: ready, a benchmark (b, Enter), quit; again: re-attached to the same server.
step pid-before-tui 10 "${PROBE[@]}" pid "$CAMP/.optui" llama
step tui 150 "$PYTHON" "$HERE/tui_drive.py" "$CAMP/optui.toml" --out "$OUT" --prefix tui --bench --size 200x50 --timeout 60
step alive-after-tui-quit 20 bash -c 'pid=$("$0" "$1" pid "$3" llama) && ps -o pid,stat,etime,args -p "$pid" | cut -c1-150 && "$0" "$1" health "$2"' \
    "$PYTHON" "$HERE/probe.py" "$URL" "$CAMP/.optui"
step tui-reattached 90 "$PYTHON" "$HERE/tui_drive.py" "$CAMP/optui.toml" --out "$OUT" --prefix tui-reattached --size 200x50 --timeout 60
step pid-after-tui 10 "${PROBE[@]}" pid "$CAMP/.optui" llama
step status-final 30 optui status --json
step experiments-final 30 optui journal experiments
RESERVE_S=5  # the rest is the report and packing
step findings 30 optui journal export --format md -o "$OUT/findings.md"
step export-jsonl 30 optui journal export --format jsonl -o "$WORK/art/events.jsonl"
step export-csv 30 optui journal export --format csv -o "$WORK/art/experiments.csv"
log "== stop the server"
stop_server
log "-- server stopped"

# ---- 4. pytest, summary, artifacts -------------------------------------------------------------
if [[ -n $PYTEST_PID ]]; then
    log "== wait for pytest (limit $(($(left) > 10 ? $(left) - 10 : 1))s)"
    while kill -0 "$PYTEST_PID" 2>/dev/null && (($(left) > 10)); do sleep 1; done
    kill -0 "$PYTEST_PID" 2>/dev/null && { log "-- pytest: stopped by the budget"; kill -TERM -- "-$PYTEST_PID" 2>/dev/null; }
    log "-- pytest: $(tail -1 "$OUT/pytest-py$PYVER.txt" 2>/dev/null)"
fi
"$PYTHON" "$HERE/probe.py" summary "$STEPS" >"$OUT/summary.json" 2>>"$CAMPAIGN"
cp -r "$STEPS" "$WORK/art/steps"
cp "$CAMP/.optui/optui.db" "$WORK/art/" 2>/dev/null
cp -r "$CAMP/.optui/logs" "$WORK/art/server-logs" 2>/dev/null
tar -czf "$OUT/artifacts.tar.gz" -C "$WORK" art
log "done in $(elapsed)s; results in $OUT:"
ls -la "$OUT" | tee -a "$CAMPAIGN"
n=$(find "$OUT" -maxdepth 2 -type f | wc -l)
((n > 8)) && log "WARNING: $n files in $OUT (a device call brings back 8)"
exit 0
