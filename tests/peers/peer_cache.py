"""What the real test peers share (llama.cpp's llama-server, vLLM, SGLang): the install cache,
its lock and stamp, the CPU-torch Python 3.11 venv, starting, stopping and polling a server,
and the ``--build``/``--check`` command line.

Each peer module keeps what is its own: versions, the recipe and its workarounds, the stamp's
fields, the launch argv. The cache layout is the peers': ``$<PEER>_CACHE`` or
``~/.cache/optui-test-peers/<name>-<version>/`` with a ``.lock`` file and a JSON stamp.

Stdlib only, so CI can prebuild before the test extra is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger("optui.tests.peers.cache")

# The CPU torch of the Python peers (vLLM, SGLang): cp311 wheels, in this image's /opt/wheels,
# elsewhere on the PyTorch CPU index.
TORCH_VERSION = "2.13.0"
LOCAL_WHEELS = Path("/opt/wheels")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class PeerUnavailable(RuntimeError):
    """A test peer cannot be provided on this machine; the message says why and what to do."""


class EnginePeer(NamedTuple):
    """A running engine server of a venv peer (vLLM, SGLang): base URL (``http://127.0.0.1:PORT``),
    process, log file, model dir."""

    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    model: Path


def cache_dir(env_var: str, name: str) -> Path:
    """``$env_var`` or ``~/.cache/optui-test-peers/<name>/``."""
    env = os.environ.get(env_var)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "optui-test-peers" / name


def stamp_matches(stamp: Path, expected: Mapping[str, str]) -> bool:
    """Whether the JSON stamp file holds exactly ``expected`` (False if absent or unreadable)."""
    try:
        return json.loads(stamp.read_text()) == expected
    except (OSError, ValueError):
        return False


def run_logged(cmd: Sequence[str], log_file: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    """Run ``cmd`` with its output appended to ``log_file``; PeerUnavailable with the log's tail if it fails."""
    with log_file.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-15:])
        raise PeerUnavailable(f"`{' '.join(cmd)}` exited {proc.returncode}; full log {log_file}:\n{tail}")


def locked_build(cache: Path, cache_env: str, cached: Callable[[Path], Path | None], build: Callable[[Path], Path],
                 what: str, takes: str) -> Path:
    """``cached(cache)``, else ``build(cache)`` under an exclusive flock on ``<cache>/.lock``.

    The lock serialises concurrent test processes: the second waits for the first build and then
    reuses it. ``what`` ("building llama-server") and ``takes`` ("~4 min") word the log line and
    the errors. Raises PeerUnavailable.
    """
    if found := cached(cache):
        return found
    try:
        cache.mkdir(parents=True, exist_ok=True)
        lock = (cache / ".lock").open("w")
    except OSError as exc:
        raise PeerUnavailable(f"cannot use cache dir {cache}: {exc}; set {cache_env} to a writable dir") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found := cached(cache):  # built by another process while we waited
            return found
        log.info("%s into %s (%s)", what, cache, takes)
        try:
            return build(cache)
        except OSError as exc:  # disk full, permissions, a tool vanishing mid-build
            raise PeerUnavailable(f"{what} in {cache} failed: {exc}") from exc


def ensure(build: Callable[[], Path], label: str) -> Path | None:
    """``build()``; None, the reason logged, where it raises PeerUnavailable."""
    try:
        return build()
    except PeerUnavailable as exc:
        log.warning("%s test peer unavailable: %s", label, exc)
        return None


def python311(needed_by: str) -> str:
    """A Python 3.11 interpreter (the CPU torch wheels are cp311); PeerUnavailable if there is none."""
    if path := shutil.which("python3.11"):
        return path
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    raise PeerUnavailable(f"{needed_by} needs Python 3.11 (its CPU torch {TORCH_VERSION} wheels are cp311); "
                          "install python3.11")


def torch_venv(cache: Path, log_file: Path, needed_by: str) -> tuple[Path, list[str], list[str]]:
    """A fresh ``<cache>/venv`` (Python 3.11) with the CPU torch in it, the stamp removed first.

    Returns (venv, its pip command, the pip options that find the CPU torch wheels).
    """
    log_file.write_text("")
    venv = cache / "venv"
    if venv.exists():
        shutil.rmtree(venv)
    (cache / "install-stamp.json").unlink(missing_ok=True)
    run_logged([python311(needed_by), "-m", "venv", str(venv)], log_file)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    # The image's pip.conf may add its own constraints (torch<=2.14.1): compatible with ours.
    source = ["--find-links", str(LOCAL_WHEELS)] if any(LOCAL_WHEELS.glob(f"torch-{TORCH_VERSION}+cpu-*.whl")) \
        else ["--extra-index-url", TORCH_CPU_INDEX]
    run_logged([*pip, "install", *source, f"torch=={TORCH_VERSION}"], log_file)
    return venv, pip, source


def make_tiny_model(python: Path, model: Path, log_file: Path) -> None:
    """``tests/peers/make_tiny_hf.py``'s tiny Llama into ``model``, run by the venv's ``python``."""
    run_logged([str(python), str(Path(__file__).with_name("make_tiny_hf.py")), str(model)], log_file)


def write_stamp(cache: Path, stamp: Mapping[str, str]) -> None:
    """``<cache>/install-stamp.json``: the install finished, for this recipe."""
    (cache / "install-stamp.json").write_text(json.dumps(stamp) + "\n")


#: where :func:`free_port` picks: from here up to the kernel's ephemeral range, one slice per
#: xdist worker (``gw0``...; the controller and a serial run take the last slice)
RESERVED_PORTS_FROM = 20000
PORT_SLICES = 16
_next_in_slice: list[int] = []  # this process's cursor in its slice (advances at every pick)


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's ephemeral port range (``net.ipv4.ip_local_port_range``: two integers),
    from which ``bind(("127.0.0.1", 0))`` and every outgoing connection take their port;
    Linux's default ``(32768, 60999)`` where the file cannot be read."""
    try:
        low, high = (int(part) for part in path.read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and that nothing else of the suite is handed.

    Below the kernel's ephemeral range (:func:`ephemeral_range`), so no ``bind(0)`` and no
    outgoing connection of another test takes it before the server binds it (ci: SGLang
    binds its port after loading the model, 60 s under load; a port ``bind(0)`` had freed was
    taken by then, its uvicorn failed with ``[Errno 98]`` and the process hung 120 s). Each
    xdist worker has a slice of its own, and each pick moves on in it, so two picks in a
    row (a test that starts several servers) differ. A port some process holds is skipped.
    Falls back to the kernel's pick where the range leaves no room below."""
    low, _ = ephemeral_range()
    size = (low - RESERVED_PORTS_FROM) // PORT_SLICES
    if size < 50:
        return _kernel_port()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) % (PORT_SLICES - 1) if worker.startswith("gw") and worker[2:].isdigit() else PORT_SLICES - 1
    start = RESERVED_PORTS_FROM + index * size
    if not _next_in_slice:
        _next_in_slice.append(os.getpid() % size)  # not the same ports as this worker's last run
    for _ in range(size):
        port = start + _next_in_slice[0] % size
        _next_in_slice[0] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return _kernel_port()


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_server(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_s`` seconds, reap."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    # Also catches anything the server left behind in its group after it exited.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _term_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``), so a test run killed hard (SIGKILL, a crashed xdist worker)
    leaves no 3 GB engine server behind; the engines stop their own workers on SIGTERM."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1: PR_SET_PDEATHSIG


@contextlib.contextmanager
def start_server(cmd: Sequence[str], log_path: Path | None, log_prefix: str, env: dict[str, str] | None = None,
                 grace_s: float = 5.0) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` in its own session, stdout and stderr to ``log_path`` (a temp file named
    ``<log_prefix>*.log`` if None); its whole process group is killed on exit, whatever happens
    in the body, and it is sent SIGTERM if this process dies first (a killed test run). Call it
    from the thread that lives as long as the server (pytest's main thread): the signal
    follows the starting thread. Does not wait for readiness: see :func:`wait_for_health`."""
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix=log_prefix, suffix=".log")
        os.close(fd)
        log_path = Path(name)
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env,
                                preexec_fn=_term_with_parent if sys.platform == "linux" else None)
    try:
        yield proc
    finally:
        stop_server(proc, grace_s)


def wait_for_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float, what: str, poll_s: float) -> float:
    """Poll ``url/health`` every ``poll_s`` until 200; return seconds waited.

    Raises PeerUnavailable (naming ``what``) if the process exits or ``timeout_s`` passes first.
    """
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise PeerUnavailable(f"{what} exited with {proc.returncode} before becoming healthy")
        # not listening yet, or 503 while loading (HTTPError is a URLError)
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise PeerUnavailable(f"{what} at {url} not healthy after {timeout_s:.0f} s")
        time.sleep(poll_s)


def main(argv: Sequence[str] | None, *, doc: str | None, cached: Callable[[], Path | None],
         ensure: Callable[[], Path | None], build_help: str, check_help: str) -> int:
    """A peer's command line: ``--check`` prints ``cached()``'s path (exit 1 if None), ``--build``
    ``ensure()``'s (which installs or builds, and logs why not where it cannot)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--build", action="store_true", help=build_help)
    mode.add_argument("--check", action="store_true", help=check_help)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    found = cached() if args.check else ensure()
    if found is None:
        return 1
    print(found)
    return 0
