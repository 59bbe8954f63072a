#!/usr/bin/env bash
# Issue 29's real-server checks, in one call on the GPU machine (no network: the wheels and the
# llama.cpp tree come from .device/, see prepare.sh), or on the CPU peer (README.md, "workloads"):
#
#   1. a built-in preset at c=1 and c=4 (3 repeats), `-np 1` (the baseline), then `-np 4`
#      (preset np4), each through `optui bench run llama two --json`: experiment_summary.workloads
#      (expected: c=4 better, c=1 same), each run's out tok/s beside the server's own timings
#      (llama.cpp's streamed `timings`, the load generator's extra.server_*);
#   2. a SIGSTOP of the server during a run (preset `stopped`, c=4, one run): the result must be
#      `invalid` with its reason;
#   3. `optui search run np`: objective "output_tok_s @ c=4", grid over -np 1, 2, 4, repeat 3:
#      its last line, and the server's flags after it (`optui status --json`, /props slots);
#   4. bench/workload_verdicts.py on the journal: headline vs per-workload verdicts.
#
# Writes to ${OUT:-bench/results/real_gpu_workloads}: workloads.txt (every step: UTC time, seconds,
# command, output, rc), summary.json (workloads_summary.py: the figures), findings.md, events.jsonl
# (the journal), build.log.
# Knobs: LLAMA_SERVER=path (skip the build), MODEL_ARGS, SERVER_ARGS (besides -np), CTX,
# BENCH_IN/OUT/PROMPTS, STOP_S (how long the server stays stopped), SEARCH_S (the search's limit, 300), BUDGET_S (540),
# NO_GPU=1, PYTHON, INSTALL_WHEELS=0 (use PYTHON's own packages), CUDA_ARCH, JOBS, WORK.
# No `set -e`: a failing step is logged and the next one runs; every step is bounded.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
HERE=$ROOT/bench/real_gpu
OUT=${OUT:-$ROOT/bench/results/real_gpu_workloads}
WORK=${WORK:-/tmp/optui-gpu-workloads}
BUDGET_S=${BUDGET_S:-540}
PYTHON=${PYTHON:-python3}
if [[ $PYTHON == */* ]]; then PYTHON=$(realpath -s "$PYTHON"); else PYTHON=$(command -v "$PYTHON"); fi
INSTALL_WHEELS=${INSTALL_WHEELS:-1}
LLAMA_SERVER=${LLAMA_SERVER:-}
MODEL_ARGS=${MODEL_ARGS:---layers 8 --embd 2048 --heads 16 --kv-heads 8 --ff 8192 --ctx 8192}
SERVER_ARGS=${SERVER_ARGS:--ngl 99}
CTX=${CTX:-16384}                   # llama.cpp splits -c among the -np slots: 4,096 a slot at -np 4
BENCH_IN=${BENCH_IN:-512}
BENCH_OUT=${BENCH_OUT:-128}
BENCH_PROMPTS=${BENCH_PROMPTS:-16}
STOP_S=${STOP_S:-6}                 # > poll_interval_s + 1 s: optui sees the stopped process (HUNG)
NO_GPU=${NO_GPU:-}
export TERM=${TERM:-xterm-256color} PYTHONUNBUFFERED=1

T0=$SECONDS
rm -rf "$WORK"
mkdir -p "$WORK/steps" "$WORK/campaign" "$WORK/bin" "$OUT"
LOG=$OUT/workloads.txt
rm -f "$LOG" "$OUT/summary.json" "$OUT/findings.md" "$OUT/build.log"
log() { printf '[%s UTC +%ss] %s\n' "$(date -u +%H:%M:%S)" "$((SECONDS - T0))" "$*" | tee -a "$LOG"; }
N=0
# step NAME LIMIT_S CMD...: CMD bounded by LIMIT_S and by the budget left (20 s kept for the end).
step() {
    local name=$1 want=$2 avail f rc t
    shift 2
    N=$((N + 1))
    f=$(printf '%s/steps/%02d-%s.txt' "$WORK" "$N" "$name")
    avail=$((BUDGET_S - (SECONDS - T0) - 20))
    if ((avail < 5)); then log "== $name: SKIPPED (budget spent)"; echo skipped >"$f"; return 99; fi
    ((want > avail)) && want=$avail
    log "== $name (limit ${want}s)"
    log "\$ $*"
    t=$SECONDS
    timeout -k 5 "$want" "$@" >"$f" 2>&1 </dev/null
    rc=$?
    cat "$f" >>"$LOG"
    log "-- $name: rc=$rc in $((SECONDS - t))s"
    return $rc
}
server_pid() { "$PYTHON" "$HERE/probe.py" pid "$WORK/campaign/.optui" llama 2>/dev/null; }
BG=()
cleanup() {
    local pid
    if pid=$(server_pid); then
        kill -CONT -- "-$pid" 2>/dev/null
        kill -TERM -- "-$pid" 2>/dev/null
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$pid" 2>/dev/null
    fi
    for pid in "${BG[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
}
trap cleanup EXIT

log "optui issue-29 workloads on llama-server: root=$ROOT out=$OUT budget=${BUDGET_S}s"
if [[ $INSTALL_WHEELS == 1 ]]; then
    SITE=$WORK/site
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$ROOT"/.device/whl/*.whl 2>>"$LOG" \
        || "$PYTHON" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
            "$SITE" "$ROOT"/.device/whl/*.whl
    export PYTHONPATH=$SITE:$ROOT/src
else
    export PYTHONPATH=$ROOT/src
fi
printf '#!/bin/sh\nexec %q -m optui "$@"\n' "$PYTHON" >"$WORK/bin/optui"
chmod +x "$WORK/bin/optui"
export PATH=$WORK/bin:$PATH
log "wheels: $((SECONDS - T0))s; $("$PYTHON" -V) $(optui --version 2>&1 | head -1)"
[[ -z $NO_GPU ]] && log "$(nvidia-smi -L 2>&1 | head -1)"

if [[ -z $LLAMA_SERVER ]]; then
    log "== build llama-server (CUDA) -> build.log"
    setsid "$HERE/build_llama.sh" "$ROOT/.device/llama.cpp.tar.gz" "$WORK/llama" >"$OUT/build.log" 2>&1 </dev/null &
    BUILD=$!
    BG+=("$BUILD")
    LLAMA_SERVER=$WORK/llama/llama-server
fi
# shellcheck disable=SC2086  # MODEL_ARGS is a list of options
step make-model 120 "$PYTHON" "$ROOT/tests/peers/make_tiny_gguf.py" "$WORK/model.gguf" $MODEL_ARGS
if [[ -n ${BUILD:-} ]]; then
    t=$SECONDS
    while kill -0 "$BUILD" 2>/dev/null && ((SECONDS - T0 < BUDGET_S - 200)); do sleep 1; done
    kill -0 "$BUILD" 2>/dev/null && { log "-- build: cut (budget)"; kill -TERM -- "-$BUILD" 2>/dev/null; }
    log "-- build: $([[ -x $LLAMA_SERVER ]] && echo ok || echo FAILED) after $((SECONDS - t))s waiting; $(tail -2 "$OUT/build.log" | tr '\n' ' ')"
fi

PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
CAMP=$WORK/campaign
# shellcheck disable=SC2086
"$PYTHON" - "$CAMP/optui.toml" "$LLAMA_SERVER" "$WORK/model.gguf" "$PORT" "$CTX" $SERVER_ARGS <<EOF
import json, sys
path, server, model, port, ctx, *extra = sys.argv[1:]
argv = [server, "-m", model, "--host", "127.0.0.1", "--port", port, "--metrics", "-a", "tiny", "--no-ui",
        "--load-mode", "none", *extra, "-c", ctx, "-np", "1"]
lens = "input_len = $BENCH_IN, output_len = $BENCH_OUT"
open(path, "w").write(f"""# written by bench/real_gpu/workloads.sh
[servers.llama]
kind = "llamacpp"
control = "process"
url = "http://127.0.0.1:{port}"
argv = {json.dumps(argv)}
ready_timeout_s = 120
stop_timeout_s = 15

[servers.llama.presets.np4]
description = "four slots: requests decode together"
set = {{ "-np" = "4" }}

[benchmarks.two]
server = "llama"
repeat = 3
builtin = {{ concurrency = [1, 4], {lens}, prompts = $BENCH_PROMPTS }}

[benchmarks.stopped]
server = "llama"
repeat = 1
builtin = {{ concurrency = [4], {lens}, prompts = $((BENCH_PROMPTS * 4)) }}

[search.np]
server = "llama"
bench = "two"
objective = "output_tok_s @ c=4"
strategy = "grid"
confirm_top = 1
[search.np.flags]
"-np" = [1, 2, 4]
""")
EOF
cat "$CAMP/optui.toml" >>"$LOG"
cd "$CAMP" || exit 1
PROPS=("$PYTHON" -c 'import json, sys, urllib.request as u; p = json.load(u.urlopen(sys.argv[1] + "/props", timeout=5)); print(json.dumps({"total_slots": p.get("total_slots"), "n_ctx_per_slot": p.get("default_generation_settings", {}).get("n_ctx")}))' "$URL")

# 1. -np 1 -> -np 4 at c=1 and c=4
step start-np1 150 optui restart llama --json
step bench-np1 150 optui bench run llama two --json
step restart-np4 150 optui restart llama --preset np4 --json
step props-np4 10 "${PROPS[@]}"
step bench-np4 150 optui bench run llama two --json

# 2. SIGSTOP of the server once 2+ requests run (past the 1-request warmup): the run must be invalid, with its reason
(sleep 1; exec optui bench run llama stopped --json >"$WORK/stopped.json" 2>&1) &
BENCH_BG=$!
step sigstop 60 bash -c 'for i in $(seq 300); do "$0" "$1" metrics "$2" --window 0.1 | grep -q "\"llamacpp:requests_processing\": [2-9]" && break; sleep 0.1; done; sleep 0.5; pid=$("$0" "$1" pid "$3" llama) || exit 1; echo "SIGSTOP $pid at $(date -u +%T.%N)"; kill -STOP "$pid"; sleep "$4"; kill -CONT "$pid"; echo "SIGCONT $pid at $(date -u +%T.%N)"' \
    "$PYTHON" "$HERE/probe.py" "$URL" "$CAMP/.optui" "$STOP_S"
t=$SECONDS
while kill -0 "$BENCH_BG" 2>/dev/null && ((SECONDS - t < 120)); do sleep 1; done
kill -0 "$BENCH_BG" 2>/dev/null && { log "-- bench-stopped: cut after 120 s"; kill "$BENCH_BG"; }
wait "$BENCH_BG"
log "-- bench-stopped rc=$?"
N=$((N + 1))
cp "$WORK/stopped.json" "$(printf '%s/steps/%02d-bench-stopped.txt' "$WORK" "$N")"
cat "$WORK/stopped.json" >>"$LOG"

# 3. the flag search on c=4's out tok/s; where the server is afterwards
step search "${SEARCH_S:-300}" optui search run np
step search-status 30 optui search status np --json
step status-after-search 30 optui status --json
step props-after-search 10 "${PROPS[@]}"

# 4. the journal: experiments, headline vs per-workload verdicts, findings
step experiments 30 optui journal experiments
if [[ -f $ROOT/bench/workload_verdicts.py ]]; then
    step headline-vs-workloads 60 "$PYTHON" "$ROOT/bench/workload_verdicts.py" "$CAMP/.optui/optui.db"
fi
optui journal export --format md -o "$OUT/findings.md" >/dev/null 2>&1
optui journal export --format jsonl -o "$OUT/events.jsonl" >/dev/null 2>&1
cleanup
"$PYTHON" "$HERE/workloads_summary.py" "$WORK/steps" >"$OUT/summary.json" 2>>"$LOG"
log "done in $((SECONDS - T0))s"
cat "$OUT/summary.json"
exit 0
