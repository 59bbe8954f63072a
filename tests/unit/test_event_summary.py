"""The one-line timeline text of journal events (journal panel, ``optui journal tail``)."""

from __future__ import annotations

from optui.core.journal import events as ev
from optui.core.journal.events import Event


def line(type_: str, data: dict) -> str:
    return Event(seq=1, ts=0.0, type=type_, target="demo", data=data).summary()


def test_server_state_shows_the_phase_only_while_starting():
    assert line(ev.SERVER_STATE, {"old": "down", "new": "starting", "phase": "loading_weights"}) == "down → starting (loading_weights)"
    # the phase of the last start says nothing about a stop
    assert line(ev.SERVER_STATE, {"old": "stopping", "new": "down", "phase": "ready"}) == "stopping → down"


def test_todo_change_keeps_the_whole_text_and_says_what_moved():
    long = "Try --chunked-prefill-size 4096 with --max-running-requests 64 and pin it as the new baseline if better"
    text = line(ev.TODO_CHANGED, {"op": "status", "before": {"content": long, "status": "pending", "priority": "high"},
                                  "after": {"content": long, "status": "in_progress", "priority": "high"}})
    assert text == f"status: {long} (status pending → in_progress)"
    assert line(ev.TODO_CHANGED, {"op": "add", "after": {"content": "x", "status": "pending"}}) == "add: x"


def test_an_autostart_says_it_runs_the_configured_flags():
    """Issue 20: the demo's second start (after a session that ran --max-running-requests 32)
    read 'exp-0003 on demo: same flags (autostart)' while it went back to the configured 4."""
    assert line(ev.EXPERIMENT_STARTED, {"reason": "autostart", "diff": []}) == "None on demo: the configured flags (autostart)"
    assert line(ev.EXPERIMENT_STARTED, {"reason": "r", "diff": []}) == "None on demo: same flags (r)"  # a restart as it ran


def test_baseline_pin_and_alerts_read_as_sentences():
    assert line(ev.BENCH_BASELINE, {"result_id": 2, "bench": "sweep", "workload": "8af096e88750", "concurrency": 16,
                                    "output_throughput_tok_s": 677.94}) == \
        "baseline pinned: bench sweep c=16, 677.9 out tok/s (result #2)"
    assert line(ev.BENCH_BASELINE, {"result_id": 7}) == "baseline pinned: bench ? (result #7)"  # older events
    assert line(ev.BENCH_BASELINE, {"result_id": 3, "bench": "sweep", "output_throughput_tok_s": 669.66, "runs": 3}) == \
        "baseline pinned: bench sweep, 669.7 out tok/s (median of 3 runs) (result #3)"
    assert line(ev.ALERT, {"kind": "crashed", "message": "demo crashed (bad_flag)"}) == "demo crashed (bad_flag)"
    assert line(ev.ALERT, {"kind": "hung", "message": "no tokens for 30 s"}) == "hung: no tokens for 30 s"


def test_a_benchmark_of_several_runs_has_numbers_in_its_journal_line():
    """The CLI's `bench run` (3 repeats) journaled `bench sweep ok` with no numbers, where a
    single run's line reads `…, 1600.2 out tok/s, TTFT p50 15.2 ms`."""
    from optui.core.journal.events import Event

    runs = [{"output_throughput_tok_s": v, "ttft_ms": {"median": t}} for v, t in ((1500.0, 16.0), (1650.0, 15.0), (1600.2, 15.2))]
    e = Event(1, 0.0, "bench.finished", "demo", "cli", None, {"bench": "sweep", "status": "ok", "results": runs})
    assert e.summary() == "bench sweep ok, median of 3 runs, 1600.2 out tok/s, TTFT p50 15.2 ms"


def test_a_benchmark_of_several_runs_journals_each_figure_as_the_median_of_its_runs():
    """The journal's line of 3 repeats gave the TTFT p50 of the run of median out tok/s
    (986.6 ms) where the bench table gave the median of the 3 runs' TTFT p50 (862.8 ms)."""
    from optui.core.journal.events import Event

    runs = [{"output_throughput_tok_s": v, "ttft_ms": {"median": t}} for v, t in ((600.0, 862.8), (620.0, 986.6), (640.0, 700.0))]
    failed = {"output_throughput_tok_s": 10.0, "ttft_ms": {"median": 1.0}, "status": "failed"}
    e = Event(1, 0.0, "bench.finished", "demo", "cli", None, {"bench": "sweep", "status": "ok", "results": [*runs, failed]})
    assert e.summary() == "bench sweep ok, median of 3 of 4 runs, 620.0 out tok/s, TTFT p50 862.8 ms"
