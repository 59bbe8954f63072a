"""Snapshot tests of every screen optui pushes over the dashboard (SVG, pytest-textual-snapshot),
each opened the way the operator opens it (its keys on the seeded campaign of
``tests/helpers/snapshot_campaign.py``), at 120x40, the wall clock frozen in UTC.

Two are pushed directly: the seeded server is ``control = "none"`` (optui only observes it),
so ``r`` opens no flag editor and no restart review; the flag editor gets the server's own argv
and one edit typed into it, the confirm dialog the restart review's body.

``test_every_screen_has_a_snapshot`` fails when a screen module under ``ui/screens/`` has no
case here. Update after a reviewed change:
``pytest tests/process/test_snapshots_screens.py --snapshot-update``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Input

from tests.helpers.snapshot_campaign import make_app, settle

# serial: a screen drawn while the machine is busy can paint a frame late (agent_requests differed
# in style only, at load ~10 with the engine peers beside it); the pictures are checked on a quiet machine
pytestmark = [pytest.mark.usefixtures("snapshot_clock"), pytest.mark.serial]

SCREENS = Path(__file__).resolve().parents[2] / "src" / "optui" / "ui" / "screens"


def push_flag_editor(app) -> None:
    from optui.ui.screens.flag_editor import FlagEditorScreen

    server = app.session.servers["qwen"]
    app.push_screen(FlagEditorScreen("qwen", server.cfg.host, "process", list(server.cfg.argv),
                                     catalog_note="no flag catalogue: names and values are not checked"))


def push_confirm(app) -> None:
    from optui.ui.screens.confirm import ConfirmScreen

    body = Text()
    body.append("host: gpu-node-1    control: process    url: http://127.0.0.1:1\n\n")
    body.append("changes:\n", style="bold")
    body.append("  ~ --max-running-requests: 64 → 128\n")
    body.append("\nwill run:\n", style="bold")
    body.append("python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp-size 2 --max-running-requests 128\n")
    app.push_screen(ConfirmScreen("Restart qwen?", body, "Restart"))


def push_choice(app) -> None:
    from optui.ui.screens.choice import ChoiceScreen

    app.push_screen(ChoiceScreen("Benchmark to run:", [
        ("c64", "c64      64 concurrent requests, 1000 prompts  → qwen  (default)"),
        ("sweep", "sweep    concurrency 1, 8, 32, 64  → qwen"),
        ("loadgen", "loadgen  built-in load generator  → qwen")]))


def push_agent_request(app) -> None:
    from optui.core.agent.requests import AgentRequest
    from optui.ui.screens.agent_requests import AgentRequestScreen

    app.push_screen(AgentRequestScreen(AgentRequest(
        seq=118, agent="agent:claude-code", action="restart", server="qwen",
        diff=("~ --max-running-requests: 64 → 128",), argv=(), why="KV cache is at 40 %: room for more requests",
        deadline_ts=1_800_000_240.0), clock=lambda: 1_800_000_000.0))  # 240 s left, however late it is drawn


#: screen module → (screen class name, keys before it opens or a function that pushes it, keys after)
CASES = {
    "agent_requests": ("AgentRequestScreen", push_agent_request, []),
    "choice": ("ChoiceScreen", push_choice, ["down"]),
    "confirm": ("ConfirmScreen", push_confirm, []),
    "text_prompt": ("TextPrompt", ["n"], [*"64 looks better"]),
    "details": ("DetailsScreen", ["3", "i"], []),
    "event_details": ("EventDetailsScreen", ["5", "enter"], []),
    "command_log": ("CommandLogScreen", ["at"], []),
    "server_log": ("ServerLogScreen", ["2", "l"], []),
    "flag_editor": ("FlagEditorScreen", push_flag_editor, [*"--max-running-requests 128", "enter"]),
    "experiment_editor": ("ExperimentScreen", ["3", "down", "E"], []),
    "results": ("ResultsScreen", ["4", "v"], []),
    "experiments": ("ExperimentsScreen", ["E"], []),
}


def opened(screen_class: str, open_it, keys_after: list[str]):
    async def run_before(pilot) -> None:
        app = pilot.app
        await settle(pilot)
        if callable(open_it):
            open_it(app)
        else:
            for key in open_it:
                await pilot.press(key)
        deadline = time.monotonic() + 10
        while type(app.screen).__name__ != screen_class and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert type(app.screen).__name__ == screen_class, [type(s).__name__ for s in app.screen_stack]
        for key in keys_after:
            await pilot.press(key)
        await pilot.pause(0.5)  # a screen that loads in a worker (experiments, results) has shown it
        # the seeded GPU's memory alert (the alert watcher ticks every 0.5 s; 5 s were not enough on a
        # loaded CI machine: its toast came after the clear, into the picture) ...
        deadline = time.monotonic() + 40
        while not any(m.title == "gpu memory" for m in app.messages) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert any(m.title == "gpu memory" for m in app.messages), [m.title for m in app.messages]
        app.clear_notifications()  # ... whose toast times out at no fixed frame (one raised after this was in CI's)
        for field in app.screen.query(Input):
            field.cursor_blink = False  # a steady cursor: a blinking one is on or off at no fixed frame
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("module", sorted(CASES))
def test_screen(snap_compare, tmp_path, module):
    screen_class, open_it, keys_after = CASES[module]
    assert snap_compare(make_app(tmp_path), terminal_size=(120, 40), run_before=opened(screen_class, open_it, keys_after))


def test_every_screen_has_a_snapshot():
    modules = {p.stem for p in SCREENS.glob("*.py") if p.name != "__init__.py"}
    assert modules == set(CASES), f"without a snapshot case: {sorted(modules - set(CASES))}; gone: {sorted(set(CASES) - modules)}"
