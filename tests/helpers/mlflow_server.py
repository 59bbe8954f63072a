"""A real MLflow tracking server for tests: ``mlflow server`` (the ``test`` extra installs the
``mlflow`` package) on a free port of 127.0.0.1, a SQLite backend store and an artifacts
folder in a tmp dir, its whole process group stopped afterwards."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.demo import free_port, http_status, stop_process_group

#: a loaded 2-core machine took 38 s to answer /health (imports, DB migrations)
START_TIMEOUT_S = 150.0


def mlflow_binary() -> str:
    """The ``mlflow`` command beside this Python; skips the test when it is missing."""
    path = Path(sys.executable).with_name("mlflow")
    found = str(path) if path.exists() else shutil.which("mlflow")
    if not found:
        pytest.skip("MLflow not installed: pip install -e '.[test]' (the test extra has mlflow)")
    return found


@contextmanager
def mlflow_server(directory: Path) -> Iterator[str]:
    """Start ``mlflow server`` with its store in ``directory``; yields its URI
    (``http://127.0.0.1:PORT``) once ``/health`` answers 200. Raises RuntimeError with the
    server's log when it exits or does not answer in :data:`START_TIMEOUT_S`."""
    port = free_port()
    log = directory / "mlflow-server.log"
    cmd = [mlflow_binary(), "server", "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}",
           "--artifacts-destination", str(directory / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
           "--workers", "1"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=directory)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while http_status(f"{uri}/health") != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start ({' '.join(cmd)}):\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.25)
        yield uri
    finally:
        stop_process_group(proc)
