"""Snapshot tests of the main screen (SVG, pytest-textual-snapshot) at 200x50 and 80x24.

Everything on screen is deterministic: GPUs come from replayed nvidia-smi captures (one
tick), the server points at a closed port (down), todos, events and a bench result are
seeded with fixed timestamps, and the clock's zone is UTC. Update after a reviewed change:
``pytest tests/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.core.bench_parse import parse_bench_output
from optui.session import Session
from optui.ui.app import OptuiApp

FIXTURES = Path(__file__).parent / "fixtures"
T0 = 1_790_000_000.0  # a fixed moment for seeded events


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.delenv("TZ")
    time.tzset()


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


def make_app(tmp_path: Path) -> OptuiApp:
    session = Session(load_config(make_campaign(tmp_path)), actor="tui")
    return OptuiApp(session)


async def settle(pilot) -> None:
    app = pilot.app
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        state = app.session.snapshot()
        if all(h.samples for h in state.hosts) and state.servers[0].state.value == "down":
            break
        await pilot.pause(0.1)
    await pilot.pause(0.5)


@pytest.mark.parametrize("size", [(200, 50), (80, 24)])
def test_main_screen(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=settle)
