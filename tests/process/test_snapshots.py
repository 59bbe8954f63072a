"""Snapshot tests of the main screen (SVG, pytest-textual-snapshot) at the four layout
sizes: wide 200x50, 120x40, medium 80x24 and the narrow tmux side pane 60x40 and 50x30
(where GPU hosts fold to one line each so Todo and Bench keep their rows).

The campaign on screen is seeded and deterministic (``tests/helpers/snapshot_campaign.py``)
and the wall clock is frozen in UTC (``snapshot_clock``). Update after a reviewed change:
``pytest tests/process/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest

from tests.helpers.snapshot_campaign import make_app, settle

pytestmark = pytest.mark.usefixtures("snapshot_clock")


@pytest.mark.parametrize("size", [(200, 50), (120, 40), (80, 24), (60, 40), (50, 30)])
def test_main_screen(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=settle)


def test_zoomed_servers_panel_in_a_60x40_side_pane(snap_compare, tmp_path):
    """``2 z`` in a side pane: each server's state, where it runs, what it does now, the
    changed flags and the whole command on lines of their own (issue 20: one line)."""

    async def zoom_servers(pilot) -> None:
        await settle(pilot)
        await pilot.press("2", "z")
        await pilot.pause(0.1)

    assert snap_compare(make_app(tmp_path), terminal_size=(60, 40), run_before=zoom_servers)
