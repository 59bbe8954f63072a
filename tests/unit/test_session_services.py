"""The session's services stand on their own: each is built from the narrow things it
uses (a JournalWriter over a real SQLite journal, a change callback, a config value, a
server lookup), with no Session, and writes what it did to that journal."""

from __future__ import annotations

import pytest

from optui.adapters.journal import Journal, JournalError
from optui.config import Config, TodoConfig
from optui.core.bench.result import BenchResult, Workload
from optui.core.todo.items import TodoStatus
from optui.session.bench.service import BenchService, import_results
from optui.session.errors import SessionError
from optui.session.journal.writer import JournalWriter
from optui.session.todo.runs import TodoRunQueue
from optui.session.todo.service import TodoService
from optui.session.todo.sync import TodoFollowService


class Recorder:
    """The session side of a JournalWriter, as a test sees it: what was recorded, failed,
    refreshed, and whether writes are allowed."""

    def __init__(self, journal: Journal, *, read_only: bool = False) -> None:
        self.journal, self.read_only = journal, read_only
        self.failures: list[str] = []
        self.refreshes = 0
        self.changes = 0

    def writer(self, actor: str = "test") -> JournalWriter:
        def record(type, target, data, *, experiment=None):
            try:
                self.journal.append(type, target, data, actor=actor, experiment=experiment)
            except JournalError as exc:
                self.failures.append(str(exc))
            self.refreshes += 1

        def check_writable(what: str) -> None:
            if self.read_only:
                raise SessionError(f"read-only mode: {what} is disabled")

        def refresh() -> None:
            self.refreshes += 1

        return JournalWriter(self.journal, actor, record=record, failed=lambda exc: self.failures.append(str(exc)),
                             refresh=refresh, check_writable=check_writable)

    def touch(self) -> None:
        self.changes += 1


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "optui.db")
    yield j
    j.close()


def result(tok_s: float) -> BenchResult:
    return BenchResult(tool="sglang", workload=Workload(num_prompts=8, max_concurrency=4), output_throughput_tok_s=tok_s)


def test_todo_service_writes_through_the_journal_writer_alone(journal):
    side = Recorder(journal)
    todos = TodoService(side.writer(actor="agent:x"), TodoConfig(max_in_progress=1), items=lambda: tuple(journal.todos()))
    a = todos.add("try chunked prefill 4096")
    b = todos.add("try cuda graphs off")
    todos.cycle(a)
    _, warning = todos.cycle(journal.todo(b.id))
    assert warning == "2 items are in progress (set [todo] max_in_progress to change this warning)"
    todos.delete(journal.todo(a.id))
    assert [t.id for t in todos.items] == [b.id]
    assert todos.undo_delete().id == a.id
    assert {e.actor for e in todos.history(a)} == {"agent:x"} and side.refreshes == 6 and not side.failures


def test_a_write_the_journal_refuses_is_shown_and_raised_as_a_session_error(tmp_path, journal):
    journal.add_todo("made while writable")
    ro = Journal(tmp_path / "optui.db", read_only=True)
    side = Recorder(ro)
    todos = TodoService(side.writer(), TodoConfig(), items=lambda: tuple(ro.todos()))
    with pytest.raises(SessionError):
        todos.add("cannot be written")
    assert len(side.failures) == 1 and side.refreshes == 0
    ro.close()


def test_bench_service_pins_a_baseline_from_the_journal_without_a_session(journal):
    side = Recorder(journal)
    ids = import_results(journal, [result(100.0), result(120.0)], source="a.jsonl", server="s", bench="b")

    def no_server(name):
        raise SessionError(f"unknown server {name!r}")

    benches = BenchService(side.writer(), Config(), server=no_server, shell=lambda host: None, on_change=side.touch,
                           on_command=lambda *a: None, ensure_experiment=lambda server: None)
    benches.pin_baseline(ids[1])
    assert benches.baseline_for(result(1.0)).id == ids[1]
    [pinned] = journal.events(types=["bench.baseline"])
    assert pinned.data["result_id"] == ids[1] and pinned.actor == "test" and side.changes == 1
    with pytest.raises(SessionError, match="unknown benchmark 'nope'"):
        benches.run("nope")


def test_read_only_refuses_following_and_todo_runs_recover_nothing(journal):
    side = Recorder(journal, read_only=True)
    writer = side.writer()
    follow = TodoFollowService(writer, TodoConfig(), on_change=side.touch)
    with pytest.raises(SessionError, match="following an agent's todo list is disabled"):
        follow.follow("claude:/nonexistent.json")
    todos = TodoService(writer, TodoConfig(), items=lambda: tuple(journal.todos()))
    item = journal.add_todo("was running in a dead process")
    journal.update_todo(item.id, actor="test", meta={"experiment_run": {"id": "todo-1.1", "status": "running", "pid": -1}})
    runs = TodoRunQueue(writer, Config(), server=lambda name: None, todos=todos, benches=None, restart=None,
                        current_experiment=lambda server: None, on_change=side.touch)
    assert runs.recover() == 0 and journal.todo(item.id).run["status"] == "running"
    side.read_only = False
    assert runs.recover() == 1
    assert journal.todo(item.id).run["status"] == "interrupted" and journal.todo(item.id).status is TodoStatus.PENDING
    [finished] = journal.events(types=["todo.run.finished"])
    assert finished.target == f"todo:{item.id}" and finished.data["status"] == "interrupted"
