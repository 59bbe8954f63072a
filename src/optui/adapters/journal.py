"""The campaign journal: one SQLite file (WAL) holding events, todo items, bench results,
the last good flags per server and the experiment index (``exp-NNNN`` ids per server).

Several optui processes (full screen + tmux side pane + CLI) share one file: every write is
one short ``BEGIN IMMEDIATE`` transaction (``busy_timeout`` 5 s by default), readers notice other
writers through ``PRAGMA data_version`` (:meth:`Journal.changed`). A write that returned is
durable across ``kill -9`` of the process (WAL + ``synchronous=NORMAL``).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from optui.adapters.file_signature import files_signature
from optui.adapters.private_files import private_dir, private_file, tighten_file
from optui.config_file import STATE_DIR_NAME
from optui.core.bench.result import BenchResult
from optui.core.journal import events as ev
from optui.core.journal.events import Event, EventFilter
from optui.core.journal.experiments import EXPERIMENT_EVENT_TYPES, StoredResult, experiment_id, unsettled
from optui.core.todo.items import Priority, TodoItem, TodoStatus, check_todo_text

#: The schema this code reads and writes: ``PRAGMA user_version`` (and ``meta.schema``) of a
#: journal it has opened for writing; :data:`MIGRATIONS` brings an older file up to it.
SCHEMA_VERSION = 2
#: Version 1, as optui wrote it before migrations existed (``meta.schema`` = 1, ``user_version`` 0).
_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, type TEXT NOT NULL,
    target TEXT, actor TEXT NOT NULL, experiment TEXT, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_type ON events(type, seq);
CREATE INDEX IF NOT EXISTS events_target ON events(target, seq);
CREATE INDEX IF NOT EXISTS events_experiment ON events(experiment, seq);
CREATE TABLE IF NOT EXISTS todos(
    id INTEGER PRIMARY KEY AUTOINCREMENT, content TEXT NOT NULL, status TEXT NOT NULL,
    priority TEXT NOT NULL, ord REAL NOT NULL, origin TEXT NOT NULL, raw_status TEXT,
    experiment TEXT, note TEXT, meta TEXT, created REAL NOT NULL, updated REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS bench_results(
    id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, server TEXT, bench TEXT,
    experiment TEXT, workload_key TEXT, status TEXT NOT NULL, output_tok_s REAL,
    data TEXT NOT NULL, baseline INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS bench_workload ON bench_results(workload_key, id);
CREATE TABLE IF NOT EXISTS last_good(server TEXT PRIMARY KEY, argv TEXT NOT NULL, ts REAL NOT NULL);
CREATE TABLE IF NOT EXISTS experiments(
    n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE, server TEXT NOT NULL, ts REAL NOT NULL,
    actor TEXT NOT NULL, seq INTEGER);
CREATE INDEX IF NOT EXISTS experiments_server ON experiments(server, n);
"""


def _create_v1(db: sqlite3.Connection) -> None:
    """0 → 1: the tables of a new journal."""
    for statement in _SCHEMA_V1.split(";"):
        if statement.strip():
            db.execute(statement)


def _index_results_by_experiment(db: sqlite3.Connection) -> None:
    """1 → 2: an experiment's results (event details, the experiments view's new results)
    without a scan of every result."""
    db.execute("CREATE INDEX IF NOT EXISTS bench_experiment ON bench_results(experiment, id)")


#: ``MIGRATIONS[n]`` brings a journal of version ``n`` to ``n + 1`` (0: a new, empty file);
#: each runs in its own transaction with the version stamp, so a crash leaves a whole version.
#: Append a function (and raise :data:`SCHEMA_VERSION`) to change the schema; never edit one.
MIGRATIONS = (_create_v1, _index_results_by_experiment)
assert len(MIGRATIONS) == SCHEMA_VERSION

#: How long a write waits for another process's lock (ms) on a thread marked with
#: :meth:`Journal.never_wait_here` (the journal thread): it holds the connection's lock meanwhile,
#: so it waits outside it instead (retries, or a deferred event).
QUICK_BUSY_MS = 20

_TODO_FIELDS = ("content", "status", "priority", "ord", "origin", "raw_status", "experiment", "note", "meta")


class JournalError(Exception):
    """The journal cannot be written (disk full, read-only file, locked too long).
    The message names the file and the cause; the session keeps running read-only."""


class JournalBusy(JournalError):
    """Another process held the journal's write lock longer than ``busy_timeout_s``
    (transient: the same write may succeed a moment later)."""


def _row_text(seq, ts, type_, target, actor, experiment, data) -> str:
    """SQLite function ``optui_row_text``: :func:`~optui.core.journal.events.row_text` of a stored
    event (the row as the journal view shows it, for a text filter across its columns);
    ``""`` for data that is not JSON (never an error inside a query)."""
    try:
        return ev.row_text(Event(seq, ts, type_, target, actor, experiment, json.loads(data)))
    except Exception:  # noqa: BLE001 - a damaged row matches nothing rather than failing the search
        return ""


def _read_only_uri(path: Path) -> str:
    """The SQLite URI that opens ``path`` read-only. On a read-only filesystem the WAL's
    ``-shm`` file cannot be created, so SQLite could not open the file at all: there the
    file is opened ``immutable`` (nothing can change it through this mount, so nothing needs
    the shared memory that tracks other writers)."""
    uri = "file:" + quote(str(path.absolute())) + "?mode=ro"
    return uri + "&immutable=1" if on_read_only_fs(path) else uri


def on_read_only_fs(path: str | Path) -> bool:
    """True when the directory of ``path`` is on a filesystem mounted read-only (the
    journal there can be read, never written); False when it is writable or unknown."""
    try:
        return bool(os.statvfs(Path(path).parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _inserted_rowid(cur: sqlite3.Cursor) -> int:
    """The rowid of the row that ``cur``'s INSERT just added. (sqlite3 types
    ``lastrowid`` as ``int | None``: None only on a cursor that never inserted.)"""
    rowid = cur.lastrowid
    if rowid is None:
        raise JournalError("INSERT gave no rowid")
    return rowid


def _dumps(data) -> str:
    return json.dumps(data, default=str, allow_nan=False, separators=(",", ":"))


def _clean(value):
    """JSON cannot hold inf/nan: inf → "inf", nan → None (recursively)."""
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class Journal:
    """A campaign DB. ``path`` is created (with parent dirs) when missing.

    Thread-safe: one connection guarded by a lock, so the session may write from its
    event loop while a worker thread reads. Raises JournalError when the file cannot be
    opened or written; ``busy_timeout_s`` is how long a write waits for another process's
    write lock before it raises JournalBusy.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False, busy_timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.write_error: str | None = None
        self._lock = threading.RLock()
        self._busy_ms = int(busy_timeout_s * 1000)
        self._here = threading.local()  # never_wait_here's mark, per thread
        try:
            if read_only:
                self._db = sqlite3.connect(_read_only_uri(self.path), uri=True, check_same_thread=False,
                                           isolation_level=None)
            else:
                # the campaign's own state dir is made private; a directory the user chose is left alone
                private_dir(self.path.parent, tighten=self.path.parent.name == STATE_DIR_NAME)
                private_file(self.path)  # before SQLite: its -wal and -shm copy the DB file's mode
                for companion in ("-wal", "-shm"):
                    tighten_file(f"{self.path}{companion}")
                self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.create_function("optui_row_text", 7, _row_text, deterministic=True)
            found = self._check_schema()
            if read_only and found == 0:  # another process is creating it: no tables to read yet
                raise JournalError(f"{self.path}: not a journal yet (no tables: another optui may be creating it)")
            if not read_only:
                # small pages: a commit appends every page it touched (row + 3 index leaves) to
                # the WAL, so 1 KiB pages write a quarter of the bytes per event (new files only)
                self._db.execute("PRAGMA page_size=1024")
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._migrate(found)
            # opening waits the full 5 s for a lock; writes afterwards wait ``busy_timeout_s``
            self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        except JournalError:
            self._db.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            hint = ""
            if not read_only and on_read_only_fs(self.path):
                hint = " (it is on a read-only filesystem: --read-only reads it)"
            raise JournalError(f"{self.path}: cannot open journal: {exc}{hint}") from exc
        self._data_version = self._pragma_data_version()

    def _check_schema(self) -> int:
        """The file's schema version: ``PRAGMA user_version``, or ``meta.schema`` for a file
        written before migrations existed (version 1 left ``user_version`` 0); 0 for a new,
        empty file. Refuses (JournalError naming the file and both versions) a journal written
        by a newer optui: its tables may mean something else, writing there could corrupt it,
        reading could mislead."""
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            row = None
        text = row[0] if row else "0"
        try:
            found = int(str(text).strip())
        except ValueError:
            raise JournalError(f"{self.path}: not an optui journal this optui can read "
                               f"(schema version {text!r} is not a number); nothing was written") from None
        found = max(found, self._db.execute("PRAGMA user_version").fetchone()[0])
        if found > SCHEMA_VERSION:
            raise JournalError(f"{self.path}: journal schema {found} is newer than this optui knows "
                               f"({SCHEMA_VERSION}): it was written by a newer optui; upgrade optui to use it "
                               f"(nothing was written)")
        return found

    def _migrate(self, found: int) -> None:
        """Run :data:`MIGRATIONS` from version ``found`` up to :data:`SCHEMA_VERSION`, one
        ``BEGIN IMMEDIATE`` transaction per step (stamped ``user_version`` and ``meta.schema``
        inside it). Another process migrating at the same time is waited for, and the version
        read again under the lock, so no step runs twice. A read-only journal is never
        migrated (an older one is read as it is)."""
        while found < SCHEMA_VERSION:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                found = self._check_schema()  # another process may have migrated meanwhile
                if found < SCHEMA_VERSION:
                    MIGRATIONS[found](self._db)
                    found += 1
                    self._db.execute(f"PRAGMA user_version={found}")
                    self._db.execute("INSERT INTO meta(key, value) VALUES ('schema', ?) "
                                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(found),))
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    # ------------------------------------------------------------ plumbing
    def close(self) -> None:
        """Close the connection (further calls raise)."""
        with self._lock:
            self._db.close()

    def never_wait_here(self) -> None:
        """From now on, writes made on the calling thread wait at most :data:`QUICK_BUSY_MS`
        for another process's lock before they raise JournalBusy, so they never hold the
        connection's lock (which every other thread's read needs) while they wait. For the
        journal's own thread, which waits out a lock by retrying outside it."""
        self._here.quick = True

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise JournalError(f"{self.path}: journal is read-only ({self.write_error or 'opened read-only'})")
        with self._lock:
            if self._db.in_transaction:  # nested inside transaction(): the outer one commits
                yield self._db
                return
            quick = getattr(self._here, "quick", False)
            try:
                if quick:
                    self._db.execute(f"PRAGMA busy_timeout={QUICK_BUSY_MS}")
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                finally:
                    if quick:
                        self._db.execute(f"PRAGMA busy_timeout={self._busy_ms}")
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if "full" in text or "readonly" in text or "read-only" in text or "disk I/O" in text:
                    self.write_error = text
                    self.read_only = True
                if "locked" in text or "busy" in text:
                    raise JournalBusy(f"{self.path}: cannot write journal: {text} (another process holds its write lock)") from exc
                raise JournalError(f"{self.path}: cannot write journal: {text}") from exc

    def transaction(self):
        """A context manager grouping several writes (``add_todo``, ``update_todo``,
        ``append``...) into one atomic commit: after a crash either all of them are there
        or none. Raises JournalError like any write."""
        return self._write()

    def _pragma_data_version(self) -> int:
        with self._lock:
            return self._db.execute("PRAGMA data_version").fetchone()[0]

    def files_stamp(self) -> tuple:
        """The :func:`~optui.adapters.file_signature.files_signature` of the journal file and
        its ``-wal``: a commit by any connection changes it. No SQLite call: what a watcher
        compares before asking :meth:`changed`."""
        return files_signature((self.path, f"{self.path}-wal"))

    def changed(self) -> bool:
        """True when *another* connection committed since the last call (cheap: no I/O
        beyond a header read). Use it to refresh views shared by several optui windows."""
        version = self._pragma_data_version()
        if version != self._data_version:
            self._data_version = version
            return True
        return False

    # -------------------------------------------------------------- events
    def append(
        self,
        type: str,
        target: str | None = None,
        data: dict | None = None,
        *,
        actor: str = "optui",
        experiment: str | None = None,
        ts: float | None = None,
    ) -> Event:
        """Append one event and return it with its ``seq``. Raises JournalError."""
        with self._write() as db:
            return self._append(db, type, target, data or {}, actor, experiment, ts)

    def _append(self, db, type, target, data, actor, experiment, ts) -> Event:
        ts = time.time() if ts is None else ts
        try:  # fast path: most data needs no cleaning (walking it costs more than the insert)
            text = _dumps(data)
        except ValueError:  # nan/inf somewhere
            data = _clean(data)
            text = _dumps(data)
        cur = db.execute(
            "INSERT INTO events(ts, type, target, actor, experiment, data) VALUES (?,?,?,?,?,?)",
            (ts, type, target, actor, experiment, text),
        )
        return Event(cur.lastrowid, ts, type, target, actor, experiment, data)

    def append_many(self, items: Iterable[tuple], *, actor: str = "optui") -> int:
        """Append several ``(type, target, data)`` or ``(type, target, data, experiment)``
        events in one transaction; returns the count."""
        n = 0
        with self._write() as db:
            for type, target, data, *exp in items:
                self._append(db, type, target, data, actor, exp[0] if exp else None, None)
                n += 1
        return n

    def events(
        self,
        *,
        since_seq: int = 0,
        limit: int | None = None,
        types: Iterable[str] | None = None,
        target: str | None = None,
        newest_first: bool = False,
        since_ts: float | None = None,
        experiment: str | None = None,
        text: str | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """Events with ``seq > since_seq`` (and ``< before_seq``) filtered by type, target,
        experiment, time and text (case-insensitive substring of type, target, actor or the
        data JSON), oldest first (or newest first with ``limit`` taking the newest)."""
        sql = "SELECT seq, ts, type, target, actor, experiment, data FROM events WHERE seq > ?"
        params: list = [since_seq]
        if before_seq is not None:
            sql += " AND seq < ?"
            params.append(before_seq)
        if types:
            types = list(types)
            sql += f" AND type IN ({','.join('?' * len(types))})"
            params += types
        if target is not None:
            sql += " AND target = ?"
            params.append(target)
        if experiment is not None:
            sql += " AND experiment = ?"
            params.append(experiment)
        if since_ts is not None:
            sql += " AND ts >= ?"
            params.append(since_ts)
        if text:
            # the data column holds JSON: non-ASCII is \u-escaped there, so match the escaped form too
            needle = text.lower()
            escaped = json.dumps(needle)[1:-1]
            # last, for the rows the plain columns do not match: the row as the journal view shows it
            sql += (" AND (instr(lower(type || ' ' || COALESCE(target, '') || ' ' || actor || ' ' || data), ?) > 0"
                    " OR instr(lower(data), ?) > 0"
                    " OR instr(optui_row_text(seq, ts, type, target, actor, experiment, data), ?) > 0)")
            params += [needle, escaped, " ".join(needle.split())]
        sql += " ORDER BY seq DESC" if newest_first else " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [Event(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6])) for r in rows]

    def query(self, flt: EventFilter, *, since_seq: int = 0, limit: int | None = 500) -> list[Event]:
        """Events matching ``flt`` newer than ``since_seq``, newest first, at most ``limit``."""
        return self.events(since_seq=since_seq, limit=limit, types=flt.types, target=flt.target,
                           experiment=flt.experiment, text=flt.text, since_ts=flt.since_ts, newest_first=True)

    def last_seq(self) -> int:
        """The highest event seq (0 when empty)."""
        with self._lock:
            return self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]

    def count_events(self) -> int:
        """Number of events."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0]

    # --------------------------------------------------------------- todos
    def todos(self, include_deleted: bool = False) -> list[TodoItem]:
        """Todo items in display order (``ord``, then id)."""
        sql = "SELECT id, content, status, priority, ord, origin, raw_status, experiment, note, meta, updated FROM todos"
        if not include_deleted:
            sql += " WHERE deleted = 0"
        sql += " ORDER BY ord, id"
        with self._lock:
            rows = self._db.execute(sql).fetchall()
        return [_todo_from_row(r) for r in rows]

    def todos_now(self, ids: Iterable[int]) -> dict[int, TodoItem | None]:
        """The items ``ids`` as they are now: id → item, None for a deleted or unknown id
        (what a reader of the whole list needs after ``todo.changed`` events name them)."""
        ids = sorted(set(ids))
        out: dict[int, TodoItem | None] = dict.fromkeys(ids)
        with self._lock:
            for start in range(0, len(ids), 500):  # SQLite's limit on bound parameters
                chunk = ids[start:start + 500]
                rows = self._db.execute(
                    "SELECT id, content, status, priority, ord, origin, raw_status, experiment, note, meta, updated FROM todos "
                    f"WHERE deleted = 0 AND id IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                out.update((r[0], _todo_from_row(r)) for r in rows)
        return out

    def todo(self, todo_id: int) -> TodoItem | None:
        """One item by id (also a deleted one), or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, content, status, priority, ord, origin, raw_status, experiment, note, meta, updated "
                "FROM todos WHERE id = ?",
                (todo_id,),
            ).fetchone()
        return _todo_from_row(row) if row else None

    def add_todo(
        self,
        content: str,
        *,
        priority: Priority | str = Priority.MEDIUM,
        status: TodoStatus | str = TodoStatus.PENDING,
        origin: str = "optui",
        raw_status: str | None = None,
        experiment: dict | None = None,
        actor: str = "optui",
        order: float | None = None,
        meta: dict | None = None,
        note: str | None = None,
        op: str = "add",
    ) -> TodoItem:
        """Add an item at the end of the list; records a ``todo.changed`` (``op``, default
        "add"; "agent.add" for items that came from an agent's list)."""
        content = check_todo_text(content)
        if note is not None:
            note = check_todo_text(note, "note")
        now = time.time()
        with self._write() as db:
            if order is None:
                order = db.execute("SELECT COALESCE(MAX(ord), 0) + 1 FROM todos").fetchone()[0]
            cur = db.execute(
                "INSERT INTO todos(content, status, priority, ord, origin, raw_status, experiment, note, meta, created, updated) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (content, str(TodoStatus(status)), str(Priority(priority)), order, origin, raw_status,
                 _dumps(experiment) if experiment else None, note, _dumps(meta) if meta else None, now, now),
            )
            item = self._todo_in(db, _inserted_rowid(cur))
            self._append(db, ev.TODO_CHANGED, f"todo:{item.id}", {"op": op, "before": None, "after": item.to_json()}, actor, None, now)
        return item

    def _todo_in(self, db, todo_id: int) -> TodoItem:
        row = db.execute(
            "SELECT id, content, status, priority, ord, origin, raw_status, experiment, note, meta, updated FROM todos WHERE id = ?",
            (todo_id,),
        ).fetchone()
        if row is None:
            raise KeyError(f"no todo item with id {todo_id}")
        return _todo_from_row(row)

    def update_todo(self, todo_id: int, *, actor: str = "optui", expected: TodoItem | None = None, op: str = "edit", **changes) -> TodoItem:
        """Change fields of an item (``content``, ``status``, ``priority``, ``order``,
        ``raw_status``, ``experiment``, ``note``); records before/after.

        ``expected`` is the item as the editor saw it: fields that another writer changed
        meanwhile are still overwritten (last writer wins per field) but the event gets a
        ``conflict`` entry with both values, and the item's ``meta["conflict"]`` keeps
        them (field → theirs / seen / mine) until acknowledged, so nothing is lost
        silently. Raises KeyError for an unknown id, ValueError for a bad status/priority.
        """
        columns: dict[str, object] = {}
        for key, value in changes.items():
            col = "ord" if key == "order" else key
            if col not in _TODO_FIELDS:
                raise ValueError(f"unknown todo field {key!r}")
            if col == "status":
                value = str(TodoStatus(value))
            elif col == "priority":
                value = str(Priority(value))
            elif col in ("experiment", "meta") and value is not None:
                value = _dumps(value)
            elif col in ("content", "note") and value is not None:
                value = check_todo_text(str(value), col)
            columns[col] = value
        now = time.time()
        with self._write() as db:
            before = self._todo_in(db, todo_id)
            conflict = {}
            if expected is not None:
                for key in changes:
                    attr = "order" if key == "ord" else key
                    theirs, seen = getattr(before, attr), getattr(expected, attr)
                    if theirs != seen and attr != "meta":
                        conflict[attr] = {"theirs": _clean(theirs), "seen": _clean(seen)}
            if conflict:
                meta = dict(changes["meta"]) if changes.get("meta") is not None else dict(before.meta)
                flagged = dict(meta.get("conflict") or {})
                for attr, both in conflict.items():
                    flagged[attr] = {**both, "mine": _clean(changes.get(attr, changes.get("ord")))}
                meta["conflict"] = flagged
                columns["meta"] = _dumps(meta)
            if columns:
                sets = ", ".join(f"{c} = ?" for c in columns)
                db.execute(f"UPDATE todos SET {sets}, updated = ? WHERE id = ?", (*columns.values(), now, todo_id))
            after = self._todo_in(db, todo_id)
            data = {"op": op, "before": before.to_json(), "after": after.to_json()}
            if conflict:
                data["conflict"] = conflict
            self._append(db, ev.TODO_CHANGED, f"todo:{todo_id}", data, actor, None, now)
        return after

    def delete_todo(self, todo_id: int, *, actor: str = "optui") -> TodoItem:
        """Soft-delete an item (kept for undo and history); returns it."""
        with self._write() as db:
            item = self._todo_in(db, todo_id)
            db.execute("UPDATE todos SET deleted = 1, updated = ? WHERE id = ?", (time.time(), todo_id))
            self._append(db, ev.TODO_CHANGED, f"todo:{todo_id}", {"op": "delete", "before": item.to_json(), "after": None}, actor, None, None)
        return item

    def deleted_todo_ids(self) -> set[int]:
        """Ids of soft-deleted items."""
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT id FROM todos WHERE deleted = 1")}

    def last_result_id(self) -> int:
        """The highest bench result id (0 when none)."""
        with self._lock:
            return self._db.execute("SELECT COALESCE(MAX(id), 0) FROM bench_results").fetchone()[0]

    def restore_todo(self, todo_id: int, *, actor: str = "optui") -> TodoItem:
        """Undo a delete."""
        with self._write() as db:
            db.execute("UPDATE todos SET deleted = 0, updated = ? WHERE id = ?", (time.time(), todo_id))
            item = self._todo_in(db, todo_id)
            self._append(db, ev.TODO_CHANGED, f"todo:{todo_id}", {"op": "restore", "before": None, "after": item.to_json()}, actor, None, None)
        return item

    # ------------------------------------------------------- bench results
    def add_result(
        self,
        result: BenchResult,
        *,
        server: str | None,
        bench: str | None,
        experiment: str | None = None,
        ts: float | None = None,
    ) -> int:
        """Store a bench result; returns its id."""
        data = result.to_json()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO bench_results(ts, server, bench, experiment, workload_key, status, output_tok_s, data) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (ts or time.time(), server, bench, experiment, result.workload.key(), result.status,
                 result.output_throughput_tok_s, _dumps(_clean(data))),
            )
            return _inserted_rowid(cur)

    def results(self, *, server: str | None = None, limit: int | None = 200,
                experiment: str | None = None, since_id: int = 0) -> list[StoredResult]:
        """Stored results with ``id > since_id``, newest first (``limit`` None: all of them)."""
        sql = "SELECT id, ts, server, bench, experiment, baseline, data FROM bench_results WHERE id > ?"
        params: list = [since_id]
        if server is not None:
            sql += " AND server = ?"
            params.append(server)
        if experiment is not None:
            sql += " AND experiment = ?"
            params.append(experiment)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [StoredResult(r[0], r[1], r[2], r[3], r[4], bool(r[5]), BenchResult.from_json(json.loads(r[6]))) for r in rows]

    def set_baseline(self, result_id: int) -> None:
        """Pin a result as the baseline of its workload (unpins the previous one)."""
        with self._write() as db:
            row = db.execute("SELECT workload_key FROM bench_results WHERE id = ?", (result_id,)).fetchone()
            if row is None:
                raise KeyError(f"no bench result with id {result_id}")
            db.execute("UPDATE bench_results SET baseline = 0 WHERE workload_key = ?", (row[0],))
            db.execute("UPDATE bench_results SET baseline = 1 WHERE id = ?", (result_id,))

    def pinned_result_ids(self) -> frozenset[int]:
        """Ids of the results pinned as their workload's baseline (a pin moves without a new
        result: readers that keep results compare this set)."""
        with self._lock:
            return frozenset(r[0] for r in self._db.execute("SELECT id FROM bench_results WHERE baseline = 1"))

    def baseline_for(self, workload_key: str) -> StoredResult | None:
        """The pinned baseline of a workload, else its first ok result, else None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, ts, server, bench, experiment, baseline, data FROM bench_results "
                "WHERE workload_key = ? AND status = 'ok' ORDER BY baseline DESC, id ASC LIMIT 1",
                (workload_key,),
            ).fetchone()
        if row is None:
            return None
        return StoredResult(row[0], row[1], row[2], row[3], row[4], bool(row[5]), BenchResult.from_json(json.loads(row[6])))

    # ------------------------------------------------------ last good flags
    def set_last_good(self, server: str, argv: list[str]) -> None:
        """Remember ``argv`` as the last flag set with which ``server`` became ready."""
        with self._write() as db:
            db.execute(
                "INSERT INTO last_good(server, argv, ts) VALUES (?,?,?) "
                "ON CONFLICT(server) DO UPDATE SET argv = excluded.argv, ts = excluded.ts",
                (server, _dumps(list(argv)), time.time()),
            )

    def last_good(self, server: str) -> list[str] | None:
        """The last good argv of ``server``, or None."""
        with self._lock:
            row = self._db.execute("SELECT argv FROM last_good WHERE server = ?", (server,)).fetchone()
        return json.loads(row[0]) if row else None

    # --------------------------------------------------------- experiments
    # An experiment groups what happened to one server between two restarts (see
    # optui.core.journal.experiments). Ids are allocated here, inside the write transaction, so two
    # optui processes never hand out the same one.
    def new_experiment(self, server: str, data: dict, *, actor: str = "optui", ts: float | None = None) -> Event:
        """Open the next experiment of ``server``: allocates ``exp-NNNN`` and appends its
        ``experiment.started`` event (with ``data``: reason, argv, prev_argv, diff...).
        Returns that event (``.experiment`` is the new id). Raises JournalError."""
        now = time.time() if ts is None else ts
        with self._write() as db:
            n = _inserted_rowid(db.execute("INSERT INTO experiments(server, ts, actor) VALUES (?,?,?)", (server, now, actor)))
            exp = experiment_id(n)
            event = self._append(db, ev.EXPERIMENT_STARTED, server, data, actor, exp, now)
            db.execute("UPDATE experiments SET id = ?, seq = ? WHERE n = ?", (exp, event.seq, n))
        return event

    def current_experiment(self, server: str) -> str | None:
        """The id of ``server``'s newest experiment, or None when it has none yet."""
        with self._lock:
            row = self._db.execute("SELECT id FROM experiments WHERE server = ? ORDER BY n DESC LIMIT 1",
                                   (server,)).fetchone()
        return row[0] if row else None

    def latest_experiment(self) -> str | None:
        """The id of the newest experiment of any server, or None."""
        with self._lock:
            row = self._db.execute("SELECT id FROM experiments ORDER BY n DESC LIMIT 1").fetchone()
        return row[0] if row else None

    def experiment_server(self, experiment: str) -> str | None:
        """The server of ``experiment``, or None for an unknown id."""
        with self._lock:
            row = self._db.execute("SELECT server FROM experiments WHERE id = ?", (experiment,)).fetchone()
        return row[0] if row else None

    def experiment_servers(self) -> list[str]:
        """Servers that have experiments."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT DISTINCT server FROM experiments ORDER BY server").fetchall()]

    def experiment_events(self, *, since_seq: int = 0, before_seq: int | None = None) -> list[Event]:
        """The events :func:`~optui.core.journal.experiments.build_experiments` needs (in
        ``since_seq < seq < before_seq``): its types (through the type index), plus the
        state changes of experiments that never reached ready/failed (through the experiment
        index), oldest first."""
        events = self.events(types=EXPERIMENT_EVENT_TYPES, since_seq=since_seq, before_seq=before_seq)
        extra = [e for exp in unsettled(events)
                 for e in self.events(experiment=exp, types=(ev.SERVER_STATE,), since_seq=since_seq,
                                      before_seq=before_seq)]
        return sorted(events + extra, key=lambda e: e.seq) if extra else events

    def experiment_ids(self, server: str | None = None) -> list[str]:
        """Experiment ids, oldest first (of one server when given)."""
        sql = "SELECT id FROM experiments"
        params: tuple = ()
        if server is not None:
            sql += " WHERE server = ?"
            params = (server,)
        with self._lock:
            return [r[0] for r in self._db.execute(sql + " ORDER BY n", params).fetchall()]

    def integrity_ok(self) -> bool:
        """``PRAGMA integrity_check`` says ok."""
        with self._lock:
            return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _todo_from_row(row) -> TodoItem:
    (id_, content, status, priority, ord_, origin, raw_status, experiment, note, meta, updated) = row
    return TodoItem(
        id=id_,
        content=content,
        status=TodoStatus(status),
        priority=Priority(priority),
        order=ord_,
        origin=origin,
        raw_status=raw_status,
        experiment=json.loads(experiment) if experiment else None,
        note=note,
        updated_at=updated,
        meta=json.loads(meta) if meta else {},
    )
