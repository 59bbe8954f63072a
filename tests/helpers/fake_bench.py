"""A fake benchmark client for tests: SGLang ``bench_serving`` or vLLM ``benchmark_serving``
flavoured output (Namespace line, tqdm bar on stderr, result block) and result files, with
deterministic numbers that depend on ``--max-concurrency``, plus misbehaviour on demand
(go silent, spawn a child, fail, print garbage).

Run through the wrappers in ``tests/helpers/fake_tools/`` so optui detects the tool from
the path (``.../sglang/bench_serving.py`` → SGLang, ``.../benchmark_serving.py`` → vLLM).

Numbers (``c`` = max concurrency, default 1): out tok/s = 100·c^0.8 (× ``--scale``),
TTFT = 10·c ms. The result file holds them at full precision (e.g. 100.123456); the printed
block rounds to two decimals, so a test can tell which source optui used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from optui.core.bench.format import format_namespace, format_sglang_block
from optui.core.bench.result import BenchResult
from optui.demo.tqdm_text import tqdm_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset-name", default="random")
    p.add_argument("--seed", type=int, default=1)  # both real tools have it (SGLang 1, vLLM 0)
    p.add_argument("--num-prompts", type=int, default=20)
    p.add_argument("--random-input-len", type=int, default=128)
    p.add_argument("--random-output-len", type=int, default=64)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--output-file", default=None)
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--result-dir", default=None)
    p.add_argument("--result-filename", default=None)
    p.add_argument("--no-file", action="store_true", help="never write the result file")
    p.add_argument("--scale", type=float, default=1.0, help="multiply the throughput")
    p.add_argument("--ms-per-request", type=float, default=1.0)
    p.add_argument("--silent", type=float, default=0.0, help="after the Namespace line, sleep this long silently")
    p.add_argument("--child", action="store_true", help="spawn a grandchild (sleep 300) first")
    p.add_argument("--fail", action="store_true", help="every request fails (SGLang: IndexError, no block)")
    p.add_argument("--completed", type=int, default=None,
                   help="only this many requests completed (the server was killed mid-run); the rest failed")
    p.add_argument("--garbage", action="store_true",
                   help="before the results: binary noise, a 1 MB line, invalid UTF-8, escapes, a CR flood")
    return p


def result_for(args) -> BenchResult:
    c = args.max_concurrency or 1
    out = 100.0 * c**0.8 * args.scale + 0.123456
    done = args.num_prompts if args.completed is None else args.completed
    r = BenchResult(tool="sglang", completed=done, duration_s=args.num_prompts * args.random_output_len / out,
                    max_concurrency=args.max_concurrency, request_rate=args.request_rate,
                    total_input_tokens=args.num_prompts * args.random_input_len,
                    total_output_tokens=args.num_prompts * args.random_output_len)
    r.output_throughput_tok_s = out
    r.request_throughput = args.num_prompts / r.duration_s
    r.input_throughput_tok_s = r.total_input_tokens / r.duration_s
    r.total_throughput_tok_s = r.input_throughput_tok_s + out
    for key, base in (("ttft_ms", 10.0 * c), ("tpot_ms", 5.0), ("itl_ms", 5.0), ("e2e_ms", 400.0)):
        getattr(r, key).update(mean=base * 1.1, median=base, p90=base * 1.5, p95=base * 1.7, p99=base * 2.0)
    return r


def sglang_json(args, r: BenchResult) -> dict:
    return {"backend": "sglang", "dataset_name": args.dataset_name, "request_rate": args.request_rate,
            "max_concurrency": args.max_concurrency, "random_input_len": args.random_input_len,
            "random_output_len": args.random_output_len, "duration": r.duration_s, "completed": r.completed,
            "total_input_tokens": r.total_input_tokens, "total_output_tokens": r.total_output_tokens,
            "total_output_tokens_retokenized": r.total_output_tokens, "request_throughput": r.request_throughput,
            "input_throughput": r.input_throughput_tok_s, "output_throughput": r.output_throughput_tok_s,
            "total_throughput": r.total_throughput_tok_s,
            **{f"{stat}_{name}_ms": getattr(r, f"{key}_ms")[stat]
               for key, name in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2e_latency"))
               for stat in ("mean", "median", "p90", "p95", "p99")}}


GARBAGE_SEED = 8


def write_garbage() -> None:
    """Hostile output (deterministic): random bytes, a 1 MB line, invalid UTF-8, terminal
    escapes and NULs, 50k carriage-return redraws without a newline."""
    import random

    rnd = random.Random(GARBAGE_SEED)
    out = sys.stdout.buffer
    out.write(bytes(rnd.randrange(256) for _ in range(64 * 1024)) + b"\n")
    out.write(b"Z" * 1_000_000 + b"\n")
    out.write(b"invalid utf-8: \xff\xfe\xc3\x28 \xe2\x82 end\n")
    out.write(b"\x1b[2J\x1b[31mred\x1b[0m \x1b]0;title\x07 nul:\x00: [bold]not markup[/bold]\n")
    out.write(b"".join(b"\r spinner %d" % i for i in range(50_000)) + b"\n")
    out.flush()


def main(flavour: str) -> int:
    args = parser().parse_args()
    if args.child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL)
    print(f"{'benchmark_args=' if flavour == 'sglang' else ''}{format_namespace(vars(args))}", flush=True)
    if args.silent:
        time.sleep(args.silent)
    if args.garbage:
        write_garbage()
    print("Starting warmup with 1 sequences...", flush=True)
    print("Warmup completed with 1 sequences. Starting main benchmark run...", flush=True)
    n = args.num_prompts
    t0 = time.monotonic()
    for done in range(n + 1):
        sys.stderr.write("\r" + tqdm_line(done, n, time.monotonic() - t0))
        sys.stderr.flush()
        time.sleep(args.ms_per_request / 1000)
    sys.stderr.write("\n")
    if args.fail:
        sys.stderr.write((FIXTURES / "sglang_all_failed.log").read_text().split("\n", 2)[2])
        return 1
    if flavour == "vllm":
        sys.stdout.write((FIXTURES / "vllm_0.33_spec.log").read_text().split("\n", 2)[2])
        if args.save_result and not args.no_file:
            directory = Path(args.result_dir or ".")
            name = args.result_filename or f"openai-infqps-model-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
            (directory / name).write_text((FIXTURES / "vllm_save_result.json").read_text())
        return 0
    r = result_for(args)
    print(format_sglang_block(r), flush=True)
    if args.output_file and not args.no_file:
        with open(args.output_file, "a") as handle:  # SGLang appends one JSON line per run
            handle.write(json.dumps(sglang_json(args, r)) + "\n")  # inf → bare Infinity, like SGLang
    return 0


def wrapper_main(flavour: str) -> None:
    sys.exit(main(flavour))


if __name__ == "__main__":
    sys.exit(main(sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1] in ("sglang", "vllm") else "sglang"))
