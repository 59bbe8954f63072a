"""``-`` reads standard input without a deprecated Click call (``click.get_text_stream``
warns since Click 8.5 and is gone in Click 9): run with deprecation warnings as errors."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args, text", [
    (["log", "classify", "-"], "[2026-01-01 00:00:00] The server is fired up and ready to roll!\n"),
    (["gpus", "--from-file", "-", "--fields", "index,name,memory.used,memory.total"], "0, NVIDIA H200, 1024, 143771\n"),
])
def test_dash_reads_stdin_with_no_deprecated_call(args, text):
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "optui", *args], input=text,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "DeprecationWarning" not in done.stderr
