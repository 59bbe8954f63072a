"""``python -m optui.demo.bench_client`` as a subprocess against a demo server."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.demo import free_port, start_demo_server, subprocess_env


def _bench(base_url: str, *flags: str) -> subprocess.CompletedProcess:
    """Run the client; stdout/stderr decoded without newline translation (``\r`` kept)."""
    cmd = [sys.executable, "-m", "optui.demo.bench_client", "--base-url", base_url, *flags]
    proc = subprocess.run(cmd, env=subprocess_env(), stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=60, start_new_session=True)
    proc.stdout, proc.stderr = proc.stdout.decode(), proc.stderr.decode()
    return proc


def test_prints_sglang_output(tmp_path):
    with start_demo_server(tmp_path) as srv:
        proc = _bench(srv.base_url, "--num-prompts", "12", "--random-input-len", "16", "--random-output-len", "8",
                      "--random-range-ratio", "1.0", "--max-concurrency", "4", "--backend", "sglang-oai")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("benchmark_args=Namespace(backend='sglang-oai', base_url=")
    order = ["#Input tokens: 192", "#Output tokens: 96", "Starting warmup with 1 sequences...",
             "Warmup completed with 1 sequences. Starting main benchmark run...",
             "\n\n============ Serving Benchmark Result ============\n"]
    assert [out.index(s) for s in order] == sorted(out.index(s) for s in order)
    assert "Backend:                                 sglang-oai\n" in out
    assert "Successful requests:                     12        \n" in out
    assert "Total generated tokens:                  96        \n" in out
    assert "Max request concurrency:                 4         \n" in out
    assert out.rstrip("\n").endswith("=" * 50)
    assert "\r" in proc.stderr and "12/12 [" in proc.stderr and "\r100%|██████████|" in proc.stderr


def test_all_requests_failed_exits_1():
    proc = _bench(f"http://127.0.0.1:{free_port()}", "--num-prompts", "3", "--warmup-requests", "0")
    assert proc.returncode == 1
    assert "UserWarning: All requests failed." in proc.stderr
    assert proc.stderr.rstrip().endswith("IndexError: index -1 is out of bounds for axis 0 with size 0")
    assert "Serving Benchmark Result" not in proc.stdout
