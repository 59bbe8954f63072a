"""A campaign's files under attack (issue 15, minor): exports that a full disk or a symlink
cannot spoil, a campaign on a read-only filesystem, a journal from a newer optui, numbers too
big for SQLite on the command line, a demo directory TOML cannot quote naively, and state
files only their owner can read.

Everything is real: the CLI in a subprocess or through click, real SQLite files, a real
read-only bind mount (in a private mount namespace: ``unshare``), a real file size limit
(``RLIMIT_FSIZE``, the EFBIG a full disk's ENOSPC stands for here).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optui.adapters.journal import SCHEMA_VERSION, Journal, JournalError
from optui.cli import cli
from optui.config import load_config
from optui.demo.campaign import write_demo_config

from ..helpers.demo import subprocess_env

HUGE = "99999999999999999999"  # > 2**63: SQLite cannot bind it (OverflowError before the fix)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def campaign(tmp_path) -> Path:
    """A demo campaign's config (never started) with a journal: 3 todo items and a note."""
    cfg = write_demo_config(tmp_path / "camp", port=1)
    j = Journal(load_config(cfg).journal_path)
    for text in ("baseline sweep", "try tp 4", "write the report"):
        j.add_todo(text)
    j.append("note", None, {"text": "first note"}, actor="cli")
    j.close()
    return cfg


def optui(*args: str, timeout: float = 60, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optui", *args], capture_output=True, text=True, timeout=timeout,
                          env=subprocess_env(), preexec_fn=preexec_fn)


def invoke(cfg: Path, *args: str):
    return CliRunner().invoke(cli, ["-c", str(cfg), *args])


# ------------------------------------------------------------------ exports
def test_todo_export_replaces_a_symlink_never_its_target(campaign, tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("not an export\n")
    link = campaign.parent / "todo.md"
    link.symlink_to(precious)
    r = invoke(campaign, "todo", "export", "-o", str(link))
    assert r.exit_code == 0, r.output
    assert precious.read_text() == "not an export\n"  # the symlink's target is never written
    assert not link.is_symlink() and "baseline sweep" in link.read_text()
    assert _mode(link) == 0o600  # as journal exports (flag values, notes)


def test_todo_export_keeps_the_previous_file_whole_on_a_full_disk(campaign):
    # a write that fails half-way (EFBIG past RLIMIT_FSIZE, like ENOSPC on a full disk) keeps the
    # previous export whole: the new text goes to a temporary file renamed over it
    j = Journal(load_config(campaign).journal_path)
    for i in range(150):
        j.add_todo(f"item {i}: " + "x" * 1000)
    j.close()
    out = campaign.parent / "todo.json"
    assert invoke(campaign, "todo", "export", "--format", "todowrite", "-o", str(out)).exit_code == 0
    before = out.read_bytes()
    assert len(before) > 150_000
    Journal(load_config(campaign).journal_path).add_todo("one more")

    def limit_file_size():  # Python ignores SIGXFSZ: a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    p = optui("-c", str(campaign), "todo", "export", "--format", "todowrite", "-o", str(out), preexec_fn=limit_file_size)
    assert p.returncode == 1, p.stderr
    assert "File too large" in p.stderr and "Traceback" not in p.stderr
    assert out.read_bytes() == before
    assert sorted(x.name for x in campaign.parent.iterdir() if x.name.startswith(".todo")) == []  # no temp file left


# -------------------------------------------------------- read-only filesystem
def _in_read_only_mount(directory: Path, argv: list[str]) -> subprocess.CompletedProcess:
    """Run ``argv`` with ``directory`` bind-mounted read-only over itself, in a private mount
    namespace (``unshare``: nothing outside the command sees the mount, nothing to undo)."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
    return subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", script, str(directory), *argv],
                          capture_output=True, text=True, timeout=90, env=subprocess_env())


def _read_only_mounts_work(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    p = _in_read_only_mount(probe, ["sh", "-c", f"! touch {probe}/x 2>/dev/null"])
    return p.returncode == 0


def test_a_campaign_on_a_read_only_filesystem_can_be_read(campaign, tmp_path):
    if not _read_only_mounts_work(tmp_path):
        pytest.skip("no unprivileged mount namespace here (unshare --mount --map-root-user)")
    directory = campaign.parent
    before = {p: p.stat().st_mtime_ns for p in directory.rglob("*")}
    py = [sys.executable, "-m", "optui", "-c", str(campaign)]

    p = _in_read_only_mount(directory, [*py, "--read-only", "todo", "list"])
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "baseline sweep" in p.stdout and "write the report" in p.stdout
    p = _in_read_only_mount(directory, [*py, "--read-only", "journal", "tail"])
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "first note" in p.stdout
    p = _in_read_only_mount(directory, [*py, "--read-only", "status", "--json", "--wait", "0"])
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    status = json.loads(p.stdout)
    assert [t["content"] for t in status["todo"]] == ["baseline sweep", "try tp 4", "write the report"]
    # a write says why it cannot, without a traceback
    p = _in_read_only_mount(directory, [*py, "todo", "add", "x"])
    assert p.returncode == 1 and "read-only filesystem" in p.stderr and "Traceback" not in p.stderr, p.stderr

    # the TUI's session (not an observer) opens it read-only and says why
    tui_session = (
        "import asyncio, sys\n"
        "from optui.config import load_config\n"
        "from optui.session import Session\n"
        "async def main():\n"
        "    s = Session(load_config(sys.argv[1]), read_only=True)\n"
        "    await s.start()\n"
        "    try:\n"
        "        await asyncio.sleep(0.2)\n"
        "        st = s.snapshot()\n"
        "        print(st.read_only, s.read_only_reason, [t.content for t in st.todos])\n"
        "        print(st.journal_error)\n"
        "    finally:\n"
        "        await s.close()\n"
        "asyncio.run(main())\n")
    p = _in_read_only_mount(directory, [sys.executable, "-c", tui_session, str(campaign)])
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.strip().splitlines()
    assert first == "True the journal is on a read-only filesystem ['baseline sweep', 'try tp 4', 'write the report']"
    assert second.endswith("optui.db: journal is read-only (it is on a read-only filesystem)")  # the status line's journal: text
    assert {p: p.stat().st_mtime_ns for p in directory.rglob("*")} == before


# ------------------------------------------------------------------ schema
@pytest.mark.parametrize("how", ["meta", "user_version"])
def test_a_journal_from_a_newer_optui_is_refused_and_not_written(campaign, how):
    db = load_config(campaign).journal_path
    with sqlite3.connect(db) as raw:
        if how == "meta":
            raw.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
        else:
            raw.execute("PRAGMA user_version = 99")
    raw.close()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    for read_only in (False, True):
        with pytest.raises(JournalError, match=rf"journal schema 99 is newer than this optui knows \({SCHEMA_VERSION}\)"):
            Journal(db, read_only=read_only)
    r = invoke(campaign, "todo", "add", "must not land")
    assert r.exit_code == 1 and "schema 99 is newer" in r.stderr and r.exception.__class__ is SystemExit
    r = invoke(campaign, "journal", "note", "must not land")
    assert r.exit_code == 2 and "schema 99 is newer" in r.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0


# ------------------------------------------------------- numbers on the CLI
@pytest.mark.parametrize("args", [
    ("journal", "tail", "-n", HUGE),
    ("journal", "show", HUGE),
    ("todo", "set", HUGE, "--status", "completed"),
    ("todo", "history", HUGE),
    ("todo", "run", HUGE),
    ("status", "--wait", "inf"),
    ("status", "--wait", "nan"),
    ("restart", "demo", "--timeout", "nan"),
    ("bench", "run", "demo", "sweep", "--timeout", "inf"),
    ("demo", "--speed", "nan"),
])
def test_numbers_out_of_range_are_a_usage_error_not_a_traceback(campaign, args):
    r = invoke(campaign, *args)
    assert r.exit_code == 2, (r.output, r.exception)
    assert isinstance(r.exception, SystemExit)
    assert "Invalid value" in r.stderr and ("range" in r.stderr or "finite" in r.stderr), r.stderr


def test_the_fast_path_of_optui_demo_leaves_a_bad_speed_to_click():
    from optui.cli.tui import parse_fast

    assert parse_fast(["demo", "--speed", "2"]) == ("demo", {"speed": 2.0})
    for bad in ("nan", "inf", "-1", "0"):
        assert parse_fast(["demo", "--speed", bad]) is None  # click then names the option


# ------------------------------------------------------------- demo --dir
@pytest.mark.parametrize("name", ["it's \"quoted\"", "line\nbreak", "back\\slash\ttab"])
def test_demo_dir_with_quotes_or_a_newline_writes_a_config_whose_gpus_follow_the_server(tmp_path, name):
    from optui.demo.sim_gpus import read_server_state

    directory = tmp_path / name
    config = load_config(write_demo_config(directory, port=1)).config
    state_path = str(directory / "demo-server.state.json")
    # the server writes its state where its env says, the simulated GPUs read demo_state: the same file
    assert config.servers["demo"].env["OPTUI_DEMO_STATE"] == state_path
    assert config.hosts["gpu-node-1"].demo_state == state_path
    import time

    Path(state_path).write_text(json.dumps({"ts": time.time(), "tp_size": 2, "mem_used_mib_per_gpu": 1234.0,
                                            "util_pct": 50.0, "pid": 1}))
    assert read_server_state(config.hosts["gpu-node-1"].demo_state, time.time())["mem_used_mib_per_gpu"] == 1234.0


def test_demo_dir_that_toml_cannot_hold_is_refused_before_anything_is_written(tmp_path):
    directory = tmp_path / os.fsdecode(b"bad\xff")  # an undecodable byte: a lone surrogate in Python
    with pytest.raises(ValueError, match="not UTF-8"):
        write_demo_config(directory, port=1)
    assert not directory.exists()


@pytest.mark.parametrize("where", ["under a file", "not UTF-8"])
def test_demo_dir_that_cannot_be_written_ends_the_tui_with_the_reason_and_exit_2(tmp_path, where):
    """The campaign is written after the first frame (in the loader thread): a --dir that
    cannot be written, or that TOML cannot hold, ends the app with its reason, no traceback."""
    from tests.helpers.demo import run_in_pty_until_exit

    if where == "under a file":
        blocked = tmp_path / "file"
        blocked.write_text("not a directory")
        directory, reason = blocked / "demo", "[Errno 20] Not a directory"
    else:
        directory, reason = tmp_path / os.fsdecode(b"bad\xff"), "holds bytes that are not UTF-8 text"
    code, text = run_in_pty_until_exit([sys.executable, "-m", "optui", "demo", "--dir", str(directory)], cwd=tmp_path)
    assert code == 2, text[-2000:]
    assert "optui: error: --dir " in text and "cannot write the demo campaign there: " in text, text[-2000:]
    assert reason in text and "Traceback" not in text
    if where == "not UTF-8":
        assert not directory.exists()


# -------------------------------------------------------------- permissions
@pytest.fixture
def umask_022():
    old = os.umask(0o022)  # the usual umask: files 0644, directories 0755 unless optui says otherwise
    yield
    os.umask(old)


def test_journal_and_exports_are_private_whatever_the_umask(campaign, tmp_path, umask_022):
    state = campaign.parent / ".optui"
    shutil.rmtree(state)
    assert invoke(campaign, "todo", "add", "a").exit_code == 0
    j = Journal(state / "optui.db")
    j.add_todo("b")  # the WAL and its shared memory exist while a connection is open
    assert _mode(state) == 0o700
    for name in ("optui.db", "optui.db-wal", "optui.db-shm"):
        assert _mode(state / name) == 0o600, name
    j.close()
    for args in (("journal", "export", "-o"), ("todo", "export", "-o")):
        out = tmp_path / f"{args[0]}.export"
        assert invoke(campaign, *args, str(out)).exit_code == 0
        assert _mode(out) == 0o600, args

    # a campaign made by an older optui (0755 / 0644) is tightened when it is opened again
    os.chmod(state, 0o755)
    os.chmod(state / "optui.db", 0o644)
    assert invoke(campaign, "todo", "add", "c").exit_code == 0
    assert (_mode(state), _mode(state / "optui.db")) == (0o700, 0o600)


def test_locks_and_server_logs_are_private_whatever_the_umask(tmp_path, umask_022):
    from optui.session.server.locks import ServerLock

    state = tmp_path / ".optui"
    lock = ServerLock(state, "demo")
    assert lock.acquire()
    lock.release()
    assert (_mode(state / "locks"), _mode(state / "locks" / "demo.lock")) == (0o700, 0o600)

    from optui.adapters.private_files import open_private_append  # how a server's log is opened

    log = state / "logs" / "demo.log"
    os.close(open_private_append(log))
    assert (_mode(log.parent), _mode(log)) == (0o700, 0o600)
    os.chmod(log, 0o644)  # a log from an older optui: tightened when the next launch appends to it
    os.close(open_private_append(log))
    assert _mode(log) == 0o600


def test_a_journal_outside_the_state_dir_leaves_its_directory_alone(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    Journal(shared / "campaign.db").close()
    assert _mode(shared) == 0o755 and _mode(shared / "campaign.db") == 0o600
