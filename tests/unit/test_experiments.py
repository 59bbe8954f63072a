"""Experiments from a real journal: ids, baseline, deltas, verdicts, best configuration,
sorting; the journal's filtered queries agree with EventFilter; event details."""

from __future__ import annotations

import time

import pytest

from optui.adapters.journal import Journal
from optui.core.flags.abbrev import fit_flag_column
from optui.core.journal import events as ev
from optui.core.journal.event_details import event_sections, experiment_sections, render_text
from optui.core.journal.events import EventFilter, parse_since
from optui.core.journal.experiments import (
    best_experiment,
    build_experiments,
    crash_summary,
    rollback_warning,
    runs_text,
    sort_experiments,
    verdict_evidence,
)
from optui.session.journal.export import load_experiments
from tests.helpers.campaign import WL, CampaignWriter, flags, result, standard_campaign


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "optui.db")
    yield j
    j.close()


def by_id(experiments):
    return {x.id: x for x in experiments}


def test_ids_baseline_deltas_and_verdicts(journal):
    ids = standard_campaign(journal)
    assert list(ids.values()) == ["exp-0001", "exp-0002", "exp-0003", "exp-0004", "exp-0005"]
    xs = by_id(load_experiments(journal))
    base, big, oom, chunk, radix = (xs[ids[k]] for k in ("base", "big", "oom", "chunk", "radix"))
    assert base.is_baseline and base.verdict == "baseline" and base.baseline_id == "exp-0001"
    assert big.verdict == "better" and big.diff_vs_baseline == ("~ --max-running-requests: 16 → 64",)
    d = big.primary_delta
    assert d.base == pytest.approx(1005.0) and d.value == pytest.approx(1295.0)
    assert d.rel_pct == pytest.approx(100 * 290 / 1005)
    assert big.metric("ttft_ms.median").good is True  # lower TTFT is better
    assert big.notes[0][1] == "64 looks better; check p99 TTFT" and big.ready_s == 31.5
    assert big.phases[-1] == ("ready", 31.5) and big.server_version == "0.5.23"
    assert oom.verdict == "failed" and oom.crash_class == "oom" and oom.rolled_back
    assert "+ --mem-fraction-static 0.99" in oom.diff_vs_baseline
    assert oom.diff_prev == ("+ --mem-fraction-static 0.99",)
    assert chunk.verdict == "worse" and chunk.actor == "cli"
    assert chunk.primary_delta.rel_pct == pytest.approx(100 * (900 - 1005) / 1005)
    assert radix.verdict == "untested" and radix.actor == "agent:claude"


def test_the_flag_changed_from_the_previous_configuration_is_never_folded(journal):
    """exp-0004 set --mem-fraction-static 0.99 on top of --max-running-requests 64 and
    failed: its row read ``--max-running-requests 64 +1 failed: oom`` (issue 34), the cause folded."""
    ids = standard_campaign(journal)
    oom = by_id(load_experiments(journal))[ids["oom"]]
    assert oom.changed_flags == ("--mem-fraction-static 0.99", "--max-running-requests 64")
    assert oom.diff_vs_baseline[0] == "+ --mem-fraction-static 0.99"
    for width in range(13, 80):  # any width: abbreviated, the other flag counted, never this one
        text = fit_flag_column([oom.changed_flags], width)[0]
        assert "0.99" in text and text.startswith(("--mem-fraction-static", "--mem-fra-sta", "--mfs")), (width, text)


def test_a_bad_flag_failure_shows_the_refused_flag_first(journal):
    """Two flags changed at once and the server refused one: the row read ``--cps 4096 +1``,
    the refused ``--no-such-flag`` folded (the walk of issue 34)."""
    w = CampaignWriter(journal)
    w.restart(flags(), reason="autostart")
    exp = w.restart(flags(chunked_prefill_size=4096, no_such_flag="1"), ready_s=None)
    journal.append(ev.SERVER_FAILED, "qwen", {"class": "bad_flag", "returncode": 2, "lines": [
        "usage: launch_server.py [-h] ...", "launch_server.py: error: unrecognized arguments: --no-such-flag 1"]},
        experiment=exp, ts=w.tick(1))
    x = by_id(load_experiments(journal))[exp]
    assert x.crash_class == "bad_flag" and x.changed_flags[0] == "--no-such-flag 1", x.changed_flags
    assert fit_flag_column([x.changed_flags], 16)[0].startswith("--nsf 1"), fit_flag_column([x.changed_flags], 16)


def test_a_rollback_to_flags_that_measured_worse_or_were_rejected_warns(journal):
    """The rollback offered as "last good" a configuration just measured worse -50 % with no
    warning (issue 34): last good is the last that became ready, not the last that measured well."""
    ids = standard_campaign(journal)
    xs = load_experiments(journal)
    by = by_id(xs)
    chunk = by[ids["chunk"]]
    warning = rollback_warning(xs, "qwen", chunk.argv)
    assert warning is not None and warning.startswith(f"{chunk.id} ran these flags and measured worse")
    assert "-10.4 % out tok/s vs exp-0001" in warning
    assert rollback_warning(xs, "qwen", by[ids["big"]].argv) is None      # better
    assert rollback_warning(xs, "qwen", by[ids["base"]].argv) is None     # the baseline
    assert rollback_warning(xs, "qwen", by[ids["radix"]].argv) is None    # never measured
    assert rollback_warning(xs, "qwen", by[ids["oom"]].argv) is None      # failed: not a last good anyway
    assert rollback_warning(xs, "other", chunk.argv) is None              # another server's
    journal.append(ev.VERDICT, "qwen", {"decision": "reject", "reason": "p99 too high"}, experiment=ids["big"])
    rejected = rollback_warning(load_experiments(journal), "qwen", by[ids["big"]].argv)
    assert rejected == f"{ids['big']} ran these flags and was rejected (p99 too high)"


def test_a_rollback_warning_follows_the_flags_not_one_experiment(journal):
    """Issue 34: rolled back once to flags that measured worse (a start that measured
    nothing), the next crash's rollback to the same flags said nothing."""
    ids = standard_campaign(journal)
    w = CampaignWriter(journal)
    w.t, w.argv = w.t + 10_000, flags(max_running_requests=64, disable_radix_cache=True)
    chunk = flags(max_running_requests=64, chunked_prefill_size=512)
    again = w.restart(chunk, reason="rollback")  # the same flags again, measured nothing
    w.restart(flags(max_running_requests=64, chunked_prefill_size=512, mem_fraction_static=0.99), crash="oom")
    xs = load_experiments(journal)
    assert by_id(xs)[again].verdict != "worse"
    warning = rollback_warning(xs, "qwen", chunk)
    assert warning is not None and warning.startswith(f"{ids['chunk']} ran these flags and measured worse"), warning
    # the same configuration in another order is the same flags
    reordered = chunk[:3] + ["--chunked-prefill-size", "512"] + [a for a in chunk[3:] if a not in ("--chunked-prefill-size", "512")]
    assert rollback_warning(xs, "qwen", reordered) == warning


def test_noise_threshold_uses_the_runs_spread(journal):
    w = CampaignWriter(journal)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1100.0), result(900.0))  # CV 10 %
    small = w.restart(flags(max_running_requests=20))
    w.bench(small, result(1050.0), result(1040.0), result(1060.0))  # +5 %: inside the baseline's runs
    big = w.restart(flags(max_running_requests=64))
    w.bench(big, result(1300.0), result(1310.0), result(1290.0))  # +30 %: clear of every baseline run
    one = w.restart(flags(max_running_requests=128))
    w.bench(one, result(2600.0))  # +160 % from a single run: the noise is unknown
    xs = by_id(load_experiments(journal))
    assert xs[small].verdict == "same" and xs[small].primary.cv_pct == pytest.approx(10.0)
    j = xs[small].primary.judgement
    assert (j.n, j.base_n, j.p) == (3, 3, pytest.approx(0.7)) and xs[small].primary.base_experiment == base
    assert xs[big].verdict == "better" and xs[big].primary.judgement.evidence() == "n=3 vs 3, ±0.8 % / ±10.0 %, p=0.10"
    assert xs[one].verdict == "untested noise" and xs[one].primary.judgement.evidence().startswith("n=1 vs 3")
    assert best_experiment(list(xs.values()), "qwen").id == big  # never the +160 % single run


def test_pinned_baseline_moves_the_reference(journal):
    w = CampaignWriter(journal)
    first = w.restart(flags(), reason="autostart")
    w.bench(first, result(1000.0), result(1001.0), result(999.0))
    second = w.restart(flags(max_running_requests=64))
    pinned, *_ = w.bench(second, result(1300.0), result(1301.0), result(1299.0))
    journal.set_baseline(pinned)
    xs = by_id(load_experiments(journal))
    assert xs[second].is_baseline and xs[first].verdict == "worse"
    assert xs[first].primary_delta.base == pytest.approx(1300.0)


def test_results_without_experiment_are_assigned_by_time(journal):
    """Journals from before experiments existed: results land in the experiment that was
    current on their server at their time."""
    w = CampaignWriter(journal)
    a = w.restart(flags(), reason="autostart")
    for v in (1000.0, 1001.0, 999.0):
        journal.add_result(result(v), server="qwen", bench="c16", ts=w.tick(10))
    b = w.restart(flags(max_running_requests=64))
    for v in (1200.0, 1201.0, 1199.0):
        journal.add_result(result(v), server="qwen", bench="c16", ts=w.tick(10))
    xs = by_id(load_experiments(journal))
    assert [len(x.primary.runs) for x in (xs[a], xs[b])] == [3, 3]
    assert xs[b].verdict == "better"


def test_best_configuration_skips_failed_and_rejected(journal):
    ids = standard_campaign(journal)
    xs = load_experiments(journal)
    assert best_experiment(xs, "qwen").id == ids["big"]
    journal.append(ev.VERDICT, "qwen", {"decision": "reject", "reason": "p99 too high"}, experiment=ids["big"])
    xs = load_experiments(journal)
    assert by_id(xs)[ids["big"]].decision == "reject"
    assert best_experiment(xs, "qwen").id == ids["base"]  # nothing else beat it
    assert best_experiment(xs, "other") is None


def test_ready_without_gate_counts_from_state_events(journal):
    """``restart --no-wait`` journals no server.ready; the state change to ready decides."""
    w = CampaignWriter(journal)
    exp = w.restart(flags(), ready_s=None)
    assert by_id(load_experiments(journal))[exp].outcome == "incomplete"
    journal.append(ev.SERVER_STATE, "qwen", {"old": "warming", "new": "ready"}, experiment=exp)
    assert by_id(load_experiments(journal))[exp].outcome == "ready"


def test_sorting_keeps_rows_without_values_last(journal):
    ids = standard_campaign(journal)
    xs = load_experiments(journal)
    order = [x.id for x in sort_experiments(xs, "delta", reverse=True)]
    assert order[:3] == [ids["big"], ids["base"], ids["chunk"]]
    assert set(order[3:]) == {ids["oom"], ids["radix"]}
    assert [x.id for x in sort_experiments(xs, "delta")][:3] == [ids["chunk"], ids["base"], ids["big"]]
    assert sort_experiments(xs, "verdict")[0].verdict == "better"
    with pytest.raises(ValueError, match="unknown sort key"):
        sort_experiments(xs, "nope")


def test_build_is_pure_and_order_independent(journal):
    standard_campaign(journal)
    events, results = journal.events(), journal.results(limit=None)
    a = build_experiments(events, results)
    b = build_experiments(list(reversed(events)), list(reversed(results)))
    assert [(x.id, x.verdict, x.primary_delta and x.primary_delta.rel_pct) for x in a] == \
           [(x.id, x.verdict, x.primary_delta and x.primary_delta.rel_pct) for x in b]


@pytest.mark.parametrize("flt", [
    EventFilter(types=ev.TYPE_GROUPS["bench"]),
    EventFilter(target="qwen", experiment="exp-0002"),
    EventFilter(text="p99 TTFT"),
    EventFilter(text="OUTOFMEMORY"),
    EventFilter(text="→"),  # non-ASCII: stored \\u-escaped
    EventFilter(types=ev.TYPE_GROUPS["failures"], text="oom"),
])
def test_sql_filter_matches_python_filter(journal, flt):
    standard_campaign(journal)
    journal.append(ev.NOTE, None, {"text": "tp 8 → 16 was worse"})
    via_sql = [e.seq for e in journal.query(flt, limit=None)]
    via_python = [e.seq for e in reversed(journal.events()) if flt.matches(e)]
    assert via_sql == via_python and via_sql


def test_filter_describe_and_parse_since():
    flt = EventFilter(types=ev.TYPE_GROUPS["bench"], type_label="bench", target="qwen", experiment="exp-0003", text="tp")
    assert flt.describe() == "type:bench server:qwen exp:exp-0003 /tp/"
    assert not EventFilter().active and flt.active
    now = 1_800_000_000.0
    assert parse_since("90m", now) == now - 5400
    assert parse_since("1d", now) == now - 86400
    assert parse_since("2026-05-03T14:00") == time.mktime((2026, 5, 3, 14, 0, 0, 0, 0, -1))
    assert parse_since("1790000000") == 1_790_000_000.0
    with pytest.raises(ValueError, match="expected a duration"):
        parse_since("yesterday")


def test_event_details_say_what_happened(journal):
    ids = standard_campaign(journal)
    flags_ev = journal.events(types=[ev.RESTART_REQUESTED], experiment=ids["big"])[0]
    text = render_text(event_sections(flags_ev))
    assert "~ --max-running-requests: 16 → 64" in text and "new command" in text
    ready = journal.events(types=[ev.SERVER_READY], experiment=ids["big"])[0]
    text = render_text(event_sections(ready))
    assert "phase timings" in text and "cuda_graph" in text and "11.50" in text  # ready - cuda_graph
    failed = journal.events(types=[ev.SERVER_FAILED])[0]
    sections = event_sections(failed)
    assert ("crash class: oom", "bad") in sections[1].lines
    assert any("OutOfMemoryError" in line for line, _ in sections[2].lines)
    bench = journal.events(types=[ev.BENCH_FINISHED], experiment=ids["chunk"])[0]
    base = journal.baseline_for(WL.key()).result
    text = render_text(event_sections(bench, {WL.key(): base}))
    assert "out tok/s" in text and "-10.0%" in text  # 900 vs the first ok result (1000)
    todo = journal.add_todo("try tp 4")
    journal.update_todo(todo.id, status="in_progress")
    change = journal.events(types=[ev.TODO_CHANGED])[-1]
    lines = event_sections(change)[1].lines
    assert ("status      pending                           in_progress", "warn") in lines
    note = journal.events(types=[ev.NOTE])[0]
    assert "64 looks better" in render_text(event_sections(note))


def test_experiment_details(journal):
    ids = standard_campaign(journal)
    big = by_id(load_experiments(journal))[ids["big"]]
    text = render_text(experiment_sections(big))
    assert "exp-0002 on qwen: better" in text and "vs baseline exp-0001" in text
    assert "+28.9%" in text and "64 looks better" in text


def test_crash_summary_prefers_the_error_line():
    lines = ["Loading", "torch.OutOfMemoryError: CUDA out of memory", "  torch.zeros("]
    assert crash_summary(lines) == "torch.OutOfMemoryError: CUDA out of memory"
    assert crash_summary([], "not ready after 900s") == "not ready after 900s"
    assert crash_summary(["x" * 500]).endswith("…")


def killed_mid_run(ok: int = 15, failed: int = 385, tput: float = 1140.0):
    """What a ``kill -9`` of the server mid-run left: a result block with 15 of 400 ok."""
    r = result(tput)
    r.completed, r.failed = ok, failed
    return r


def test_a_96_percent_failed_run_is_never_compared(journal):
    """Issue 16: 15/400 was stored ok and shown +13.1 %; now it is never compared, and the
    experiment says how many requests were ok."""
    w = CampaignWriter(journal)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1001.0), result(999.0))
    killed = w.restart(flags(max_running_requests=64))
    w.bench(killed, killed_mid_run(), killed_mid_run(16, 384), killed_mid_run(14, 386))
    mixed = w.restart(flags(max_running_requests=32))
    w.bench(mixed, result(1300.0), killed_mid_run(tput=9000.0), result(1301.0), result(1299.0))
    xs = by_id(load_experiments(journal))
    k = xs[killed]
    assert k.verdict == "untested" and k.primary.n_ok == 0 and k.primary_delta.value is None
    assert k.primary.requests == (45, 1200) and runs_text(k.primary) == "0/3 runs, 45/1200 ok"
    assert best_experiment(list(xs.values()), "qwen").id == mixed
    m = xs[mixed]  # the degraded run (9000 tok/s) is left out of the median and the test
    assert m.verdict == "better" and m.primary.n_ok == 3 and m.primary_delta.value == pytest.approx(1300.0)
    assert m.primary.judgement.n == 3 and verdict_evidence(m).endswith(f"vs {base}")
    text = render_text(experiment_sections(m))  # the TUI's details of the experiment
    assert f"evidence: n=3 vs 3, ±0.1 % / ±0.1 %, p=0.10, vs {base}" in text
    assert "3/4 runs, 207/592 ok" in text and "degraded, 15/400 ok: never compared" in text


def test_same_flags_repeat_is_same_and_restarts_widen_the_noise(journal):
    """The same flags restarted and benched again: 'same' (noise); the level shift between
    those restarts (vllm#39903) is the restart-to-restart spread every later change must
    beat."""
    w = CampaignWriter(journal)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, result(1000.0), result(1004.0), result(996.0))
    again = w.restart(flags(), reason="same flags again")
    w.bench(again, result(1060.0), result(1062.0), result(1058.0))  # +6 %: separated, but a restart did it
    change = w.restart(flags(max_running_requests=64))
    w.bench(change, result(1050.0), result(1052.0), result(1048.0))  # +5 %: inside the restart spread
    xs = by_id(load_experiments(journal))
    j = xs[again].primary.judgement
    assert j.restart_spread_pct == pytest.approx(100 * 60 / 1030) and xs[again].verdict == "same"
    assert xs[change].verdict == "same" and "restarts ±2.9 %" in verdict_evidence(xs[change])
    assert best_experiment(list(xs.values()), "qwen").id == base
    big = w.restart(flags(max_running_requests=128))
    w.bench(big, result(1200.0), result(1201.0), result(1199.0))  # +20 %: beyond the restarts' 6 %
    assert by_id(load_experiments(journal))[big].verdict == "better"


def cached(tput: float, pct: float):
    """A result whose server said ``pct`` % of its prompt tokens came from the prefix cache."""
    r = result(tput)
    r.extra["prefix_cache_hit_pct"] = pct
    return r


def test_a_run_the_prefix_cache_served_otherwise_than_its_baseline_is_flagged_where_the_verdict_is_shown(journal):
    """A warm repeat (98 % of prompt tokens from the cache) against a cold baseline (0 %)
    measured different prefill work: the verdict's evidence says so (the experiments view,
    `journal experiments`, the report all show verdict_evidence), and so does the results
    table's delta cell (Row.cache_note)."""
    from optui.core.bench.compare import Entry, build_rows, group_entries
    from optui.core.journal.experiments import verdict_evidence

    w = CampaignWriter(journal)
    base = w.restart(flags(), reason="autostart")
    w.bench(base, cached(1000.0, 0.0), cached(1010.0, 0.0), cached(990.0, 0.0))
    warm = w.restart(flags(max_running_requests=64))
    w.bench(warm, cached(2300.0, 98.0), cached(2310.0, 98.5), cached(2290.0, 97.9))
    cold = w.restart(flags(max_running_requests=32))
    w.bench(cold, cached(1200.0, 0.5), cached(1210.0, 0.0), cached(1190.0, 1.0))
    xs = by_id(load_experiments(journal))
    assert "⚠ prefix cache 98% vs 0% in the baseline" in verdict_evidence(xs[warm])
    assert "prefix cache" not in verdict_evidence(xs[cold])  # within 10 points: compared as it is
    entries = [Entry(i, r, "c16") for i, r in enumerate([cached(1000.0, 0.0), cached(2300.0, 98.0)])]
    entries = [Entry(e.id, e.result, e.bench) for e in entries]
    for e, run in zip(entries, ("r1", "r2")):
        e.result.extra["run_id"] = run
    rows = build_rows(group_entries(entries))
    assert rows[0].cache_note is None and rows[1].cache_note == "prefix cache 98% vs 0% in the baseline"
