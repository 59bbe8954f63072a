"""A real SGLang (0.5.23 from PyPI, CPU) as a test peer: cached venv, launch, readiness.

Installed once into ``$OPTUI_SGLANG_PEER_CACHE`` or ``~/.cache/optui-test-peers/sglang-<version>/``
(a Python 3.11 venv, ~3.5 GB, ~2-5 min), serving the same generated tiny Llama as the vLLM peer
(``tests/peers/make_tiny_hf.py``). A plain ``pip install sglang`` pins torch 2.14.1, flashinfer,
cuda-python, sglang-kernel...: several GB of CUDA wheels that cannot run here. The recipe (issue
32), each step for a reason:

1. ``python3.11 -m venv`` and the CPU ``torch==2.13.0`` (cp311; the image's /opt/wheels, else
   the PyTorch CPU index), as for vLLM.
2. A constraints file pinning ``torch==2.13.0``, ``torchvision==0.28.0`` and ``triton==3.9.0``
   for every later install, so no requirement swaps the CPU torch for a CUDA one.
3. ``torchvision==0.28.0 --no-deps``: sglang imports it (even its benchmark client), and its
   own requirement would pull the CUDA torch.
4. ``sglang==0.5.23 --no-deps`` plus its pure-Python requirements (:data:`PURE_REQUIREMENTS`,
   the wheel's ``Requires-Dist`` without the CUDA kernels, flash-attn, flashinfer, nvidia-*,
   tilelang, torchaudio/torchcodec, py-spy).
5. A torchvision import hook (``optui_peer_tv_hook.py`` + a ``.pth`` line): PyPI's torchvision is
   a CUDA build whose ``_C`` extension does not load beside the CPU torch, and its import then
   dies in ``_meta_registrations`` with ``operator torchvision::nms does not exist``. The hook
   defines the ``torchvision::nms`` / ``qnms`` schemas (never their kernels) just before
   torchvision is first imported; a plain Llama never calls them.
6. An ``sgl_kernel`` placeholder package: the official CPU path needs ``sgl-kernel`` built from
   source (PyPI's ``sglang-kernel``/``sgl-kernel`` are CUDA-only). On a CPU without AMX, plain
   Llama serving only imports it; every attribute of the placeholder is a function that raises
   ``RuntimeError`` naming what was called, so a path that needs a real kernel (speculative
   decoding, w8a8, AMX) fails loudly instead of computing garbage.
7. At run time ``SGLANG_USE_CPU_ENGINE=1`` (without it the server looks for vLLM and hangs),
   ``--device cpu --max-total-tokens 8192 --enable-metrics``.

Stdlib only::

    python tests/peers/sglang_server.py --build
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

log = logging.getLogger("optui.tests.peers.sglang")

SGLANG_VERSION = "0.5.23"
CACHE_ENV = "OPTUI_SGLANG_PEER_CACHE"
CONSTRAINTS = (f"torch=={TORCH_VERSION}", "torchvision==0.28.0", "triton==3.9.0")
# sglang 0.5.23's Requires-Dist that are pure Python (or CPU wheels), pins kept.
PURE_REQUIREMENTS = (
    "aiohttp", "anthropic>=0.20.0", "blobfile==3.0.0", "build", "compressed-tensors==0.18.0", "datasets", "distro",
    "easydict", "einops", "fastapi", "gguf", "interegular", "IPython", "llguidance>=1.7.6,<2.0.0",
    "mistral_common>=1.11.5", "modelscope", "msgspec", "ninja", "numpy", "nvidia-ml-py", "openai==2.8.0",
    "openai-harmony==0.0.4", "orjson", "outlines==0.1.11", "packaging", "partial_json_parser", "pillow",
    "prometheus-client>=0.20.0", "psutil", "pybase64", "pydantic", "python-dateutil<3", "python-multipart",
    "pyzmq>=25.1.2", "regex", "requests", "scipy", "sentencepiece==0.2.1", "setproctitle", "soundfile==0.13.1",
    "tiktoken", "timm==1.0.25", "tokenizers==0.23.2", "tqdm", "transformers==5.19.0", "uvicorn>=0.51", "uvloop",
    "watchfiles", "xgrammar==0.2.7", "xxhash", "zstandard",
)
RUN_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "SGLANG_DISABLE_REQUEST_LOGGING": "1"}
DEFAULT_ARGS: tuple[str, ...] = ("--device", "cpu", "--max-total-tokens", "8192", "--enable-metrics",
                                 "--served-model-name", "tiny", "--mem-fraction-static", "0.05")
READY_TIMEOUT_S = 400.0
# How long a SIGTERMed server gets to exit before its group is SIGKILLed.
STOP_GRACE_S = 15.0

TV_HOOK = '''"""optui test peer: define torchvision::nms/qnms before torchvision loads (tests/peers/sglang_server.py step 5)."""
import importlib.abc
import sys

_LIB = None


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        global _LIB
        if name == "torchvision" and _LIB is None:
            sys.meta_path.remove(self)
            import torch

            _LIB = torch.library.Library("torchvision", "DEF")
            _LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        return None


sys.meta_path.insert(0, _Hook())
'''

SGL_KERNEL = '''"""optui test peer: placeholder for sgl_kernel (tests/peers/sglang_server.py step 6).

Importable, so plain Llama serving on a CPU without AMX runs; anything called raises. Its
submodules (sgl_kernel.scalar_type...) do not exist: sglang's ImportError fallbacks apply."""

__version__ = "0.0.0+optui.placeholder"


def _placeholder(qualname):
    def call(*args, **kwargs):
        raise RuntimeError(f"{qualname} called, but sgl_kernel is optui's test placeholder (no CPU kernels)")
    call.__qualname__ = call.__name__ = qualname.rpartition(".")[2]
    return call


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _placeholder(f"sgl_kernel.{name}")
'''


# A running SGLang server: base URL, process, log file, model dir.
SglangPeer = peer_cache.EnginePeer


def cache_dir() -> Path:
    """``$OPTUI_SGLANG_PEER_CACHE`` or ``~/.cache/optui-test-peers/sglang-<version>/``."""
    return peer_cache.cache_dir(CACHE_ENV, f"sglang-{SGLANG_VERSION}")


def _stamp() -> dict[str, str]:
    return {"sglang": SGLANG_VERSION, "torch": TORCH_VERSION, "recipe": "1"}


def cached_sglang(cache: Path | None = None) -> Path | None:
    """The cached venv's python if the install finished for this recipe, else None."""
    cache = cache or cache_dir()
    python = cache / "venv" / "bin" / "python"
    try:
        if python.is_file() and peer_cache.stamp_matches(cache / "install-stamp.json", _stamp()) \
                and (cache / "model" / "config.json").is_file():
            _write_shims(cache / "venv")
            return python
    except OSError:
        pass
    return None


def _write_shims(venv: Path) -> None:
    """Steps 5 and 6: the torchvision hook and the sgl_kernel placeholder (rewritten when
    this file's version of them changed; no reinstall)."""
    site = next((venv / "lib").glob("python3.*/site-packages"))
    for path, text in ((site / "optui_peer_tv_hook.py", TV_HOOK), (site / "optui_peer_tv_hook.pth", "import optui_peer_tv_hook\n"),
                       (site / "sgl_kernel" / "__init__.py", SGL_KERNEL)):
        path.parent.mkdir(exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)


def _install(cache: Path) -> Path:
    log_file = cache / "install.log"
    started = time.monotonic()
    venv, pip, source = peer_cache.torch_venv(cache, log_file, f"sglang {SGLANG_VERSION}")
    constraints = cache / "constraints.txt"
    constraints.write_text("\n".join(CONSTRAINTS) + "\n")
    peer_cache.run_logged([*pip, "install", "--no-deps", "torchvision==0.28.0", f"sglang=={SGLANG_VERSION}"], log_file)
    peer_cache.run_logged([*pip, "install", *source, "-c", str(constraints), *PURE_REQUIREMENTS], log_file)
    _write_shims(venv)
    model = cache / "model"
    if not (model / "config.json").is_file():
        peer_cache.make_tiny_model(venv / "bin" / "python", model, log_file)
    peer_cache.write_stamp(cache, _stamp())
    log.info("installed sglang %s into %s in %.0f s", SGLANG_VERSION, venv, time.monotonic() - started)
    return venv / "bin" / "python"


def build_sglang() -> Path:
    """The cached venv's python, installing it first if needed (flock-serialised). Raises PeerUnavailable."""
    return peer_cache.locked_build(cache_dir(), CACHE_ENV, cached_sglang, _install,
                                   f"installing sglang {SGLANG_VERSION}", "2-5 min, ~3.5 GB")


def ensure_sglang() -> Path | None:
    """The cached venv's python, installing it if needed; None (reason logged) if impossible."""
    return peer_cache.ensure(build_sglang, "SGLang")


def run_env() -> dict[str, str]:
    """The environment the server and ``sglang.bench_serving`` run with (step 7)."""
    return {**os.environ, **RUN_ENV}


def serve_command(python: Path, model: Path, port: int, extra_args: Sequence[str] = DEFAULT_ARGS) -> list[str]:
    """``python -m sglang.launch_server --model-path M --host 127.0.0.1 --port P *extra_args``."""
    return [str(python), "-m", "sglang.launch_server", "--model-path", str(model), "--host", "127.0.0.1",
            "--port", str(port), *extra_args]


@contextlib.contextmanager
def start_sglang(python: Path, model: Path, port: int, extra_args: Sequence[str] = DEFAULT_ARGS,
                 log_path: Path | None = None, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run the server in its own session, stdout+stderr to ``log_path``; kill its group on exit."""
    with peer_cache.start_server(serve_command(python, model, port, extra_args), log_path, "sglang-",
                                 {**run_env(), **(env or {})}, STOP_GRACE_S) as proc:
        yield proc


def wait_for_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float = READY_TIMEOUT_S) -> float:
    """Poll ``url/health`` until 200; seconds waited. PeerUnavailable if the process exits or time runs out."""
    return peer_cache.wait_for_health(url, proc, timeout_s, "sglang", 0.2)


def main(argv: Sequence[str] | None = None) -> int:
    return peer_cache.main(argv, doc=__doc__, cached=cached_sglang, ensure=ensure_sglang,
                           build_help="install (or find) the cached venv and print its python",
                           check_help="print the cached python; exit 1 if an install is needed")


if __name__ == "__main__":
    sys.exit(main())
