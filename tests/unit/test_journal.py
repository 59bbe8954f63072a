"""The SQLite journal: events, todos with history, results, last good flags, sharing."""

import math

from optui.adapters.journal import Journal
from optui.core.bench.result import BenchResult, Workload
from optui.core.todo.items import TodoStatus


def test_events_roundtrip_and_filters(tmp_path):
    j = Journal(tmp_path / "j.db")
    a = j.append("server.state", "qwen", {"old": "down", "new": "starting"}, actor="tui")
    j.append("note", None, {"text": "hello", "x": math.inf})
    assert [e.seq for e in j.events()] == [a.seq, a.seq + 1]
    assert j.events(types=["note"])[0].data == {"text": "hello", "x": "inf"}
    assert j.events(target="qwen")[0].actor == "tui"
    assert j.events(newest_first=True, limit=1)[0].type == "note"


def test_todo_history_and_conflict_flag(tmp_path):
    j = Journal(tmp_path / "j.db")
    item = j.add_todo("try tp 8", priority="high")
    other = Journal(tmp_path / "j.db")  # a second optui window
    other.update_todo(item.id, status="in_progress")
    # this window still shows the old item and edits the same field
    after = j.update_todo(item.id, expected=item, status="completed")
    assert after.status is TodoStatus.COMPLETED
    last = j.events(types=["todo.changed"])[-1]
    assert last.data["conflict"]["status"] == {"theirs": "in_progress", "seen": "pending"}
    assert last.data["before"]["status"] == "in_progress"
    j.delete_todo(item.id)
    assert j.todos() == []
    j.restore_todo(item.id)
    assert [t.content for t in j.todos()] == ["try tp 8"]


def test_other_connection_changes_are_noticed(tmp_path):
    j1, j2 = Journal(tmp_path / "j.db"), Journal(tmp_path / "j.db")
    assert not j1.changed()
    j2.append("note", None, {"text": "x"})
    assert j1.changed() and not j1.changed()


def test_results_baseline_and_last_good(tmp_path):
    j = Journal(tmp_path / "j.db")
    wl = Workload(tool="sglang", input_len=128, output_len=128, num_prompts=64, max_concurrency=4, request_rate=math.inf)
    first = j.add_result(BenchResult(tool="sglang", output_throughput_tok_s=100.0, workload=wl), server="s", bench="c4")
    second = j.add_result(BenchResult(tool="sglang", output_throughput_tok_s=120.0, workload=wl), server="s", bench="c4")
    assert j.baseline_for(wl.key()).id == first
    j.set_baseline(second)
    assert j.baseline_for(wl.key()).result.output_throughput_tok_s == 120.0
    assert j.results()[0].result.workload.request_rate == math.inf
    j.set_last_good("s", ["python", "-m", "x", "--a", "1"])
    assert j.last_good("s") == ["python", "-m", "x", "--a", "1"]
    assert j.integrity_ok()
