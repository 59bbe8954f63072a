#!/usr/bin/env bash
# Build llama.cpp's llama-server with CUDA from the trimmed tree that prepare.sh packs.
#
#   bench/real_gpu/build_llama.sh TARBALL WORKDIR     -> WORKDIR/llama-server (statically linked)
#
# CUDA_ARCH (default 90-real: H100/H200; 80-real for A100, 89-real for L4/4090, "native"
# for the GPU in this machine), JOBS (default: all cores), GGML_CUDA=OFF for a CPU build.
# Takes ~170-200 s with 16 cores for the H200. Needs cmake, a C++ compiler, nvcc; ninja if present.
set -euo pipefail
tarball=$1 work=$2
CUDA_ARCH=${CUDA_ARCH:-90-real}
JOBS=${JOBS:-$(nproc)}
GGML_CUDA=${GGML_CUDA:-ON}
if [[ $GGML_CUDA == ON ]] && ! command -v nvcc >/dev/null; then
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
        if [[ -x $d/nvcc ]]; then export PATH=$d:$PATH; break; fi
    done
fi
if [[ $GGML_CUDA == ON ]]; then
    command -v nvcc >/dev/null || { echo "build_llama: no nvcc on PATH or in /usr/local/cuda*/bin" >&2; exit 1; }
    export CUDACXX=${CUDACXX:-$(command -v nvcc)}
    nvcc --version | tail -2
fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
mkdir -p "$work"
rm -rf "$work/llama.cpp" "$work/b"
tar -xzf "$tarball" -C "$work"
started=$SECONDS
cmake -S "$work/llama.cpp" -B "$work/b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA="$GGML_CUDA" -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
cmake --build "$work/b" --target llama-server -j "$JOBS"
cp "$work/b/bin/llama-server" "$work/llama-server.tmp"
mv "$work/llama-server.tmp" "$work/llama-server"
echo "build_llama: built $work/llama-server in $((SECONDS - started)) s"
"$work/llama-server" --version 2>&1 | tail -3 || true
