#!/usr/bin/env bash
# A flag search on a real GPU (issue 22), in one call on the GPU machine (no network; the
# wheels and the llama.cpp tree come from .device/, see prepare.sh): build llama-server with
# CUDA, generate the 505M-parameter model of run.sh, then `optui search run` a grid over
# -np, -ub and -c (llama.cpp splits -c among the -np slots; one -c that cannot fit: the OOM
# point) under a TTFT and a GPU memory ceiling, the top 2 re-run before a winner is named. Writes to ${OUT:-bench/results/real_gpu_search}: build.log, search.txt (the run's
# lines), search.json (optui search status --json), findings.md, nvidia-smi.csv.
# LLAMA_SERVER=path skips the build. Results: bench/RESULTS.md, "A flag search on the H200".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
HERE=$ROOT/bench/real_gpu
OUT=${OUT:-$ROOT/bench/results/real_gpu_search}
WORK=${WORK:-/tmp/optui-gpu-search}
PYTHON=${PYTHON:-python3}
rm -rf "$WORK"
mkdir -p "$WORK" "$OUT"
SITE=$WORK/site
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$ROOT"/.device/whl/*.whl 2>/dev/null \
    || "$PYTHON" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' "$SITE" "$ROOT"/.device/whl/*.whl
export PYTHONPATH=$SITE:$ROOT/src
LLAMA_SERVER=${LLAMA_SERVER:-}
if [[ -z $LLAMA_SERVER ]]; then
    s=$SECONDS
    "$HERE/build_llama.sh" "$ROOT/.device/llama.cpp.tar.gz" "$WORK/llama" >"$OUT/build.log" 2>&1
    echo "build rc=$? in $((SECONDS - s)) s" | tee -a "$OUT/build.log"
    LLAMA_SERVER=$WORK/llama/llama-server
fi
"$PYTHON" "$ROOT/tests/peers/make_tiny_gguf.py" "$WORK/model.gguf" --layers 8 --embd 2048 --heads 16 --kv-heads 8 \
    --ff 8192 --ctx 8192 >/dev/null
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/campaign"
cat >"$WORK/campaign/optui.toml" <<TOML
[servers.llama]
url = "http://127.0.0.1:$PORT"
kind = "llamacpp"
control = "process"
argv = ["$LLAMA_SERVER", "-m", "$WORK/model.gguf", "--host", "127.0.0.1", "--port", "$PORT", "-ngl", "99",
        "-c", "16384", "-np", "4", "--metrics", "-a", "tiny"]
ready_timeout_s = 120
stop_timeout_s = 15

[benchmarks.c16]
server = "llama"
repeat = 2
builtin = { concurrency = [16], input_len = 512, output_len = 128, prompts = 48 }

[search.gpu]
server = "llama"
bench = "c16"
objective = "max output_tok_s"
constraints = ["ttft_p99_ms <= 2000", "gpu_mem_mib <= 100000"]
confirm_top = 2
[search.gpu.flags]
"-np" = [4, 8, 16]
"-ub" = [512, 2048]
"-c" = [32768, 8388608]
TOML
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,nounits -lms 500 >"$OUT/nvidia-smi.csv" 2>&1 &
SMI=$!
cd "$WORK/campaign" || exit 1
s=$SECONDS
timeout "${SEARCH_S:-420}" "$PYTHON" -m optui search run gpu >"$OUT/search.txt" 2>&1
echo "search rc=$? in $((SECONDS - s)) s" | tee -a "$OUT/search.txt"
"$PYTHON" -m optui search status gpu --json >"$OUT/search.json" 2>&1
"$PYTHON" -m optui journal export --format md --output "$OUT/findings.md" >/dev/null 2>&1 \
    || "$PYTHON" -m optui journal export --format md >"$OUT/findings.md" 2>&1
pid=$("$PYTHON" "$HERE/probe.py" pid "$WORK/campaign/.optui" llama 2>/dev/null) && kill -TERM -- "-$pid" 2>/dev/null
kill "$SMI" 2>/dev/null
cat "$OUT/search.txt"
