"""Follow an AI agent's todo list live, read-only at the source.

Sources (``bench_todo_ops.md`` §2, §6 row 15): opencode's SQLite DB (opened with a
``mode=ro`` URI; ``SELECT content, status, priority, position FROM todo WHERE session_id=?
ORDER BY position``; the DB is found from ``$OPENCODE_DB`` or the newest
``~/.local/share/opencode/opencode*.db`` when no path is given), opencode's legacy
``storage/todo/<session>.json``, Claude Code's ``~/.claude/todos/*.json`` (or the last
TodoWrite call of a session transcript ``~/.claude/projects/*/<session>.jsonl``) and any
todowrite-style JSON file. A path may be a glob: the newest matching file is followed.

:class:`TodoFollower` polls cheap file signatures (size + mtime of the file, and of the
``-wal`` file for SQLite) every ``poll_s`` and re-reads on a change (and every
``refresh_s`` anyway). Agents rewrite files in place, so a file that fails to parse is
re-read once before the error is reported (a half-written file is not an error).
No new dependency: stat polling works on every filesystem, inotify does not over NFS.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from optui.core.todo_formats import (
    AgentTodo,
    FollowSpec,
    TodoFormatError,
    origin_of,
    parse_claude_transcript,
    parse_todo_json,
    todos_from_rows,
)

OPENCODE_DATA = "~/.local/share/opencode"


class FollowError(Exception):
    """The source cannot be read (missing file, not an opencode DB, unknown session).
    ``missing`` is True when the file simply does not exist (yet)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def discover_opencode_db() -> Path | None:
    """``$OPENCODE_DB`` when set, else the newest ``opencode*.db`` in opencode's data dir
    (channel builds use ``opencode-<channel>.db``), else None."""
    env = os.environ.get("OPENCODE_DB")
    if env:
        return Path(env).expanduser()
    data = Path(os.environ.get("XDG_DATA_HOME") or Path("~/.local/share").expanduser()) / "opencode"
    found = sorted(data.glob("opencode*.db"), key=lambda p: _mtime(p), reverse=True)
    return found[0] if found else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def resolve_path(spec: FollowSpec) -> Path:
    """The file a spec means now: ``~`` expanded, a glob resolved to its newest match, an
    empty opencode path discovered. Raises FollowError(missing=True) when there is none."""
    if not spec.path:
        db = discover_opencode_db()
        if db is None:
            raise FollowError(f"no opencode database found ($OPENCODE_DB or {OPENCODE_DATA}/opencode*.db)", missing=True)
        return db
    path = os.path.expanduser(spec.path)
    if glob.has_magic(path):
        matches = sorted(glob.glob(path), key=lambda p: _mtime(Path(p)), reverse=True)
        if not matches:
            raise FollowError(f"{path}: no matching file yet", missing=True)
        return Path(matches[0]).resolve()
    return Path(path).resolve()


def signature(spec: FollowSpec) -> tuple:
    """A cheap fingerprint that changes when the source is written: path, size and mtime
    of the file (and of its ``-wal`` for SQLite). Never raises."""
    try:
        path = resolve_path(spec)
    except FollowError as exc:
        return ("missing", str(exc))
    out: list = [str(path)]
    for p in (path, Path(str(path) + "-wal")) if spec.is_sqlite else (path,):
        try:
            st = p.stat()
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [None, None]
    return tuple(out)


def read_snapshot(spec: FollowSpec) -> tuple[str, list[AgentTodo]]:
    """Read the agent's whole list now: ``(origin, items)``. Blocking (call it in a
    thread). Raises FollowError or TodoFormatError (file, line, field)."""
    path = resolve_path(spec)
    if spec.is_sqlite:
        session, items = _read_opencode_db(path, spec.session)
        return origin_of("opencode", str(path), session), items
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FollowError(f"{path}: no such file (yet)", missing=True) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FollowError(f"{path}: cannot read: {exc}") from None
    if path.suffix == ".jsonl":
        items = parse_claude_transcript(text, str(path))
        if items is None:
            raise FollowError(f"{path}: no TodoWrite call in this transcript yet", missing=True)
        return origin_of("claude", str(path)), items
    return origin_of(spec.kind, str(path)), parse_todo_json(text, str(path))


def _read_opencode_db(path: Path, session: str | None) -> tuple[str, list[AgentTodo]]:
    if not path.exists():
        raise FollowError(f"{path}: no such database (yet)", missing=True)
    try:
        # mode=ro: never write into the agent's store (the DB is in WAL mode; readers are fine)
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=2.0)
    except sqlite3.Error as exc:
        raise FollowError(f"{path}: cannot open read-only: {exc}") from None
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "todo" not in tables:
            raise FollowError(f"{path}: no 'todo' table (not an opencode >= 1.2 database?)")
        if session is None:
            order = "time_updated" if _has_column(db, "todo", "time_updated") else "rowid"
            row = db.execute(f"SELECT session_id FROM todo ORDER BY {order} DESC LIMIT 1").fetchone()
            if row is None:
                raise FollowError(f"{path}: no session has todos yet", missing=True)
            session = row[0]
        elif "session" in tables and db.execute("SELECT 1 FROM session WHERE id = ?", (session,)).fetchone() is None:
            raise FollowError(f"{path}: no session {session!r}")
        rows = db.execute("SELECT content, status, priority, position FROM todo WHERE session_id = ? ORDER BY position",
                          (session,)).fetchall()
    except sqlite3.Error as exc:
        raise FollowError(f"{path}: cannot read: {exc}") from None
    finally:
        db.close()
    return session, todos_from_rows(rows, f"{path}#{session}")


def _has_column(db: sqlite3.Connection, table: str, column: str) -> bool:
    return any(r[1] == column for r in db.execute(f"PRAGMA table_info({table})"))


class TodoFollower:
    """Poll one source and report snapshots (see module doc).

    ``on_snapshot(origin, items)`` runs on the event loop for every *new* list content;
    ``on_error(message, missing)`` when the source cannot be read (a parse error only once
    the file stopped changing); ``on_ok()`` when it can be read again.
    """

    def __init__(self, spec: FollowSpec, *, on_snapshot: Callable[[str, list[AgentTodo]], None],
                 on_error: Callable[[str, bool], None], on_ok: Callable[[], None] = lambda: None,
                 poll_s: float = 0.5, refresh_s: float = 5.0) -> None:
        self.spec = spec
        self.on_snapshot = on_snapshot
        self.on_error = on_error
        self.on_ok = on_ok
        self.poll_s = poll_s
        self.refresh_s = refresh_s
        self.reads = 0
        self._last: tuple[str, list[AgentTodo]] | None = None

    async def run(self) -> None:
        """Follow until cancelled."""
        last_sig, error_sig, last_read = None, None, 0.0
        while True:
            sig = await asyncio.to_thread(signature, self.spec)
            if sig != last_sig or time.monotonic() - last_read >= self.refresh_s:
                last_read = time.monotonic()
                try:
                    self.reads += 1
                    snapshot = await asyncio.to_thread(read_snapshot, self.spec)
                except (TodoFormatError, FollowError) as exc:
                    missing = isinstance(exc, FollowError) and exc.missing
                    if missing or sig == error_sig:
                        self.on_error(str(exc), missing)
                        last_sig = sig  # reported: wait for the next change
                    else:
                        error_sig, last_sig = sig, None  # maybe mid-write: read once more
                else:
                    error_sig, last_sig = None, sig
                    self.on_ok()
                    if snapshot != self._last:
                        self._last = snapshot
                        self.on_snapshot(*snapshot)
            await asyncio.sleep(self.poll_s)


async def cancel(task: asyncio.Task | None) -> None:
    """Cancel a follower task and wait for it."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
