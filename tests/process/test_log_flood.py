"""A server that floods its log never takes the event loop for long (issue 15: a 100 MB
flood from a server the window launched froze it for ~90 s, keys waited up to 2.9 s).

Real parts: a real file written by a real subprocess, the real LogFollower and the real
LogClassifier. What is checked is structural, not a timing: how many lines the follower
hands over between two turns of the event loop, and how many regex searches a line costs.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

from optui.adapters.log_follow import LogFollower
from optui.core.server import log as server_log
from optui.core.server.log import LogClassifier

FLOOD = (
    "import sys\n"
    "line = '[2026-12-01 11:00:00] INFO flood line with some text text text text text %d\\n'\n"
    "sys.stdout.writelines(line % i for i in range(60000))\n"
)


async def test_a_flooded_log_is_handed_over_in_small_steps(tmp_path):
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-c", FLOOD], stdout=out, check=True, timeout=60)
    classifier = LogClassifier("sglang")
    since_tick = 0
    most_per_step = 0
    seen = 0

    def on_line(line: str) -> None:
        nonlocal since_tick, most_per_step, seen
        classifier.feed(line, 1.0)
        since_tick += 1
        seen += 1
        most_per_step = max(most_per_step, since_tick)

    follower = LogFollower(log, on_line, interval_s=0.01)
    task = asyncio.create_task(follower.run())
    try:
        for _ in range(100_000):  # every turn of the loop resets the count: a key press would run here
            await asyncio.sleep(0)
            since_tick = 0
            if seen >= 60000:
                break
    finally:
        follower.stop()
        task.cancel()
    assert seen == 60000
    # 64 KiB a step (~850 such lines, ~30 ms of classification); 256 KiB gave 3,400 lines a step
    assert most_per_step <= 1000, f"{most_per_step} lines handled in one turn of the event loop"


def test_case_insensitive_signatures_keep_their_fast_scan():
    """A (?i) pattern defeats the regex engine's literal scan (the OOM signature cost 21 µs
    a line): such patterns are searched case-folded, with the same matches."""
    for _, pattern in server_log._CRASH_PATTERNS:
        assert not (isinstance(pattern, type(server_log._P(""))) and pattern.flags & 2), pattern.pattern  # re.I
    c = LogClassifier("sglang")
    c.feed("torch.OutOfMemoryError: cuda OUT of memory. Tried to allocate 2.0 GiB", 1.0)
    c.feed("OSError: [Errno 98] ADDRESS ALREADY IN USE", 2.0)
    assert [h.crash_class.value for h in c.hints] == ["oom", "port_in_use"]
