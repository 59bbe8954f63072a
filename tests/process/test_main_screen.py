"""Cheap focus changes and prompt repaints (issue 8, key press to screen).

The real app runs headless on the seeded snapshot campaign (``App.run_test``). A focus
change must restyle and repaint only what changed (the two panels' borders, the key bar),
not the whole screen, and show the new panel's keys in the same frame; a key that changes
the session's state is painted without waiting out the render loop's pause.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from optui.ui.app import MIN_FRAME_S
from optui.ui.main_screen import MainScreen
from optui.ui.widgets.key_bar import KeyBar
from tests.helpers.snapshot_campaign import make_app, settle

pytestmark = pytest.mark.usefixtures("snapshot_clock")


def count_calls(monkeypatch, obj, name: str) -> list:
    """Record the arguments of every call of ``obj.name`` (the method still runs)."""
    calls = []
    original = getattr(obj, name)

    def spy(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(obj, name, spy)
    return calls


async def test_focus_change_repaints_only_the_panels_concerned(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        await pilot.press("3")
        await pilot.pause(0.1)
        compositor = app.screen._compositor
        dirty: list = []
        render_update = compositor.render_update

        def spy_render_update(full=False, **kwargs):
            dirty.append(list(compositor._dirty_regions) + ([app.screen.region] if full else []))
            return render_update(full=full, **kwargs)

        monkeypatch.setattr(compositor, "render_update", spy_render_update)
        restyled = count_calls(monkeypatch, app.stylesheet, "update_nodes")
        for key in ("4", "3", "4"):
            await pilot.press(key)
            await pilot.pause(0.05)
        assert app.focused is app.query_one("#bench-results")  # the campaign has results
        # painted: the todo and bench panels (rows 10-29) and the key bar (row 39), nothing else
        middle = app.query_one("#middle").region
        bar = app.query_one(KeyBar).region
        regions = [region for frame in dirty for region in frame]
        assert regions, "nothing was painted"
        outside = [r for r in regions if not (middle.contains_region(r) or bar.contains_region(r))]
        assert not outside, outside
        # restyled: the two panels (their :focus-within border) and the widgets that got or
        # lost the focus (their :focus style), not every widget inside the panels
        ids = {node.id for call in restyled for node in call[0]}
        assert ids <= {"todo-box", "bench-box", "todo-list", "bench-results"}, ids
        # the focused panel's border is the theme's primary colour, the other one is not
        primary = app.theme_variables["primary"].lower()
        assert app.query_one("#bench-box").styles.border_top[1].hex.lower() == primary
        assert app.query_one("#todo-box").styles.border_top[1].hex.lower() != primary
        await pilot.press("q")


async def test_key_bar_follows_the_focus_at_once(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        bar = app.query_one(KeyBar)
        app.action_focus_panel("todo")  # no frame in between
        assert "a Add" in bar.render().plain
        app.action_focus_panel("bench")
        assert "a Add" not in bar.render().plain
        assert "B Pin baseline" in bar.render().plain
        await pilot.press("q")


async def test_a_key_is_painted_without_waiting_for_the_next_frame(tmp_path, monkeypatch):
    """The render loop pauses between frames; a key press ends the pause, so what the key
    changed in the session is painted at once, even right after a frame."""
    monkeypatch.setattr("optui.ui.app.MIN_FRAME_S", 5.0)  # a pause no key could wait out here
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        status = app.query_one("#status-line")
        app.session.touch()  # a frame now: the loop then pauses 5 s
        await pilot.pause(0.3)
        t0 = time.monotonic()
        await pilot.press("p")  # pause: the session changes, the status line says so
        while "PAUSED" not in str(status.render()) and time.monotonic() - t0 < 3.0:
            await asyncio.sleep(0.01)
        assert app.session.paused
        assert "PAUSED" in str(status.render()), "the status line was not repainted within 3 s of the key"
        await pilot.press("q")
    assert MIN_FRAME_S == 0.1


async def test_a_focus_change_is_painted_in_one_frame(tmp_path, monkeypatch):
    """The key bar, both panels' borders and the widgets that lost and got the focus are
    painted by the same frame: each widget hands its repaint over from its own message loop,
    so they used to arrive in two frames 20-30 ms apart (a focus change took 45-60 ms)."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause(0.2)
        screen = app.screen
        frames: list[set[str]] = []
        on_timer_update = screen._on_timer_update

        def spy_frame():
            frames.append({f"#{w.id}" for w in screen._dirty_widgets if w.id})
            return on_timer_update()

        monkeypatch.setattr(screen, "_on_timer_update", spy_frame)
        screen._update_timer._callback = spy_frame
        for key, expected in (("3", {"#keys", "#servers-box", "#todo-box", "#servers", "#todo-list"}),
                              ("4", {"#keys", "#todo-box", "#bench-box", "#todo-list", "#bench-results"})):
            frames.clear()
            await pilot.press(key)
            await pilot.pause(0.2)
            touched = [frame & expected for frame in frames if frame & expected]
            assert touched and touched[0] == expected, (key, frames)
        await pilot.press("q")


async def test_the_cli_app_freezes_its_startup_objects_once_the_campaign_is_on_screen(tmp_path):
    """Full garbage collections while a benchmark streams: 40-50 ms with the app's ~90k
    startup objects in the collector's reach (a key pressed then waited), 5-8 ms without."""
    import gc

    app = make_app(tmp_path, freeze_gc=True)
    assert gc.get_freeze_count() == 0
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            deadline = time.monotonic() + 5
            while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert "campaign" in str(app.query_one("#status-line").render())
            assert gc.get_freeze_count() > 10_000
            await pilot.press("q")
    finally:
        gc.unfreeze()  # the rest of the suite collects as usual
