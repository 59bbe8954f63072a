"""pytest fixtures for the real llama.cpp test peer.

Use from a test module with ``pytest_plugins = ["tests.peers.fixtures"]``.

If the binary cannot be built the peer fixtures FAIL, so a CI run without the peer is red
instead of silently green; set ``OPTUI_ALLOW_PEER_SKIP=1`` to skip those tests instead (laptops
without a compiler). Prebuild with ``.ci/peers.sh`` or ``python tests/peers/llama_server.py --build``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.peers.engine_fixtures import built_or_fail, tail
from tests.peers.llama_server import (
    DEFAULT_ARGS,
    LaunchPeer,
    LlamaPeer,
    PeerUnavailable,
    build_llama_server,
    cached_llama_server,
    free_port,
    start_llama_server,
    stop_server,
    wait_for_health,
)
from tests.peers.make_tiny_gguf import SIZES, make_tiny_gguf

# Model sizes for big_gguf: the smallest whose load with --load-mode none keeps /health at
# 503 for >= 300 ms on the 2-core reference machine (measurements in tests/peers/NOTES.md).
LOADING_SIZE: dict[str, int] = SIZES["medium"]
# One compute thread: two synchronise at every op of the graph, and on a loaded 2-core
# machine (the suite itself, its servers) each sync waits out the other thread's time slice.
# Measured there (load ~7): 4 x 64 tokens of the tiny model in 0.7-2.0 s with -t 1 vs
# 0.9-10.6 s with -t 2; 7 x 24 tokens of the medium model in 9-11 s vs 80-107 s.
PEER_THREADS = 1
# A cold cache means the first peer test builds the binary (~4 min on 2 cores).
COLD_BUILD_TIMEOUT_S = 900


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The project-wide 120 s timeout covers fixture setup, which would kill a cold build.
    if cached_llama_server() is not None:
        return
    for item in items:
        if "llama_server_bin" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(COLD_BUILD_TIMEOUT_S), append=False)


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    """Path of the cached llama-server binary (built on first use)."""
    return built_or_fail(build_llama_server, "llama-server")


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 605 KB random LLaMA GGUF (2 layers, embd 64, vocab 512, n_ctx_train 512)."""
    return make_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf").path


@pytest.fixture(scope="session")
def big_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model slow enough to load that /health shows 503 "Loading model" for >= 300 ms.

    Start it with llama_server.LOADING_ARGS (``--load-mode none``); with mmap the load is near-instant.
    """
    return make_tiny_gguf(tmp_path_factory.mktemp("gguf") / "loading.gguf", **LOADING_SIZE).path


@pytest.fixture
def launch_llama_server(llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path) -> Iterator[LaunchPeer]:
    """Factory: ``with launch_llama_server(model=None, args=DEFAULT_ARGS, wait=True) as peer:``.

    Each call picks a free port and a fresh log under tmp_path; ``wait`` polls /health until
    200. Servers still running at teardown are killed.
    """
    with contextlib.ExitStack() as cleanup:

        @contextlib.contextmanager
        def launch(model: Path | None = None, args: Sequence[str] = DEFAULT_ARGS, wait: bool = True) -> Iterator[LlamaPeer]:
            port = free_port()
            log_path = tmp_path / f"llama-server-{port}.log"
            with start_llama_server(llama_server_bin, model or tiny_gguf, port, args, log_path, threads=PEER_THREADS) as proc:
                cleanup.callback(stop_server, proc)
                peer = LlamaPeer(f"http://127.0.0.1:{port}", proc, log_path)
                if wait:
                    _wait_or_fail(peer)
                yield peer

        yield launch


@pytest.fixture
def llama_server(launch_llama_server: LaunchPeer) -> Iterator[LlamaPeer]:
    """A healthy llama-server on tiny_gguf with DEFAULT_ARGS: yields (url, proc, log_path)."""
    with launch_llama_server() as peer:
        yield peer


def _wait_or_fail(peer: LlamaPeer) -> None:
    try:
        wait_for_health(peer.url, peer.proc)
        return
    except PeerUnavailable as exc:
        reason = str(exc)
    pytest.fail(f"{reason}; log {peer.log_path}:\n{tail(peer.log_path, 20)}", pytrace=False)
