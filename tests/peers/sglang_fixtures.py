"""pytest fixtures for the real SGLang test peer (``tests/peers/sglang_server.py``).

Use from a test module with ``pytest_plugins = ["tests.peers.sglang_fixtures"]``. Keep every
test that needs the peer in one module: ``--dist loadfile`` then gives them one worker, and the
session-scoped ``sglang_server`` (a ~30-90 s start) is started once for all the tests that only
read from it.

If the peer cannot be installed the fixtures FAIL (CI must run these tests: ``./test.sh``
installs it through ``.ci/peers.sh``); ``OPTUI_ALLOW_PEER_SKIP=1`` skips them instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.peers.llama_server import free_port
from tests.peers.sglang_server import (
    DEFAULT_ARGS,
    SglangPeer,
    build_sglang,
    cache_dir,
    cached_sglang,
    start_sglang,
    wait_for_health,
)
from tests.peers.vllm_server import PeerUnavailable

ALLOW_SKIP_ENV = "OPTUI_ALLOW_PEER_SKIP"
# Start, a bench run or an install on a shared 2-core machine: beyond the suite's 120 s.
SGLANG_TEST_TIMEOUT_S = 600
COLD_INSTALL_TIMEOUT_S = 1200


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    limit = SGLANG_TEST_TIMEOUT_S if cached_sglang() is not None else COLD_INSTALL_TIMEOUT_S
    for item in items:
        if "sglang_python" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(limit), append=False)


def _unavailable(reason: str) -> None:
    if os.environ.get(ALLOW_SKIP_ENV) == "1":
        pytest.skip(f"SGLang peer unavailable ({ALLOW_SKIP_ENV}=1): {reason}")
    pytest.fail(f"SGLang peer unavailable: {reason}\n(set {ALLOW_SKIP_ENV}=1 to skip instead)", pytrace=False)


@pytest.fixture(scope="session")
def sglang_python() -> Path:
    """The cached venv's python with sglang (installed on first use: ~2-7 min, 3.5 GB)."""
    try:
        return build_sglang()
    except PeerUnavailable as exc:
        reason = str(exc)
    _unavailable(reason)
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def sglang_model(sglang_python: Path) -> Path:
    """The generated tiny Llama (``tests/peers/make_tiny_hf.py``) in the peer's cache."""
    return cache_dir() / "model"


@contextlib.contextmanager
def launch_sglang(python: Path, model: Path, log_dir: Path, args: Sequence[str] = DEFAULT_ARGS, *, wait: bool = True,
                port: int | None = None, env: dict[str, str] | None = None) -> Iterator[SglangPeer]:
    """An SGLang server of ``model`` on a free (or the given) port, its log in ``log_dir``;
    ``wait`` polls /health. Stopped (its process group) on exit."""
    port = port or free_port()
    log_path = log_dir / f"sglang-{port}.log"
    with start_sglang(python, model, port, args, log_path, env) as proc:
        peer = SglangPeer(f"http://127.0.0.1:{port}", proc, log_path, model)
        if wait:
            try:
                wait_for_health(peer.url, proc)
            except PeerUnavailable as exc:
                pytest.fail(f"{exc}; log {log_path}:\n{_tail(log_path)}", pytrace=False)
        yield peer


@pytest.fixture(scope="session")
def sglang_server(sglang_python: Path, sglang_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SglangPeer]:
    """One healthy SGLang server for the session's read-only tests (DEFAULT_ARGS)."""
    with launch_sglang(sglang_python, sglang_model, tmp_path_factory.mktemp("sglang")) as peer:
        yield peer


def _tail(path: Path, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""
