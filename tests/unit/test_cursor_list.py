"""CursorList's window (a bare Textual app): the cursor stays visible when the list shrinks,
and when it grows again (a resize back from a side pane) the rows above come back instead of
staying hidden behind the old scroll offset."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from optui.ui.widgets.cursor_list import CursorList

pytestmark = pytest.mark.timeout(60)


class ListApp(App):
    CSS = "CursorList { height: 5; }"

    def compose(self) -> ComposeResult:
        yield CursorList(id="rows")


def first_line(widget: CursorList) -> str:
    return widget.render().plain.split("\n")[0].strip()


async def test_window_follows_the_cursor_and_refills_when_taller():
    app = ListApp()
    async with app.run_test(size=(40, 30)) as pilot:
        rows = app.query_one(CursorList)
        rows.set_rows(list(range(20)), [Text(f"row {i}") for i in range(20)])
        rows.focus()
        await pilot.press("end")
        assert first_line(rows) == "row 15" and rows.render().plain.rstrip().endswith("row 19")
        rows.styles.height = 25
        await pilot.pause()
        assert first_line(rows) == "row 0", rows.render().plain
        assert "row 19" in rows.render().plain
        # rows removed below the window: the window fills from the top again
        rows.styles.height = 5
        await pilot.pause()
        assert first_line(rows) == "row 15"
        rows.set_rows(list(range(3)), [Text(f"row {i}") for i in range(3)])
        await pilot.pause()
        assert first_line(rows) == "row 0" and rows.cursor == 2
