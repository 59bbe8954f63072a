"""The first frame: the status line, the five panels' outline and the key bar, the panels'
outline drawn by one widget (:class:`FirstFrame`). The dashboard's own widgets (the panels'
boxes and the panels in them) mount in its place on Textual's ``Ready``
(``OptuiApp._mount_panels``).

One widget instead of the eleven of the boxes, their rows and their placeholders is less to
style, lay out and paint before anything shows: ~13 ms of CPU of a ~190 ms start on the
2-core VM (``bench/RESULTS.md``, issue 33). :func:`outline` follows ``optui.tcss``'s layout
for panels that are still empty; ``tests/process/test_first_frame.py`` checks it against the
mounted dashboard's boxes at the size classes' sizes, so the frame does not jump when the
dashboard replaces it.
"""

from __future__ import annotations

from typing import NamedTuple

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from optui.ui.colors import style

#: each panel's box: its id's name (``#gpus-box``...) and its border title, in the order drawn
PANEL_TITLES = {"gpus": "[1] GPUs", "servers": "[2] Servers", "todo": "[3] Todo", "bench": "[4] Bench",
                "journal": "[5] Journal"}
#: what an empty panel says in the first frame
LOADING = "loading…"


class Box(NamedTuple):
    """A panel's box on the screen: its top-left cell and its size, in cells."""

    x: int
    y: int
    width: int
    height: int


def outline(width: int, height: int) -> dict[str, Box]:
    """The boxes of the panels (:data:`PANEL_TITLES`' names) on a ``width`` x ``height``
    screen while the panels are empty, as ``optui.tcss`` lays them out: the status line on
    the first row, the key bar on the last; wide (≥ 120 columns) GPUs beside Servers above
    Todo beside Bench; medium (80-119) and narrow (< 80) one column; a short screen (< 30
    rows) has no Journal, and a short narrow one no Todo either. A panel the size hides is
    absent; boxes may reach past a screen too small for them (Textual cuts them too)."""
    wide, narrow, short = width >= 120, width < 80, height < 30
    bottom = height - 1  # the key bar's row
    journal = 0 if short else 9 if wide else 5 if narrow else 6
    boxes: dict[str, Box] = {}
    if wide:
        gpus = width * 3 // 5  # 3fr beside 2fr
        boxes["gpus"] = Box(0, 1, gpus, 3)
        boxes["servers"] = Box(gpus, 1, width - gpus, 5)
        top = 6
        rest = max(bottom - journal - top, 6)
        todo = width * 2 // 5  # 2fr beside 3fr
        boxes["todo"] = Box(0, top, todo, rest)
        boxes["bench"] = Box(todo, top, width - todo, rest)
    else:
        servers = 3 if narrow else 5
        boxes["gpus"] = Box(0, 1, width, 3)
        boxes["servers"] = Box(0, 4, width, servers)
        top = 4 + servers
        rest = bottom - journal - top
        if short and not narrow:  # Todo beside Bench
            boxes["todo"] = Box(0, top, width // 2, max(rest, 3))
            boxes["bench"] = Box(width // 2, top, width - width // 2, max(rest, 3))
        elif short:  # Bench alone
            boxes["bench"] = Box(0, top, width, max(rest, 3))
        else:  # Todo above Bench: 1fr and 2fr (medium), 1fr and 1fr (narrow)
            todo = max(rest // 2 if narrow else rest // 3, 3 if narrow else 4)
            boxes["todo"] = Box(0, top, width, todo)
            boxes["bench"] = Box(0, top + todo, width, max(rest - todo, 5 if narrow else 6))
    if journal:
        boxes["journal"] = Box(0, bottom - journal, width, journal)
    return {name: boxes[name] for name in PANEL_TITLES if name in boxes}


class FirstFrame(Widget):
    """The panels' outline (module doc) between the status line and the key bar: each box's
    rounded border in the theme's ``panel-border`` colour, its title, and "loading…" inside.
    Drawn once per size through the line API (no Rich layout of a renderable)."""

    DEFAULT_CSS = "FirstFrame { height: 1fr; }"

    def __init__(self) -> None:
        super().__init__(id="first-frame")
        self._strips: list[Strip] = []
        self._drawn_for: tuple[int, int, int, int] | None = None

    def render_line(self, y: int) -> Strip:
        screen = self.screen.size
        key = (screen.width, screen.height, self.region.y, self.size.width)
        if key != self._drawn_for:
            self._drawn_for = key
            self._strips = self._draw(screen.width, screen.height)
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)

    def _draw(self, width: int, height: int) -> list[Strip]:
        base = self.rich_style
        border = base + style(self.app, "panel-border")
        title_style = base + style(self.app, "text-muted", bold=True)
        muted = base + style(self.app, "text-muted")
        pad = 0 if width < 80 else 1  # optui.tcss: a narrow screen's panels have no padding
        top = self.region.y
        rows: list[list[tuple[int, int, list[Segment]]]] = [[] for _ in range(self.size.height)]
        for name, box in outline(width, height).items():
            inner = box.width - 2
            if inner < 1 or box.height < 2:
                continue
            for dy in range(box.height):
                row = box.y - top + dy
                if not 0 <= row < len(rows):
                    continue
                if dy == 0:
                    title = f" {PANEL_TITLES[name]} "[: max(inner - 1, 0)]
                    segments = [Segment("╭─", border), Segment(title, title_style),
                                Segment("─" * (inner - 1 - len(title)) + "╮", border)]
                elif dy == box.height - 1:
                    segments = [Segment("╰" + "─" * inner + "╯", border)]
                else:
                    text = (" " * pad + LOADING)[:inner] if dy == 1 else ""
                    segments = [Segment("│", border), Segment(text.ljust(inner), muted), Segment("│", border)]
                rows[row].append((box.x, box.width, segments))
        strips = []
        for parts in rows:
            segments, x = [], 0
            for at, box_width, part in sorted(parts, key=lambda p: p[0]):
                if at > x:
                    segments.append(Segment(" " * (at - x), base))
                segments.extend(part)
                x = at + box_width
            if x < self.size.width:
                segments.append(Segment(" " * (self.size.width - x), base))
            strips.append(Strip(segments).crop(0, self.size.width))
        return strips
