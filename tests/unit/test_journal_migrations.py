"""The journal's schema versions: ``PRAGMA user_version`` read at open, ordered migrations
(one transaction each), a journal from a newer optui refused, a version-1 file made the way
optui wrote it before migrations existed opened with everything in it."""

import hashlib
import json
import sqlite3

import pytest

from optui.adapters import journal as journal_module
from optui.adapters.journal import MIGRATIONS, SCHEMA_VERSION, Journal, JournalError
from optui.core.bench.result import BenchResult

#: The schema optui wrote as version 1 (adapters/journal.py before migrations, copied verbatim:
#: this test must keep describing those files even when the code's schema moves on).
V1_SCHEMA = """
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


def make_v1(path):
    """A campaign DB as optui 1 made it: its open sequence, then rows its writes left."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA page_size=1024")
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(V1_SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '1')")
    db.execute("INSERT INTO experiments(id, server, ts, actor, seq) VALUES ('exp-0001', 'qwen', 100.0, 'tui', 1)")
    db.execute("INSERT INTO events(ts, type, target, actor, experiment, data) VALUES (?,?,?,?,?,?)",
               (100.0, "experiment.started", "qwen", "tui", "exp-0001",
                json.dumps({"reason": "first", "argv": ["serve", "--tp", "1"], "prev_argv": [], "diff": []})))
    db.execute("INSERT INTO events(ts, type, target, actor, experiment, data) VALUES (?,?,?,?,?,?)",
               (101.0, "note", "qwen", "tui", "exp-0001", json.dumps({"text": "kept from version 1"})))
    db.execute("INSERT INTO todos(content, status, priority, ord, origin, created, updated) "
               "VALUES ('try tp 2', 'pending', 'high', 1, 'optui', 100.0, 100.0)")
    result = BenchResult(tool="sglang", output_throughput_tok_s=1234.5)
    db.execute("INSERT INTO bench_results(ts, server, bench, experiment, workload_key, status, output_tok_s, data) "
               "VALUES (?,?,?,?,?,?,?,?)", (102.0, "qwen", "c16", "exp-0001", result.workload.key(), "ok",
                                            1234.5, json.dumps(result.to_json(), default=str)))
    db.execute("INSERT INTO last_good(server, argv, ts) VALUES ('qwen', ?, 103.0)", (json.dumps(["serve", "--tp", "1"]),))
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0  # what version 1 left there
    db.close()


def versions(path) -> tuple[int, str]:
    db = sqlite3.connect(path)
    try:
        return (db.execute("PRAGMA user_version").fetchone()[0],
                db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0])
    finally:
        db.close()


def test_a_version_1_journal_is_migrated_and_keeps_everything(tmp_path):
    path = tmp_path / "optui.db"
    make_v1(path)
    j = Journal(path)
    assert versions(path) == (SCHEMA_VERSION, str(SCHEMA_VERSION))
    indexes = {r[0] for r in j._db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "bench_experiment" in indexes  # the 1 → 2 step ran
    assert [e.data.get("text") for e in j.events(types=["note"])] == ["kept from version 1"]
    assert [t.content for t in j.todos()] == ["try tp 2"]
    assert [r.result.output_throughput_tok_s for r in j.results(experiment="exp-0001")] == [1234.5]
    assert j.last_good("qwen") == ["serve", "--tp", "1"]
    assert j.current_experiment("qwen") == "exp-0001"
    assert j.new_experiment("qwen", {"reason": "next"}).experiment == "exp-0002"  # ids go on from the old ones
    j.close()
    Journal(path).close()  # opening again runs nothing
    assert versions(path) == (SCHEMA_VERSION, str(SCHEMA_VERSION))


def test_a_new_journal_gets_the_current_version(tmp_path):
    Journal(tmp_path / "new.db").close()
    assert versions(tmp_path / "new.db") == (SCHEMA_VERSION, str(SCHEMA_VERSION))
    assert len(MIGRATIONS) == SCHEMA_VERSION


def test_a_version_1_journal_opened_read_only_is_read_as_it_is(tmp_path):
    path = tmp_path / "optui.db"
    make_v1(path)
    j = Journal(path, read_only=True)
    assert [e.type for e in j.events()] == ["experiment.started", "note"]
    j.close()
    assert versions(path) == (0, "1")  # never migrated by a reader


def test_a_failed_step_leaves_the_previous_version_whole(tmp_path, monkeypatch):
    path = tmp_path / "optui.db"
    make_v1(path)

    def broken(db):
        db.execute("CREATE INDEX half_done ON events(ts)")
        raise sqlite3.OperationalError("disk I/O error (simulated)")

    monkeypatch.setattr(journal_module, "MIGRATIONS", (MIGRATIONS[0], broken))
    with pytest.raises(JournalError, match="simulated"):
        Journal(path)
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone() == (0,)
    db.close()
    assert versions(path) == (0, "1")
    monkeypatch.undo()
    Journal(path).close()  # the real step runs next time
    assert versions(path) == (SCHEMA_VERSION, str(SCHEMA_VERSION))


def test_a_journal_newer_than_the_code_is_refused_with_both_versions(tmp_path):
    path = tmp_path / "optui.db"
    Journal(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    for read_only in (False, True):
        with pytest.raises(JournalError) as info:
            Journal(path, read_only=read_only)
        text = str(info.value)
        assert str(path) in text
        assert f"journal schema {SCHEMA_VERSION + 1} is newer than this optui knows ({SCHEMA_VERSION})" in text
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_a_journal_file_without_tables_yet_is_refused_read_only_with_a_clear_error(tmp_path):
    """Another optui has created the file but not its tables yet: a read-only reader (`optui
    status`, a test polling the journal) gets a JournalError naming the file, never a raw
    sqlite3 "no such table" from its first query."""
    db = tmp_path / "optui.db"
    sqlite3.connect(db).close()  # the file as sqlite3.connect leaves it before any table
    with pytest.raises(JournalError, match=r"optui\.db: not a journal yet"):
        Journal(db, read_only=True)
    Journal(db).close()  # a writer makes it a journal
    reader = Journal(db, read_only=True)
    assert reader.events() == []
    reader.close()
