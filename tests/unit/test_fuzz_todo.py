"""Property-based bad input for the todo importers (hypothesis): agents' lists (todowrite /
Claude / opencode JSON, Claude transcripts, opencode SQLite rows), follow specs, the
experiment attached to an item and the editor's flag line. No exception escapes except the
documented error type, and its message names the file (and line/field where there is one).
200 examples each by default, 10,000 with OPTUI_SLOW=1 (like tests/unit/test_fuzz_inputs.py)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optui.core.flags.argv import FlagError
from optui.core.todo.experiment import ExperimentSpec, parse_flag_edits
from optui.core.todo.formats import (
    AgentTodo,
    TodoFormatError,
    parse_claude_transcript,
    parse_follow_spec,
    parse_todo_json,
    todos_from_rows,
)
from optui.core.todo.items import Priority, TodoStatus
from optui.core.todo.merge import plan_snapshot

SLOW = os.environ.get("OPTUI_SLOW") == "1"
FUZZ = settings(max_examples=10_000 if SLOW else 200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.timeout(1200 if SLOW else 120)

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=20))
json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                           max_leaves=12)
statuses = st.sampled_from(["pending", "in_progress", "completed", "cancelled", "blocked", "", "DONE"])
todo_objects = st.fixed_dictionaries({}, optional={
    "content": st.one_of(st.text(max_size=30), json_values), "status": st.one_of(statuses, json_values),
    "priority": st.one_of(st.sampled_from(["high", "medium", "low", "urgent"]), json_values),
    "activeForm": st.one_of(st.text(max_size=20), json_values), "id": json_values})
documents = st.one_of(st.lists(todo_objects, max_size=6), st.fixed_dictionaries({"todos": st.lists(todo_objects, max_size=6)}),
                      json_values)


def texts_of(doc) -> st.SearchStrategy[str]:
    text = json.dumps(doc)
    return st.sampled_from([text, text[: len(text) // 2], text + "]", "\ufeff" + text, text.replace('"', "'", 1)])


def check_items(items: list[AgentTodo]) -> None:
    for item in items:
        assert item.content and item.content == item.content.strip()
        assert isinstance(item.status, TodoStatus) and isinstance(item.priority, Priority)


@FUZZ
@given(documents.flatmap(texts_of) | st.text(max_size=200))
def test_todo_json_raises_only_todo_format_error_naming_the_file(text):
    try:
        items = parse_todo_json(text, "todos.json")
    except TodoFormatError as exc:
        assert str(exc).startswith("todos.json") and exc.problem
        return
    check_items(items)
    plan = plan_snapshot((), items)  # what an import would apply to an empty list
    assert len(plan.adds) == len(items)


def transcript_line(doc) -> str:
    return json.dumps({"type": "assistant", "message": {"content": [
        {"type": "text", "text": "x"}, {"type": "tool_use", "name": "TodoWrite", "input": doc}]}})


@FUZZ
@given(st.lists(st.one_of(documents.map(transcript_line), json_values.map(json.dumps), st.text(max_size=40)), max_size=6),
       st.booleans())
def test_claude_transcript_raises_only_todo_format_error_with_the_line(lines, trailing_newline):
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    try:
        items = parse_claude_transcript(text, "s.jsonl")
    except TodoFormatError as exc:
        assert str(exc).startswith("s.jsonl:") and exc.line is not None
        return
    assert items is None or all(isinstance(i, AgentTodo) for i in items)
    check_items(items or [])


cells = st.one_of(st.none(), st.text(max_size=20), st.integers(), st.floats(), st.binary(max_size=8))


@FUZZ
@given(st.lists(st.tuples(cells, cells, cells, cells), max_size=6))
def test_opencode_rows_raise_only_todo_format_error_naming_the_field(rows):
    try:
        items = todos_from_rows(rows, "opencode.db")
    except TodoFormatError as exc:
        assert str(exc).startswith("opencode.db: todo position ") and exc.where
        return
    check_items(items)


@FUZZ
@given(st.one_of(st.text(max_size=60), st.sampled_from(["claude:", "opencode:x.db#ses_1", "todowrite:a.json#s", "bogus:x", ""])))
def test_follow_spec_raises_only_value_error_with_a_message(text):
    try:
        spec = parse_follow_spec(text)
    except ValueError as exc:
        assert str(exc)
        return
    assert spec.kind in ("claude", "opencode", "todowrite", "auto")


@FUZZ
@given(json_values | st.fixed_dictionaries({"server": json_values}, optional={
    "set": json_values | st.dictionaries(st.text(max_size=10), json_values, max_size=3), "unset": json_values,
    "bench": json_values, "base": json_values, "preset": json_values}))
def test_experiment_spec_raises_only_value_error_naming_the_field(data):
    try:
        spec = ExperimentSpec.from_dict(data)
    except ValueError as exc:
        assert str(exc).startswith("experiment")
        return
    assert spec.server and all(name.startswith("-") for name in spec.set)


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(["--tp", "2", "!--x", "--a=b", "'q", '"', "\\", "--", "-", "x y"]), st.text(max_size=8)),
                max_size=8).map(" ".join))
def test_flag_line_raises_only_flag_error(text):
    try:
        sets, unset = parse_flag_edits(text)
    except FlagError as exc:
        assert str(exc)
        return
    assert all(name.startswith("-") for name in [*sets, *unset])
