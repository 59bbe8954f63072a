"""Agent todo lists of a few MB (issue 15): parse, diff and the follower's steady state.

    python bench/todo_lists.py [--sizes 1,2,4,50] [--repeat 3] [--src DIR]

For each size (MB) a todowrite file ``{"todos": [...]}`` (indent 2, like an agent writes
it; at most 90,000 items, longer texts past that) is parsed with ``parse_todo_json``
(``parse``), parsed with an error in its last item (``error``: the path that finds the
line), and diffed against itself with ``plan_snapshot`` as after a restart (``diff``).
Prints item count, median and min/max seconds of ``--repeat`` runs. ``--src`` takes the
optui code from another checkout (``git archive HEAD src | tar -x -C /tmp/old``), for
before/after figures; a step slower than ``--budget`` s is not repeated.
Key presses with 15,000 items: ``bench/keypress_latency.py --mode todo --todo-items 15000``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_list(mb: float, bad_last: bool = False) -> tuple[str, int]:
    """A todowrite file of about ``mb`` MB and its item count."""
    size = int(mb * 1024 * 1024)
    n = min(90_000, size // 170)
    pad = "x" * max(0, size // n - 170)
    items = [{"content": f"Try tensor parallel {i % 8} with chunked prefill {i * 64} and measure p99 TTFT {pad}",
              "status": "pending", "priority": "medium", "activeForm": f"Trying config {i}"} for i in range(n)]
    if bad_last:
        items[-1]["status"] = 5
    return json.dumps({"todos": items}, indent=2), n


def timed(fn, repeat: int, budget: float) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
        if out[-1] > budget:
            break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,50")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=30.0, help="seconds; a slower step runs once")
    parser.add_argument("--src", default=str(ROOT / "src"), help="the optui source tree to measure")
    opts = parser.parse_args()
    sys.path.insert(0, opts.src)
    from optui.core.todo import formats as todo_formats
    from optui.core.todo.formats import TodoFormatError, parse_todo_json
    from optui.core.todo.items import Priority, TodoItem, TodoStatus
    from optui.core.todo.merge import plan_snapshot

    print(f"optui from {Path(todo_formats.__file__).parent.parent}; python {sys.version.split()[0]}")
    for mb in (float(s) for s in opts.sizes.split(",")):
        text, n = make_list(mb)
        bad, _ = make_list(mb, bad_last=True)
        parsed = parse_todo_json(text)

        def error() -> None:
            try:
                parse_todo_json(bad, "plan.json")
            except TodoFormatError as exc:
                assert f"todos[{n - 1}].status" in str(exc) and exc.line, exc

        existing = [TodoItem(i + 1, t.content, TodoStatus.PENDING, Priority.MEDIUM, origin="todowrite:/x",
                             meta={"agent": "added", "upstream": t.upstream}) for i, t in enumerate(parsed)]
        row = [f"{mb:g} MB ({len(text) / 1e6:.1f} M chars, {n} items):"]
        for name, fn in (("parse", lambda: parse_todo_json(text)), ("error", error),
                         ("diff", lambda: plan_snapshot(existing, parsed))):
            runs = timed(fn, opts.repeat, opts.budget)
            row.append(f"{name} {statistics.median(runs):.3f} s [{min(runs):.3f}-{max(runs):.3f}, n={len(runs)}]")
        print("  ".join(row), flush=True)


if __name__ == "__main__":
    main()
