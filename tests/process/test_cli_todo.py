"""``optui todo``: list / add / set / import / export / history, exit codes and messages."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from optui.adapters.journal import Journal
from optui.cli import cli
from optui.demo.campaign import write_demo_config

CLAUDE = [
    {"content": "Run the baseline sweep", "status": "completed", "activeForm": "Running the baseline sweep"},
    {"content": "Try --max-running-requests 32", "status": "in_progress", "activeForm": "Trying 32"},
    {"content": "Wait for node 2", "status": "blocked", "activeForm": "Waiting"},
]


@pytest.fixture
def campaign(tmp_path):
    cfg = write_demo_config(tmp_path, port=1)  # never started: only the config matters here
    return cfg


def todo(cfg, *args, input=None):
    return CliRunner().invoke(cli, ["-c", str(cfg), "todo", *args], input=input)


def journal(cfg) -> Journal:
    return Journal(cfg.parent / ".optui" / "optui.db")


def test_add_list_set_roundtrip(campaign):
    r = todo(campaign, "add", "try tp 8", "--priority", "high", "--json")
    assert r.exit_code == 0, r.output
    item = json.loads(r.stdout)
    assert (item["content"], item["priority"], item["status"]) == ("try tp 8", "high", "pending")
    assert todo(campaign, "add", "bench c16", "--actor", "agent:claude").stdout == "added #2: bench c16\n"
    r = todo(campaign, "set", str(item["id"]), "--status", "in_progress", "--content", "try tp 4")
    assert r.exit_code == 0 and "in_progress" in r.stdout
    listed = json.loads(todo(campaign, "list", "--json").stdout)
    assert [(t["id"], t["content"], t["status"]) for t in listed] == [(1, "try tp 4", "in_progress"), (2, "bench c16", "pending")]
    events = journal(campaign).events(types=["todo.changed"])
    assert [(e.actor, e.data["op"]) for e in events] == [("cli", "add"), ("agent:claude", "add"), ("cli", "edit")]
    assert events[-1].data["before"]["content"] == "try tp 8" and events[-1].data["after"]["status"] == "in_progress"
    assert "#2    pending     medium bench c16" in todo(campaign, "list").stdout
    assert todo(campaign, "list", "--open").stdout.count("\n") == 2


def test_clean_errors_and_exit_codes(campaign):
    r = todo(campaign, "set", "42", "--status", "completed")
    assert r.exit_code == 1 and r.stderr == "optui: error: no todo item #42 (optui todo list shows the ids)\n"
    todo(campaign, "add", "x")
    r = todo(campaign, "set", "1")
    assert r.exit_code == 2 and "nothing to change" in r.stderr
    r = todo(campaign, "set", "1", "--status", "blocked")
    assert r.exit_code == 2 and "Invalid value for '--status'" in r.stderr
    r = todo(campaign, "add", "   ")
    assert r.exit_code == 2 and "must not be empty" in r.stderr
    assert "Traceback" not in r.output


def test_import_prints_normalised_items_and_imports(campaign, tmp_path):
    src = tmp_path / ".claude" / "todos" / "abc-agent-abc.json"
    src.parent.mkdir(parents=True)
    src.write_text(json.dumps(CLAUDE))
    r = todo(campaign, "import", str(src), "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    printed = json.loads(r.stdout)
    origin = f"claude:{src.resolve()}"
    assert [{k: t[k] for k in ("content", "status", "priority", "origin")} for t in printed] == [
        {"content": "Run the baseline sweep", "status": "completed", "priority": "medium", "origin": origin},
        {"content": "Try --max-running-requests 32", "status": "in_progress", "priority": "medium", "origin": origin},
        {"content": "Wait for node 2", "status": "pending", "priority": "medium", "origin": origin},
    ]
    assert printed[2]["raw_status"] == "blocked"
    assert journal(campaign).todos() == []  # --dry-run imported nothing
    r = todo(campaign, "import", str(src), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == printed
    assert "3 new" in r.stderr
    todos = journal(campaign).todos()
    assert [(t.content, t.status.value, t.raw_status, t.origin) for t in todos][2] == ("Wait for node 2", "pending", "blocked", origin)
    # re-import after the agent's next write diffs, never duplicates
    src.write_text(json.dumps(CLAUDE[:2] + [{"content": "Write the report", "status": "pending", "activeForm": "Writing"}]))
    r = todo(campaign, "import", str(src))
    assert r.exit_code == 0 and "1 new, 0 changed, 1 dropped by the agent, 2 unchanged" in r.stderr
    assert [t.content for t in journal(campaign).todos()] == [c["content"] for c in CLAUDE] + ["Write the report"]


def test_malformed_import_names_the_line_and_imports_nothing(campaign, tmp_path):
    src = tmp_path / "plan.json"
    src.write_text('{"todos": [\n  {"content": "ok", "status": "pending"},\n  {"content": "bad"}\n]}')
    r = todo(campaign, "import", str(src), "--json")
    message = f"{src.resolve()}:3: todos[1].status: missing (required) (nothing imported)"
    assert r.exit_code == 1 and json.loads(r.stdout) == {"error": message, "exit_code": 1}  # --json: JSON on stdout
    assert r.stderr == f"optui: error: {message}\n"
    assert journal(campaign).todos() == []
    r = todo(campaign, "import", str(tmp_path / "missing.json"))
    assert r.exit_code == 1 and "no such file" in r.stderr
    # stdin, todowrite tool-input shape
    r = todo(campaign, "import", "-", "--json", input=json.dumps({"todos": [{"content": "A", "status": "pending", "priority": "high"}]}))
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["origin"] == "todowrite:stdin"


def test_export_todowrite_and_markdown(campaign, tmp_path):
    todo(campaign, "add", "Baseline", "-p", "high")
    todo(campaign, "add", "Try 32")
    todo(campaign, "set", "1", "--status", "completed", "--note", "sweep: 100.0 out tok/s")
    r = todo(campaign, "export", "--format", "todowrite")
    assert json.loads(r.stdout) == {"todos": [{"content": "Baseline", "status": "completed", "priority": "high"},
                                              {"content": "Try 32", "status": "pending", "priority": "medium"}]}
    out = tmp_path / "todo.md"
    r = todo(campaign, "export", "-o", str(out))
    assert r.exit_code == 0 and "wrote 2 items" in r.stderr
    r = todo(campaign, "export", "--open", "-o", str(tmp_path / "open.md"))
    assert r.exit_code == 0 and "wrote 1 item to" in r.stderr  # not "1 items" (issue 34)
    assert out.read_text().splitlines()[2:] == ["- [x] **high** Baseline", "  - sweep: 100.0 out tok/s", "- [ ] Try 32"]
    hist = todo(campaign, "history", "1", "--json")
    assert [e["data"]["op"] for e in json.loads(hist.stdout)] == ["add", "status"]


def test_add_with_an_experiment(campaign):
    r = todo(campaign, "add", "bigger batches", "--server", "demo", "--preset", "big-batch", "--set", "--chunked-prefill-size=512",
             "--unset", "--enable-metrics", "--bench", "sweep", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["experiment"] == {
        "server": "demo", "set": {"--max-running-requests": "32", "--chunked-prefill-size": "512"},
        "unset": ["--enable-metrics"], "bench": ["sweep"], "preset": "big-batch"}
    for args, why in [(["--server", "nope"], "unknown server 'nope'"), (["--bench", "nope"], "unknown benchmark 'nope'"),
                      (["--preset", "nope"], "unknown preset 'nope'")]:
        r = todo(campaign, "add", "x", *args)
        assert r.exit_code == 2 and why in r.stderr, r.stderr
    assert len(journal(campaign).todos()) == 1


def test_import_of_a_600_level_list_is_a_clear_error_without_traceback(campaign, tmp_path):
    """The real command in its own process (no CliRunner between it and the terminal)."""
    import subprocess
    import sys

    from tests.helpers.demo import subprocess_env

    src = tmp_path / "plan.json"
    src.write_text('{"todos": [\n  {"content": "A", "status": "pending", "x": ' + "[" * 600 + "]" * 600 + "}]}\n")
    for source, name in ((str(src), str(src.resolve())), ("-", "<stdin>")):
        r = subprocess.run([sys.executable, "-m", "optui", "-c", str(campaign), "todo", "import", source],
                           input=src.read_text(), capture_output=True, text=True, env=subprocess_env(), timeout=60)
        assert r.returncode == 1
        assert r.stderr == f"optui: error: {name}:2: nested deeper than 64 levels (column 107) (nothing imported)\n"
        assert "Traceback" not in r.stdout + r.stderr
    assert journal(campaign).todos() == []


def test_import_from_an_endless_stdin_stops_at_the_size_limit(campaign, monkeypatch):
    import optui.core.todo.formats as tf

    monkeypatch.setattr(tf, "MAX_CHARS", 1000)
    r = todo(campaign, "import", "-", input="[" + " " * 5000 + "]")
    assert r.exit_code == 1 and r.stderr == (
        "optui: error: <stdin>: file too large: 1,001 characters (limit 1,000; not a todo list?) (nothing imported)\n")
