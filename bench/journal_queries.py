"""Journal query latency on a large campaign (target: "last good flags" and baseline
queries <= 5 ms on a journal of 100k events), and the experiments view's loads (issue 17).

Builds a journal of N events shaped like a long campaign (2 servers, one experiment per
~100 events with restart/phases/states/ready-or-failed/bench events, todo edits, notes,
3 bench results per experiment over 4 workloads), then times each query R times and
prints the median and the worst, in ms.

    python bench/journal_queries.py [N] [--repeat R] [--dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, not an installed copy

from optui.adapters.journal import Journal  # noqa: E402
from optui.adapters.journal_thread import TEXT_SCAN_WINDOW, ExperimentFeed  # noqa: E402
from optui.core.bench.result import BenchResult, Workload  # noqa: E402
from optui.core.journal.events import EventFilter  # noqa: E402
from optui.core.journal.experiments import experiment_start  # noqa: E402
from optui.session.journal.export import load_experiments  # noqa: E402

ARGV = ["python", "-m", "sglang.launch_server", "--model-path", "/models/qwen", "--tp-size", "4"]
WORKLOADS = [Workload("sglang", "random", 256, 96, 64, c, float("inf")) for c in (1, 4, 16, 64)]


def build(path: Path, n_events: int) -> tuple[Journal, list[str]]:
    """A journal of about ``n_events`` events; returns it and its experiment ids."""
    j = Journal(path)
    experiments: list[str] = []
    per_exp = 100
    for k in range(max(1, n_events // per_exp)):
        server = ("qwen", "llama")[k % 2]
        argv = ARGV + ["--max-running-requests", str(16 + k)]
        exp = j.new_experiment(server, experiment_start(ARGV, argv, "sweep"), actor="agent:bench").experiment
        experiments.append(exp)
        batch = [("server.restart", server, {"reason": "sweep", "old_argv": ARGV, "new_argv": argv}, exp),
                 ("flags.changed", server, {"diff": [f"~ --max-running-requests: 16 → {16 + k}"]}, exp),
                 ("server.stopped", server, {"how": "term", "returncode": 0}, exp),
                 ("server.starting", server, {"pid": 1000 + k, "argv": argv}, exp)]
        batch += [("server.phase", server, {"phase": f"phase-{i}", "t": i * 1.5}, exp) for i in range(8)]
        batch += [("server.state", server, {"old": "starting", "new": "warming"}, exp)]
        failed = k % 7 == 3
        batch.append(("server.failed" if failed else "server.ready", server,
                      {"class": "oom", "lines": ["CUDA out of memory"]} if failed
                      else {"ready_s": 30.5, "phases": [], "argv": argv, "model": "qwen"}, exp))
        batch += [("todo.changed", f"todo:{k % 40}", {"op": "status", "before": {"status": "pending"},
                                                     "after": {"status": "in_progress"}}, None)]
        batch += [("note", server, {"text": f"observation {k}"}, exp)]
        # filler: load alerts and state flapping, the bulk of a long journal
        batch += [("server.state", server, {"old": "ready", "new": "degraded" if i % 2 else "ready"}, exp)
                  for i in range(per_exp - len(batch) - 6)]
        if not failed:
            batch += [("bench.started", server, {"bench": "c16"}, exp)] * 3
            batch += [("bench.finished", server, {"bench": "c16", "status": "ok", "result": None}, exp)] * 3
            j.append_many(batch)
            for r in range(3):
                wl = WORKLOADS[(k + r) % len(WORKLOADS)]
                j.add_result(BenchResult(tool="sglang", output_throughput_tok_s=1000.0 + k + r, workload=wl),
                             server=server, bench=f"c{wl.max_concurrency}", experiment=exp)
            j.set_last_good(server, argv)
        else:
            j.append_many(batch)
    return j, experiments


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median and worst time of ``fn()`` in ms."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--dir", default=None, help="where to create the journal (default: a temp dir)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        t0 = time.perf_counter()
        j, exps = build(Path(tmp) / "big.db", opts.n)
        print(f"built {j.count_events():,} events, {len(exps)} experiments, {len(j.results(limit=None)):,} results "
              f"in {time.perf_counter() - t0:.1f} s")
        j.close()
        j = Journal(Path(tmp) / "big.db")  # a fresh connection, as a new optui process has
        key = WORKLOADS[2].key()
        middle = exps[len(exps) // 2]
        queries = [
            ("last good flags (last_good table)", lambda: j.last_good("qwen"), True),
            ("last good flags from events (newest server.ready)",
             lambda: j.events(types=["server.ready"], target="qwen", newest_first=True, limit=1), True),
            ("baseline of a workload (baseline_for)", lambda: j.baseline_for(key), True),
            ("current experiment of a server", lambda: j.current_experiment("llama"), True),
            ("events of one experiment (~100)", lambda: j.events(experiment=middle), False),
            ("journal view: newest 500 bench events", lambda: j.query(EventFilter(types=frozenset({"bench.finished"}))), False),
            ("journal view: text filter over all events", lambda: j.query(EventFilter(text="observation 500")), False),
        ]
        worst_target = 0.0
        for label, fn, target in queries:
            med, worst = timed(fn, opts.repeat)
            mark = " (target <= 5 ms)" if target else ""
            if target:
                worst_target = max(worst_target, med)
            print(f"{label:<52} median {med:7.3f} ms  worst {worst:7.3f} ms{mark}")
        med, worst = timed(lambda: load_experiments(j), 5)
        print(f"{'build every experiment (experiments view, report)':<52} median {med:7.1f} ms  worst {worst:7.1f} ms")
        # the experiments view since issue 17: its first load, then each update reads only what is new
        med, worst = timed(lambda: ExperimentFeed().refresh(j), 5)
        print(f"{'experiments view: first load (ExperimentFeed)':<52} median {med:7.1f} ms  worst {worst:7.1f} ms")
        feed, k = ExperimentFeed(), iter(range(10**9))
        feed.refresh(j)

        def one_note() -> None:
            n = next(k)
            j.append("note", ("qwen", "llama")[n % 2], {"text": f"again {n}"}, experiment=exps[n % len(exps)])
            feed.refresh(j)

        med, worst = timed(one_note, 50)
        print(f"{'experiments view: a note journaled, then the update':<52} median {med:7.1f} ms  worst {worst:7.1f} ms")
        med, worst = timed(lambda: feed.refresh(j), 50)
        print(f"{'experiments view: the update when nothing is new':<52} median {med:7.1f} ms  worst {worst:7.1f} ms")
        top = j.last_seq()
        med, worst = timed(lambda: j.events(text="observation 500", since_seq=top - TEXT_SCAN_WINDOW, before_seq=top + 1,
                                            newest_first=True, limit=500), 20)
        print(f"{'text filter: one window of the journal thread':<52} median {med:7.1f} ms  worst {worst:7.1f} ms")
        print(f"target: last good + baseline medians <= 5 ms: {'ok' if worst_target <= 5 else 'SLOW'}")
        j.close()


if __name__ == "__main__":
    main()
