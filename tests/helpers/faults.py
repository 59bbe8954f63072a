"""Helpers of the fault-injection suite (tests/process/test_faults*.py): the real app over the demo
campaign, a UI heartbeat that measures freezes, polling, a process that holds the journal's
write lock, and reading the journal back from another connection."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from optui.adapters import proc
from optui.config import load_config
from optui.demo.campaign import write_demo_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.demo import TEST_SPEED, free_port, subprocess_env
from tests.helpers.pilot import wait_for as pilot_wait_for

FAKE_TOOLS = Path(__file__).resolve().parent / "fake_tools"


def demo_config(directory: Path, *, server_extra: str = "", env: str = "", benchmarks: str = "") -> Path:
    """The demo campaign (demo speed :data:`~tests.helpers.demo.TEST_SPEED`) with extra server
    keys, server env entries (``KEY = "v"`` pairs) and extra ``[benchmarks.X]`` tables."""
    cfg = write_demo_config(directory, port=free_port(), speed=TEST_SPEED)
    text = cfg.read_text()
    if env:
        text = text.replace("env = { OPTUI_DEMO_STATE", "env = { " + env + ", OPTUI_DEMO_STATE")
    if server_extra:
        text = text.replace("[servers.demo.presets.big-batch]", server_extra + "\n\n[servers.demo.presets.big-batch]")
    cfg.write_text(text + "\n" + benchmarks)
    return cfg


@contextlib.contextmanager
def observed_demo(cfg: Path) -> Iterator[subprocess.Popen]:
    """The demo server of campaign ``cfg`` made an observed one (``control = "none"``: like
    a remote or foreign server, optui has no process of it to ask), launched here in its own
    process group with the config's argv and env; continued and killed on exit."""
    cfg.write_text(cfg.read_text().replace('control = "process"', 'control = "none"'))
    server = load_config(cfg).config.servers["demo"]
    server_proc = subprocess.Popen(list(server.argv), env=subprocess_env(dict(server.env or {})), start_new_session=True,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield server_proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server_proc.pid, signal.SIGCONT)
            os.killpg(server_proc.pid, signal.SIGKILL)
        server_proc.wait(timeout=10)


def demo_app(directory: Path, **kwargs) -> OptuiApp:
    """The real app on :func:`demo_config` (the demo server is stopped when it quits)."""
    return app_on(demo_config(directory, **kwargs))


def app_on(config: Path) -> OptuiApp:
    """The real app on the campaign ``config`` (demo servers stopped when it quits)."""
    return OptuiApp(Session(load_config(config), stop_servers_on_exit=True), title="faults")


def small_client(config: Path, name: str = "client") -> None:
    """Add preset ``name`` to the demo ``config``: the bundled SGLang-style client, 8 requests."""
    url = load_config(config).config.servers["demo"].url
    argv = [sys.executable, "-m", "optui.demo.bench_client", "--base-url", url, "--num-prompts", "8",
            "--random-input-len", "32", "--random-output-len", "8", "--max-concurrency", "4"]
    with open(config, "a") as fh:
        fh.write(f'\n[benchmarks.{name}]\nserver = "demo"\nargv = {json.dumps(argv)}\n')


class Heartbeat:
    """A 50 ms Textual timer of the running app; :attr:`max_gap_s` is the longest time
    between two ticks, i.e. the longest the UI could not react. A duration, so no test
    asserts it (a busy machine stretches it): :meth:`stop` records it for
    ``bench/ui_gaps.py``, which runs these tests alone and prints each gap against its
    ``target_s``."""

    def __init__(self, app, interval_s: float = 0.05, *, target_s: float = 1.0) -> None:
        self.last = time.monotonic()
        self.max_gap_s = 0.0
        self.ticks = 0
        self.target_s = target_s
        self._timer = app.set_interval(interval_s, self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        self.max_gap_s = max(self.max_gap_s, now - self.last)
        self.last, self.ticks = now, self.ticks + 1

    def stop(self, what: str = "") -> float:
        """Stop ticking; the max gap (s), printed (``pytest -s``) and, where
        ``$OPTUI_UI_GAPS`` names a file, appended to it as a JSON line ``{"test", "what",
        "gap_s", "ticks", "target_s"}`` (``what``: which part of the test, when it has two)."""
        self._timer.stop()
        print(f"[heartbeat] max UI gap {self.max_gap_s * 1000:.0f} ms over {self.ticks} ticks")
        out = os.environ.get(GAPS_FILE_ENV)
        if out:
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
            with open(out, "a") as fh:
                fh.write(json.dumps({"test": test, "what": what, "gap_s": round(self.max_gap_s, 4),
                                     "ticks": self.ticks, "target_s": self.target_s}) + "\n")
        return self.max_gap_s


#: the file :meth:`Heartbeat.stop` appends its figures to (set by bench/ui_gaps.py)
GAPS_FILE_ENV = "OPTUI_UI_GAPS"


async def wait_for(pilot, predicate, timeout: float = 30.0, step: float = 0.1, what: str = "condition"):
    """Poll ``predicate`` while the app runs; AssertionError naming ``what`` after ``timeout``."""
    await pilot_wait_for(pilot, predicate, timeout, step, what)


async def ready(pilot, rt, timeout: float = 40.0) -> None:
    await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None, timeout, what="server ready")


def status_line(app) -> str:
    return app.query_one("#status-line").render().plain


def stored_events(db: Path, **filters) -> list:
    """Events as another process sees them (a fresh read-only connection)."""
    from optui.adapters.journal import Journal

    journal = Journal(db, read_only=True)
    try:
        return journal.events(**filters)
    finally:
        journal.close()


def gone(pid: int | None) -> bool:
    """The process (or its process group) is not running (a zombie counts as gone)."""
    return pid is None or (not proc.pid_alive(pid) and not proc.group_alive(pid))


LOCKER = r"""
import os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
db.execute("INSERT INTO meta(key, value) VALUES ('locker', '1') ON CONFLICT(key) DO UPDATE SET value = '1'")
print("locked", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
db.execute("ROLLBACK")
print("released", flush=True)
"""


class Locker:
    """Another process holding the journal's write lock (``BEGIN EXCLUSIVE``, like a
    ``sqlite3`` shell left mid-transaction) until :meth:`release`."""

    def __init__(self, db: Path) -> None:
        self.release_file = db.parent / f"release-{os.getpid()}-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), str(self.release_file)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=subprocess_env(), start_new_session=True)
        line = self.proc.stdout.readline().strip()
        assert line == "locked", self.proc.stderr.read()

    def release(self) -> None:
        self.release_file.touch()
        assert self.proc.stdout.readline().strip() == "released"
        self.proc.wait(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def page_limit(journal) -> None:
    """Make the journal's file full from now on: SQLite's ``max_page_count`` set to the
    current size, so the next write that needs a new page fails with SQLITE_FULL
    ("database or disk is full"), as on a full disk."""
    db = journal._db  # the session's own connection: the limit is per connection
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages}")


def db_bytes(db: Path) -> bytes:
    """The journal's bytes on disk: the DB file, its WAL and shared-memory index."""
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())


__all__ = ["FAKE_TOOLS", "Heartbeat", "Locker", "app_on", "db_bytes", "demo_app", "demo_config", "gone", "page_limit", "ready",
           "small_client",
           "status_line", "stored_events", "wait_for"]
