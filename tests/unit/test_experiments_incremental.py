"""The experiments view's queries off the event loop and incremental: the journal thread,
the experiment feed (only new events and results are read, only touched rows rebuilt) and
the text filter scanned in bounded windows — each giving what the one-shot query gives."""

import asyncio
import threading

import pytest

from optui.adapters import journal_thread
from optui.adapters.journal import Journal
from optui.adapters.journal_thread import ExperimentFeed, JournalThread
from optui.core.bench.result import BenchResult, Workload
from optui.core.journal.events import EventFilter
from optui.core.journal.experiments import experiment_start
from optui.session.journal.export import load_experiments

ARGV = ["serve", "--model", "m", "--tp", "1"]
WORKLOADS = [Workload("sglang", "random", 256, 96, 64, c, float("inf")) for c in (1, 16)]


def one_experiment(j: Journal, k: int) -> str:
    """Experiment ``k`` of a campaign over two servers: some fail, some stay unsettled
    (ready only through a state change), most are benchmarked 1-3 times; some results carry
    no experiment id (journals from before experiments)."""
    server = ("qwen", "llama")[k % 2]
    argv = ARGV + ["--max-running-requests", str(16 + k % 4)]  # flag sets repeat: restart spreads
    exp = j.new_experiment(server, experiment_start(ARGV, argv, "sweep"), actor="agent").experiment
    j.append("server.starting", server, {"argv": argv}, experiment=exp)
    if k % 5 == 3:
        j.append("server.failed", server, {"class": "oom", "lines": ["CUDA out of memory"]}, experiment=exp)
        return exp
    if k % 6 == 4:
        j.append("server.state", server, {"old": "starting", "new": "ready"}, experiment=exp)
    else:
        j.append("server.ready", server, {"ready_s": 10.0 + k, "argv": argv}, experiment=exp)
    for r in range(1 + k % 3):
        wl = WORKLOADS[(k + r) % 2]
        j.add_result(BenchResult(tool="sglang", output_throughput_tok_s=1000.0 + 7 * k + r, workload=wl),
                     server=server, bench="c16", experiment=None if k % 7 == 6 else exp)
        j.append("bench.finished", server, {"bench": "c16", "status": "ok"}, experiment=exp)
    j.append("note", server, {"text": f"observation {k}"}, experiment=exp)
    return exp


def test_the_feed_follows_the_journal_and_equals_a_full_load(tmp_path):
    j = Journal(tmp_path / "j.db")
    feed = ExperimentFeed()
    assert feed.refresh(j).experiments == ()
    ids = []
    for k in range(24):
        ids.append(one_experiment(j, k))
        if k == 9:  # a pin moves without a new result
            j.set_baseline(j.results(server="llama", limit=None)[-1].id)
        if k % 4 == 0:
            j.append("verdict", ("qwen", "llama")[k % 2], {"decision": "keep"}, experiment=ids[k // 2])
        update = feed.refresh(j)
        assert list(update.experiments) == load_experiments(j)
        assert update.last_seq == j.last_seq()
        assert ids[-1] in update.changed
    assert {x.verdict for x in update.experiments} >= {"baseline", "failed", "untested noise"}


def test_a_note_rebuilds_only_its_experiment(tmp_path):
    j = Journal(tmp_path / "j.db")
    for k in range(12):
        one_experiment(j, k)
    feed = ExperimentFeed()
    before = feed.refresh(j)
    assert before.changed == {x.id for x in before.experiments}  # the first load: every row
    target = before.experiments[4]
    j.append("note", target.server, {"text": "looked again"}, experiment=target.id)
    j.append("server.state", "qwen", {"old": "ready", "new": "degraded"})  # no experiment: touches nothing
    after = feed.refresh(j)
    assert after.changed == {target.id}
    assert list(after.experiments) == load_experiments(j)
    for old, new in zip(before.experiments, after.experiments, strict=True):
        assert (new is old) == (new.id != target.id)  # the other rows are the very same objects
    assert feed.refresh(j).changed == frozenset()  # nothing new: nothing rebuilt


@pytest.mark.parametrize("limit", [None, 3, 500])
def test_the_text_filter_in_windows_finds_what_one_scan_finds(tmp_path, monkeypatch, limit):
    monkeypatch.setattr(journal_thread, "TEXT_SCAN_WINDOW", 7)  # many windows over a small journal
    j = Journal(tmp_path / "j.db")
    for k in range(20):
        one_experiment(j, k)
    thread = JournalThread(j)

    async def both(flt, since_seq=0):
        return await thread.query(flt, since_seq=since_seq, limit=limit), j.query(flt, since_seq=since_seq, limit=limit)

    for flt, since in [(EventFilter(text="observation 1"), 0), (EventFilter(text="OBSERVATION"), 0),
                       (EventFilter(text="observation", target="qwen"), 40), (EventFilter(text="no such text"), 0),
                       (EventFilter(types=frozenset({"note"})), 0)]:
        windowed, single = asyncio.run(both(flt, since))
        assert [e.seq for e in windowed] == [e.seq for e in single]
    thread.close()


def test_journal_calls_run_on_the_journal_thread_not_the_loop(tmp_path):
    j = Journal(tmp_path / "j.db")
    thread = JournalThread(j)

    async def main():
        loop_thread = threading.current_thread()
        seen = await thread.run(lambda journal: (threading.current_thread().name, journal is j))
        event = await thread.append("note", None, {"text": "from the loop"}, actor="tui")
        return loop_thread.name, seen, event

    loop_name, seen, event = asyncio.run(main())
    assert seen == ("optui-journal", True) and loop_name != "optui-journal"
    assert j.events(types=["note"])[-1].seq == event.seq
    thread.close()
