"""tests/unit/conftest.py fails a test there that starts a process or opens a network socket,
even when the code under test swallows the error; a test elsewhere is not guarded.

A copy of the guard and of the unit folder's conftest in a temporary tree, run by pytest in a
subprocess (hence this test's place)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SWALLOWS = '''
import socket, subprocess

def test_swallows_a_process():
    try:
        subprocess.run(["true"])
    except OSError:
        pass

def test_swallows_a_connection():
    try:
        socket.create_connection(("127.0.0.1", 1), timeout=1).close()
    except OSError:
        pass

def test_pure():
    assert sum([1, 2]) == 3
'''


def test_the_unit_folder_fails_what_tries_and_the_process_folder_does_not(tmp_path):
    tests = tmp_path / "tests"
    (tests / "helpers").mkdir(parents=True)
    for kind in ("unit", "process"):
        (tests / kind).mkdir()
        (tests / kind / "__init__.py").write_text("")
        (tests / kind / f"test_{kind}_swallows.py").write_text(SWALLOWS)
    for name in ("__init__.py", "helpers/__init__.py", "helpers/unit_guard.py", "unit/conftest.py"):
        shutil.copy(TESTS / name, tests / name)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "tests"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = run.stdout
    assert run.returncode == 1, out
    assert "2 failed, 4 passed" in out, out
    failed = sorted(line for line in out.splitlines() if line.startswith("FAILED"))
    assert [line.split(" - ")[0] for line in failed] == ["FAILED tests/unit/test_unit_swallows.py::test_swallows_a_connection",
                                                         "FAILED tests/unit/test_unit_swallows.py::test_swallows_a_process"], out
    assert "a unit test tried to start a process ['true']" in out, out
    assert "a unit test tried to connect a network socket to ('127.0.0.1', 1)" in out, out
