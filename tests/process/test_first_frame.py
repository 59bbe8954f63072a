"""The first frame (``optui.ui.first_frame``): the panels' outline drawn by one widget is where
the mounted dashboard's boxes are, at every size class, so nothing jumps when the dashboard
replaces it; and it shows each visible panel's title on its box's top border."""

from __future__ import annotations

import threading

import pytest

from optui.ui.app import OptuiApp
from optui.ui.first_frame import PANEL_TITLES, FirstFrame, outline

#: wide, medium, narrow; tall and short; odd widths (the fr columns' rounding)
SIZES = [(200, 50), (120, 40), (133, 41), (151, 37), (121, 29), (120, 25), (100, 30), (97, 33), (81, 30),
         (80, 24), (79, 31), (60, 40), (50, 30), (60, 20), (40, 15)]


def _gated_app(**kwargs) -> tuple[OptuiApp, threading.Event]:
    """An app (``kwargs``: OptuiApp's) whose campaign never loads until the event is set: the
    panels mount and stay empty."""
    go = threading.Event()

    def loader():
        go.wait(30)
        raise RuntimeError("not loaded (the test ended)")

    return OptuiApp(loader=loader, title="test", **kwargs), go


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_outline_is_where_the_dashboard_mounts_its_boxes(size):
    app, go = _gated_app()
    try:
        async with app.run_test(size=size) as pilot:
            for _ in range(100):
                if app.panels_mounted:
                    break
                await pilot.pause(0.05)
            assert app.panels_mounted and not app.query(FirstFrame)
            await pilot.pause()
            mounted = {}
            for name in PANEL_TITLES:
                box = app.query_one(f"#{name}-box")
                if box.display and box.region.area:
                    mounted[name] = tuple(box.region)
            assert {name: tuple(box) for name, box in outline(*size).items()} == mounted
    finally:
        go.set()


@pytest.mark.parametrize("size", [(120, 40), (60, 40), (80, 24)], ids=["wide", "narrow", "medium-short"])
async def test_the_first_frame_draws_each_shown_panels_title_on_its_top_border(size):
    app, go = _gated_app()

    async def stay(self):  # keep the first frame on screen
        return None

    app._mount_panels = stay.__get__(app)
    try:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            frame = app.query_one(FirstFrame)
            lines = [frame.render_line(y).text for y in range(frame.size.height)]
            boxes = outline(*size)
            for name, box in boxes.items():
                row = lines[box.y - frame.region.y]
                assert row[box.x:].startswith(f"╭─ {PANEL_TITLES[name]} "), (name, row)
                assert row[box.x + box.width - 1] == "╮", (name, row)
                assert lines[box.y - frame.region.y + 1][box.x:].startswith("│"), name
            shown = {name for name in PANEL_TITLES if any(PANEL_TITLES[name] in line for line in lines)}
            assert shown == set(boxes), (shown, lines)
            assert all(len(line) == size[0] for line in lines)
            assert "loading campaign" in app.query_one("#status-line").render().plain
    finally:
        go.set()


async def test_the_collector_paused_for_the_start_up_runs_again_from_the_first_frame():
    """The CLI switches the garbage collector off before importing Textual
    (``process_setup.pause_collector_until_first_frame``); an app made with ``freeze_gc`` (the
    CLI's) switches it on at its first frame, before the campaign loads."""
    import gc

    from optui.ui.process_setup import pause_collector_until_first_frame

    pause_collector_until_first_frame()
    app, go = _gated_app(freeze_gc=True)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                if app.panels_mounted:
                    break
                await pilot.pause(0.05)
            assert app.panels_mounted and app.session is None
            assert gc.isenabled()
    finally:
        go.set()
        gc.enable()
