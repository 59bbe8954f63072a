"""The rack view: 8 hosts x 8 GPUs fit a 200x50 screen and a 60-column side pane (one line
per host); hosts expand to per-GPU rows with Enter and collapse again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp

FIXTURES = Path(__file__).parents[1] / "fixtures" / "snap"
pytestmark = pytest.mark.usefixtures("snapshot_clock")  # alerts raised on screen get a fixed time


def rack_app(tmp_path: Path, hosts: int = 8) -> OptuiApp:
    campaign = tmp_path / "rack"
    campaign.mkdir()
    text = ""
    for i in range(1, hosts + 1):
        text += f'[hosts.gpu-node-{i}]\ngpu_source = "replay"\nreplay_file = "{FIXTURES / "node-8gpu.csv"}"\ninterval_s = 60\n\n'
    (campaign / "optui.toml").write_text(text)
    return OptuiApp(Session(load_config(campaign / "optui.toml")))


async def settle(pilot) -> None:
    """Every host sampled and its GPU memory alert journaled (the session's alert watcher
    ticks every 0.5 s: waiting on the samples alone, the journal was empty or full by luck),
    then the frame that shows them."""
    deadline = time.monotonic() + 10

    def settled() -> bool:
        snap = pilot.app.session.snapshot()
        return all(h.samples for h in snap.hosts) and sum(e.type == "alert" for e in snap.events) >= len(snap.hosts)

    while time.monotonic() < deadline and not settled():
        await pilot.pause(0.05)
    await pilot.pause(0.4)


@pytest.mark.parametrize("size", [(200, 50), (60, 40)])
async def test_rack_of_8x8_one_line_per_host(tmp_path, size):
    app = rack_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = app.query_one("#gpus")
        lines = panel.render().plain.splitlines()
        assert len(lines) == 8, lines
        for i, line in enumerate(lines, start=1):
            assert line.startswith(f"gpu-node-{i}")
            assert "%" in line  # utilization readable
            assert len(line) <= panel.size.width
        assert panel.region.bottom <= size[1]
        # expand one host: 8 GPU rows (+ its header) appear, others stay one line
        await pilot.press("1", "down", "enter")
        await pilot.pause(0.2)
        lines = panel.render().plain.splitlines() if size[1] >= 40 else lines
        assert len(panel._rows[1].plain.splitlines()) == 9
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert len(panel._rows[1].plain.splitlines()) == 1
        await pilot.press("q")


def test_rack_snapshot_200x50(snap_compare, tmp_path):
    assert snap_compare(rack_app(tmp_path), terminal_size=(200, 50), run_before=settle)


def test_rack_snapshot_60x40(snap_compare, tmp_path):
    assert snap_compare(rack_app(tmp_path), terminal_size=(60, 40), run_before=settle)
