"""The bench panel's log keeps showing the newest output once it holds ``log_max_lines``
lines (the oldest are dropped; the screen must still follow the stream)."""

from __future__ import annotations

import html
import re

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from optui.ui.widgets.bench_panel import LOG_FRAME_S


def screen_text(app: OptuiApp) -> str:
    """The text of what the terminal shows (the compositor's own render, caches included)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def test_full_log_still_shows_the_newest_lines(tmp_path):
    (tmp_path / "optui.toml").write_text('log_max_lines = 100\n[hosts.local]\ngpu_source = "none"\n')
    app = OptuiApp(Session(load_config(tmp_path / "optui.toml")))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        panel = app.query_one("#bench")
        for batch in range(4):  # 4 frames of 60 lines: full after the second
            panel.append_lines([f"output line {batch * 60 + i:04d}" for i in range(60)])
            await pilot.pause(LOG_FRAME_S + 0.1)
            assert f"output line {batch * 60 + 59:04d}" in screen_text(app), f"batch {batch}: newest line not on screen"
        log = app.query_one("#bench-log")
        assert log.line_count == 100
        await pilot.press("q")


async def test_log_repaints_are_spaced_and_nothing_is_left_behind(tmp_path):
    """Batches arriving faster than LOG_FRAME_S are shown together with the next repaint;
    the last batch of a stream appears without any further output."""
    (tmp_path / "optui.toml").write_text('[hosts.local]\ngpu_source = "none"\n')
    app = OptuiApp(Session(load_config(tmp_path / "optui.toml")))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        panel = app.query_one("#bench")
        log = app.query_one("#bench-log")
        panel.append_lines(["first"])
        assert log.line_count == 1  # the first batch at once
        panel.append_lines(["second"])
        panel.append_lines(["third"])
        assert log.line_count == 1  # held until the next repaint
        await pilot.pause(LOG_FRAME_S + 0.2)
        assert list(log.lines) == ["first", "second", "third"]
        assert "third" in screen_text(app)
        await pilot.press("q")
