"""Claude Code's task lists (v2.1.16+, ``~/.claude/tasks/<list-id>/<id>.json``) followed
live while a real writer process creates, rewrites and deletes task files; dependencies
shown as ``blocked by #N``; ``optui todo import --dry-run --json`` carrying its warnings
(the CLI as a real subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from optui.adapters.todo_follow import read_snapshot
from optui.core.todo.formats import TodoFormatError, parse_claude_task_files, parse_follow_spec
from optui.core.todo.items import TodoStatus
from optui.demo.campaign import write_demo_config
from optui.session import Session
from tests.helpers.waiting import until

pytestmark = pytest.mark.timeout(60)


def task(id_: str, subject: str, status: str = "pending", *, blocked_by=(), blocks=()) -> dict:
    """A task file as Claude Code's TaskCreate/TaskUpdate write it (``<id>.json``)."""
    return {"id": id_, "subject": subject, "description": f"{subject} (details)", "activeForm": subject + "ing",
            "status": status, "blocks": list(blocks), "blockedBy": list(blocked_by), "owner": "",
            "metadata": {}}


def write_list(directory: Path, *tasks: dict, highwatermark: int | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for t in tasks:
        (directory / f"{t['id']}.json").write_text(json.dumps(t, indent=2))
    (directory / ".highwatermark").write_text(str(highwatermark or len(tasks)))
    (directory / ".lock").write_text("")


def test_task_files_parse_in_id_order_with_dependencies(tmp_path):
    files = [(f"{t['id']}.json", json.dumps(t, indent=2)) for t in (
        task("10", "Write the report", blocked_by=["2"]), task("1", "Run the baseline", "completed", blocks=["2"]),
        task("2", "Try 32 requests", "in_progress", blocked_by=["1"]), task("3", "Old idea", "deleted"))]
    items = parse_claude_task_files(files, "/t/list")
    assert [(t.content, t.status, t.upstream_id, t.blocked_by) for t in items] == [
        ("Run the baseline", TodoStatus.COMPLETED, "1", ()),
        ("Try 32 requests", TodoStatus.IN_PROGRESS, "2", ("1",)),
        ("Write the report", TodoStatus.PENDING, "10", ("2",))]
    assert items[1].active_form == "Try 32 requestsing"
    bad = json.dumps({**task("4", "x"), "blockedBy": "3"}, indent=2)
    with pytest.raises(TodoFormatError) as err:
        parse_claude_task_files([("4.json", bad)], "/t/list")
    assert str(err.value).startswith("/t/list/4.json:8: blockedBy: expected an array of task ids")
    with pytest.raises(TodoFormatError, match=r"/t/list/5.json:1: subject: missing"):
        parse_claude_task_files([("5.json", '{"id": "5", "status": "pending"}')], "/t/list")


def test_a_task_dir_reads_as_a_list_and_claude_alone_is_the_shared_list(tmp_path, monkeypatch):
    home = tmp_path / "claude-home"
    shared = home / "tasks" / "optui-campaign"
    write_list(shared, task("1", "Run the baseline"), task("2", "Try tp 2", blocked_by=["1"]))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    monkeypatch.setenv("CLAUDE_CODE_TASK_LIST_ID", "optui-campaign")
    origin, items = read_snapshot(parse_follow_spec("claude:"))
    assert origin == f"claude:{shared}" and [t.content for t in items] == ["Run the baseline", "Try tp 2"]
    origin, items = read_snapshot(parse_follow_spec(f"{shared}/"))  # a bare path under .claude/
    assert origin.startswith("claude:") and len(items) == 2


#: The writer: Claude Code's own steps on one list, each after the test says "go" on stdin
#: (so nothing depends on timing): create three tasks; 2 starts; a file caught mid-write
#: (half of 3.json, then the rest); 1 completes; 2 is deleted (file removed).
WRITER = r'''
import json, os, sys
d = sys.argv[1]
def task(i, subject, status="pending", blocked_by=()):
    return {"id": i, "subject": subject, "description": "", "activeForm": subject, "status": status,
            "blocks": [], "blockedBy": list(blocked_by), "owner": "", "metadata": {}}
def put(t):
    tmp = os.path.join(d, ".%s.json.tmp" % t["id"])
    with open(tmp, "w") as f:
        json.dump(t, f)
    os.replace(tmp, os.path.join(d, t["id"] + ".json"))
    with open(os.path.join(d, ".highwatermark"), "w") as f:
        f.write(max(n.split(".")[0] for n in os.listdir(d) if n.endswith(".json") and n[0] != "."))
def step():
    sys.stdout.write("ready\n"); sys.stdout.flush()
    sys.stdin.readline()
os.makedirs(d, exist_ok=True)
open(os.path.join(d, ".lock"), "w").close()
step()
put(task("1", "Run the baseline")); put(task("2", "Try 32 requests", blocked_by=["1"]))
put(task("3", "Write the report", blocked_by=["1", "2"]))
step()
put(task("2", "Try 32 requests", "in_progress", ["1"]))
step()
text = json.dumps(task("3", "Write the findings report", blocked_by=["2"]))
with open(os.path.join(d, "3.json"), "w") as f:   # in place, half of it
    f.write(text[: len(text) // 2]); f.flush(); os.fsync(f.fileno())
    step()
    f.write(text[len(text) // 2:])
step()
put(task("1", "Run the baseline", "completed"))
step()
os.remove(os.path.join(d, "2.json"))
step()
'''


async def test_a_task_list_is_followed_live_while_a_real_writer_changes_it(tmp_path):
    from optui.config import load_config
    from optui.core.todo.formats import dependency_labels

    lst = tmp_path / "home" / ".claude" / "tasks" / "list-1"
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "none"\n[todo]\npoll_s = 0.1\nfollow = '
                   + json.dumps([f"claude:{lst}"]) + "\n")
    writer = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(lst), stdin=subprocess.PIPE,
                                                  stdout=subprocess.PIPE)

    async def go():
        assert (await asyncio.wait_for(writer.stdout.readline(), 10)) == b"ready\n"
        writer.stdin.write(b"go\n")
        await writer.stdin.drain()

    session = Session(load_config(cfg))
    await session.start()
    key = f"claude:{lst}"

    def todos():
        return {t.content: t for t in session.snapshot().todos}

    def labels():
        items = session.snapshot().todos
        return {t.content: dependency_labels(items).get(t.id) for t in items}

    try:
        await go()  # the list appears
        await until(lambda: len(todos()) == 3)
        ids = {c: t.id for c, t in todos().items()}
        one = ids["Run the baseline"]
        assert labels() == {"Run the baseline": None, "Try 32 requests": f"blocked by #{one}",
                            "Write the report": f"blocked by #{one}, #{ids['Try 32 requests']}"}
        await go()  # 2 starts
        await until(lambda: todos()["Try 32 requests"].status is TodoStatus.IN_PROGRESS)
        await go()  # 3.json half written (and left so): read again, then shown as an error; nothing imported
        await until(lambda: session.todo_follow.statuses[key].state == "error")
        assert "3.json:1: invalid JSON" in session.todo_follow.statuses[key].error
        assert set(todos()) == {"Run the baseline", "Try 32 requests", "Write the report"}
        await go()  # the rest of 3.json: the reworded task keeps its id, its blockers change
        await until(lambda: "Write the findings report" in todos())
        assert todos()["Write the findings report"].id == ids["Write the report"]
        assert labels()["Write the findings report"] == f"blocked by #{ids['Try 32 requests']}"
        await go()  # 1 completes: it no longer blocks 2
        await until(lambda: todos()["Run the baseline"].status is TodoStatus.COMPLETED)
        await until(lambda: labels()["Try 32 requests"] is None)
        await go()  # 2.json deleted: dropped by the agent, and 3 is no longer blocked
        await until(lambda: todos()["Try 32 requests"].agent_mark == "removed")
        assert labels()["Write the findings report"] is None
        assert session.todo_follow.statuses[key].state == "ok"
        await go()
        assert await asyncio.wait_for(writer.wait(), 10) == 0
    finally:
        if writer.returncode is None:
            writer.kill()
            await writer.wait()
        await session.close()


def run_cli(cfg: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_todo_list_shows_dependencies_and_dry_run_json_carries_warnings(tmp_path):
    cfg = write_demo_config(tmp_path, port=1)
    lst = tmp_path / ".claude" / "tasks" / "shared"
    write_list(lst, task("1", "Run the baseline"), task("2", "Try tp 2", blocked_by=["1"]),
               task("3", "Wait for node 2", "blocked"))
    r = run_cli(cfg, "todo", "import", f"claude:{lst}", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows[2]["warnings"] == ["unknown status 'blocked' kept as pending"]
    assert "warnings" not in rows[0] and rows[1]["blocked_by"] == ["1"]
    assert "unknown status 'blocked' kept as pending" in r.stderr
    r = run_cli(cfg, "todo", "import", str(lst))
    assert r.returncode == 0, r.stderr
    listed = run_cli(cfg, "todo", "list").stdout.splitlines()
    by_text = {line.split("  [")[0].split(None, 3)[-1]: line for line in listed}
    assert by_text["Try tp 2"].endswith("[blocked by #1, agent added]"), listed
    assert json.loads(run_cli(cfg, "todo", "list", "--json").stdout)[1]["blocked"] == "blocked by #1"


def test_dry_run_json_of_a_todowrite_file_names_the_unknown_status(tmp_path):
    cfg = write_demo_config(tmp_path, port=1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"todos": [{"content": "Wait for node 2", "status": "blocked", "priority": "urgent"},
                                          {"content": "Run it", "status": "pending", "priority": "high"}]}))
    r = run_cli(cfg, "todo", "import", f"todowrite:{plan}", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows[0]["warnings"] == ["unknown status 'blocked' kept as pending", "unknown priority 'urgent' kept as medium"]
    assert "warnings" not in rows[1]


def test_opencode_db_in_its_current_schema_is_read(tmp_path):
    """anomalyco/opencode ``session.sql.ts``: todo keyed by (session_id, position), the
    session table with its many columns."""
    import sqlite3

    db_path = tmp_path / "opencode.db"
    db = sqlite3.connect(db_path)
    db.executescript("""
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL,
            directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL, cost REAL NOT NULL DEFAULT 0,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, time_archived INTEGER);
        CREATE TABLE todo (session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
            content TEXT NOT NULL, status TEXT NOT NULL, priority TEXT NOT NULL, position INTEGER NOT NULL,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, PRIMARY KEY (session_id, position));
        CREATE INDEX todo_session_idx ON todo (session_id);
        INSERT INTO session VALUES ('ses_a', 'p', NULL, 's', '/w', 't', '1.14.0', 0, 1, 2, NULL);
        INSERT INTO todo VALUES ('ses_a', 'Try tp 2', 'pending', 'high', 1, 1, 5),
                                ('ses_a', 'Run the baseline', 'completed', 'medium', 0, 1, 5);
    """)
    db.commit()
    db.close()
    origin, items = read_snapshot(parse_follow_spec(f"opencode:{db_path}"))
    assert origin == f"opencode:{db_path.resolve()}#ses_a"
    assert [(t.content, t.status.value, t.priority.value) for t in items] == [
        ("Run the baseline", "completed", "medium"), ("Try tp 2", "pending", "high")]


async def test_the_todo_panel_shows_what_a_task_is_blocked_by(tmp_path):
    from optui.config import load_config
    from optui.ui.app import OptuiApp
    from tests.helpers.pilot import wait_for

    lst = tmp_path / ".claude" / "tasks" / "list-9"
    write_list(lst, task("1", "Run the baseline"), task("2", "Try tp 2", blocked_by=["1"]))
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "none"\n[todo]\npoll_s = 0.1\nfollow = '
                   + json.dumps([f"claude:{lst}"]) + "\n")
    app = OptuiApp(Session(load_config(cfg)))

    def shown() -> list[str]:
        return [line.rstrip() for line in app.query_one("#todo-list").render().plain.splitlines()]

    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: any("Try tp 2" in line for line in shown()), what=shown)
        first = {t.content: t.id for t in app.session.journal.todos()}["Run the baseline"]
        assert shown()[1] == f"○ M A+ Try tp 2  blocked by #{first}"
        write_list(lst, task("1", "Run the baseline", "completed"), task("2", "Try tp 2", blocked_by=["1"]))
        # its blocker is done (and listed after it: open items first)
        await wait_for(pilot, lambda: shown()[0] == "○ M A+ Try tp 2", what=shown)


def test_renumbered_ids_of_a_todowrite_list_are_not_taken_for_task_ids(tmp_path):
    """opencode's legacy files carry the model's ``id``s, renumbered at will: only Claude
    Code task ids match items by id; these are matched by content as before."""
    cfg = write_demo_config(tmp_path, port=1)
    src = tmp_path / "opencode" / "storage" / "todo" / "ses_1.json"
    src.parent.mkdir(parents=True)
    src.write_text(json.dumps([{"id": "1", "content": "Run the baseline", "status": "pending", "priority": "high"}]))
    assert run_cli(cfg, "todo", "import", str(src)).returncode == 0
    src.write_text(json.dumps([{"id": "1", "content": "Profile decode", "status": "pending", "priority": "low"},
                               {"id": "2", "content": "Run the baseline", "status": "completed", "priority": "high"}]))
    assert run_cli(cfg, "todo", "import", str(src)).returncode == 0
    items = {t["content"]: t for t in json.loads(run_cli(cfg, "todo", "list", "--json").stdout)}
    assert items["Run the baseline"]["id"] == 1 and items["Run the baseline"]["status"] == "completed"
    assert items["Profile decode"]["id"] == 2
