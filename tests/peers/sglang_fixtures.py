"""pytest fixtures for the real SGLang test peer (``tests/peers/sglang_server.py``):
``sglang_python``, ``sglang_model``, ``sglang_server`` (session scope) and ``launch_sglang``, made
by ``tests/peers/engine_fixtures.py`` (which says how to use them and when they fail or skip).

Use from a test module with ``pytest_plugins = ["tests.peers.sglang_fixtures"]``.
"""

from __future__ import annotations

from tests.peers.engine_fixtures import engine_fixtures
from tests.peers.sglang_server import (
    DEFAULT_ARGS,
    SglangPeer,
    build_sglang,
    cache_dir,
    cached_sglang,
    start_sglang,
    wait_for_health,
)

pytest_collection_modifyitems, sglang_python, sglang_model, launch_sglang, sglang_server = engine_fixtures(
    label="SGLang", name="sglang", exe_name="sglang_python", build=build_sglang, cached=cached_sglang,
    cache_dir=cache_dir, start=start_sglang, wait_for_health=wait_for_health, peer=SglangPeer,
    default_args=DEFAULT_ARGS,
    exe_doc="The cached venv's python with sglang (installed on first use: ~2-7 min, 3.5 GB).",
    server_doc="One healthy SGLang server for the session's read-only tests (DEFAULT_ARGS).")
