"""The TUI's last boundary before the terminal: no character of untrusted text reaches it.

Widgets show untrusted text (todo items, notes, agents' lists, model ids, log lines, flag
values, file names) escaped visibly where they put it on screen
(:func:`~optui.core.text.safe_text.safe_line` in the panels, :meth:`OptuiApp.notify` for
toasts). This filter is the guarantee under them, for everything Textual draws (inputs,
tables, logs, border titles, toasts, any later widget): Textual's public line-filter
hook (``App.get_line_filters``) passes every rendered line through it, and it removes
each control / invisible format character (:func:`~optui.core.text.safe_text.strip_unsafe`).
Rich and Textual measure those characters as zero cells wide, so removing them changes
no layout. Rich itself strips only BEL, BS, VT, FF and CR: an ESC, an 8-bit CSI (0x9b)
or a bidi override would otherwise be written to the terminal as it is.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter

from optui.core.text.safe_text import STRIP_RE, UNSAFE_RE, safe_text, strip_unsafe


class UnsafeCharFilter(LineFilter):
    """Removes control and invisible format characters from the text of every segment
    (control segments, which Textual does not put in lines, pass as they are). Textual
    caches the filtered strip per filter instance: keep one instance per app."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        """``segments`` with those characters removed (empty segments dropped)."""
        search = STRIP_RE.search
        if not any(search(seg.text) for seg in segments if not seg.control):
            return segments
        out = []
        for seg in segments:
            if seg.control or not search(seg.text):
                out.append(seg)
            elif text := strip_unsafe(seg.text):
                out.append(Segment(text, seg.style))
        return out


def visible_text(text: Text) -> Text:
    """``text`` (Rich) with each control / invisible format character written visibly as
    :func:`~optui.core.text.safe_text.safe_text` does (``\\x1b``, ``\\u202e``), its styles
    kept; newlines stay (they are the row's own structure). The same object when there is
    nothing to escape (the common case costs one regex search)."""
    plain = text.plain
    if not UNSAFE_RE.search(plain):
        return text
    cuts = sorted({i for m in UNSAFE_RE.finditer(plain) for i in (m.start(), m.end())})
    out = Text(style=text.style, justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, end=text.end)
    for piece in text.divide(cuts):
        if len(piece.plain) == 1 and UNSAFE_RE.match(piece.plain):
            shown = Text(safe_text(piece.plain), style=piece.style)
            for span in piece.spans:
                shown.stylize(span.style, 0, len(shown))
            piece = shown
        out.append_text(piece)
    return out
