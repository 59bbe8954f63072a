"""Following a client's output: the bounded result capture and the progress tracker
(optui.core.bench.stream), fed through the real LineSplitter like a live run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optui.core.bench.parse import parse_bench_output
from optui.core.bench.stream import ProgressTracker, ResultCapture
from optui.core.text.textstream import LineSplitter
from optui.demo.tqdm_text import tqdm_line

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bench"
LOGS = sorted(p.name for p in FIXTURES.glob("*.log"))


def lines_of(data: bytes, chunk: int = 4096) -> list[str]:
    """Lines as CommandRun sees them: bytes in chunks through a LineSplitter."""
    splitter, out = LineSplitter(), []
    for i in range(0, len(data), chunk):
        out.extend(splitter.feed(data[i:i + chunk]).lines)
    out.extend(splitter.close().lines)
    return out


def dumps(results) -> str:
    return json.dumps([r.to_json() for r in results], sort_keys=True)


@pytest.mark.parametrize("name", LOGS)
def test_capture_parses_like_the_whole_log(name):
    lines = lines_of((FIXTURES / name).read_bytes())
    capture = ResultCapture(context_chars=0)  # keep only what the parser needs
    for line in lines:
        capture.add(line)
    assert dumps(parse_bench_output(capture.text())) == dumps(parse_bench_output("\n".join(lines)))
    assert parse_bench_output(capture.text()), name


def test_capture_stays_bounded_in_a_flood_and_keeps_the_blocks():
    block_log = (FIXTURES / "vllm_0.33_sweep.log").read_text()
    capture = ResultCapture(max_chars=2_000_000, context_chars=10_000)
    flood = "x" * 60_000
    for i in range(2_000):  # 120 MB of noise before the runs
        capture.add(flood if i % 2 else f"INFO line {i}")
    for line in lines_of(block_log.encode()):
        capture.add(line)
    assert len(capture.text()) < 2_000_000 and capture.dropped >= 1_900
    assert [r.max_concurrency for r in parse_bench_output(capture.text())] == [1, 8, 32]


def test_tracker_follows_an_sglang_run():
    t = ProgressTracker()
    assert t.line("benchmark_args=Namespace(backend='sglang', num_prompts=200, max_concurrency=16)", 0.0)
    assert (t.state.phase, t.state.total) == ("starting", 200)
    assert t.line("Starting warmup with 1 sequences...", 0.1) and t.state.phase == "warmup" and t.state.total == 1
    assert t.line("Warmup completed with 1 sequences. Starting main benchmark run...", 0.5)
    assert (t.state.phase, t.state.done, t.state.total) == ("running", 0, 200)
    assert t.progress(" 25%|██▌       | 50/200 [00:05<00:15,  9.98it/s]", 5.5)
    s = t.state
    assert (s.done, s.total, s.rate, s.eta_s) == (50, 200, 9.98, 15.0)
    # tqdm before it knows the rate: derived from the requests done since the phase began
    t2 = ProgressTracker()
    t2.line("Namespace(num_prompts=100)", 0.0)
    t2.line("Starting main benchmark run...", 0.0)
    t2.progress("  0%|          | 0/100 [00:00<?, ?it/s]", 0.1)
    assert t2.state.rate is None and t2.state.eta_s is None
    t2.progress(" 10%|█         | 10/100 [00:02<?, ?it/s]", 2.0)
    assert t2.state.rate == pytest.approx(5.0) and t2.state.eta_s == pytest.approx(18.0)
    assert t.line("============ Serving Benchmark Result ============", 21.0)
    assert (t.state.phase, t.state.runs) == ("results", 1)


def test_tracker_vllm_warmup_then_main_bar_and_a_newline_terminated_bar():
    t = ProgressTracker()
    t.line("Namespace(subparser='bench', num_prompts=1000, num_warmups=4)", 0.0)
    t.line("Starting initial single prompt test run...", 0.0)
    assert t.state.phase == "test run"
    t.line("Warming up with 4 requests...", 1.0)
    t.progress("100%|██████████| 4/4 [00:01<00:00,  3.99it/s]", 2.0)
    assert (t.state.phase, t.state.done, t.state.total) == ("warmup", 4, 4)
    t.line("Warmup run completed.", 2.0)
    t.line("Starting main benchmark run...", 2.0)
    assert (t.state.phase, t.state.done, t.state.total) == ("running", 0, 1000)
    # a bar written as a whole line (tqdm's last redraw before "\n", or a non-tty bar)
    assert t.line("100%|██████████| 1000/1000 [01:10<00:00, 14.17it/s]", 72.0)
    assert (t.state.done, t.state.total, t.state.eta_s) == (1000, 1000, 0.0)


def test_tracker_through_real_carriage_returns():
    splitter, t = LineSplitter(), ProgressTracker()
    t.line("Namespace(num_prompts=64)", 0.0)
    data = "".join("\r" + tqdm_line(i, 64, i * 0.5) for i in range(0, 33)).encode()
    chunk = splitter.feed(data)
    assert chunk.lines == [] and "31/64" in chunk.progress  # the last line a \r ended
    assert t.progress(splitter.pending_redraw(), 16.0)  # tqdm's newest redraw ("\r" + bar)
    assert (t.state.done, t.state.total, t.state.phase) == (32, 64, "running")
    assert t.state.rate == pytest.approx(2.0) and t.state.eta_s == pytest.approx(16.0)


def test_set_counts_for_the_builtin_generator():
    t = ProgressTracker()
    t.set_counts(0, 10, 100.0, "c=1")
    t.set_counts(4, 10, 102.0, "c=1")
    assert (t.state.rate, t.state.eta_s, t.state.text) == (2.0, 3.0, "c=1")


@pytest.mark.parametrize("line", [
    "1" * 65_000 + " it/s",            # was 30 s of regex backtracking (parse_progress)
    "1%|" * 20_000 + "it/s",
    " 1/2 [" * 10_000 + "it/s",
    "x" * 65_000 + "Error and it/s " + "Traceback",
    'File "' + "a" * 65_000 + "vllm",
], ids=["digits", "percent-bars", "brackets", "error-words", "traceback-frame"])
@pytest.mark.timeout(60)  # a did-not-hang bound, no duration asserted: the backtracking regex took ~30 s per
def test_huge_hostile_lines_are_handled_in_linear_time(line):  # call, 60 calls here (~30 min); linear: ms
    t, capture = ProgressTracker(), ResultCapture()
    for _ in range(20):
        t.line(line, 0.0)
        t.progress(line, 0.0)
        capture.add(line)
    assert parse_bench_output(capture.text()) == []  # parsed to the end; no result invented from the noise


def test_capture_keeps_vllms_rate_and_concurrency_lines_before_the_block():
    # issue 18: they fill request_rate / max_concurrency when the block has none
    text = (FIXTURES / "vllm_2025.log").read_text().replace(
        "Traffic request rate: inf", "Traffic request rate: 8.0").replace(
        "Maximum request concurrency: None", "Maximum request concurrency: 64")
    lines = lines_of(text.encode())
    capture = ResultCapture(context_chars=0)
    for line in lines:
        capture.add(line)
    [r] = parse_bench_output(capture.text())
    assert (r.request_rate, r.max_concurrency) == (8.0, 64)


def _batches(lines: list[str], seed: int) -> list[list[str]]:
    """``lines`` cut into reads of 1 to 400 lines (a random cut, like pipe reads)."""
    import random

    rng, out, i = random.Random(seed), [], 0
    while i < len(lines):
        n = rng.randint(1, 400)
        out.append(lines[i:i + n])
        i += n
    return out


def _flooded(name: str) -> list[str]:
    """The fixture's lines with a flood of request lines and tqdm bars between them."""
    flood = [f"[bench] request {i} done: 96 output tokens, ttft 12.3 ms" if i % 7 else
             tqdm_line(i, 5000, i / 100.0) for i in range(3000)]
    lines = lines_of((FIXTURES / name).read_bytes())
    return flood[:1500] + lines[: len(lines) // 2] + flood[1500:] + lines[len(lines) // 2:] + ["line\nwith a newline"]


@pytest.mark.parametrize("name", LOGS)
@pytest.mark.parametrize("context_chars", [0, 300, 200_000])
def test_capture_in_batches_keeps_what_line_by_line_keeps(name, context_chars):
    # issue 17 §2: a read's lines go through add_lines at once (20k lines/s on the event loop)
    lines = _flooded(name)
    one, batched = ResultCapture(context_chars=context_chars), ResultCapture(context_chars=context_chars)
    for line in lines:
        one.add(line)
    for batch in _batches(lines, seed=len(name) + context_chars):
        batched.add_lines(batch)
    assert batched.text() == one.text() and batched.dropped == one.dropped
    assert parse_bench_output(batched.text()), name


@pytest.mark.parametrize("name", LOGS)
def test_tracker_in_batches_ends_where_line_by_line_ends(name):
    lines = _flooded(name)
    one, batched = ProgressTracker(), ProgressTracker()
    for batch in _batches(lines, seed=len(name)):
        changed = [one.line(line, 5.0) for line in batch]
        assert batched.lines(batch, 5.0) == any(changed)
        assert batched.state == one.state
