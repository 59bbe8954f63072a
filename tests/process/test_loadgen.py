"""The built-in load generator against real demo servers (loopback)."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest

from optui.adapters.loadgen import plan_requests, run_load
from tests.helpers.demo import free_port, start_demo_server

PROMPTS, IN_LEN, OUT_LEN = 6, 32, 12


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with start_demo_server(tmp_path_factory.mktemp("demo")) as srv:
        yield srv


@pytest.fixture(scope="module")
def serial_server(tmp_path_factory):
    with start_demo_server(tmp_path_factory.mktemp("demo1"), "--max-running-requests", "1") as srv:
        yield srv


async def _run(url: str, concurrency: int, **kw):
    kw = {"input_len": IN_LEN, "output_len": OUT_LEN, "num_prompts": PROMPTS, "model": None, **kw}
    result = await run_load(url, concurrency=concurrency, **kw)
    assert result.status == "ok", result.error
    assert result.completed == kw["num_prompts"] and result.failed == 0
    assert result.total_output_tokens == kw["num_prompts"] * kw["output_len"]
    return result


@pytest.mark.serial  # a throughput ratio: measured alone
async def test_concurrency_raises_throughput(server):
    progress: list[tuple[int, int]] = []
    one = await _run(server.base_url, 1, on_progress=lambda d, t: progress.append((d, t)))
    four = await _run(server.base_url, 4)
    assert four.output_throughput_tok_s > 2.0 * one.output_throughput_tok_s
    assert progress[0] == (0, PROMPTS) and progress[-1] == (PROMPTS, PROMPTS)
    assert one.total_input_tokens == PROMPTS * IN_LEN
    assert one.tool == "optui-loadgen" and one.workload.max_concurrency == 1
    assert one.workload.dataset == "random" and math.isinf(one.workload.request_rate)
    assert one.extra["peak_concurrent_requests"] == 1 and four.extra["peak_concurrent_requests"] == 4
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        stats = getattr(one, key)
        assert stats["mean"] > 0 and stats["p99"] >= stats["median"]
    # TPOT of a lone request ≈ one decode step (6 ms base + 0.15 ms per request, CUDA graphs)
    assert 5.0 < one.tpot_ms["median"] < 15.0


@pytest.mark.serial  # a throughput ratio: measured alone
async def test_max_running_requests_one_serializes(serial_server):
    one = await _run(serial_server.base_url, 1)
    four = await _run(serial_server.base_url, 4)
    assert four.output_throughput_tok_s < 1.3 * one.output_throughput_tok_s
    assert four.ttft_ms["mean"] > 2.0 * one.ttft_ms["mean"]  # requests wait in the queue


@pytest.mark.parametrize("endpoint", ["chat", "generate"])
async def test_other_endpoints_count_tokens_exactly(server, endpoint):
    await _run(server.base_url, 2, endpoint=endpoint, num_prompts=3, output_len=5)


async def test_poisson_rate_and_random_lengths(server):
    result = await run_load(server.base_url, model="m", input_len=20, output_len=6, num_prompts=6, concurrency=0,
                            request_rate=40.0, random_lengths=True, seed=3, warmup=0)
    planned = plan_requests(6, 20, 6, random_lengths=True, seed=3)
    assert result.status == "ok" and result.request_rate == 40.0 and result.max_concurrency is None
    assert result.total_output_tokens == sum(p.output_len for p in planned)
    assert len({p.input_len for p in planned}) > 1


async def test_all_failed_and_warmup_failed():
    url = f"http://127.0.0.1:{free_port()}"
    failed = await run_load(url, model="m", input_len=4, output_len=4, num_prompts=3, concurrency=2, warmup=0)
    assert failed.status == "failed" and failed.completed == 0 and failed.failed == 3
    assert "ConnectError" in failed.error
    warm = await run_load(url, model="m", input_len=4, output_len=4, num_prompts=3, concurrency=2)
    assert warm.status == "failed" and warm.extra["failed_phase"] == "warmup"
    assert warm.error.startswith("Warmup failed")


async def test_cancel_aborts_requests_on_the_server(server):
    task = asyncio.create_task(run_load(server.base_url, model="m", input_len=8, output_len=2000,
                                        num_prompts=4, concurrency=4, warmup=0))
    await asyncio.sleep(0.4)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        for _ in range(50):  # the server notices the closed streams at the next token
            load = (await client.get("/v1/loads")).json()["loads"][0]
            if load["num_running_reqs"] == 0:
                break
            await asyncio.sleep(0.05)
    assert load["num_running_reqs"] == 0


async def test_a_server_killed_mid_run_stops_the_run_as_failed(tmp_path):
    """kill -9 of the server during a long built-in run: the generator sent the rest of
    100,000 requests into a closed port for 67 s and stored 8 ok / 99,992 failed as "ok"
    (seen on the H200). Now the run stops after a streak of failures and is "failed"."""
    import os
    import signal

    from optui.adapters.loadgen import UNREACHABLE_AFTER

    with start_demo_server(tmp_path) as srv:
        progress: list[int] = []
        tasks: list[int] = []  # tasks alive at each progress call

        def on_progress(done: int, total: int) -> None:
            progress.append(done)
            tasks.append(len(asyncio.all_tasks()))
            if done == 8:
                os.killpg(srv.proc.pid, signal.SIGKILL)

        result = await asyncio.wait_for(run_load(srv.base_url, input_len=IN_LEN, output_len=OUT_LEN, num_prompts=5000,
                                                 concurrency=4, model=None, on_progress=on_progress, timeout_s=10), 60)
    assert result.status == "failed", (result.status, result.error)
    assert "in a row failed" in result.error and "not sent" in result.error, result.error
    assert result.completed >= 8 and max(progress) < 8 + UNREACHABLE_AFTER + 10, max(progress)
    # 4 workers take the requests in turn: never a task per request (5,000 made up front, each
    # blocked on the cap, cost seconds of CPU before the first request of a 100k run)
    assert max(tasks) <= 4 + 16, max(tasks)  # the workers, the test's own and the HTTP client's
