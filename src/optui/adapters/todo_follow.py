"""Follow an AI agent's todo list live, read-only at the source.

Sources (``bench_todo_ops.md`` §2, §6 row 15): opencode's SQLite DB (opened with a
``mode=ro`` URI; ``SELECT content, status, priority, position FROM todo WHERE session_id=?
ORDER BY position``; the DB is found from ``$OPENCODE_DB`` or the newest
``~/.local/share/opencode/opencode*.db`` when no path is given), opencode's legacy
``storage/todo/<session>.json``, Claude Code's ``~/.claude/todos/*.json`` (or the last
TodoWrite call of a session transcript ``~/.claude/projects/*/<session>.jsonl``) and any
todowrite-style JSON file, and Claude Code's task list directories
``~/.claude/tasks/<list-id>/`` (one ``<id>.json`` per task; ``claude:`` alone means the list
``$CLAUDE_CODE_TASK_LIST_ID`` names, under ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``). A path
may be a glob: the newest matching file (or directory) is followed.

:class:`TodoFollower` polls cheap file signatures (size, mtime and inode of the file, and of
the ``-wal`` file for SQLite; of the directory and each task file of a task list) every
``poll_s`` and re-reads on a change (and every
``refresh_s`` anyway, for filesystems whose mtime is coarse or wrong). A JSON file is
parsed only when its content hash differs from the last one parsed, so an unchanged list
of any size costs one read and one hash per ``refresh_s``, never a parse. Agents rewrite
files in place, so a file that fails to parse is re-read once before the error is reported
(a half-written file is not an error); any failure, even an unexpected one, is reported
through ``on_error`` and the follower keeps polling: the next valid write recovers it.
No new dependency: stat polling works on every filesystem, inotify does not over NFS.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import hashlib
import inspect
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from optui.adapters.file_signature import files_signature
from optui.core.todo.formats import (
    AgentTodo,
    FollowSpec,
    TodoFormatError,
    check_size,
    is_claude_task,
    origin_of,
    parse_claude_task_files,
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


def claude_task_dir() -> Path | None:
    """``$CLAUDE_CONFIG_DIR``/``~/.claude`` ``/tasks/$CLAUDE_CODE_TASK_LIST_ID``, or None when
    that variable is unset (Claude Code then names the list after the session)."""
    list_id = os.environ.get("CLAUDE_CODE_TASK_LIST_ID", "").strip()
    if not list_id:
        return None
    base = Path(os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser()
    return base / "tasks" / list_id


def resolve_path(spec: FollowSpec) -> Path:
    """The file (or task list directory) a spec means now: ``~`` expanded, a glob resolved
    to its newest match, an empty opencode path discovered, an empty claude path the
    ``$CLAUDE_CODE_TASK_LIST_ID`` list. Raises FollowError(missing=True) when there is none."""
    if not spec.path and spec.kind == "claude":
        tasks = claude_task_dir()
        if tasks is None:
            raise FollowError("claude: no path and $CLAUDE_CODE_TASK_LIST_ID is not set"
                              " (give claude:~/.claude/tasks/LIST-ID or a todos file)")
        return tasks
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
    """A cheap fingerprint that changes when the source is written: path, size, mtime
    and inode of the file (and of its ``-wal`` for SQLite; the inode catches a rename over
    it). Never raises."""
    try:
        path = resolve_path(spec)
    except FollowError as exc:
        return ("missing", str(exc))
    paths: tuple | list = (path, Path(str(path) + "-wal")) if spec.is_sqlite else (path,)
    if path.is_dir():  # a task list: a file rewritten in place changes no directory mtime
        try:
            paths = [path, *sorted(path.glob("*.json"))]
        except OSError:
            pass
    return (str(path), *files_signature(paths))


def read_snapshot(spec: FollowSpec) -> tuple[str, list[AgentTodo]]:
    """Read the agent's whole list now: ``(origin, items)``. Blocking (call it in a
    thread). Raises FollowError or TodoFormatError (file, line, field; also a file over
    the size, item or depth limits of :mod:`optui.core.todo.formats`)."""
    path, raw = read_raw(spec)
    return parse_raw(spec, path, raw)


Raw = bytes | tuple[tuple[str, bytes], ...] | None


def read_raw(spec: FollowSpec) -> tuple[Path, Raw]:
    """The source's file and its bytes (None for an opencode DB, which
    :func:`parse_raw` queries; ``((name, bytes), ...)`` of the ``*.json`` task files of a
    task list directory). Blocking. A JSON file over ``MAX_CHARS`` bytes is refused
    before it is read (TodoFormatError); transcripts are not limited (they grow all session)."""
    path = resolve_path(spec)
    if spec.is_sqlite:
        return path, None
    if path.is_dir():
        return path, _read_task_dir(path)
    try:
        with path.open("rb") as fh:
            if path.suffix != ".jsonl":
                check_size(os.fstat(fh.fileno()).st_size, str(path))
            return path, fh.read()
    except FileNotFoundError:
        raise FollowError(f"{path}: no such file (yet)", missing=True) from None
    except OSError as exc:
        raise FollowError(f"{path}: cannot read: {exc}") from None


def _read_task_dir(path: Path) -> tuple[tuple[str, bytes], ...]:
    """The ``*.json`` task files of a Claude Code task list (``.highwatermark``, ``.lock``
    and other dot files are not tasks), by name. A file deleted between the listing and
    its read is simply gone (the task was deleted)."""
    try:
        names = sorted(e.name for e in os.scandir(path) if e.name.endswith(".json") and not e.name.startswith("."))
    except FileNotFoundError:
        raise FollowError(f"{path}: no such task list (yet)", missing=True) from None
    except OSError as exc:
        raise FollowError(f"{path}: cannot read: {exc}") from None
    out = []
    for name in names:
        try:
            with open(path / name, "rb") as fh:
                check_size(os.fstat(fh.fileno()).st_size, str(path / name))
                out.append((name, fh.read()))
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            continue
        except OSError as exc:
            raise FollowError(f"{path / name}: cannot read: {exc}") from None
    return tuple(out)


def parse_raw(spec: FollowSpec, path: Path, raw: Raw) -> tuple[str, list[AgentTodo]]:
    """What :func:`read_raw` returned → ``(origin, items)`` (an opencode DB is queried
    now). Blocking. Raises FollowError or TodoFormatError."""
    if raw is None:
        session, items = _read_opencode_db(path, spec.session)
        return origin_of("opencode", str(path), session), items
    if isinstance(raw, tuple):
        files = []
        for name, data in raw:
            try:
                files.append((name, data.decode("utf-8")))
            except UnicodeDecodeError as exc:
                raise FollowError(f"{path / name}: cannot read: {exc}") from None
        return origin_of("claude", str(path)), parse_claude_task_files(files, str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FollowError(f"{path}: cannot read: {exc}") from None
    if path.suffix == ".json" and is_claude_task(text):  # one task of a list: tasks/<list>/<n>.json
        return origin_of("claude", str(path)), parse_claude_task_files([(path.name, text)], str(path.parent))
    if path.suffix == ".jsonl":
        written = parse_claude_transcript(text, str(path))
        if written is None:
            raise FollowError(f"{path}: no TodoWrite call in this transcript yet", missing=True)
        return origin_of("claude", str(path)), written
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

    ``on_snapshot(origin, items)`` runs on the event loop for every *new* list content
    (it may return an awaitable, awaited before the next poll);
    ``on_error(message, missing)`` when the source cannot be read (a parse error only once
    the file stopped changing); ``on_ok()`` when it can be read again. An exception from
    these callbacks is reported through ``on_error`` too; the follower keeps going.
    Counters for tests and benchmarks: ``polls`` (signature checks), ``reads`` (reads of
    the source), ``parses`` (JSON parses or DB queries).
    """

    def __init__(self, spec: FollowSpec, *, on_snapshot: Callable[[str, list[AgentTodo]], Awaitable[None] | None],
                 on_error: Callable[[str, bool], None], on_ok: Callable[[], None] = lambda: None,
                 poll_s: float = 0.5, refresh_s: float = 5.0) -> None:
        self.spec = spec
        self.on_snapshot = on_snapshot
        self.on_error = on_error
        self.on_ok = on_ok
        self.poll_s = poll_s
        self.refresh_s = refresh_s
        self.polls = self.reads = self.parses = 0
        self._last: tuple[str, list[AgentTodo]] | None = None
        self._seen: tuple[str, bytes] | None = None  # (path, hash) of the content last parsed to an end

    async def run(self) -> None:
        """Follow until cancelled."""
        last_sig, error_sig, last_read = None, None, 0.0
        while True:
            self.polls += 1
            sig = await asyncio.to_thread(signature, self.spec)
            if sig != last_sig or time.monotonic() - last_read >= self.refresh_s:
                last_read = time.monotonic()
                try:
                    self.reads += 1
                    snapshot, seen = await asyncio.to_thread(self._read)
                except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError...: reported, never fatal
                    missing = isinstance(exc, FollowError) and exc.missing
                    if missing or sig == error_sig:
                        self._seen = getattr(exc, "seen", None)  # an unchanged broken file is not parsed again
                        self._report(_message(exc, self.spec), missing)
                        last_sig = sig  # reported: wait for the next change
                    else:
                        error_sig, last_sig = sig, None  # maybe mid-write: read once more
                else:
                    error_sig, last_sig = None, sig
                    if snapshot is not None:  # None: the content is the one parsed last time
                        self._seen = seen
                        await self._deliver(snapshot)
            await asyncio.sleep(self.poll_s)

    def _read(self) -> tuple[tuple[str, list[AgentTodo]] | None, tuple[str, bytes] | None]:
        """(snapshot, content key) in a worker thread; snapshot None when the content is
        unchanged since the last parse. A parse error carries the key as ``exc.seen``."""
        path, raw = read_raw(self.spec)
        seen = None if raw is None else (str(path), _digest(raw))
        if seen is not None and seen == self._seen:
            return None, seen
        self.parses += 1
        try:
            return parse_raw(self.spec, path, raw), seen
        except Exception as exc:
            exc.seen = seen  # type: ignore[attr-defined]  # read back with getattr by the follower
            raise

    async def _deliver(self, snapshot: tuple[str, list[AgentTodo]]) -> None:
        try:
            self.on_ok()
            if snapshot != self._last:
                done = self.on_snapshot(*snapshot)
                if inspect.isawaitable(done):
                    await done
                self._last = snapshot
        except Exception as exc:  # a follower that dies silently would show ✓ for ever
            self._seen = None  # try this content again at the next refresh
            self._report(_message(exc, self.spec), False)

    def _report(self, message: str, missing: bool) -> None:
        with contextlib.suppress(Exception):
            self.on_error(message, missing)


def _digest(raw: bytes | tuple[tuple[str, bytes], ...]) -> bytes:
    """Content hash of a file, or of a task directory's files (names and lengths framed,
    so moving bytes from one file to the next changes it)."""
    h = hashlib.blake2b(digest_size=16)
    if isinstance(raw, bytes):
        h.update(raw)
    else:
        for name, data in raw:
            h.update(f"{len(name)}:{name}:{len(data)}:".encode())
            h.update(data)
    return h.digest()


def _message(exc: BaseException, spec: FollowSpec) -> str:
    """What the operator is told: our errors say file/line/field themselves; anything
    else is named with its type and the entry followed."""
    if isinstance(exc, TodoFormatError | FollowError):
        return str(exc)
    return f"{spec.text or spec.path}: cannot follow: {type(exc).__name__}: {exc}"


async def cancel(task: asyncio.Task | None) -> None:
    """Cancel a follower task and wait for it."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
