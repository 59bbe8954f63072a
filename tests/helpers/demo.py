"""Fixtures for tests that need the demo server: free ports, start/stop with cleanup.

``start_demo_server`` always kills the server's whole process group on exit, whatever
the test did, so no process outlives a test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.peers.peer_cache import free_port  # noqa: F401  (re-exported: the helpers' one port picker)

SRC = Path(__file__).resolve().parents[2] / "src"

#: ``--demo-speed`` of the demo servers tests start: the startup phases (~5 s at speed 1) take
#: 50 ms; the warmup keeps its 0.3 s minimum (HTTP up, /health 503), so each state a test
#: waits for still happens, in order, just without the simulated model loading time
TEST_SPEED = 100.0



def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` with ``src`` on PYTHONPATH (so ``python -m optui...`` works) + ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def stop_process_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), then
    SIGKILL whatever is left after ``grace_s`` seconds."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # leader gone: make sure no child lingers
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        return


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """GET ``url``: the status code, or None when the connection is refused/fails."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


@dataclass
class DemoServer:
    """A running demo server process."""

    proc: subprocess.Popen
    port: int
    log_path: Path
    state_path: Path | None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_healthy(self, timeout_s: float = 15.0) -> None:
        """Poll ``/health`` until 200; fail early when the process exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"demo server exited with {self.proc.returncode}:\n{self.log_text()}")
            if http_status(self.base_url + "/health") == 200:
                return
            time.sleep(0.02)
        raise AssertionError(f"demo server not healthy after {timeout_s} s:\n{self.log_text()}")


def demo_server_cmd(port: int, *flags: str, speed: float = TEST_SPEED) -> list[str]:
    """argv of a demo server on ``port`` (a default ``--model-path`` unless given)."""
    cmd = [sys.executable, "-m", "optui.demo.fake_server", "--port", str(port), "--demo-speed", str(speed)]
    if "--model-path" not in flags:
        cmd += ["--model-path", "demo/Model-18B"]
    return cmd + list(flags)


@contextlib.contextmanager
def start_demo_server(
    tmp_path: Path,
    *flags: str,
    speed: float = TEST_SPEED,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    state: bool = False,
    port: int | None = None,
) -> Iterator[DemoServer]:
    """Run ``python -m optui.demo.fake_server`` (stdin closed, own session, stdout and
    stderr to ``tmp_path/demo-PORT.log``); ``state`` sets OPTUI_DEMO_STATE to a file in
    ``tmp_path``. Yields once healthy (unless ``wait_ready`` is False)."""
    port = port or free_port()
    log_path = tmp_path / f"demo-{port}.log"
    state_path = tmp_path / f"demo-{port}.state.json" if state else None
    extra = dict(env or {})
    if state_path:
        extra["OPTUI_DEMO_STATE"] = str(state_path)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            demo_server_cmd(port, *flags, speed=speed), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env=subprocess_env(extra), start_new_session=True,
        )
    try:
        server = DemoServer(proc, port, log_path, state_path)
        if wait_ready:
            server.wait_healthy()
        yield server
    finally:
        stop_process_group(proc)


@contextlib.contextmanager
def started_demo_campaign(cfg: Path) -> Iterator[Path]:
    """The demo campaign ``cfg`` with its server started by the CLI (``optui restart demo``, the
    reason 'first start'), which must succeed; the server (it outlives optui by design) is killed
    on exit, whatever happened. For a module-scoped ``campaign`` fixture::

        with started_demo_campaign(small_demo_config(tmp_path_factory.mktemp("x"))) as cfg:
            yield cfg
    """
    from tests.process.test_cli_headless import kill_demo_server, optui  # it imports this module

    try:
        started = optui(cfg, "restart", "demo", "--reason", "first start", "--json")
        assert started.returncode == 0, started.stderr + started.stdout
        yield cfg
    finally:
        kill_demo_server(cfg)


def run_in_pty_until_exit(argv: list[str], *, cwd: Path, timeout: float = 60, env: dict[str, str] | None = None,
                          size: tuple[int, int] | None = None) -> tuple[int, str]:
    """Run ``argv`` (the real TUI) in a pseudo-terminal of ``size`` (columns, rows; the pty's
    default if None) until it exits on its own; its exit code and everything it wrote
    (``\r\n`` as ``\n``). ``env``: the whole environment (default: :func:`subprocess_env`
    with ``TERM=xterm-256color``). Killed after ``timeout`` s (a bound for slow machines):
    the code is then the kill's."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    leader, follower = pty.openpty()
    if size is not None:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    proc = subprocess.Popen(argv, cwd=cwd, stdin=follower, stdout=follower, stderr=follower,
                            env=env if env is not None else subprocess_env({"TERM": "xterm-256color"}),
                            start_new_session=True)
    os.close(follower)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    out += os.read(leader, 65536)
                except OSError:  # the child closed the pty
                    break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(leader)
    return proc.returncode, out.decode("utf-8", "replace").replace("\r\n", "\n")
