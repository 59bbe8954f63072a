#!/usr/bin/env bash
# Prebuild the real llama.cpp test peer (llama-server) before pytest, and install the MCP
# Inspector's CLI (tests/peers/mcp_inspector.py; optional: its tests skip without it).
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

if "$PYTHON" "$peer" --check >/dev/null 2>&1; then
    echo "llama-server peer: cached at $("$PYTHON" "$peer" --check)"
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

exec "$PYTHON" "$peer" --build
