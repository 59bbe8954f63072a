"""The experiments view in the real app (Pilot) reads and writes the journal only on the
session's journal thread, and a change by another process repaints only its row."""

from __future__ import annotations

import threading

import pytest

from optui.adapters.journal import Journal
from optui.core.journal import events as ev
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.process.test_app_flows import wait_for
from tests.process.test_journal_view import seeded  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(120)


async def test_the_view_reads_and_writes_the_journal_off_the_event_loop(seeded, monkeypatch):  # noqa: F811
    loaded, ids = seeded
    threads: list[tuple[str, str]] = []  # (what, thread) of every whole-campaign read and verdict write
    results, append = Journal.results, Journal.append

    def watched_results(self, *args, **kwargs):
        if kwargs.get("limit", 200) is None:
            threads.append(("results", threading.current_thread().name))
        return results(self, *args, **kwargs)

    def watched_append(self, type, *args, **kwargs):
        if type == ev.VERDICT and kwargs.get("actor") != "cli":  # not the other process's
            threads.append(("verdict", threading.current_thread().name))
        return append(self, type, *args, **kwargs)

    monkeypatch.setattr(Journal, "results", watched_results)
    monkeypatch.setattr(Journal, "append", watched_append)
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("E")
        table = app.screen.query_one("#experiments-table")
        await wait_for(pilot, lambda: table.row_count == 5)
        assert threads and all(name == "optui-journal" for _, name in threads), threads
        def cells(key) -> dict:  # a row's cells but those that give way to a new column (change, evidence)
            return {c.key.value: cell for c, cell in zip(table.ordered_columns, table.get_row(key), strict=True)
                    if c.key.value not in ("change", "evidence")}

        first = {key.value: cells(key) for key in table.rows}

        other = Journal(loaded.journal_path)  # another optui process writes a verdict on one row
        other.append(ev.VERDICT, "qwen", {"decision": "reject"}, experiment=ids["radix"], actor="cli")
        other.close()
        # the first decision adds its column (none while no experiment has one)
        await wait_for(pilot, lambda: str(table.get_row(ids["radix"])[11:]) == "['reject']")
        for key, before in first.items():
            if key != ids["radix"]:
                assert {k: v for k, v in cells(key).items() if k != "decision"} == before

        await pilot.press("k")  # the row under the cursor: kept (Enter: no reason), journaled from the journal thread
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TextPrompt")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(what == "verdict" for what, _ in threads))
        assert [name for what, name in threads if what == "verdict"] == ["optui-journal"]
        assert all(name == "optui-journal" for _, name in threads), threads
        await pilot.press("escape", "q")


async def _view_with_rows(app, pilot, rows: int):
    await pilot.pause(0.3)
    await pilot.press("E")
    table = app.screen.query_one("#experiments-table")
    await wait_for(pilot, lambda: table.row_count == rows)
    await pilot.pause(0.3)  # painted
    return table


async def test_a_new_sort_draws_only_the_header_and_the_cursor_row_through_rich(seeded, monkeypatch):  # noqa: F811
    """A sort moves the rows: a row drawn before keeps its rendered cells (DataTable drew
    every visible cell again, ~440 on a 160x45 terminal: most of the key press on a large
    campaign, bench/keypress_experiments.py)."""
    from rich.console import Console

    loaded, _ = seeded
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        table = await _view_with_rows(app, pilot, 5)
        columns = len(table.columns)
        renders, depth = [], [0]
        render_lines = Console.render_lines

        def counted(self, *args, **kwargs):  # the outermost calls: one per cell
            if not depth[0]:
                renders.append(args[0])
            depth[0] += 1
            try:
                return render_lines(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        monkeypatch.setattr(Console, "render_lines", counted)
        for _ in range(2):  # id -> change -> outcome (one server: no server column, not a sort key)
            await pilot.press("s")
            await pilot.pause(0.2)
        assert app.screen.sort_key == "outcome"
        monkeypatch.setattr(Console, "render_lines", render_lines)
        # per sort at most the header and the cursor row (DataTable's own lines): 2 x 11 cells
        assert len(renders) <= 2 * 2 * columns, len(renders)
        await pilot.press("escape")


async def test_the_dashboard_under_the_view_is_not_drawn_while_it_changes(seeded):  # noqa: F811
    """The view is opaque: a change on the dashboard under it (here a note from another
    process in the journal panel) does not draw the dashboard again (a translucent modal
    drew the whole dashboard, dimmed, for each of its frames: every frame while a
    benchmark streams); the panels take the snapshot once the view closes."""
    loaded, ids = seeded
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        await wait_for(pilot, lambda: app.query("#journal"))
        journal_panel = app.query_one("#journal")
        await _view_with_rows(app, pilot, 5)
        drawn = []
        render_lines = journal_panel.render_lines

        def counted(crop):
            drawn.append(crop)
            return render_lines(crop)

        journal_panel.render_lines = counted
        shown = journal_panel.shown_seqs
        other = Journal(loaded.journal_path)
        other.append(ev.NOTE, "qwen", {"text": "from another process"}, experiment=ids["radix"], actor="cli")
        other.close()
        await wait_for(pilot, lambda: any(e.data.get("text") == "from another process"
                                          for e in app.client.snapshot().events))  # the session has it
        await pilot.pause(0.3)
        assert drawn == [] and journal_panel.shown_seqs == shown  # not even taken in under the view
        await pilot.press("escape")
        await wait_for(pilot, lambda: journal_panel.shown_seqs != shown)  # taken in once the view closed
        await pilot.pause(0.2)
        assert drawn  # and drawn


async def test_the_row_cached_table_draws_every_line_as_datatable_does():
    """Same rows in a DataTable and a RowCachedTable: the same strips (text, style, meta),
    after adding rows, sorting, moving the cursor, changing a cell and scrolling sideways."""
    from rich.text import Text
    from textual.app import App
    from textual.geometry import Region
    from textual.widgets import DataTable

    from optui.ui.widgets.experiment_table import RowCachedTable

    class Pair(App):
        CSS = "DataTable { height: 12; width: 60; }"
        AUTO_FOCUS = None  # both unfocused: the same styles

        def compose(self):
            yield DataTable(id="plain", cursor_type="row", zebra_stripes=True)
            yield RowCachedTable(id="cached", cursor_type="row", zebra_stripes=True)

    def fill(table):
        table.add_column("id", key="id")
        table.add_column("change", key="change", width=14)
        table.add_column("verdict", key="verdict")
        table.add_column("n", key="n")
        for k in range(30):
            table.add_row(f"exp-{k:04d}", Text(f"~ --flag-{k}: 16 → {k} and more", no_wrap=True, overflow="ellipsis"),
                          Text("better" if k % 3 else "worse", style="green" if k % 3 else "red"), k * 1.5, key=f"e{k}")

    def lines(table):
        return [list(strip) for strip in table.render_lines(Region(0, 0, table.size.width, table.size.height))]

    app = Pair()
    async with app.run_test(size=(80, 30)) as pilot:
        plain, cached = app.query_one("#plain"), app.query_one("#cached")
        fill(plain), fill(cached)
        await pilot.pause()
        assert lines(cached) == lines(plain)
        steps = [lambda t: t.sort("n", reverse=True), lambda t: t.move_cursor(row=4),
                 lambda t: t.update_cell("e20", "verdict", Text("failed", style="bold red")),
                 lambda t: t.sort("id"), lambda t: t.scroll_to(x=6, y=3, animate=False)]
        for step in steps:
            step(plain), step(cached)
            await pilot.pause()
            assert lines(cached) == lines(plain)


async def test_rows_off_screen_are_rendered_ahead_so_a_new_sort_finds_them_ready(monkeypatch):
    """200 rows, 10 on screen: after the first paint the others are rendered in timer steps
    of a few rows; the sort that brings the bottom rows into view then renders no data cell
    (the header and the cursor row are DataTable's own lines)."""
    from textual.app import App

    from optui.ui.widgets import experiment_table
    from optui.ui.widgets.experiment_table import RowCachedTable

    class One(App):
        CSS = "DataTable { height: 12; width: 60; }"

        def compose(self):
            yield RowCachedTable(id="cached", cursor_type="row", zebra_stripes=True)

    app = One()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one("#cached")
        for key in ("id", "change", "n"):
            table.add_column(key, key=key)
        for k in range(200):
            table.add_row(f"exp-{k:04d}", f"--flag-{k}", k * 1.5, key=f"e{k}")
        steps = []
        ahead = table.render_ahead
        monkeypatch.setattr(table, "render_ahead", lambda rows=experiment_table.AHEAD_ROWS_PER_STEP: steps.append(ahead(rows)) or steps[-1])
        await wait_for(pilot, lambda: sum(steps) >= 190, timeout=30, what=lambda: steps)
        assert max(steps) <= experiment_table.AHEAD_ROWS_PER_STEP  # a few rows per step, never all at once
        cells = []  # the data cells rendered for the lines this table draws itself
        render_cell = experiment_table._render_cell
        monkeypatch.setattr(experiment_table, "_render_cell", lambda *a: cells.append(a[2]) or render_cell(*a))
        table.sort("n", reverse=True)  # rows 199..190 come into view
        await pilot.pause(0.2)
        assert table.get_row_at(1)[0] == "exp-0198"
        assert cells == [], cells


async def test_a_change_on_the_dashboard_does_not_repaint_the_view(seeded):  # noqa: F811
    """Under the view lies an empty opaque screen, so the dashboard is not current: its
    frames (every frame while a benchmark streams) do not lay out and repaint the view, as
    the screen right under the top one does in Textual. Closing the view shows the
    dashboard again, with what changed meanwhile."""
    loaded, ids = seeded
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        await wait_for(pilot, lambda: app.query("#journal"))
        journal_panel = app.query_one("#journal")
        table = await _view_with_rows(app, pilot, 5)
        painted = []
        render_lines = table.render_lines

        def counted(crop):
            painted.append(crop)
            return render_lines(crop)

        table.render_lines = counted
        shown = journal_panel.shown_seqs
        other = Journal(loaded.journal_path)  # a note changes no cell of the view
        other.append(ev.NOTE, "qwen", {"text": "from another process"}, experiment=ids["radix"], actor="cli")
        other.close()
        await wait_for(pilot, lambda: any(e.data.get("text") == "from another process"
                                          for e in app.client.snapshot().events))  # the session has it
        await pilot.pause(0.3)
        assert painted == [] and journal_panel.shown_seqs == shown  # the panel waits under the view
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "MainScreen"
        assert "from another process" in journal_panel.render().plain


async def test_the_view_is_not_drawn_under_an_experiments_details(seeded):  # noqa: F811
    """Enter opens the details over an empty screen of their own: the translucent details
    drew the whole view again, dimmed, for each of their frames (issue 17 §2: most of the
    Enter / Escape key press, bench/keypress_experiments.py --mode details). Closing them
    shows the view again, with what changed meanwhile; Escape then closes the view."""
    loaded, ids = seeded
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        table = await _view_with_rows(app, pilot, 5)
        view = app.screen
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DetailsScreen")
        await pilot.pause(0.3)
        painted = []
        render_lines = table.render_lines

        def counted(crop):
            painted.append(crop)
            return render_lines(crop)

        table.render_lines = counted
        other = Journal(loaded.journal_path)  # another process changes a row of the view
        other.append(ev.VERDICT, "qwen", {"decision": "reject"}, experiment=ids["radix"], actor="cli")
        other.close()
        await wait_for(pilot, lambda: str(table.get_row(ids["radix"])[11:]) == "['reject']")  # (the column comes with it)
        await pilot.pause(0.3)
        assert painted == []
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.screen is view and [type(s).__name__ for s in app.screen_stack] == [
            "MainScreen", "ExperimentsUnderlay", "ExperimentsScreen"]
        assert painted  # drawn again, with the new verdict
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert [type(s).__name__ for s in app.screen_stack] == ["MainScreen"]


async def test_one_details_screen_serves_every_enter_while_the_view_is_open(seeded):  # noqa: F811
    """Enter shows the experiment under the cursor in the details screen the view keeps (a
    new one per Enter was composed, styled, laid out and drawn twice: most of the ~50 ms
    press on 16 cores, issue 17 §2, bench/keypress_experiments.py --mode details); it goes
    with the view."""
    loaded, _ = seeded
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        await _view_with_rows(app, pilot, 5)
        view = app.screen
        shown = []
        for row in range(3):
            view.query_one("#experiments-table").move_cursor(row=row)
            await pilot.press("enter")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "DetailsScreen")
            await pilot.pause(0.1)
            details = app.screen
            title = str(details.query_one("#details-title").render())
            assert title.startswith(f"{view.current_id()} on ")  # this row's, not the first one's
            assert details.query_one("#details-body").render().plain.startswith(f"{view.current_id()} on ")
            shown.append(details)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is view)
        assert shown[0] is shown[1] is shown[2] and shown[0].is_mounted
        assert [type(s).__name__ for s in app.screen_stack] == ["MainScreen", "ExperimentsUnderlay", "ExperimentsScreen"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: not shown[0].is_attached)
        assert [type(s).__name__ for s in app.screen_stack] == ["MainScreen"]
        assert not app._installed_screens


async def test_the_details_over_their_underlay_are_opaque_and_look_the_same(seeded):  # noqa: F811
    """Over their empty underlay the details are opaque in the colour their translucent
    background showed there: the same picture, without Textual composing the underlay under
    each of their frames."""
    loaded, _ = seeded
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        await _view_with_rows(app, pilot, 5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DetailsScreen")
        await pilot.pause(0.3)
        details = app.screen
        assert details.styles.background.a == 1
        opaque = _cells(app.export_screenshot())
        assert len(opaque) == 180 * 45 and "".join(cell[1] for cell in opaque.values()).count("on qwen")
        details.remove_class("-over-experiments-underlay")  # as Textual drew them before
        await pilot.pause(0.3)
        assert details.styles.background.a < 1
        assert _cells(app.export_screenshot()) == opaque


def _cells(svg: str) -> dict:
    """What a screenshot shows, cell by cell: (column, row) → (background, character, its
    style; a space's style is not shown). The SVG's own grouping of cells and numbering of
    styles differ between two renders of the same picture."""
    import html
    import re

    styles = dict(re.findall(r"\.terminal-\d+-(r\d+) \{ ([^}]*) \}", svg))
    cell_w, cells = 12.2, {}
    for fill, x, y, width in re.findall(r'<rect fill="(#[0-9a-f]+)" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"', svg):
        col, row = round(float(x) / cell_w), round(float(y) / 24.4)
        for n in range(round(float(width) / cell_w)):
            cells[(col + n, row)] = [fill, " ", ""]
    for cls, x, y, text in re.findall(r'<text class="terminal-\d+-(r\d+)" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg):
        col, row = round(float(x) / cell_w), round((float(y) - 20) / 24.4)
        for n, char in enumerate(html.unescape(text).replace("\n", "").replace("\xa0", " ")):
            cell = cells.setdefault((col + n, row), ["", " ", ""])
            cell[1:] = [char, styles.get(cls, "") if char.strip() else ""]
    return {key: tuple(cell) for key, cell in cells.items()}
