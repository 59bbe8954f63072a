"""pytest fixtures for the real vLLM test peer (``tests/peers/vllm_server.py``): ``vllm_exe``,
``vllm_model``, ``vllm_server`` (session scope) and ``launch_vllm``, made by
``tests/peers/engine_fixtures.py`` (which says how to use them and when they fail or skip).

Use from a test module with ``pytest_plugins = ["tests.peers.vllm_fixtures"]``.
"""

from __future__ import annotations

from tests.peers.engine_fixtures import engine_fixtures
from tests.peers.vllm_server import DEFAULT_ARGS, VllmPeer, build_vllm, cache_dir, cached_vllm, start_vllm, wait_for_health

pytest_collection_modifyitems, vllm_exe, vllm_model, launch_vllm, vllm_server = engine_fixtures(
    label="vLLM", name="vllm", exe_name="vllm_exe", build=build_vllm, cached=cached_vllm, cache_dir=cache_dir,
    start=start_vllm, wait_for_health=wait_for_health, peer=VllmPeer, default_args=DEFAULT_ARGS,
    exe_doc="The cached venv's ``vllm`` (installed on first use: ~4 min, 3.5 GB).",
    server_doc="One healthy ``vllm serve`` for the session's read-only tests (DEFAULT_ARGS).")
