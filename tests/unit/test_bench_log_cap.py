"""The bench panel's log keeps showing the newest output once it holds ``log_max_lines``
lines (the oldest are dropped; the screen must still follow the stream)."""

from __future__ import annotations

import html
import re

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.pilot import wait_for


def bench_app(tmp_path, *, log_max_lines: int | None = None) -> OptuiApp:
    """The app on a campaign with no GPUs and no servers (only the bench panel matters)."""
    cap = f"log_max_lines = {log_max_lines}\n" if log_max_lines else ""
    (tmp_path / "optui.toml").write_text(cap + '[hosts.local]\ngpu_source = "none"\n')
    return OptuiApp(Session(load_config(tmp_path / "optui.toml")))


def screen_text(app: OptuiApp) -> str:
    """The text of what the terminal shows (the compositor's own render, caches included)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def mounted(pilot, app: OptuiApp):
    """The bench panel and its log, once mounted (the panels mount just after the first frame)."""
    await wait_for(pilot, lambda: app.query_one("#bench-log"), what="the bench log mounted")
    return app.query_one("#bench"), app.query_one("#bench-log")


async def on_screen(pilot, app: OptuiApp, text: str, what: str) -> None:
    """Wait until ``text`` is on screen (a repaint due within LOG_FRAME_S comes with a timer)."""
    await wait_for(pilot, lambda: text in screen_text(app), what=what)


async def test_full_log_still_shows_the_newest_lines(tmp_path):
    app = bench_app(tmp_path, log_max_lines=100)
    async with app.run_test(size=(120, 40)) as pilot:
        panel, log = await mounted(pilot, app)
        for batch in range(4):  # 4 frames of 60 lines: full after the second
            panel.append_lines([f"output line {batch * 60 + i:04d}" for i in range(60)])
            await on_screen(pilot, app, f"output line {batch * 60 + 59:04d}", f"batch {batch}: newest line on screen")
        assert log.line_count == 100
        await pilot.press("q")


async def test_log_repaints_are_spaced_and_nothing_is_left_behind(tmp_path):
    """Batches arriving faster than LOG_FRAME_S are shown together with the next repaint;
    the last batch of a stream appears without any further output."""
    app = bench_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        panel, log = await mounted(pilot, app)
        panel.append_lines(["first"])
        assert log.line_count == 1  # the first batch at once
        panel.append_lines(["second"])
        panel.append_lines(["third"])
        assert log.line_count == 1  # held until the next repaint
        await wait_for(pilot, lambda: log.line_count > 1, what=lambda: list(log.lines))  # the next repaint, by its timer
        assert list(log.lines) == ["first", "second", "third"]
        await on_screen(pilot, app, "third", "the last batch on screen")
        await pilot.press("q")


async def test_log_follows_the_stream_when_its_view_gets_shorter(tmp_path):
    """A line wider than the panel adds a horizontal scrollbar, and a results table growing
    above the log shortens it: either way Textual's Log no longer thinks it is at the end
    and stopped following the stream."""
    app = bench_app(tmp_path, log_max_lines=500)
    async with app.run_test(size=(120, 40)) as pilot:
        panel, log = await mounted(pilot, app)
        for batch in range(5):
            lines = [f"line {batch * 30 + i:04d}" for i in range(30)]
            lines[5] += " " + "x" * 300  # wider than any panel
            panel.append_lines(lines)
            if batch == 2:  # the results table grows above the log: the log gets shorter
                log.styles.max_height = 6
            newest = f"line {batch * 30 + 29:04d}"
            await on_screen(pilot, app, newest, f"batch {batch}: {newest} on screen")
        await pilot.press("q")


async def test_log_stays_where_the_operator_scrolled(tmp_path):
    """Scrolled up to read: new output does not pull the view back to the end; scrolled
    back to the end: it follows again."""
    app = bench_app(tmp_path, log_max_lines=500)
    async with app.run_test(size=(120, 40)) as pilot:
        panel, log = await mounted(pilot, app)
        panel.append_lines([f"line {i:04d}" for i in range(100)])
        await on_screen(pilot, app, "line 0099", "the first 100 lines shown")
        assert log.scroll_y == log.max_scroll_y > 0
        log.scroll_to(y=10, animate=False, immediate=True)
        panel.append_lines([f"more {i:04d}" for i in range(50)])
        await wait_for(pilot, lambda: log.line_count == 150, what=lambda: log.line_count)  # the next repaint, by its timer
        await pilot.pause()  # its frame
        assert log.scroll_y == 10 and "more 0049" not in screen_text(app)
        log.scroll_end(animate=False, immediate=True)
        panel.append_lines([f"last {i:04d}" for i in range(50)])
        await on_screen(pilot, app, "last 0049", "the view following again")
        await pilot.press("q")
