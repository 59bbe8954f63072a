#!/usr/bin/env python3
"""Key press to screen with the experiments view open on a 100k-event campaign while a
benchmark streams 20k lines/s and the journal grows (issue 17 §2; target: p95 <= 50 ms).

    python bench/keypress_experiments.py [--events 100000] [--presses 60] [--rate 20000]
                                         [--mode sort|details] [--write-every 0.5] [--size 160x45] [--json]

The method of ``keypress_latency.py`` (a real pseudo-terminal, the same flood client, a key
written to the pty and timed until the escape-stripped terminal output shows what it
changed), on a campaign whose journal is the one ``journal_queries.py`` builds (``--events``
events, one experiment per 100: 1000 experiments over two servers, ~2.6k results). ``b``
starts the benchmark, ``E`` opens the experiments view; the presses begin once it shows
every experiment. Meanwhile another connection (as another optui process would) journals a
note on a random experiment every ``--write-every`` s, so the view reloads every second.

- ``sort``: ``s`` moves the sort to the next column, seen when the title says
  ``sorted by <column> ↑``.
- ``details``: Enter opens the experiment under the cursor (seen: ``exp-NNNN on <server>``),
  the next press (Escape) closes it (seen: the view's title again).

Prints median / p95 / max in ms (and per key: ``by_key``), the lines/s the client achieved,
and how long the view took to show every experiment after ``E``; ``slowest`` names the key
of each press at or above the p95 (``open`` / ``close`` in ``details``, ``sort``), so the
tail is explained: with ``--json`` the whole record, ``presses_ms`` in press order.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))  # this checkout's code, not an installed copy

from journal_queries import build  # noqa: E402
from keypress_latency import FLOOD, Watch, latency_summary, timed_presses  # noqa: E402
from ptyrun import PtyProcess, load_average, parse_size  # noqa: E402

from optui.adapters.journal import Journal  # noqa: E402
from optui.config import load_config  # noqa: E402
from optui.ui.screens.experiments import COLUMNS  # noqa: E402

ITEM = "keypress probe item"
#: the headers ``s`` cycles through, from the first sort (id)
SORT_HEADERS = [header.replace("\n", " ") for _, header, key in COLUMNS if key]  # the title says a two-line header on one


def write_campaign(root: Path, rate: float, seconds: float, events: int) -> tuple[Path, list[str]]:
    """The config (servers qwen, llama; the flood benchmark on qwen) and its journal."""
    (root / "flood.py").write_text(FLOOD)
    cfg = root / "optui.toml"
    cfg.write_text(f'''[hosts.local]
gpu_source = "none"

[servers.qwen]
url = "http://127.0.0.1:9"
control = "none"

[servers.llama]
url = "http://127.0.0.1:9"
control = "none"

[benchmarks.flood]
server = "qwen"
argv = [{sys.executable!r}, {str(root / "flood.py")!r}, "{rate}", "{seconds}", {str(root / "flood.json")!r}]
''')
    journal, experiments = build(load_config(cfg).journal_path, events)
    journal.close()
    subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), "todo", "add", ITEM], check=True,
                   stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return cfg, experiments


def keep_writing(path: Path, experiments: list[str], every: float, stop: threading.Event, rng: random.Random) -> None:
    """A note on a random experiment every ``every`` s, from a connection of its own."""
    j = Journal(path)
    n = 0
    while not stop.wait(every):
        k = rng.randrange(len(experiments))
        j.append("note", ("qwen", "llama")[k % 2], {"text": f"bench note {n}"}, experiment=experiments[k], actor="cli")
        n += 1
    j.close()


def press_key(n: int, mode: str) -> str:
    """What press ``n`` did: ``sort``, or in ``details`` ``open`` (even n) / ``close``."""
    return "sort" if mode == "sort" else ("open", "close")[n % 2]


def tail_by_key(record: list[tuple[int, float, float | None]], mode: str) -> dict:
    """``by_key``: median / p95 / max per key; ``slowest``: each press at or above the p95
    of all presses (slowest first) with its key, its number and its time after the first
    press (s); ``presses_ms``: every press's ms in order (None: missed)."""
    seen = [(n, t, ms) for n, t, ms in record if ms is not None]
    if not seen:
        return {"by_key": {}, "slowest": [], "presses_ms": [ms for _, _, ms in record]}
    p95 = latency_summary([ms for _, _, ms in seen])["p95_ms"]
    keys = sorted({press_key(n, mode) for n, _, _ in seen})
    by_key = {key: latency_summary([ms for n, _, ms in seen if press_key(n, mode) == key]) for key in keys}
    t_first = record[0][1]
    slowest = [{"press": n, "key": press_key(n, mode), "ms": round(ms, 1), "at_s": round(t - t_first, 2)}
               for n, t, ms in sorted(seen, key=lambda r: -r[2]) if round(ms, 1) >= p95]
    return {"by_key": by_key, "slowest": slowest,
            "presses_ms": [None if ms is None else round(ms, 1) for _, _, ms in record]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--presses", type=int, default=60, help="60 or more for a p95 that is not one press")
    parser.add_argument("--rate", type=float, default=20000.0, help="benchmark lines/s (0: no benchmark)")
    parser.add_argument("--seconds", type=float, default=90.0, help="how long the benchmark prints")
    parser.add_argument("--mode", choices=["sort", "details"], default="sort")
    parser.add_argument("--write-every", type=float, default=0.5, help="s between notes from another connection (0: none)")
    parser.add_argument("--size", default="160x45")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    watch = Watch()
    latencies: list[float] = []
    record: list[tuple[int, float, float | None]] = []
    missed = 0
    with tempfile.TemporaryDirectory(prefix="optui-keys-exp-") as tmp:
        root = Path(tmp)
        t_build = time.monotonic()
        cfg, experiments = write_campaign(root, args.rate, args.seconds, args.events)
        build_s = time.monotonic() - t_build
        stop = threading.Event()
        writer = None
        proc = PtyProcess([sys.executable, "-m", "optui", "-c", str(cfg)], parse_size(args.size), keep=True,
                          on_output=watch.feed)
        try:
            if proc.wait_for(ITEM.encode(), 60) is None:
                raise SystemExit("optui did not show the campaign within 60 s")
            time.sleep(1.0)
            if args.rate > 0:
                proc.send(b"b")
                if proc.wait_for(b"Run anyway", 5) is not None:  # the journal says qwen ran; now it is down
                    proc.send(b"y")
                if proc.wait_for(b"[bench] request ", 20) is None:
                    raise SystemExit("the benchmark output did not appear within 20 s: "
                                     + proc.text().decode(errors="replace")[-3000:])
            if args.write_every > 0:
                writer = threading.Thread(target=keep_writing, daemon=True,
                                          args=(load_config(cfg).journal_path, experiments, args.write_every, stop, rng))
                writer.start()
            title = f"Experiments ({len(experiments)})".encode()
            watch.arm(title)
            t_open = time.monotonic()
            proc.send(b"E")
            if not watch.event.wait(60):
                raise SystemExit("the experiments view did not show every experiment within 60 s")
            open_s = watch.found_at - t_open
            time.sleep(1.5)
            load = load_average()
            t_start = time.monotonic()

            def press(n: int) -> tuple[bytes, bytes]:
                if args.mode == "sort":
                    return b"s", f"{SORT_HEADERS[(n + 1) % len(SORT_HEADERS)]} ↑".encode()
                if n % 2 == 0:
                    return b"\r", b" on qwen"  # the details title: exp-NNNN on qwen (sorted by id: row 1)
                return b"\r", title  # Enter closes the details too

            latencies, missed = timed_presses(proc, watch, press, args.presses, rng, record)
            elapsed = time.monotonic() - t_start
            stats = root / "flood.json"
            still_streaming = args.rate <= 0 or (stats.exists() and not json.loads(stats.read_text()).get("done"))
        finally:
            stop.set()
            if writer is not None:
                writer.join(5)
            proc.send(b"\x1b")  # close the view; ptyrun's stop then quits with q
            time.sleep(0.3)
            proc.stop()
        flood = json.loads((root / "flood.json").read_text()) if (root / "flood.json").exists() else None
    result = {
        "mode": args.mode,
        "events": args.events,
        "experiments": len(experiments),
        "rate_asked": args.rate,
        "write_every_s": args.write_every,
        "presses": args.presses,
        "seen": len(latencies),
        "missed": missed,
        **latency_summary(latencies),
        **tail_by_key(record, args.mode),
        "first_press_monotonic": round(record[0][1], 4) if record else None,  # to line up a trace of the process
        "view_shown_s": round(open_s, 2),
        "journal_built_s": round(build_s, 1),
        "presses_s": round(elapsed, 1),
        "streaming_throughout": still_streaming,
        "client_lines_per_s": round(flood["lines"] / flood["seconds"]) if flood else None,
        "load_during": load,
        "size": args.size,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.mode}: {len(latencies)}/{args.presses} presses seen ({missed} missed) with the experiments view "
              f"open on {args.events:,} events / {len(experiments)} experiments, a note every {args.write_every} s, "
              f"streaming {args.rate:.0f} lines/s; key -> screen median {result['median_ms']} ms, "
              f"p95 {result['p95_ms']} ms, max {result['max_ms']} ms; view shown {result['view_shown_s']} s after E; "
              f"client printed {result['client_lines_per_s']} lines/s; streaming throughout: {still_streaming}; "
              f"load {load}; per key {result['by_key']}; slowest "
              + ", ".join(f"{x['key']} {x['ms']}" for x in result["slowest"]))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
