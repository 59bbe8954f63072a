"""The demo's benchmark command: ``python -m optui.demo.bench_client --base-url URL ...``.

It behaves like ``python -m sglang.bench_serving`` with ``--dataset-name random``
(``servers_and_bench.md`` section 3.1), so optui parses its output with the same code as
the real tool's: ``benchmark_args=Namespace(...)`` and the dataset totals on stdout, a tqdm
bar on stderr (``\\r`` updates, at most ~10 per second), then the 0.5.23 result block.
When every request fails it prints SGLang's ``UserWarning`` and ``IndexError`` traceback
on stderr and exits 1. Requests are sent by :func:`optui.adapters.loadgen.run_load`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from optui.adapters.loadgen import Endpoint, plan_requests, run_load
from optui.core.bench.format import format_namespace, format_sglang_block
from optui.demo.tqdm_text import tqdm_line

#: ``--backend`` → loadgen endpoint (SGLang's names).
BACKENDS: dict[str, Endpoint] = {"sglang": "generate", "sglang-native": "generate", "sglang-oai": "completions",
            "sglang-oai-chat": "chat", "vllm": "completions", "vllm-chat": "chat"}
_MIN_REFRESH_S = 0.1  # tqdm's mininterval


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser (``prog="bench_serving.py"``, SGLang's flag names and defaults)."""
    p = argparse.ArgumentParser(prog="bench_serving.py", description="optui demo benchmark (SGLang bench_serving style)")
    p.add_argument("--backend", choices=sorted(BACKENDS), default="sglang")
    p.add_argument("--base-url", required=True, help="server URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--dataset-name", choices=["random", "random-ids"], default="random")
    p.add_argument("--model", default=None, help="model id (default: first id of /v1/models)")
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=1024)
    p.add_argument(
        "--random-range-ratio", type=float, choices=[0.0, 1.0], default=0.0,
        help="0.0: lengths uniform in 1..len (SGLang's default); 1.0: fixed lengths",
    )
    p.add_argument("--request-rate", type=float, default=float("inf"), help="req/s (Poisson); inf = all at once")
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--disable-ignore-eos", action="store_true")
    p.add_argument("--api-key", default=None, help="Bearer token (default: $OPENAI_API_KEY, read like SGLang's client)")
    return p


class ProgressBar:
    """A tqdm-like bar on stderr: ``\\r`` + line, refreshed at most every 0.1 s."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.started: float | None = None
        self._last_draw = 0.0

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.started is None:
            self.started = now
        if not self.enabled or (done not in (0, total) and now - self._last_draw < _MIN_REFRESH_S):
            return
        self._last_draw = now
        sys.stderr.write("\r" + tqdm_line(done, total, now - self.started))
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.started is not None:
            sys.stderr.write("\n")
            sys.stderr.flush()


_ALL_FAILED = """\
{file}:{line}: UserWarning: All requests failed. This is likely due to a misconfiguration on the benchmark arguments.
  warnings.warn(
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "<frozen runpy>", line 88, in _run_code
  File "{file}", line {line}, in <module>
    run_benchmark(args)
  File "{file}", line {line}, in calculate_metrics
    p99_e2e_latency_ms=np.percentile(e2e_latencies, 99) * 1000,
  File "numpy/lib/_function_base_impl.py", line 4238, in percentile
    return _quantile_unchecked(
IndexError: index -1 is out of bounds for axis 0 with size 0
"""
_WARMUP_FAILED = """\
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "{file}", line {line}, in benchmark
    raise ValueError(
ValueError: {error}
"""


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return the exit code (0 ok, 1 all requests or warmup failed)."""
    args = build_parser().parse_args(argv)
    print(f"benchmark_args={format_namespace(vars(args))}")
    print(f"{format_namespace(vars(args))}\n")
    random_lengths = args.random_range_ratio < 1.0
    plan = plan_requests(args.num_prompts, args.random_input_len, args.random_output_len,
                         random_lengths=random_lengths, seed=args.seed)
    print(f"#Input tokens: {sum(p.input_len for p in plan)}")
    print(f"#Output tokens: {sum(p.output_len for p in plan)}")
    if args.warmup_requests > 0:
        print(f"Starting warmup with {args.warmup_requests} sequences...", flush=True)
    bar = ProgressBar(enabled=not args.disable_tqdm)

    def progress(done: int, total: int) -> None:
        if done == 0 and args.warmup_requests > 0:
            print(f"Warmup completed with {args.warmup_requests} sequences. Starting main benchmark run...", flush=True)
        bar.update(done, total)

    result = asyncio.run(run_load(
        args.base_url, endpoint=BACKENDS[args.backend], model=args.model, input_len=args.random_input_len,
        output_len=args.random_output_len, num_prompts=args.num_prompts,
        concurrency=args.max_concurrency or 0, request_rate=args.request_rate,
        ignore_eos=not args.disable_ignore_eos, warmup=args.warmup_requests, random_lengths=random_lengths,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or None, seed=args.seed, on_progress=progress,
    ))
    bar.close()
    sys.stdout.flush()
    if result.status != "ok":
        template = _WARMUP_FAILED if result.extra.get("failed_phase") == "warmup" else _ALL_FAILED
        sys.stderr.write(template.format(file=__file__, line=1, error=result.error))
        sys.stderr.flush()
        return 1
    print(format_sglang_block(result, backend=args.backend))
    return 0


if __name__ == "__main__":
    sys.exit(main())
