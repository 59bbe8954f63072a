"""The pytest fixtures of an engine test peer that runs from a cached venv (vLLM, SGLang), made
by one factory: :func:`engine_fixtures`. ``tests/peers/vllm_fixtures.py`` and
``tests/peers/sglang_fixtures.py`` each call it with their peer's functions and names.

Keep every test that needs a peer in one module: ``--dist loadfile`` then gives them one worker,
and the module-scoped server (a ~30-90 s start) is started once for all the tests that only read
from it, and stopped when they are done: session-scoped it idled until the worker's last test,
SGLang's scheduler polling at ~80 % of a core for the rest of the suite (a CPU hog of its own on
a 2-core machine).

If the peer cannot be installed the fixtures FAIL (CI must run these tests: ``./test.sh``
installs it through ``.ci/peers.sh``); ``OPTUI_ALLOW_PEER_SKIP=1`` skips them instead.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.peers.peer_cache import PeerUnavailable, free_port

ALLOW_SKIP_ENV = "OPTUI_ALLOW_PEER_SKIP"
# Start, a bench run or an install on a shared 2-core machine: beyond the suite's 120 s.
TEST_TIMEOUT_S = 600
COLD_INSTALL_TIMEOUT_S = 1200


class EngineFixtures(NamedTuple):
    """What a peer's fixture module binds at its top level (pytest finds fixtures and hooks there)."""

    pytest_collection_modifyitems: Callable[[pytest.Config, list[pytest.Item]], None]
    exe: Any  # the session fixture: the cached venv's executable (or python)
    model: Any  # the session fixture: the generated tiny Llama in the peer's cache
    launch: Callable[..., AbstractContextManager[Any]]  # launch(exe, model, log_dir, args, *, wait, port, env)
    server: Any  # the module fixture: one healthy server on DEFAULT_ARGS


def engine_fixtures(*, label: str, name: str, exe_name: str, build: Callable[[], Path],
                    cached: Callable[[], Path | None], cache_dir: Callable[[], Path],
                    start: Callable[..., AbstractContextManager[subprocess.Popen[bytes]]],
                    wait_for_health: Callable[[str, subprocess.Popen[bytes]], float], peer: Callable[..., Any],
                    default_args: Sequence[str], exe_doc: str, server_doc: str) -> EngineFixtures:
    """The fixtures ``<exe_name>``, ``<name>_model`` (session scope) and ``<name>_server`` (module scope), the
    ``launch`` context manager and the collection hook that gives the tests which use the peer
    their longer timeout.

    ``label`` names the peer in messages ("vLLM"); ``build``/``cached``/``cache_dir``/``start``/
    ``wait_for_health`` are the peer module's; ``peer`` makes its (url, proc, log_path, model) tuple.
    """
    model_name, server_name = f"{name}_model", f"{name}_server"

    def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
        limit = TEST_TIMEOUT_S if cached() is not None else COLD_INSTALL_TIMEOUT_S
        for item in items:
            if exe_name in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.timeout(limit), append=False)

    def exe() -> Path:
        return built_or_fail(build, label)

    def model(exe: Path) -> Path:
        return cache_dir() / "model"

    @contextlib.contextmanager
    def launch(exe: Path, model: Path, log_dir: Path, args: Sequence[str] = default_args, *, wait: bool = True,
               port: int | None = None, env: dict[str, str] | None = None) -> Iterator[Any]:
        """A server of ``model`` on a free (or the given) port, its log in ``log_dir``; ``wait``
        polls /health. Stopped (its process group) on exit."""
        port = port or free_port()
        log_path = log_dir / f"{name}-{port}.log"
        with start(exe, model, port, args, log_path, env) as proc:
            running = peer(f"http://127.0.0.1:{port}", proc, log_path, model)
            if wait:
                try:
                    wait_for_health(running.url, proc)
                except PeerUnavailable as exc:
                    pytest.fail(f"{exc}; log {log_path}:\n{tail(log_path)}", pytrace=False)
            yield running

    def server(exe: Path, model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
        with launch(exe, model, tmp_path_factory.mktemp(name)) as running:
            yield running

    return EngineFixtures(
        pytest_collection_modifyitems,
        _peer_fixture(exe, exe_name, (), exe_doc),
        _peer_fixture(model, model_name, (exe_name,),
                         "The generated tiny Llama (``tests/peers/make_tiny_hf.py``) in the peer's cache."),
        launch,
        _peer_fixture(server, server_name, (exe_name, model_name, "tmp_path_factory"), server_doc, scope="module"),
    )


def built_or_fail(build: Callable[[], Path], label: str) -> Path:
    """``build()``; where it raises PeerUnavailable the test FAILS with the reason (skips with
    ``OPTUI_ALLOW_PEER_SKIP=1``): llama-server's fixture uses it too."""
    try:
        return build()
    except PeerUnavailable as exc:
        reason = str(exc)
    # Outside the except block so the report shows the reason, not a chained traceback.
    if os.environ.get(ALLOW_SKIP_ENV) == "1":
        pytest.skip(f"{label} peer unavailable ({ALLOW_SKIP_ENV}=1): {reason}")
    pytest.fail(f"{label} peer unavailable: {reason}\n(set {ALLOW_SKIP_ENV}=1 to skip instead)", pytrace=False)


def _peer_fixture(body: Callable[..., Any], name: str, requests: Sequence[str], doc: str,
                     scope: str = "session") -> Any:
    """A fixture ``name`` of ``scope`` (session by default) that requests the fixtures
    ``requests`` (by those names, so pytest sees them in each test's fixture closure) and passes
    them to ``body`` in order."""
    if inspect.isgeneratorfunction(body):
        def fixture(**kwargs: Any) -> Any:
            yield from body(*(kwargs[r] for r in requests))
    else:
        def fixture(**kwargs: Any) -> Any:
            return body(*(kwargs[r] for r in requests))
    fixture.__name__ = fixture.__qualname__ = name
    fixture.__doc__ = doc
    fixture.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(r, inspect.Parameter.KEYWORD_ONLY) for r in requests])
    return pytest.fixture(scope=scope, name=name)(fixture)  # type: ignore[call-overload]


def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a server's log ('' if unreadable)."""
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""
