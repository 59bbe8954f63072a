"""The llama-server build cache: reuse only a matching build, one build at a time, None with a reason."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers import llama_server
from tests.peers.llama_server import _build_stamp, cached_llama_server, ensure_llama_server

ROOT = Path(__file__).parents[2]


def fake_cache(cache: Path, stamp: dict[str, str]) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    binary = cache / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (cache / "build-stamp.json").write_text(json.dumps(stamp))
    return binary


def test_cached_binary_is_reused_only_for_same_config_and_cpu(tmp_path: Path) -> None:
    binary = fake_cache(tmp_path, _build_stamp())
    assert cached_llama_server(tmp_path) == binary
    fake_cache(tmp_path, {**_build_stamp(), "cpu_flags_sha256": "other-cpu"})
    assert cached_llama_server(tmp_path) is None
    (tmp_path / "build-stamp.json").unlink()
    assert cached_llama_server(tmp_path) is None


# Stands in for the 4-minute cmake build: records each call, takes a moment, writes the outputs.
FAKE_BUILD = """
import sys, time, json
from pathlib import Path
import tests.peers.llama_server as m
def fake_build(cache):
    with open(cache / "calls", "a") as f:
        f.write("build\\n")
    time.sleep(1.0)
    b = cache / "llama-server"; b.write_text("#!/bin/sh\\n"); b.chmod(0o755)
    (cache / "build-stamp.json").write_text(json.dumps(m._build_stamp()))
    return b
m._build = fake_build
print(m.build_llama_server())
"""


def test_concurrent_processes_build_once(tmp_path: Path) -> None:
    env = {**os.environ, "OPTUI_PEER_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", FAKE_BUILD], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=30)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [str(tmp_path / "llama-server")] * 2
    assert (tmp_path / "calls").read_text() == "build\n"


def test_ensure_returns_none_and_logs_why_when_cache_unusable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("OPTUI_PEER_CACHE", str(blocker / "cache"))
    with caplog.at_level(logging.WARNING, logger="optui.tests.peers"):
        assert ensure_llama_server() is None
    assert "cannot use cache dir" in caplog.text and "OPTUI_PEER_CACHE" in caplog.text


def test_missing_tools_without_root_explain_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_server.os, "geteuid", lambda: 1000)
    with pytest.raises(llama_server.PeerUnavailable, match=r"build tools missing: ninja; .*apt-get install -y ninja-build"):
        llama_server._install_build_tools(["ninja"])
