"""``optui mcp`` checked with a second real client: the MCP Inspector's CLI (npm
``@modelcontextprotocol/inspector``, installed by ``.ci/peers.sh``; skipped, with the reason,
where it is not), on the demo with ``forbidden_flags = ["--tp-size"]``: the tool list with its
annotations and typed schemas, the presets with their points, ``--tp 2`` refused at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.demo import started_demo_campaign, subprocess_env
from tests.peers.mcp_inspector import binary, cache_dir
from tests.process.test_cli_headless import small_demo_config
from tests.process.test_mcp_cockpit import POLICY

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(binary() is None, reason=f"the MCP Inspector is not installed in {cache_dir()} "
                                 "(.ci/peers.sh installs it: python tests/peers/mcp_inspector.py --install)")]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    cfg = small_demo_config(tmp_path_factory.mktemp("mcp-inspector"))
    cfg.write_text(cfg.read_text() + POLICY)
    with started_demo_campaign(cfg):
        yield cfg


def inspect(cfg: Path, *args: str) -> tuple[int, dict]:
    """``mcp-inspector --cli ARGS -- python -m optui -c CFG mcp``: (exit status, its JSON)."""
    # the Inspector's own connect timeout (15 s) ran out while `optui mcp` started beside a CPU
    # hog (issue 30's suite under load): the test's client waits as long as the call may take
    done = subprocess.run([str(binary()), "--cli", "--connect-timeout", "100000", *args, "--", sys.executable, "-m", "optui", "-c", str(cfg), "mcp"],
                          capture_output=True, text=True, timeout=120, env=subprocess_env(), cwd=cfg.parent,
                          check=False)
    first = done.stdout[: done.stdout.index("\n}") + 2] if "\n}" in done.stdout else done.stdout
    try:
        return done.returncode, json.loads(first)
    except ValueError:
        raise AssertionError(f"not JSON (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}") from None


def test_the_inspector_lists_annotated_typed_tools(campaign):
    rc, listed = inspect(campaign, "--method", "tools/list")
    assert rc == 0
    tools = {t["name"]: t for t in listed["tools"]}
    assert tools["status"]["annotations"]["readOnlyHint"] is True
    assert tools["benchmarks"]["annotations"]["readOnlyHint"] is True
    assert tools["restart_server"]["annotations"]["destructiveHint"] is True
    assert tools["stop_server"]["annotations"]["destructiveHint"] is True
    assert tools["todo_set"]["inputSchema"]["properties"]["status"]["anyOf"][0]["enum"] == [
        "pending", "in_progress", "completed", "cancelled"]
    assert tools["restart_server"]["inputSchema"]["properties"]["why"]["maxLength"] == 1000


def test_the_inspector_reads_the_presets_and_gets_an_abbreviation_refused(campaign):
    rc, presets = inspect(campaign, "--method", "tools/call", "--tool-name", "benchmarks")
    assert rc == 0, presets
    points = {p["name"]: p["points"] for p in presets["structuredContent"]["result"]}
    assert points["loadgen"] == {"kind": "concurrency", "values": [1, 2, 4, 8]}
    rc, refused = inspect(campaign, "--method", "tools/call", "--tool-name", "restart_server", "--tool-arg",
                          "server=demo", "why=bigger TP", 'set_flags={"--tp": "2"}')
    assert refused["isError"] is True and rc != 0
    assert refused["content"][0]["text"].endswith("demo: not restarted, --tp is an abbreviation of --tp-size: "
                                                  "write --tp-size")
