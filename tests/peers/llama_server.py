"""llama.cpp's ``llama-server`` as a real test peer: cached build, launch, port, readiness.

The binary is built from the ``vendor/llama.cpp`` tree of the llama-cpp-python sdist on PyPI
(the only network access is that ``pip download``) and cached outside the clone, so only the
first run on a machine pays the ~4 min build. Recipe and endpoint behaviour:
``/work/shared/reference/llamacpp_peer.md`` section 3.

Stdlib only, so CI can prebuild before the test extra is installed::

    python tests/peers/llama_server.py --build
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# peer_cache: a stdlib-only sibling (this runs as a script too); free_port and stop_server are
# re-exported, the fixtures and bench scripts take them from here
from tests.peers import peer_cache  # noqa: E402
from tests.peers.peer_cache import PeerUnavailable, free_port, stop_server  # noqa: E402, F401

log = logging.getLogger("optui.tests.peers")

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
BINARY_NAME = "llama-server"
CACHE_ENV = "OPTUI_PEER_CACHE"
BUILD_TOOLS = {"cmake": "cmake", "ninja": "ninja-build", "g++": "g++"}

# LLAMA_USE_PREBUILT_UI defaults to ON and would fetch the web UI from Hugging Face during
# the build; everything else keeps the build to the one target we need, statically linked
# so the cached binary is a single relocatable file.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_COMMON=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_NATIVE=ON",
    "-DBUILD_SHARED_LIBS=OFF",
)
# The default test peer: 4 slots of 2048/4 = 512 context (tiny's n_ctx_train is 512 too).
DEFAULT_ARGS: tuple[str, ...] = ("-c", "2048", "-np", "4", "--metrics", "-a", "tiny")
# Read the weights into memory instead of mmap, so a big enough model keeps /health at 503
# "Loading model" for a visible while (this build has no --no-mmap).
LOADING_ARGS: tuple[str, ...] = ("--load-mode", "none")


class LlamaPeer(NamedTuple):
    """A running llama-server: base URL (``http://127.0.0.1:PORT``), process, log file."""

    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path


# launch(model=None, args=DEFAULT_ARGS, wait=True) -> context manager yielding a LlamaPeer
LaunchPeer = Callable[..., AbstractContextManager[LlamaPeer]]


def cache_dir() -> Path:
    """Where the built binary lives: ``$OPTUI_PEER_CACHE`` or ``~/.cache/optui-test-peers/llama-server-<ver>/``."""
    return peer_cache.cache_dir(CACHE_ENV, f"llama-server-{LLAMA_CPP_PYTHON_VERSION}")


def _build_stamp() -> dict[str, str]:
    """What the cached binary must match to be reused.

    GGML_NATIVE=ON compiles for the build host's SIMD set, so a cache restored onto a
    different CPU could die with SIGILL mid-test; the CPU flags are part of the key.
    """
    flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].strip()
                break
    return {
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "cmake_flags": " ".join(CMAKE_FLAGS),
        "machine": platform.machine(),
        "cpu_flags_sha256": hashlib.sha256(flags.encode()).hexdigest()[:16],
    }


def cached_llama_server(cache: Path | None = None) -> Path | None:
    """The cached binary if present and built for this configuration and CPU, else None."""
    cache = cache or cache_dir()
    binary = cache / BINARY_NAME
    stamp = cache / "build-stamp.json"
    if not (binary.is_file() and os.access(binary, os.X_OK) and stamp.is_file()):
        return None
    if not peer_cache.stamp_matches(stamp, _build_stamp()):
        log.info("cached %s was built for another configuration or CPU (or its stamp is unreadable); rebuilding", binary)
        return None
    return binary


def missing_build_tools() -> list[str]:
    """Executables from BUILD_TOOLS not on PATH."""
    return [exe for exe in BUILD_TOOLS if shutil.which(exe) is None]


def _install_build_tools(missing: list[str]) -> None:
    """apt-get the missing tools when we are root on a Debian-like host (CI images); else explain."""
    packages = [BUILD_TOOLS[exe] for exe in missing]
    hint = f"install them (e.g. `apt-get install -y {' '.join(packages)}`) or run .ci/peers.sh"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise PeerUnavailable(f"build tools missing: {', '.join(missing)}; {hint}")
    log.info("installing build tools with apt-get: %s", " ".join(packages))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if proc.returncode != 0:
            raise PeerUnavailable(f"`{' '.join(cmd)}` failed ({proc.returncode}): {proc.stderr.strip()[-500:]}; {hint}")
    if still := missing_build_tools():
        raise PeerUnavailable(f"build tools still missing after apt-get: {', '.join(still)}; {hint}")


def _sdist(cache: Path, log_file: Path) -> Path:
    """The llama-cpp-python sdist, downloaded once into the cache (76 MB)."""
    sdist_dir = cache / "sdist"
    sdist_dir.mkdir(parents=True, exist_ok=True)
    found = sorted(sdist_dir.glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"))
    if found:
        return found[0]
    peer_cache.run_logged(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", str(sdist_dir), "--quiet"],
        log_file,
    )
    found = sorted(sdist_dir.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise PeerUnavailable(f"pip download left no llama_cpp_python sdist in {sdist_dir}")
    return found[0]


def _build(cache: Path) -> Path:
    if missing := missing_build_tools():
        _install_build_tools(missing)
    log_file = cache / "build.log"
    log_file.write_text("")
    sdist = _sdist(cache, log_file)
    # The temp tree sits in the cache dir so the final os.replace stays on one filesystem.
    with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as tmp:
        work = Path(tmp)
        started = time.monotonic()
        try:
            with tarfile.open(sdist) as tar:
                tar.extractall(work, filter="data")
        except tarfile.TarError as exc:
            sdist.unlink()  # a truncated download: fetch it again next time
            raise PeerUnavailable(f"corrupt sdist {sdist} ({exc}); deleted, rerun to download again") from exc
        src = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"), None)
        if src is None:
            raise PeerUnavailable(f"{sdist} has no vendor/llama.cpp; is LLAMA_CPP_PYTHON_VERSION right?")
        build = src / "build"
        peer_cache.run_logged(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja", *CMAKE_FLAGS], log_file)
        jobs = str(os.cpu_count() or 2)
        peer_cache.run_logged(["cmake", "--build", str(build), "--target", BINARY_NAME, "-j", jobs], log_file)
        built = build / "bin" / BINARY_NAME
        staged = work / BINARY_NAME
        shutil.copy2(built, staged)
        os.replace(staged, cache / BINARY_NAME)
        stamp_tmp = work / "build-stamp.json"
        stamp_tmp.write_text(json.dumps(_build_stamp(), indent=1) + "\n")
        os.replace(stamp_tmp, cache / "build-stamp.json")
        log.info("built %s in %.0f s", cache / BINARY_NAME, time.monotonic() - started)
    return cache / BINARY_NAME


def build_llama_server() -> Path:
    """The cached binary, building it first if needed. Raises PeerUnavailable with the reason.

    An exclusive flock on ``<cache>/.lock`` serialises concurrent test processes: the second
    waits for the first build and then reuses its binary.
    """
    # _build looked up at call time: tests/process/test_llama_peer_cache.py swaps it for a fake
    return peer_cache.locked_build(cache_dir(), CACHE_ENV, cached_llama_server, lambda cache: _build(cache),
                                   f"building {BINARY_NAME}", "takes ~4-7 min on 2 cores")


def ensure_llama_server() -> Path | None:
    """The cached ``llama-server`` path, building it if needed; None (reason logged) if impossible."""
    return peer_cache.ensure(build_llama_server, "llama-server")


@contextlib.contextmanager
def start_llama_server(
    binary: Path,
    model: Path,
    port: int,
    extra_args: Sequence[str] = (),
    log_path: Path | None = None,
    host: str = "127.0.0.1",
    threads: int = 2,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``llama-server -m model --host host --port port -t THREADS --no-ui *extra_args``.

    ``threads`` 2 is what the figures in bench/RESULTS.md were measured with; the test
    fixtures pass 1 (see ``tests/peers/fixtures.py``).

    stdout and stderr go to ``log_path`` (a temp file if None); the server gets its own
    session so the whole process group is killed on exit, whatever happens in the body.
    Does not wait for readiness: see ``wait_for_health``.
    """
    cmd = [str(binary), "-m", str(model), "--host", host, "--port", str(port), "-t", str(threads), "--no-ui", *extra_args]
    with peer_cache.start_server(cmd, log_path, "llama-server-") as proc:
        yield proc


def wait_for_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> float:
    """Poll ``url/health`` until 200; return seconds waited.

    Raises PeerUnavailable if the process exits or ``timeout_s`` passes first.
    """
    return peer_cache.wait_for_health(url, proc, timeout_s, "llama-server", 0.02)


def wait_for_log(log_path: Path, pattern: str, timeout_s: float = 10.0) -> re.Match[str]:
    """First match of regex ``pattern`` in the log, polling until it appears.

    llama-server writes its log from a separate thread, so a line can trail the HTTP state
    it describes (``model loaded`` may land after /health already answers 200).
    """
    rx = re.compile(pattern, re.MULTILINE)
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError):
            if m := rx.search(log_path.read_text(errors="replace")):
                return m
        if time.monotonic() > deadline:
            raise PeerUnavailable(f"no line matching {pattern!r} in {log_path} after {timeout_s:.0f} s")
        time.sleep(0.02)


def main(argv: Sequence[str] | None = None) -> int:
    return peer_cache.main(argv, doc=__doc__, cached=cached_llama_server, ensure=ensure_llama_server,
                           build_help="build (or find) the cached binary and print its path",
                           check_help="print the cached binary's path; exit 1 if a build is needed")


if __name__ == "__main__":
    sys.exit(main())
