"""A synthetic but realistic campaign journal for experiment/report/view tests: written
through the real Journal API (SQLite), the same calls a session makes."""

from __future__ import annotations

import math

from optui.adapters.journal import Journal
from optui.core.bench.result import BenchResult, Workload
from optui.core.journal import events as ev
from optui.core.journal.experiments import experiment_start

BASE_ARGV = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--port", "30000",
             "--tp-size", "2", "--max-running-requests", "16"]
WL = Workload(tool="sglang", dataset="random", input_len=256, output_len=96, num_prompts=64, max_concurrency=16,
              request_rate=math.inf)
T0 = 1_790_000_000.0


def result(tput: float, ttft: float = 100.0, wl: Workload = WL, status: str = "ok") -> BenchResult:
    """A bench result with the given out tok/s and TTFT p50 (ms)."""
    r = BenchResult(tool="sglang", status=status, output_throughput_tok_s=tput if status == "ok" else None,
                    request_throughput=tput / 96 if status == "ok" else None, completed=64, failed=0, workload=wl)
    if status == "ok":
        r.ttft_ms = {"mean": ttft, "median": ttft, "p90": ttft * 1.5, "p95": ttft * 1.7, "p99": ttft * 2}
        r.tpot_ms = {"mean": 6.0, "median": 6.0, "p90": 7.0, "p95": 7.5, "p99": 8.0}
    return r


class CampaignWriter:
    """Writes experiments the way a session does (ids from the journal)."""

    def __init__(self, journal: Journal, server: str = "qwen") -> None:
        self.j = journal
        self.server = server
        self.argv = list(BASE_ARGV)
        self.t = T0

    def tick(self, dt: float = 60.0) -> float:
        self.t += dt
        return self.t

    def restart(self, argv: list[str], *, reason: str = "flag editor", ready_s: float | None = 31.5,
                crash: str | None = None, actor: str = "tui", names: dict | None = None) -> str:
        """One restart: experiment + restart + flags + ready (or failed with ``crash``);
        ``names``: how the server's catalogue names the flags (``experiment.started``'s ``flag_names``)."""
        old, self.argv = self.argv, list(argv)
        exp = self.j.new_experiment(self.server, experiment_start(old, argv, reason, names=names), actor=actor,
                                    ts=self.tick(1)).experiment
        j, s = self.j, self.server
        j.append(ev.RESTART_REQUESTED, s, {"reason": reason, "old_argv": old, "new_argv": argv}, actor=actor, experiment=exp, ts=self.tick(1))
        j.append(ev.SERVER_STOPPED, s, {"how": "term", "returncode": 0}, actor=actor, experiment=exp, ts=self.tick(1))
        j.append(ev.SERVER_STARTING, s, {"pid": 4242, "argv": argv}, actor=actor, experiment=exp, ts=self.tick(1))
        if crash:
            j.append(ev.SERVER_FAILED, s, {"class": crash, "returncode": 1, "phase": "kv_cache", "argv": argv,
                                           "lines": ["Loading weights", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.0 GiB",
                                                     "  at init_memory_pool"]},
                     actor="optui", experiment=exp, ts=self.tick(5))
        elif ready_s is not None:
            j.append(ev.SERVER_READY, s, {"ready_s": ready_s, "argv": argv, "model": "Qwen/Qwen3-8B", "server_version": "0.5.23",
                                          "phases": [{"phase": "loading_weights", "t": 2.0}, {"phase": "cuda_graph", "t": 20.0},
                                                     {"phase": "ready", "t": ready_s}]},
                     actor=actor, experiment=exp, ts=self.tick(ready_s))
        return exp

    def bench(self, exp: str, *results: BenchResult, name: str = "c16") -> list[int]:
        """One bench run per result, stored under ``exp``."""
        ids = []
        for r in results:
            self.j.append(ev.BENCH_STARTED, self.server, {"bench": name}, actor="tui", experiment=exp, ts=self.tick(1))
            ids.append(self.j.add_result(r, server=self.server, bench=name, experiment=exp, ts=self.tick(30)))
            self.j.append(ev.BENCH_FINISHED, self.server, {"bench": name, "status": r.status, "duration_s": 30.0,
                                                           "result": r.to_json(), "error": None if r.status == "ok" else "no result"},
                          actor="tui", experiment=exp, ts=self.tick(1))
        return ids


def flags(**changes) -> list[str]:
    """BASE_ARGV with ``--name value`` changes (``name_with_underscores`` → dashes; None removes)."""
    from optui.core.flags.argv import Flags

    f = Flags.parse(BASE_ARGV)
    for name, value in changes.items():
        flag = "--" + name.replace("_", "-")
        f = f.unset(flag) if value is None else f.set(flag, None if value is True else str(value))
    return f.to_argv()


def standard_campaign(journal: Journal) -> dict[str, str]:
    """baseline (3 runs) → big batch (better, 3 runs) → OOM crash → chunked prefill
    (worse, 3 runs) → radix off (ready, never benchmarked). Returns name → experiment id.
    Three runs a side: the fewest the noise model (exact Mann-Whitney U) can judge."""
    w = CampaignWriter(journal)
    ids = {}
    ids["base"] = w.restart(list(BASE_ARGV), reason="autostart")
    w.bench(ids["base"], result(1000.0, 100.0), result(1010.0, 102.0), result(1005.0, 101.0))
    ids["big"] = w.restart(flags(max_running_requests=64), reason="preset big-batch")
    w.bench(ids["big"], result(1300.0, 90.0), result(1290.0, 91.0), result(1295.0, 90.5))
    journal.append(ev.NOTE, "qwen", {"text": "64 looks better; check p99 TTFT"}, actor="tui", experiment=ids["big"], ts=w.tick(5))
    ids["oom"] = w.restart(flags(max_running_requests=64, mem_fraction_static=0.99), reason="preset oom", crash="oom")
    journal.append(ev.ROLLBACK, "qwen", {"reason": "operator", "from_argv": w.argv, "to_argv": flags(max_running_requests=64)},
                   actor="tui", experiment=ids["oom"], ts=w.tick(2))
    ids["chunk"] = w.restart(flags(max_running_requests=64, chunked_prefill_size=512), reason="cli", actor="cli")
    w.bench(ids["chunk"], result(900.0, 150.0), result(905.0, 149.0), result(895.0, 151.0))
    ids["radix"] = w.restart(flags(max_running_requests=64, disable_radix_cache=True), reason="agent", actor="agent:claude")
    return ids
