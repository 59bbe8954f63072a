"""Following agents' todo lists live: real files and a real opencode-style SQLite DB in WAL
mode written by another connection, a real session and journal."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from optui.adapters.todo_follow import FollowError, TodoFollower, read_snapshot
from optui.config import ConfigError, load_config, parse_config_text
from optui.core.todo.formats import parse_follow_spec
from optui.core.todo.items import TodoStatus
from optui.session import Session
from tests.helpers.waiting import until

pytestmark = pytest.mark.timeout(60)


def claude_list(*items: tuple[str, str]) -> str:
    return json.dumps([{"content": c, "status": s, "activeForm": c + "…"} for c, s in items], indent=1)


def make_session(tmp_path: Path, follow: list[str]) -> Session:
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "none"\n[todo]\npoll_s = 0.1\nfollow = ' + json.dumps(follow) + "\n")
    return Session(load_config(cfg))


async def test_claude_list_followed_live_with_stable_ids(tmp_path):
    todos = tmp_path / "home" / ".claude" / "todos"
    todos.mkdir(parents=True)
    path = todos / "abc-agent-abc.json"
    path.write_text(claude_list(("Run the baseline", "in_progress"), ("Try 32 requests", "pending"), ("Wait for node 2", "blocked")))
    session = make_session(tmp_path, [f"claude:{path}"])
    await session.start()
    try:
        await until(lambda: len(session.snapshot().todos) == 3)
        first = {t.content: t for t in session.snapshot().todos}
        assert first["Run the baseline"].origin == f"claude:{path.resolve()}"
        assert first["Wait for node 2"].raw_status == "blocked" and first["Wait for node 2"].status is TodoStatus.PENDING
        assert all(t.agent_mark == "added" for t in first.values())
        # the operator edits one item in optui meanwhile
        session.todos.bump_priority(first["Try 32 requests"], up=True)
        # the agent rewrites its whole list: one done, one dropped, one new
        path.write_text(claude_list(("Run the baseline", "completed"), ("Try 32 requests", "in_progress"), ("Write the report", "pending")))
        await until(lambda: len(session.snapshot().todos) == 4)
        now = {t.content: t for t in session.snapshot().todos}
        assert now["Run the baseline"].id == first["Run the baseline"].id  # stable id
        assert now["Run the baseline"].status is TodoStatus.COMPLETED and now["Run the baseline"].agent_mark == "changed"
        assert now["Try 32 requests"].priority.value == "high"  # the operator's edit survived
        assert now["Wait for node 2"].agent_mark == "removed"  # dropped by the agent: kept, marked
        assert now["Write the report"].agent_mark == "added"
        ops = [(e.actor, e.data["op"]) for e in session.journal.events(types=["todo.changed"])]
        assert ("agent:claude", "agent.remove") in ops and ops.count(("agent:claude", "agent.add")) == 4
        status = session.todo_follow.statuses[f"claude:{path}"]
        assert status.state == "ok" and status.last_summary == "+1 ~2 -1"
    finally:
        await session.close()


async def test_malformed_file_imports_nothing_and_says_where(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(claude_list(("A", "pending")))
    session = make_session(tmp_path, [f"todowrite:{path}"])
    await session.start()
    try:
        await until(lambda: len(session.snapshot().todos) == 1)
        path.write_text('[\n {"content": "A", "status": "completed"},\n {"content": "B", "status": 7}\n]')
        key = f"todowrite:{path}"
        await until(lambda: session.todo_follow.statuses[key].state == "error")
        error = session.todo_follow.statuses[key].error
        assert error == f"{path.resolve()}:3: [1].status: expected a string, got 7"
        assert [(t.content, t.status.value) for t in session.snapshot().todos] == [("A", "pending")]  # nothing imported
        alerts = session.journal.events(types=["alert"])
        assert [a.data["kind"] for a in alerts] == ["todo.follow"] and alerts[0].data["message"] == error
        path.write_text(claude_list(("A", "completed")))
        await until(lambda: session.snapshot().todos[0].status is TodoStatus.COMPLETED)
        assert session.todo_follow.statuses[key].state == "ok"
        assert len(session.journal.events(types=["alert"])) == 1  # reported once
    finally:
        await session.close()


async def test_a_broken_file_is_read_twice_before_it_is_an_error(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('[{"content": "A", "sta')  # as if caught mid-write
    errors = []
    follower = TodoFollower(parse_follow_spec(f"todowrite:{path}"), on_snapshot=lambda o, i: None,
                            on_error=lambda msg, missing: errors.append((follower.reads, msg)), poll_s=0.05)
    task = asyncio.create_task(follower.run())
    try:
        await until(lambda: errors)
        assert errors[0][0] >= 2 and "invalid JSON" in errors[0][1]
    finally:
        task.cancel()


def make_opencode_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript("""
        CREATE TABLE session(id TEXT PRIMARY KEY, title TEXT);
        CREATE TABLE todo(session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE, content TEXT NOT NULL,
            status TEXT NOT NULL, priority TEXT NOT NULL, position INTEGER NOT NULL, time_created INTEGER NOT NULL,
            time_updated INTEGER NOT NULL, PRIMARY KEY(session_id, position));
        INSERT INTO session VALUES ('ses_old', 'old'), ('ses_1', 'tuning');
    """)
    return db


def todowrite(db: sqlite3.Connection, session: str, items: list[tuple[str, str, str]], t: int) -> None:
    """What opencode's todowrite does: replace the whole list in one transaction."""
    db.execute("BEGIN")
    db.execute("DELETE FROM todo WHERE session_id = ?", (session,))
    for pos, (content, status, priority) in enumerate(items):
        db.execute("INSERT INTO todo VALUES (?,?,?,?,?,?,?)", (session, content, status, priority, pos, t, t))
    db.execute("COMMIT")


async def test_opencode_sqlite_followed_read_only(tmp_path):
    path = tmp_path / "opencode" / "opencode.db"
    path.parent.mkdir()
    writer = make_opencode_db(path)  # stays open: the DB lives in WAL mode like opencode's
    try:
        todowrite(writer, "ses_old", [("old session item", "pending", "low")], 1)
        todowrite(writer, "ses_1", [("Profile decode", "in_progress", "high"), ("Wait", "blocked", "medium")], 2)
        assert Path(str(path) + "-wal").exists()
        # no session given: the most recently updated one
        origin, items = read_snapshot(parse_follow_spec(f"opencode:{path}"))
        assert origin == f"opencode:{path.resolve()}#ses_1" and [t.content for t in items] == ["Profile decode", "Wait"]
        with pytest.raises(FollowError, match="no session 'ses_nope'"):
            read_snapshot(parse_follow_spec(f"opencode:{path}#ses_nope"))
        session = make_session(tmp_path, [f"opencode:{path}#ses_1"])
        await session.start()
        try:
            await until(lambda: len(session.snapshot().todos) == 2)
            ids = [t.id for t in session.snapshot().todos]
            todowrite(writer, "ses_1", [("Profile decode", "completed", "high"), ("Wait", "pending", "medium"),
                                        ("Try fp8 KV cache", "pending", "high")], 3)
            await until(lambda: len(session.snapshot().todos) == 3)
            todos = session.snapshot().todos
            assert [t.id for t in todos][:2] == ids
            assert [(t.status.value, t.raw_status) for t in todos] == [("completed", None), ("pending", None), ("pending", None)]
            assert session.journal.events(types=["todo.changed"])[-1].actor == "agent:opencode"
        finally:
            await session.close()
        # the agent's data is untouched (optui never writes into another agent's store)
        rows = writer.execute("SELECT content, status FROM todo WHERE session_id = 'ses_1' ORDER BY position").fetchall()
        assert rows == [("Profile decode", "completed"), ("Wait", "pending"), ("Try fp8 KV cache", "pending")]
    finally:
        writer.close()


def test_legacy_opencode_storage_and_globs(tmp_path):
    storage = tmp_path / "opencode" / "storage" / "todo"
    storage.mkdir(parents=True)
    (storage / "ses_a.json").write_text(json.dumps([{"id": "1", "content": "A", "status": "pending", "priority": "high"}]))
    newer = storage / "ses_b.json"
    newer.write_text(json.dumps([{"content": "B", "status": "cancelled", "priority": "low"}]))
    os.utime(newer, (time.time() + 5, time.time() + 5))
    origin, items = read_snapshot(parse_follow_spec(str(storage / "*.json")))
    assert origin == f"opencode:{newer.resolve()}"
    assert [(t.content, t.status.value, t.priority.value) for t in items] == [("B", "cancelled", "low")]
    with pytest.raises(FollowError) as err:
        read_snapshot(parse_follow_spec(f"claude:{tmp_path}/nope/*.json"))
    assert err.value.missing


def test_todo_config_is_validated():
    cfg = parse_config_text('[todo]\nfollow = ["claude:~/.claude/todos/a.json", "opencode:~/x/opencode.db#ses_1"]\n')
    assert cfg.todo.follow[1].endswith("#ses_1") and cfg.todo.max_in_progress == 1
    with pytest.raises(ConfigError, match=r"optui.toml:3: todo.follow.0: 'claude:a.json#x': a #SESSION suffix"):
        parse_config_text('theme = "optui-dark"\n[todo]\nfollow = ["claude:a.json#x"]\n')
    with pytest.raises(ConfigError, match="todo.poll_s"):
        parse_config_text("[todo]\npoll_s = 0\n")


def test_claude_transcript_is_followed_when_no_todo_file_is_written(tmp_path):
    project = tmp_path / ".claude" / "projects" / "-work-qwen"
    project.mkdir(parents=True)
    path = project / "ses.jsonl"
    path.write_text(json.dumps({"type": "user", "message": {"content": "go"}}) + "\n")
    spec = parse_follow_spec(str(tmp_path / ".claude" / "projects" / "*" / "*.jsonl"))
    with pytest.raises(FollowError) as err:
        read_snapshot(spec)
    assert err.value.missing and "no TodoWrite call" in str(err.value)
    call = {"type": "tool_use", "name": "TodoWrite", "input": {"todos": [{"content": "A", "status": "pending", "activeForm": "A"}]}}
    with open(path, "a") as fh:
        fh.write(json.dumps({"type": "assistant", "message": {"content": [call]}}) + "\n")
    origin, items = read_snapshot(spec)
    assert origin == f"claude:{path.resolve()}" and [t.content for t in items] == ["A"]



SYNCER = """
import os, sys, time
from optui.adapters.journal import Journal
from optui.core.todo.formats import AgentTodo
from optui.session.todo.sync import apply_snapshot
j = Journal(sys.argv[1])
open(sys.argv[2] + f".ready-{os.getpid()}", "w").close()
while not os.path.exists(sys.argv[2]):  # start together
    time.sleep(0.001)
for k in range(40):
    apply_snapshot(j, "todowrite:/plan.json", [AgentTodo(f"item {i}") for i in range(k + 1)])
"""


def test_two_processes_applying_the_same_snapshots_add_each_item_once(tmp_path):
    """Two optui windows following one list both apply every agent write: the diff is
    taken inside the write transaction, so no item is added twice."""
    import subprocess
    import sys

    from optui.adapters.journal import Journal
    from tests.helpers.demo import subprocess_env

    db = tmp_path / "optui.db"
    Journal(db).close()
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", SYNCER, str(db), str(go)], env=subprocess_env(),
                              stdin=subprocess.DEVNULL, start_new_session=True) for _ in range(2)]
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("go.ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # both imported and waiting
    go.touch()
    for p in procs:
        assert p.wait(timeout=60) == 0
    contents = [t.content for t in Journal(db).todos()]
    assert sorted(contents) == sorted(f"item {i}" for i in range(40))


async def test_an_unchanged_file_is_never_parsed_again(tmp_path, monkeypatch):
    """A real file and a real follower refreshing every 20 ms: one parse for the file,
    none for a touch that keeps the content (new mtime), one for each new content."""
    import optui.adapters.todo_follow as tf

    parses, polls = [], []
    real_parse, real_signature = tf.parse_todo_json, tf.signature
    monkeypatch.setattr(tf, "parse_todo_json", lambda *a: parses.append(1) or real_parse(*a))
    monkeypatch.setattr(tf, "signature", lambda spec: polls.append(1) or real_signature(spec))
    path = tmp_path / "plan.json"
    path.write_text(claude_list(*[(f"item {i}", "pending") for i in range(200)]))
    snapshots = []
    follower = TodoFollower(parse_follow_spec(f"todowrite:{path}"), on_snapshot=lambda o, i: snapshots.append(i),
                            on_error=lambda msg, missing: None, poll_s=0.01, refresh_s=0.02)
    task = asyncio.create_task(follower.run())
    try:
        await until(lambda: len(polls) >= 30)
        assert (len(parses), len(snapshots)) == (1, 1)
        os.utime(path, ns=(time.time_ns() + 10**9,) * 2)  # touched: new mtime, same bytes
        seen = len(polls)
        await until(lambda: len(polls) >= seen + 30)
        assert len(parses) == 1
        path.write_text(claude_list(("item 0", "completed")))
        await until(lambda: len(snapshots) == 2)
        seen = len(polls)
        await until(lambda: len(polls) >= seen + 30)
        assert len(parses) == 2 and follower.parses == 2
    finally:
        task.cancel()


async def test_a_deep_list_is_an_error_on_screen_and_the_next_valid_write_recovers(tmp_path):
    """600 levels of nesting used to kill the follower (RecursionError) while the status
    kept saying ok; now the status is the error and the follower goes on."""
    path = tmp_path / "plan.json"
    path.write_text(claude_list(("A", "pending")))
    session = make_session(tmp_path, [f"todowrite:{path}"])
    await session.start()
    key = f"todowrite:{path}"
    try:
        await until(lambda: len(session.snapshot().todos) == 1 and session.todo_follow.statuses[key].state == "ok")
        text = '{"todos": [{"content": "A", "status": "pending", "x": ' + "[" * 600 + "]" * 600 + "}]}"
        path.write_text(text)
        await until(lambda: session.todo_follow.statuses[key].state == "error")
        column = text.index("[[") + 62  # the bracket that opens level 65 (3 levels before "x")
        assert session.todo_follow.statuses[key].error == f"{path.resolve()}:1: nested deeper than 64 levels (column {column})"
        path.write_text(claude_list(("A", "completed"), ("B", "pending")))
        await until(lambda: len(session.snapshot().todos) == 2)
        assert session.todo_follow.statuses[key].state == "ok" and session.todo_follow.statuses[key].error is None
    finally:
        await session.close()


async def test_an_unexpected_failure_is_reported_and_the_follower_goes_on(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(claude_list(("A", "pending")))
    errors, snapshots = [], []

    def on_snapshot(origin, items):
        if not snapshots:
            snapshots.append(None)
            raise RuntimeError("disk on fire")
        snapshots.append(items)

    follower = TodoFollower(parse_follow_spec(f"todowrite:{path}"), on_snapshot=on_snapshot,
                            on_error=lambda msg, missing: errors.append(msg), poll_s=0.01, refresh_s=0.05)
    task = asyncio.create_task(follower.run())
    try:
        await until(lambda: len(snapshots) == 2)  # the same content delivered again at the next refresh
        assert errors == [f"todowrite:{path}: cannot follow: RuntimeError: disk on fire"]
        assert not task.done()
    finally:
        task.cancel()


async def test_an_edit_of_a_big_followed_list_reads_only_the_items_it_changed(tmp_path, monkeypatch):
    """After the list is in, Space (cycle) and another process's writes re-read the items
    their todo.changed events name; the list stays the one a full read gives, in order."""
    from optui.adapters.journal import Journal

    path = tmp_path / "plan.json"
    path.write_text(claude_list(*[(f"item {i}", "pending") for i in range(3000)]))
    session = make_session(tmp_path, [f"todowrite:{path}"])
    await session.start()
    try:
        await until(lambda: len(session.snapshot().todos) == 3000, timeout=30)
        full_reads = []
        real_todos = Journal.todos
        monkeypatch.setattr(Journal, "todos", lambda self, *a, **k: full_reads.append(1) or real_todos(self, *a, **k))
        first, last = session.snapshot().todos[0], session.snapshot().todos[-1]
        session.todos.cycle(first)
        other = Journal(session.journal.path)  # another optui process on the same campaign
        other.update_todo(last.id, status="completed", actor="cli")
        other.add_todo("added elsewhere", actor="cli")
        other.delete_todo(session.snapshot().todos[1].id, actor="cli")
        session.sync_journal()
        session.todos.move(session.snapshot().todos[-1], -1)  # the new item up one place
        assert full_reads == []
        shown = session.snapshot().todos
        assert shown == tuple(real_todos(session.journal))
        assert shown[0].status is TodoStatus.IN_PROGRESS and len(shown) == 3000
        assert [(t.content, t.status.value) for t in shown[-2:]] == [("added elsewhere", "pending"), ("item 2999", "completed")]
    finally:
        await session.close()
