"""Every dialog's buttons whole and on screen in a 50x30 side pane (issue 34: the ``X`` queue
confirm's and the rollback offer's titles wrapped to two lines and pushed the buttons under the
dialog's edge; the experiment editor's and the flag editor's buttons were wider than the dialog).
The real app on the seeded campaign (tests/helpers/snapshot_campaign.py), through Pilot."""

from __future__ import annotations

import time

import pytest
from rich.text import Text
from textual.widgets import Button

from tests.helpers.snapshot_campaign import make_app, settle
from tests.process.test_snapshots_screens import push_agent_request, push_flag_editor

pytestmark = pytest.mark.usefixtures("snapshot_clock")

LONG_BODY = Text("\n".join(
    ["host: gpu-node-1    control: process", "", "changes:", "  - --mem-fraction-static 0.99", "", "will run:",
     "python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp-size 2 --max-running-requests 4 "
     "--enable-metrics --disable-cuda-graph", "", "the last lines of its log:"]
    + [f"  torch.OutOfMemoryError: CUDA out of memory, line {n}" for n in range(30)]))


def push_rollback_offer(app) -> None:
    """A confirm whose title wraps at 50 columns, over a body longer than the screen (the
    rollback offer after an OOM: its log lines)."""
    from optui.ui.screens.confirm import ConfirmScreen

    app.push_screen(ConfirmScreen("qwen failed — roll back to its last good flags?", LONG_BODY, "Roll back"))


def push_queue_confirm(app) -> None:
    from optui.ui.screens.confirm import ConfirmScreen

    app.push_screen(ConfirmScreen("Run 4 experiments, one after another? Each restarts qwen", LONG_BODY, "Run"))


#: name → (screen class name, a function that pushes it, or the keys that open it)
DIALOGS = {
    "rollback offer": ("ConfirmScreen", push_rollback_offer),
    "X queue confirm": ("ConfirmScreen", push_queue_confirm),
    "agent request": ("AgentRequestScreen", push_agent_request),
    "flag editor": ("FlagEditorScreen", push_flag_editor),
    "experiment editor": ("ExperimentScreen", ["3", "down", "E"]),
}


@pytest.mark.parametrize("name", sorted(DIALOGS))
async def test_dialog_buttons_whole_at_50x30(tmp_path, name):
    screen_class, open_it = DIALOGS[name]
    app = make_app(tmp_path)
    async with app.run_test(size=(50, 30)) as pilot:
        await settle(pilot)
        if callable(open_it):
            open_it(app)
        else:
            for key in open_it:
                await pilot.press(key)
        deadline = time.monotonic() + 10
        while type(app.screen).__name__ != screen_class and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert type(app.screen).__name__ == screen_class
        await pilot.pause(0.3)
        screen = app.screen
        buttons = list(screen.query(Button))
        assert buttons
        for button in buttons:
            geometry = screen.find_widget(button)
            # the whole button (its border and label) inside what its dialog shows, and on screen
            assert geometry.clip.contains_region(geometry.region), (name, str(button.label), geometry)
            assert screen.region.contains_region(geometry.region), (name, str(button.label), geometry)
            label = str(button.label)
            assert button.content_size.width >= len(label), (name, label, button.content_size)
        # the buttons still say what they do (a key hint may go: the key bar names the keys)
        assert all(str(b.label).strip() for b in buttons)
        await pilot.press("escape")
