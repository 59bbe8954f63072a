"""Agent todo formats, snapshot matching and experiment specs (pure core)."""

from __future__ import annotations

import json

import pytest

from optui.core.bench.result import BenchResult
from optui.core.flags.argv import FlagError
from optui.core.todo.experiment import ExperimentSpec, format_flag_edits, parse_flag_edits, result_line
from optui.core.todo.formats import (
    AgentTodo,
    TodoFormatError,
    parse_claude_transcript,
    parse_follow_spec,
    parse_todo_json,
    to_markdown,
    to_todowrite,
    todos_from_rows,
)
from optui.core.todo.items import Priority, TodoItem, TodoStatus, normalize_content, parse_status
from optui.core.todo.merge import plan_snapshot

# Claude Code TodoWrite file (~/.claude/todos/<session>-agent-<agent>.json): no priority
CLAUDE = """[
  {"content": "Run the baseline sweep", "status": "completed", "activeForm": "Running the baseline sweep"},
  {"content": "Try --max-running-requests 32", "status": "in_progress", "activeForm": "Trying 32"},
  {"content": "Write the report", "status": "pending", "activeForm": "Writing the report"}
]"""
# opencode todowrite tool input (and legacy storage/todo/<session>.json items with an id)
OPENCODE = json.dumps({"todos": [
    {"id": "1", "content": "Profile decode", "status": "pending", "priority": "high"},
    {"id": "2", "content": "Wait for node 2", "status": "blocked", "priority": "urgent"},
]})


def test_claude_file_normalised():
    items = parse_todo_json(CLAUDE, "abc.json")
    assert [(t.content, t.status, t.priority) for t in items] == [
        ("Run the baseline sweep", TodoStatus.COMPLETED, Priority.MEDIUM),
        ("Try --max-running-requests 32", TodoStatus.IN_PROGRESS, Priority.MEDIUM),
        ("Write the report", TodoStatus.PENDING, Priority.MEDIUM),
    ]
    assert items[1].active_form == "Trying 32"
    assert items[0].to_json("claude:/x/abc.json") == {
        "content": "Run the baseline sweep", "status": "completed", "priority": "medium",
        "origin": "claude:/x/abc.json", "active_form": "Running the baseline sweep"}


def test_unknown_status_and_priority_are_kept():
    items = parse_todo_json(OPENCODE, "ses_1.json")
    blocked = items[1]
    assert blocked.status is TodoStatus.PENDING and blocked.raw_status == "blocked"
    assert blocked.priority is Priority.MEDIUM and blocked.raw_priority == "urgent"
    assert blocked.upstream == {"content": "Wait for node 2", "status": "blocked", "priority": "urgent"}
    assert items[0].upstream_id == "1" and items[0].priority is Priority.HIGH
    assert parse_status("In-Progress") == (TodoStatus.IN_PROGRESS, None)
    assert parse_status("canceled") == (TodoStatus.CANCELLED, None)


@pytest.mark.parametrize("text, where", [
    ('[\n {"content": "a", "status": "pending"},\n {"content": "b",\n  "status": 3}\n]', ":3: [1].status: expected a string"),
    ('[{"status": "pending"}]', ":1: [0].content: missing"),
    ('{"todos": [\n\n {"content": "  ", "status": "pending"}]}', ":3: todos[0].content: must not be empty"),
    ('{"items": []}', ":1: expected a JSON array"),
    ('[1, 2]', "[0]: expected an object"),
    ('[{"content": "a", "status": "pending"},', ":1: invalid JSON"),
    ("", "empty file"),
    ('[{"content": "a", "status": "pending", "priority": 1}]', "[0].priority: expected a string"),
])
def test_malformed_files_name_line_and_field(text, where):
    with pytest.raises(TodoFormatError) as err:
        parse_todo_json(text, "todos.json")
    assert str(err.value).startswith("todos.json")
    assert where in str(err.value)


def test_opencode_rows():
    rows = [("Profile decode", "in_progress", "high", 0), ("Odd", "blocked", None, 1)]
    items = todos_from_rows(rows, "opencode.db#ses_1")
    assert [(t.content, t.status, t.priority, t.raw_status, t.position) for t in items] == [
        ("Profile decode", TodoStatus.IN_PROGRESS, Priority.HIGH, None, 0),
        ("Odd", TodoStatus.PENDING, Priority.MEDIUM, "blocked", 1)]
    with pytest.raises(TodoFormatError, match="opencode.db#ses_1: todo position 4.content: expected text"):
        todos_from_rows([(None, "pending", "high", 4)], "opencode.db#ses_1")


def test_follow_specs():
    assert parse_follow_spec("claude:~/.claude/todos/abc.json").kind == "claude"
    spec = parse_follow_spec("opencode:~/.local/share/opencode/opencode.db#ses_123")
    assert (spec.kind, spec.path, spec.session, spec.is_sqlite) == ("opencode", "~/.local/share/opencode/opencode.db", "ses_123", True)
    assert parse_follow_spec("opencode:").path == ""  # discover the DB
    assert parse_follow_spec("~/.claude/todos/*.json").kind == "claude"
    assert parse_follow_spec("plan.json").kind == "todowrite"
    legacy = parse_follow_spec("/data/opencode/storage/todo/ses_9.json")
    assert legacy.kind == "opencode" and not legacy.is_sqlite
    for bad, why in [("bogus:x.json", "unknown kind"), ("todowrite:", "missing file path"),
                     ("claude:x.json#s", "only applies to an opencode database"), ("  ", "empty")]:
        with pytest.raises(ValueError, match=why):
            parse_follow_spec(bad)


def item(id_, content, status="pending", priority="medium", **meta) -> TodoItem:
    return TodoItem(id_, content, TodoStatus(status), Priority(priority), origin="claude:/f.json", meta=meta)


def agent(content, status="pending", priority="medium") -> AgentTodo:
    return parse_todo_json(json.dumps([{"content": content, "status": status, "priority": priority}]))[0]


def up(content, status="pending", priority="medium"):
    return {"content": content, "status": status, "priority": priority}


def test_snapshot_matching_keeps_ids_and_marks_changes():
    existing = [item(1, "Run the baseline sweep", upstream=up("Run the baseline sweep")),
                item(2, "Try 32", upstream=up("Try 32")),
                item(3, "Write the report", upstream=up("Write the report"))]
    snapshot = [agent("run the  baseline sweep.", "completed"),  # same item, new status
                agent("Write the final report"),                  # reworded: fuzzy match keeps id 3
                agent("Check TTFT")]                              # new
    plan = plan_snapshot(existing, snapshot)
    assert [a.content for a, _ in plan.adds] == ["Check TTFT"]
    assert plan.adds[0][1]["agent"] == "added"
    changed = {u.item.id: u for u in plan.updates}
    assert set(changed) == {1, 3}
    assert changed[1].changes["status"] is TodoStatus.COMPLETED and "content" in changed[1].changes
    assert changed[1].seen.status is TodoStatus.PENDING
    assert changed[3].changes["content"] == "Write the final report"
    assert changed[3].changes["meta"]["agent"] == "changed"
    assert [r.id for r in plan.removes] == [2]  # dropped by the agent: marked, not deleted
    assert plan.summary() == "+1 ~2 -1"
    assert normalize_content("  Run the  baseline sweep. ") == "run the baseline sweep"


def test_operator_edits_are_not_overwritten_by_a_stale_snapshot():
    # the operator completed item 1 in optui; the agent still says pending (unchanged upstream)
    existing = [item(1, "Try 32", "completed", upstream=up("Try 32", "pending"))]
    plan = plan_snapshot(existing, [agent("Try 32", "pending")])
    assert plan.empty and plan.unchanged == 1
    # the agent now moves it: its change wins, the journal flags the conflict (seen=pending)
    plan = plan_snapshot(existing, [agent("Try 32", "in_progress")])
    (u,) = plan.updates
    assert u.changes["status"] is TodoStatus.IN_PROGRESS and u.seen.status is TodoStatus.PENDING


def test_dropped_then_readded_and_deleted_items():
    existing = [item(1, "A", agent="removed", upstream=up("A")), item(2, "B", upstream=up("B"))]
    plan = plan_snapshot(existing, [agent("A"), agent("B")], deleted=[2])
    assert [(u.item.id, u.op) for u in plan.updates] == [(1, "agent.readd")]
    assert plan.kept_deleted == 1 and not plan.adds  # deleted in optui: stays deleted
    plan = plan_snapshot(existing, [])
    assert [r.id for r in plan.removes] == [2]  # already-removed items are not removed twice


def test_exports():
    items = [TodoItem(1, "Baseline", TodoStatus.COMPLETED, Priority.HIGH, note="sweep: 100.0 out tok/s"),
             TodoItem(2, "Try 32", TodoStatus.IN_PROGRESS),
             TodoItem(3, "Old idea", TodoStatus.CANCELLED, Priority.LOW),
             TodoItem(4, "Wait", raw_status="blocked")]
    assert to_todowrite(items)["todos"][3] == {"content": "Wait", "status": "blocked", "priority": "medium"}
    assert [t["status"] for t in to_todowrite(items)["todos"]] == ["completed", "in_progress", "cancelled", "blocked"]
    md = to_markdown(items, "Todo — qwen")
    assert md.splitlines() == [
        "# Todo — qwen", "",
        "- [x] **high** Baseline", "  - sweep: 100.0 out tok/s",
        "- [ ] *(in progress)* Try 32",
        "- [-] (low) ~~Old idea~~",
        "- [ ] *(blocked)* Wait"]
    # the todowrite export reads back as the same list
    again = parse_todo_json(json.dumps(to_todowrite(items)))
    assert [(t.content, t.status, t.raw_status) for t in again][3] == ("Wait", TodoStatus.PENDING, "blocked")


def test_experiment_spec_and_flag_edits():
    sets, unset = parse_flag_edits("--max-running-requests 32 --tp=2 --disable-cuda-graph !--chunked-prefill-size --x a b")
    assert sets == {"--max-running-requests": "32", "--tp": "2", "--disable-cuda-graph": None, "--x": ("a", "b")}
    assert unset == ["--chunked-prefill-size"]
    assert parse_flag_edits(format_flag_edits(sets, unset)) == (sets, unset)
    for bad in ("32", "--disable-cuda-graph 1", "'unclosed"):
        with pytest.raises(FlagError):
            parse_flag_edits(bad)
    spec = ExperimentSpec.from_dict({"server": "demo", "set": {"--max-running-requests": "32", "--e": []},
                                     "unset": ["--old"], "bench": "sweep, loadgen"})
    assert spec.bench == ("sweep", "loadgen") and spec.set["--e"] is None
    argv = ["python", "-m", "sglang.launch_server", "--old", "1", "--max-running-requests", "4"]
    assert spec.apply(argv) == ["python", "-m", "sglang.launch_server", "--max-running-requests", "32", "--e"]
    assert ExperimentSpec.from_dict(spec.to_dict()) == spec
    for bad, why in [({"set": {}}, "experiment.server"), ({"server": "s", "set": {"tp": "1"}}, "not a flag name"),
                     ({"server": "s", "set": {"--tp": 1}}, "experiment.set.--tp"), ({"server": "s", "base": "x"}, "experiment.base"),
                     ({"server": "s", "oops": 1}, "unknown field")]:
        with pytest.raises(ValueError, match=why):
            ExperimentSpec.from_dict(bad)


def test_result_line_against_baseline():
    base = BenchResult(output_throughput_tok_s=100.0, ttft_ms={"median": 50.0})
    new = BenchResult(output_throughput_tok_s=112.5, ttft_ms={"median": 45.0})
    assert result_line("sweep", [new], base, False) == "sweep: 112.5 out tok/s (+12.5% vs 100.0), TTFT p50 45.0 ms (base 50.0)"
    assert result_line("sweep", [base], base, True) == "sweep: 100.0 out tok/s (this is the baseline), TTFT p50 50.0 ms"
    assert "no baseline" in result_line("c", [new], None, False)
    # repeats: each figure the median of the runs' (the bench table's), not the TTFT of the run of median tok/s
    runs = [BenchResult(output_throughput_tok_s=v, ttft_ms={"median": t}) for v, t in ((600.0, 862.8), (620.0, 986.6), (640.0, 700.0))]
    assert result_line("sweep", runs, None, False) == "sweep: 620.0 out tok/s (no baseline), TTFT p50 862.8 ms (median of 3 runs)"


def test_fuzzy_matching_never_changes_numbers():
    existing = [item(1, "Try tp 4", upstream=up("Try tp 4"))]
    plan = plan_snapshot(existing, [agent("Try tp 8")])
    assert [a.content for a, _ in plan.adds] == ["Try tp 8"] and [r.id for r in plan.removes] == [1]


def test_claude_transcript_last_todowrite_call():
    def line(obj):
        return json.dumps(obj) + "\n"

    def todowrite(todos):
        return line({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "updating the plan"},
            {"type": "tool_use", "id": "toolu_1", "name": "TodoWrite", "input": {"todos": todos}}]}})

    text = (line({"type": "user", "message": {"role": "user", "content": "tune it"}})
            + todowrite([{"content": "A", "status": "in_progress", "activeForm": "Doing A"}])
            + line({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]}})
            + todowrite([{"content": "A", "status": "completed", "activeForm": "Doing A"},
                         {"content": "B", "status": "pending", "activeForm": "Doing B"}])
            + '{"type": "assistant", "message": {"con')  # the agent is writing the next line
    items = parse_claude_transcript(text, "s.jsonl")
    assert [(t.content, t.status.value) for t in items] == [("A", "completed"), ("B", "pending")]
    assert parse_claude_transcript(line({"type": "user"}), "s.jsonl") is None
    with pytest.raises(TodoFormatError, match=r"s.jsonl:2: invalid JSON line"):
        parse_claude_transcript(line({}) + "{oops\n" + line({}), "s.jsonl")
    with pytest.raises(TodoFormatError, match=r"s.jsonl:1: TodoWrite.input.todos\[0\].status: missing"):
        parse_claude_transcript(todowrite([{"content": "A"}]), "s.jsonl")


def test_demo_todos_carry_valid_experiments():
    from optui.demo.campaign import DEMO_TODOS

    specs = [ExperimentSpec.from_dict(e) for _, _, e in DEMO_TODOS if e]
    assert len(specs) == 4 and all(s.server == "demo" and s.bench == ("sweep",) for s in specs)


# ------------------------------------------------------------------ big and deep lists (issue 15)
class CountingText(str):
    """A str that adds up how many characters its ``count``/``find`` calls scan (the old
    parser counted newlines from the start of the file for every object: quadratic)."""

    scanned = 0

    def count(self, sub, start=0, end=None):
        CountingText.scanned += (len(self) if end is None else end) - (start or 0)
        return str.count(self, sub, start, end if end is not None else len(self))

    def find(self, sub, start=0, end=None):
        CountingText.scanned += (len(self) if end is None else end) - (start or 0)
        return str.find(self, sub, start, end if end is not None else len(self))


def big_list(n: int, bad_last: bool = False) -> str:
    items = [{"content": f"Try tensor parallel {i} with chunked prefill {i * 64}", "status": "pending"} for i in range(n)]
    if bad_last:
        items[-1]["status"] = 5
    return json.dumps({"todos": items}, indent=2)


@pytest.mark.parametrize("n", [6000, 24000])  # ~1 MB and ~4 MB
def test_parsing_is_linear_and_still_names_the_line(n):
    """An error in the last item of a 1 MB / 4 MB list: its line is found with a number of
    scanned characters proportional to the file (the old parser scanned ~n²/2)."""
    text = big_list(n, bad_last=True)
    CountingText.scanned = 0
    with pytest.raises(TodoFormatError) as err:
        parse_todo_json(CountingText(text), "plan.json")
    line = text.count("\n", 0, text.rindex('"status": 5')) + 1
    assert str(err.value) == f"plan.json:{line - 2}: todos[{n - 1}].status: expected a string, got 5"
    assert CountingText.scanned <= 2 * len(text)
    assert len(parse_todo_json(big_list(n))) == n


def test_line_index_is_a_bisect():
    from optui.core.todo.formats import LineIndex

    text = "a\nbb\n\nccc"
    index = LineIndex(text)
    assert [index.line(i) for i in range(len(text))] == [1, 1, 2, 2, 2, 3, 4, 4, 4]
    assert [text.count("\n", 0, i) + 1 for i in range(len(text))] == [index.line(i) for i in range(len(text))]
    assert index.column(text.index("ccc") + 1) == 2


@pytest.mark.parametrize("levels", [600, 100_000])
def test_deep_nesting_is_refused_with_line_and_limit(levels):
    MAX_DEPTH = 64  # noqa: N806 - the documented limit (core.todo_formats.MAX_DEPTH)
    text = '{"todos": [\n{"content": "a", "status": "pending",\n "x": ' + "[" * levels + "]" * levels + "}]}"
    with pytest.raises(TodoFormatError) as err:
        parse_todo_json(text, "plan.json")
    assert str(err.value) == f"plan.json:3: nested deeper than {MAX_DEPTH} levels (column {7 + MAX_DEPTH - 3})"  # the 65th bracket
    # a transcript line past the limit: one the C decoder reads (100 levels), one it may refuse
    # itself (5,000: a RecursionError on Python 3.11, read whole by 3.12's)
    for deep in (100, 5000):
        deep_line = json.dumps({"message": {"content": [{"type": "tool_use"}]}, "x": "[" * 10}) + "\n" + "[" * deep + "]" * deep + "\n"
        with pytest.raises(TodoFormatError, match=rf"t.jsonl:2: nested deeper than {MAX_DEPTH} levels"):
            parse_claude_transcript(deep_line, "t.jsonl")


def test_size_and_item_limits(monkeypatch):
    import optui.core.todo.formats as tf

    monkeypatch.setattr(tf, "MAX_ITEMS", 10)
    with pytest.raises(TodoFormatError, match=r"^plan.json: todos: 11 items \(limit 10; not a todo list\?\)$"):
        parse_todo_json(big_list(11), "plan.json")
    monkeypatch.setattr(tf, "MAX_CHARS", 1000)
    with pytest.raises(TodoFormatError, match=r"^plan.json: file too large: 2,\d{3} characters \(limit 1,000"):
        parse_todo_json(big_list(20), "plan.json")


def test_a_rewritten_big_list_costs_bounded_similarity_work(monkeypatch):
    """300 items the agent reworded, none with numbers: comparing every pair was 90,000
    SequenceMatcher ratios; the similarity pass stops at its budget."""
    import optui.core.todo.merge as tm

    made = []

    class Counting(tm.SequenceMatcher):
        def __init__(self, *a, **kw):
            made.append(1)
            super().__init__(*a, **kw)

    monkeypatch.setattr(tm, "SequenceMatcher", Counting)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta"]
    old = [item(i + 1, f"check {words[i % 8]} {words[i // 8 % 8]} {words[i // 64 % 8]} path",
                upstream=up(f"check {words[i % 8]} {words[i // 8 % 8]} {words[i // 64 % 8]} path")) for i in range(300)]
    new = [agent(f"verify {w} logs") for w in (f"{a}{b}" for a in words for b in words * 5)][:300]
    plan = tm.plan_snapshot(old, new)
    assert len(made) <= tm.FUZZY_BUDGET
    assert len(plan.adds) + len(plan.updates) + plan.unchanged == 300
