"""Keys that arrive together (one read of the terminal: tmux send-keys, a paste of commands,
typing ahead) are handled one at a time and in order (optui.ui.key_order): the key that
opens an input, then the text, reaches that input. Keys are posted to the real app as its
terminal driver posts them, all at once (Pilot.press waits between keys and hides this)."""

from __future__ import annotations

import pytest
from textual import events

from optui.core import events as ev
from tests.helpers.pilot import wait_for
from tests.helpers.snapshot_campaign import make_app, settle

pytestmark = pytest.mark.usefixtures("snapshot_clock")

NAMED = {"enter": "\r", "escape": "\x1b", "space": " "}


def post_at_once(app, keys: list[str]) -> None:
    """What the driver does with one read holding ``keys``."""
    for key in keys:
        app.post_message(events.Key(key, NAMED.get(key, key if len(key) == 1 else None)))


def todo_texts(app) -> list[str]:
    return [t.content for t in app.session.journal.todos()]


async def test_a_key_that_opens_an_input_then_text_then_enter(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        post_at_once(app, ["3", "a", *"burst item", "enter"])  # an inline input (todo panel)
        await wait_for(pilot, lambda: "burst item" in todo_texts(app), timeout=5, what=lambda: todo_texts(app)[-2:])
        post_at_once(app, ["n", *"a note", "enter"])  # a prompt screen, pushed then mounted
        notes = lambda: [e.data["text"] for e in app.session.journal.events(types=[ev.NOTE])]  # noqa: E731
        await wait_for(pilot, lambda: "a note" in notes(), timeout=5, what=notes)
        assert type(app.screen).__name__ == "MainScreen"
        post_at_once(app, ["a", *"second", "escape", "4"])  # cancel, then on to the bench panel
        await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "bench-results", timeout=5,
                       what=lambda: app.focused)
        assert "second" not in todo_texts(app) and not app.query_one("#todo").editing
        await pilot.press("q")


async def test_keys_typed_before_the_panels_mount_are_kept_in_order(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        typed_ahead = not app.panels_mounted
        post_at_once(app, ["3", "a", *"typed ahead", "enter"])
        await settle(pilot)
        await wait_for(pilot, lambda: "typed ahead" in todo_texts(app), timeout=10, what=lambda: todo_texts(app)[-2:])
        assert typed_ahead, "the panels were already mounted: this test no longer types ahead"
        await pilot.press("q")
