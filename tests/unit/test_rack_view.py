"""The rack view: 8 hosts x 8 GPUs fit a 200x50 screen and a 60-column side pane (one line
per host); hosts expand to per-GPU rows with Enter and collapse again."""

from __future__ import annotations

from pathlib import Path

import pytest

from optui.config import load_config
from optui.session import Session
from optui.session.state import SessionState
from optui.ui.app import OptuiApp
from tests.helpers.pilot import wait_for

FIXTURES = Path(__file__).parents[1] / "fixtures" / "snap"
pytestmark = pytest.mark.usefixtures("snapshot_clock")  # alerts raised on screen get a fixed time


def rack_app(tmp_path: Path, hosts: int = 8) -> OptuiApp:
    campaign = tmp_path / "rack"
    campaign.mkdir()
    text = ""
    for i in range(1, hosts + 1):
        text += f'[hosts.gpu-node-{i}]\ngpu_source = "replay"\nreplay_file = "{FIXTURES / "node-8gpu.csv"}"\ninterval_s = 60\n\n'
    (campaign / "optui.toml").write_text(text)
    app = OptuiApp(Session(load_config(campaign / "optui.toml")))
    painted: list[SessionState] = []
    apply_state = app.apply_state

    def recording(state: SessionState) -> None:  # the snapshots the render loop paints, in order
        apply_state(state)
        painted.append(state)

    app.apply_state = recording  # type: ignore[method-assign]
    app.painted = painted  # type: ignore[attr-defined]
    return app


def settled(state: SessionState) -> bool:
    """Every host sampled and its GPU memory alert journaled (the session's alert watcher
    ticks every 0.5 s: waiting on the samples alone, the journal was empty or full by luck)."""
    return all(h.samples for h in state.hosts) and sum(e.type == "alert" for e in state.events) >= len(state.hosts)


async def settle(pilot) -> None:
    """A settled snapshot painted into the panels, then the frame that shows them."""
    painted = pilot.app.painted
    await wait_for(pilot, lambda: painted and settled(painted[-1]), timeout=10, what="a settled snapshot painted")
    await pilot.pause()


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
        await wait_for(pilot, lambda: len(panel._rows[1].plain.splitlines()) == 9, what=lambda: panel._rows[1].plain)
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(panel._rows[1].plain.splitlines()) == 1, what=lambda: panel._rows[1].plain)
        await pilot.press("q")


def test_rack_snapshot_200x50(snap_compare, tmp_path):
    assert snap_compare(rack_app(tmp_path), terminal_size=(200, 50), run_before=settle)


def test_rack_snapshot_60x40(snap_compare, tmp_path):
    assert snap_compare(rack_app(tmp_path), terminal_size=(60, 40), run_before=settle)
