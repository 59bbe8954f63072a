"""A DataTable whose rows keep their rendered cells across sorts (the experiments view).

Textual's ``DataTable`` keys its render caches on a counter that every ``sort``,
``update_cell`` and ``add_row`` bumps, so after any change it renders every visible cell
again through Rich (~440 cells at ~80 µs on a 160x45 terminal: most of a key press in the
experiments view, ``bench/keypress_experiments.py``). :class:`RowCachedTable` is a
``DataTable`` in every behaviour (keys, cursor, scrolling, mouse, messages, the API the
tests read) and in every cell of its output; only ``render_line`` differs for a plain
data row (not under the cursor or the mouse): each cell's text is rendered once per cell
value and column width, and the line is put together from those parts with the row's
zebra style and the same per-cell meta (row, column) that DataTable's own lines carry.
The header, the cursor row and the hovered row (once the mouse has moved over the table)
are DataTable's own lines.

The rows off screen are rendered ahead, a few per timer step after a render pass found
rows without parts (:meth:`RowCachedTable.render_ahead`): the first press of a sort order
that brings them into view then finds them ready (without it, the first three sorts after
the view opened rendered ~40 new rows each: the slowest presses of the experiments view).

Only Textual's public API is used (``render_line``/``render_lines`` of the Line API,
``get_row``, ``ordered_rows``, ``ordered_columns``, ``Column.get_render_width``,
``get_component_styles``). It assumes what the experiments view sets up: rows of
height 1, no row labels, no fixed rows or columns (else it draws DataTable's lines).
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import Console, ConsoleOptions
from rich.padding import Padding
from rich.protocol import is_renderable
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import BindingType
from textual.geometry import Region
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import DataTable

#: the most rows whose cells are kept rendered (a campaign's experiments, with room)
MAX_CACHED_ROWS = 5000
#: rows rendered ahead per timer step (~10 cells at ~80 µs: ~6 ms, so a key press waits at
#: most that long behind one) and the pause between steps (s), which leaves the loop free
AHEAD_ROWS_PER_STEP = 8
AHEAD_PAUSE_S = 0.02


class RowCachedTable(DataTable):
    """``DataTable`` with per-row caches of rendered cells that survive a sort or a change
    to another row (see the module doc). Same constructor, API and look."""

    BINDINGS: ClassVar[list[BindingType]] = []  # none of its own: DataTable's keys are inherited

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # row key -> (the row's cell objects, the column widths, each cell's segments, unstyled)
        self._cells_rendered: dict[object, tuple[list, tuple[int, ...], list[list[Segment]]]] = {}
        # (row key, zebra style) -> (those segments, the same under the row's style)
        self._cells_styled: dict[tuple, tuple[list[list[Segment]], list[list[Segment]]]] = {}
        self._line_metas: dict[int, tuple[list[Style], Style]] = {}  # row index -> cells' metas, the rest's
        self._pass: tuple | None = None  # what one render pass shares: widths, zebra styles
        self._pointer_seen = False  # the mouse moved over the table: its hover row may be shown
        self._ahead_timer: Timer | None = None  # the pending step of render_ahead, None when none is

    def on_mouse_move(self) -> None:
        self._pointer_seen = True

    def render_lines(self, crop: Region) -> list[Strip]:
        columns = self.ordered_columns
        widths = tuple(column.get_render_width(self) for column in columns)
        self._pass = (widths, self.get_component_styles("datatable--even-row").rich_style,
                      self.get_component_styles("datatable--odd-row").rich_style, self.rich_style)
        try:
            return super().render_lines(crop)
        finally:
            self._pass = None
            if self._ahead_timer is None and len(self._cells_rendered) < min(self.row_count, MAX_CACHED_ROWS):
                self._ahead_timer = self.set_timer(AHEAD_PAUSE_S, self.render_ahead)

    def render_ahead(self, rows: int = AHEAD_ROWS_PER_STEP) -> int:
        """Render the parts (both zebra styles) of up to ``rows`` rows that have none at the
        current column widths, then schedule the next step while some are left. Returns how
        many rows it rendered."""
        self._ahead_timer = None
        if not self.is_mounted or not self.row_count:
            return 0
        widths = tuple(column.get_render_width(self) for column in self.ordered_columns)
        styles = (self.get_component_styles("datatable--even-row").rich_style,
                  self.get_component_styles("datatable--odd-row").rich_style)
        done = 0
        left = False
        for row in self.ordered_rows:
            cached = self._cells_rendered.get(row.key)
            if cached is not None and cached[1] == widths:
                continue
            if done == rows:
                left = True
                break
            parts = self._row_parts(row.key, widths)
            for style in styles:
                self._styled_parts(row.key, parts, style)
            done += 1
        if left and len(self._cells_rendered) < MAX_CACHED_ROWS:
            self._ahead_timer = self.set_timer(AHEAD_PAUSE_S, self.render_ahead)
        return done

    def render_line(self, y: int) -> Strip:
        header = self.header_height if self.show_header else 0
        row_index = y - header + self.scroll_offset.y
        plain = (self._pass is not None and y >= header and 0 <= row_index < self.row_count
                 and not self.fixed_rows and not self.fixed_columns and self.zebra_stripes
                 and not (self.show_cursor and self.cursor_type != "none" and self.cursor_coordinate.row == row_index)
                 and not (self._pointer_seen and self.hover_coordinate.row == row_index))
        if not plain:
            return super().render_line(y)
        row = self.ordered_rows[row_index]
        if row.height != 1 or row.label is not None:
            return super().render_line(y)
        widths, even_style, odd_style, base_style = self._pass  # type: ignore[misc]
        parts = self._row_parts(row.key, widths)
        row_style = odd_style if row_index % 2 else even_style
        # as DataTable: a cell's segment has the row's style, then its own, with the cell's
        # (row, column) meta (what a click or the hover cursor reads)
        styled = self._styled_parts(row.key, parts, row_style)
        metas, out_of_bounds = self._metas(row_index, len(parts))
        segments = [Segment(text, meta if style is None else style + meta) for cell, meta in zip(styled, metas, strict=True)
                    for text, style, _ in cell]
        width = self.size.width
        remaining = max(0, width - sum(widths))
        segments.append(Segment(" " * remaining, row_style + out_of_bounds))
        scroll_x = self.scroll_offset.x
        if not scroll_x and sum(widths) + remaining == width:
            return Strip(segments, width)
        return Strip(segments).crop(scroll_x, scroll_x + width).adjust_cell_length(width, base_style).simplify()

    def _styled_parts(self, row_key, parts: list[list[Segment]], row_style: Style) -> list[list[Segment]]:
        """``parts`` under the row's (zebra) style: kept per row and style while the parts are."""
        key = (row_key, row_style)
        cached = self._cells_styled.get(key)
        if cached is not None and cached[0] is parts:
            return cached[1]
        # simplified per cell: the same segments as DataTable's simplified line (a cell's
        # meta differs from its neighbours', so no segment joins across cells)
        styled = [list(Segment.simplify(Segment.apply_style(cell, row_style))) for cell in parts]
        if len(self._cells_styled) >= 2 * MAX_CACHED_ROWS:
            self._cells_styled.clear()
        self._cells_styled[key] = (parts, styled)
        return styled

    def _metas(self, row_index: int, columns: int) -> tuple[list[Style], Style]:
        """The meta styles of a line's cells and of the space right of them, as DataTable's."""
        cached = self._line_metas.get(row_index)
        if cached is None or len(cached[0]) != columns:
            cached = ([Style.from_meta({"row": row_index, "column": n}) for n in range(columns)],
                      Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True}))
            if len(self._line_metas) >= MAX_CACHED_ROWS:
                self._line_metas.clear()
            self._line_metas[row_index] = cached
        return cached

    def _row_parts(self, row_key, widths: tuple[int, ...]) -> list[list[Segment]]:
        """Each cell of the row rendered (padding included) at its column's width, without
        the row's style: kept while the row's cell objects and the widths stay the same."""
        cells = self.get_row(row_key)
        cached = self._cells_rendered.get(row_key)
        if cached is not None and cached[1] == widths and len(cached[0]) == len(cells) \
                and all(a is b for a, b in zip(cached[0], cells, strict=True)):
            return cached[2]
        console, options = self.app.console, self.app.console_options
        padding = self.cell_padding
        parts = [_render_cell(console, options, _cell_renderable(cell), width, padding)
                 for cell, width in zip(cells, widths, strict=True)]
        if len(self._cells_rendered) >= MAX_CACHED_ROWS:
            self._cells_rendered.clear()
        self._cells_rendered[row_key] = (cells, widths, parts)
        return parts

    def clear(self, columns: bool = False):
        self._cells_rendered.clear()
        self._cells_styled.clear()
        return super().clear(columns)


def _cell_renderable(cell):
    """A cell as DataTable shows a row of height 1 (its ``default_cell_formatter``): a
    string is markup, a float has 2 decimals, a renderable is itself, None is empty."""
    if cell is None:
        return Text("", end="")
    if isinstance(cell, str):
        text = Text.from_markup(cell, end="")
        text.no_wrap = True
        return text
    if isinstance(cell, float):
        return Text(f"{cell:.2f}", no_wrap=True, end="")
    if not is_renderable(cell):
        return Text(str(cell), no_wrap=True, end="")
    return cell


_NULL = Style()


def _render_cell(console: Console, options: ConsoleOptions, renderable, width: int, padding: int) -> list[Segment]:
    """One line of a cell, as ``console.render_lines(Padding(renderable, (0, padding)))`` at
    ``width`` with ``no_wrap`` makes it (what DataTable renders before its styles): a
    :class:`~rich.text.Text` is wrapped, joined and rendered as its ``__rich_console__``
    does, and padded as ``Padding`` does, without the layers between (~4x faster);
    anything else goes through Rich."""
    inner = width - 2 * padding
    if not isinstance(renderable, Text) or inner < 1:
        return console.render_lines(Padding(renderable, (0, padding)),
                                    options.update_dimensions(width, 1).update(no_wrap=True))[0]
    text = renderable
    lines = text.wrap(console, inner, justify=text.justify or options.justify or "default",
                      overflow=text.overflow or options.overflow or "fold",
                      tab_size=console.tab_size if text.tab_size is None else text.tab_size, no_wrap=True)
    line = Text("\n").join(lines[:1])
    segments = [Segment(" " * padding, _NULL)] if padding else []
    segments += line.render(console, end="")
    room = inner - line.cell_len
    if room > 0:
        segments.append(Segment(" " * room, _NULL))
    if padding:
        segments.append(Segment(" " * padding, _NULL))
    return segments
