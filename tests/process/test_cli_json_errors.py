"""``--json`` on a command that fails prints one JSON object on stdout,
``{"error": …, "exit_code": …}``, as well as the message on stderr (issue 34): a script that
reads stdout gets JSON whatever happened (real subprocesses, the demo's config)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optui.demo.campaign import write_demo_config
from tests.helpers.demo import TEST_SPEED, free_port, subprocess_env

pytestmark = pytest.mark.timeout(90)


def optui(cfg: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, env=subprocess_env(None))


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return write_demo_config(tmp_path, port=free_port(), speed=TEST_SPEED)


def test_a_flag_the_server_does_not_know_is_a_json_error(cfg):
    res = optui(cfg, "restart", "demo", "--set", "--bogus-flag=3", "--json")
    assert res.returncode == 2
    data = json.loads(res.stdout)
    assert data["exit_code"] == 2 and "--bogus-flag" in data["error"]
    assert "--bogus-flag" in res.stderr  # a person still reads it there


@pytest.mark.parametrize("args, code, words", [
    (("restart", "nosuch", "--json"), 2, "nosuch"),            # the command's own error
    (("todo", "list", "--json", "--bogus"), 2, "--bogus"),      # click's usage error
    (("todo", "set", "999", "--status", "done", "--json"), 2, "done"),
])
def test_every_failure_with_json_prints_one_object(cfg, args, code, words):
    res = optui(cfg, *args)
    assert res.returncode == code, res.stderr
    data = json.loads(res.stdout)  # one object, nothing else
    assert set(data) == {"error", "exit_code"} and data["exit_code"] == code
    assert words in data["error"] and not data["error"].startswith(("Error:", "optui: error:"))


def test_a_success_and_a_failure_without_json_print_no_error_object(cfg):
    ok = optui(cfg, "todo", "add", "try --max-running-requests 16", "--json")
    assert ok.returncode == 0 and "error" not in json.loads(ok.stdout)
    plain = optui(cfg, "restart", "nosuch")
    assert plain.returncode == 2 and plain.stdout == ""
