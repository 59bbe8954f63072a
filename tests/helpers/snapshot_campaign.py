"""The seeded campaign that snapshot and look-and-feel tests render.

Everything on screen is deterministic: GPUs come from replayed nvidia-smi captures (one
tick, then nothing for a minute), the server points at a closed port (down), todos, events
and a bench result are seeded with fixed timestamps, and :func:`settle` fills the GPU
history with a fixed pattern (5 minutes at 1 s, one gap) once the first readings are in.
Use with the ``snapshot_clock`` fixture (UTC, frozen wall clock).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.core.bench.parse import parse_bench_output
from optui.session import Session
from optui.ui.app import OptuiApp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
T0 = 1_790_000_000.0  # a fixed moment for seeded events


pytestmark = pytest.mark.usefixtures("snapshot_clock")  # UTC, frozen wall clock


def make_campaign(root: Path) -> Path:
    campaign = root / "qwen-tuning"
    campaign.mkdir()
    port = 1  # fixed (it is on screen) and closed: nothing listens on tcpmux
    (campaign / "optui.toml").write_text(f'''
[hosts.gpu-node-1]
gpu_source = "replay"
replay_file = "{FIXTURES / 'snap' / 'node-4gpu.csv'}"
interval_s = 60

[hosts.gpu-node-2]
gpu_source = "replay"
replay_file = "{FIXTURES / 'snap' / 'node-h200-load.csv'}"
interval_s = 60

[servers.qwen]
host = "gpu-node-1"
url = "http://127.0.0.1:{port}"
kind = "sglang"
control = "none"
argv = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-30B-A3B", "--tp-size", "2", "--max-running-requests", "64"]
''')
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(time, "time", lambda: T0 - 600)  # seeded todo events get a fixed time
        seed_journal(campaign / ".optui" / "optui.db")
    return campaign / "optui.toml"


def seed_journal(path: Path) -> None:
    journal = Journal(path)
    journal.add_todo("Baseline at concurrency 1, 2, 4, 8", priority="high", status="completed")
    journal.add_todo("Try --max-running-requests 128 and compare output tok/s against the baseline", priority="high", status="in_progress")
    journal.add_todo("Check whether --disable-radix-cache hurts TTFT", priority="low")
    for i, (type_, data) in enumerate([
        ("server.restart", {"reason": "flag editor"}),
        ("flags.changed", {"diff": ["~ --max-running-requests: 32 → 64"]}),
        ("server.stopped", {"how": "term", "returncode": 0}),
        ("server.starting", {"pid": 4242}),
        ("server.ready", {"ready_s": 92.4}),
        ("note", {"text": "64 looks better; check p99 TTFT"}),
    ]):
        journal.append(type_, "qwen" if type_ != "note" else None, data, actor="tui", ts=T0 + 60 * i)
    text = (FIXTURES / "bench" / "sglang_0.5.23_spec.log").read_text()
    for result in parse_bench_output(text):
        journal.add_result(result, server="qwen", bench="c64", ts=T0)
    journal.close()


def make_app(tmp_path: Path, *, read_only: bool = False, **app_options) -> OptuiApp:
    """The app on a fresh seeded campaign under ``tmp_path``; ``app_options`` go to OptuiApp
    (``theme_name``, ``keymap``...)."""
    session = Session(load_config(make_campaign(tmp_path)), actor="tui", read_only=read_only or None)
    return OptuiApp(session, **app_options)


def seed_history(session: Session, points: int = 300) -> None:
    """Replace every GPU's history with a fixed 5-minute pattern: utilization waves, memory
    climbing then flat, and a 40-point gap (a lost reading) two minutes ago."""
    history = session.gpus.history
    history.points = points
    for n, key in enumerate(sorted(history.util)):
        util = [50 + 45 * math.sin(i / 15 + n) for i in range(points)]
        mem = [min(95.0, 20 + i * (0.3 + 0.1 * n)) for i in range(points)]
        for i in range(150, 190):
            util[i] = mem[i] = None
        history.set_series(key, util, mem)


async def settle(pilot) -> None:
    """Wait until the campaign is on screen as every snapshot shows it: each host's replayed
    GPUs read, the server DOWN, the seeded history drawn and the seeded GPU's memory alert
    raised (its toast is in the main screen's pictures). Bounds for a loaded machine, each
    failing loudly: a settle that went on after a fixed 10 s or 0.5 s took a picture of a
    half-drawn screen beside a CPU hog (test_theme_snapshot[optui-light])."""
    app = pilot.app
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = app.session.snapshot()
        if all(h.samples for h in state.hosts) and state.servers[0].state.value == "down":
            break
        await pilot.pause(0.1)
    state = app.session.snapshot()
    assert all(h.samples for h in state.hosts) and state.servers[0].state.value == "down", (
        [len(h.samples) for h in state.hosts], state.servers[0].state)
    seed_history(app.session)
    # history alone does not trigger a redraw (new readings do; the next is a minute away)
    app.session.touch()
    state = app.session.snapshot()
    app.query_one("#gpus").show(state.hosts, state.gpu_history)
    deadline = time.monotonic() + 40  # the alert watcher ticks every 0.5 s
    while not any(m.title == "gpu memory" for m in app.messages) and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert any(m.title == "gpu memory" for m in app.messages), [m.title for m in app.messages]
    await pilot.pause(0.5)


