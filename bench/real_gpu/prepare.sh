#!/usr/bin/env bash
# Gather everything bench/real_gpu/run.sh needs on a GPU machine without network, into the
# ignored folder .device/ at the repository root (run here, where PyPI is reachable):
#
#   .device/whl/              py3.12 manylinux x86_64 wheels: optui's runtime + test deps
#                             (pyproject.toml) with their dependencies, one version each, + gguf
#   .device/llama.cpp.tar.gz  the vendor/llama.cpp tree of the llama-cpp-python sdist, trimmed
#                             to what a CUDA build of llama-server needs
#
# Usage: bench/real_gpu/prepare.sh            (PYTHON=... picks the pip; PY_VERSION=3.12)
# Idempotent: wheels already in .device/whl are kept, the tarball is rebuilt only when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
dev=$root/.device
PY_VERSION=${PY_VERSION:-3.12}
LLAMA_CPP_PYTHON_VERSION=$(sed -n 's/^LLAMA_CPP_PYTHON_VERSION = "\(.*\)"$/\1/p' tests/peers/llama_server.py)
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

mkdir -p "$dev/whl"
# Ignored without touching the shared .gitignore.
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >>"$exclude"

# The requirement list comes from pyproject.toml, so a new dependency is carried without an edit here;
# less the test extra's parts a GPU run never imports (SKIP, names as pyproject spells them): mlflow
# alone is ~850 MB installed and its wheels would pass the 64 MiB a device call carries.
SKIP=${SKIP:-mlflow ruff mypy types-psutil}
mapfile -t reqs < <(SKIP="$SKIP" "$PYTHON" - <<'PY'
import os, re, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
skip = {s.lower() for s in os.environ["SKIP"].split()}
# gguf: the test model's writer; nvitop and yappi: idle_startup.sh's and idle_profile.sh's
for r in p["dependencies"] + p["optional-dependencies"]["test"] + ["gguf", "nvitop==1.7.2", "yappi"]:
    if re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() not in skip:
        print(r)
PY
)
echo "prepare: ${#reqs[@]} requirements for cp${PY_VERSION/./} manylinux x86_64: ${reqs[*]}"
# One resolve with dependencies for the target platform: pip picks one version of each.
# --no-build-isolation etc. are moot: --only-binary=:all: never builds anything.
PIP_CONSTRAINT='' "$PYTHON" -m pip download --quiet --dest "$dev/whl" \
    --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    "${reqs[@]}"

# One version of each project: an older wheel left from a previous run would shadow or clash.
"$PYTHON" - "$dev/whl" <<'PY'
import collections, pathlib, re, sys
d = pathlib.Path(sys.argv[1])
seen = collections.defaultdict(list)
for w in d.glob("*.whl"):
    seen[re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower()].append(w)
dups = {k: v for k, v in seen.items() if len(v) > 1}
for name, files in dups.items():
    files.sort(key=lambda p: p.stat().st_mtime)
    for old in files[:-1]:  # the newest download is what this resolve chose
        print(f"prepare: removing older {old.name}")
        old.unlink()
print(f"prepare: {len(seen)} wheels in {d}")
PY

# The set is complete: resolving every requirement from these files alone, for the target, works.
PIP_CONSTRAINT='' "$PYTHON" -m pip install --quiet --dry-run --ignore-installed --ignore-requires-python --no-index --find-links "$dev/whl" \
    --target "$(mktemp -d)" --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
    "${reqs[@]}"
echo "prepare: the wheels resolve offline for cp${PY_VERSION/./}"

tarball=$dev/llama.cpp.tar.gz
if [[ ! -s $tarball ]]; then
    sdist_dir=${OPTUI_PEER_CACHE:-$HOME/.cache/optui-test-peers/llama-server-$LLAMA_CPP_PYTHON_VERSION}/sdist
    sdist=$sdist_dir/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz
    if [[ ! -s $sdist ]]; then
        mkdir -p "$sdist_dir"
        "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$sdist_dir"
    fi
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
    src=$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp
    # What a CUDA llama-server build never reads. tools/ui/CMakeLists.txt stays (CMake
    # adds that directory even with the UI off).
    rm -rf "${src:?}"/{models,docs,media,benches,.devops,.github} "$src"/tools/ui/src "$src"/tools/ui/tests \
        "$src"/ggml/src/ggml-{metal,sycl,opencl,hexagon,vulkan,cann,musa,webgpu,zdnn,openvino}
    mv "$src" "$tmp/llama.cpp"
    tar -czf "$tarball.tmp" -C "$tmp" llama.cpp
    mv "$tarball.tmp" "$tarball"
fi

du -sh "$dev/whl" "$tarball"
total=$(du -sm "$dev" | cut -f1)
echo "prepare: .device/ is ${total} MiB (limit for a device call with the tree: 64 MiB)"
if ((total >= 50)); then
    echo "prepare: .device/ is over 50 MiB; trim it" >&2
    exit 1
fi
# Which tree the wheels were gathered for (the device copy of the tree has no .git).
{ git rev-parse --short HEAD; git status --porcelain | grep -q . && echo "(with uncommitted changes)" || true; } \
    2>/dev/null | tr '\n' ' ' >"$dev/REVISION"
