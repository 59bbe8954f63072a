"""``optui mcp`` against llama.cpp's real ``llama-server`` (tests/peers), through the SDK's
stdio client: the flag catalogue learned from its ``--help``, a restart the ``[agent]`` policy
allows (``-c`` changed, verified in /props: no ``config_mismatch``), then status shows it."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.peers.llama_server import free_port
from tests.process.test_mcp import agent, argv_flag, data
from tests.process.test_peer_server_control import llama_argv, write_config

pytest_plugins = ["tests.peers.fixtures"]
pytestmark = pytest.mark.timeout(120)


def kill_server(cfg, name: str) -> None:
    """Kill the server the agent's restart left running (it outlives optui by design)."""
    try:
        pid = json.loads((cfg.parent / ".optui" / "servers" / f"{name}.json").read_text())["pid"]
        os.killpg(pid, signal.SIGKILL)
    except (OSError, ValueError, KeyError):
        pass


async def test_an_agent_restarts_llama_server_inside_the_policy(tmp_path, llama_server_bin, tiny_gguf):
    port = free_port()
    cfg = write_config(tmp_path, llama_argv(llama_server_bin, tiny_gguf, port, "-c", "512", "-np", "1"), port)
    cfg.write_text(cfg.read_text() + '\n[agent]\nallowed_flags = ["-c"]\n')
    try:
        async with agent(cfg, name="opencode") as client:
            catalogue = json.loads((await client.read_resource("optui://servers/llama/flags")).contents[0].text)
            assert "--ctx-size" in json.dumps(catalogue)
            ran = data(await client.call_tool("restart_server", {
                "server": "llama", "why": "a longer context", "set_flags": {"-c": "1024"}}))
            assert ran["outcome"] == "ran" and ran["request"]["decision"] == "allowed", ran
            restart = ran["restart"]
            assert restart["state"] == "ready", (restart["crash_class"], restart["lines"])
            assert argv_flag(restart["argv"], "-c") == "1024" and restart["config_mismatch"] == []
            server = data(await client.call_tool("status", {}))["servers"][0]
            assert server["kind"] == "llamacpp" and server["state"] == "ready" and server["experiment"] == restart["experiment"]
    finally:
        kill_server(cfg, "llama")
