"""The benchmark output log of the bench panel (a Textual ``Log`` that keeps following the
stream and repaints correctly once it is full)."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Log

from optui.core.text.safe_text import safe_line


class StreamLog(Log):
    """The benchmark's output: follows the stream unless the operator scrolled up.

    Textual's own auto-scroll follows only while the log is exactly at its end, which it
    stops being whenever its view gets shorter (a results row above it, a horizontal
    scrollbar for a long line): here "following" means "not scrolled up since we last
    scrolled to the end", and a resize keeps a following log at its end."""

    BINDINGS = [  # Textual's scroll keys, with ids so that [keymap] can remap them
        Binding("up", "scroll_up", "Scroll up", show=False, id="bench_log.up"),
        Binding("down", "scroll_down", "Scroll down", show=False, id="bench_log.down"),
        Binding("left", "scroll_left", "Scroll left", show=False, id="bench_log.left"),
        Binding("right", "scroll_right", "Scroll right", show=False, id="bench_log.right"),
        Binding("home", "scroll_home", "Oldest output", show=False, id="bench_log.top"),
        Binding("end", "scroll_end", "Newest output", show=False, id="bench_log.bottom"),
        Binding("pageup", "page_up", "Page up", show=False, id="bench_log.page_up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="bench_log.page_down"),
        Binding("ctrl+pageup", "page_left", "Page left", show=False, id="bench_log.page_left"),
        Binding("ctrl+pagedown", "page_right", "Page right", show=False, id="bench_log.page_right"),
    ]

    def __init__(self, *, max_lines: int, id: str | None = None) -> None:
        super().__init__(max_lines=max_lines, id=id, auto_scroll=False)
        self._left_at: float | None = None  # scroll_y after the last scroll to the end

    def clear(self) -> StreamLog:
        self._left_at = None
        super().clear()
        return self

    def append(self, lines: list[str]) -> None:
        """Write ``lines`` (already split; what ANSI stripping left of an escape sequence
        shown escaped, :func:`~optui.core.text.safe_text.safe_line`) and keep following if we were."""
        lines = [safe_line(line) for line in lines]
        follow = self._following()
        full = self.line_count + len(lines) > (self.max_lines or 0) > 0
        self.write_lines(lines, scroll_end=False)
        if full:
            # Textual's Log repaints only the lines it appended, by their index before the
            # oldest were dropped: past the end once the log is full, so the view froze
            # on a long run. Every visible line moved up: repaint them all. (Public API
            # only, so not a textual_patches patch; report: docs/upstream/log_write_lines_pruning.md)
            self.refresh()
        if follow:
            self._to_end()

    def _following(self) -> bool:
        return self._left_at is None or self.scroll_y >= self._left_at or self.is_vertical_scroll_end

    def _to_end(self) -> None:
        self.scroll_end(animate=False, immediate=True, x_axis=False)
        self._left_at = self.scroll_y

    def on_resize(self) -> None:
        if self._following():
            self.call_after_refresh(self._to_end)
