"""Tiny fixed-scale meters rendered as Rich text: bars and sparklines.

Textual's Sparkline auto-scales to the data's min..max, so a flat 95 % line would look
like a flat 5 % line; these meters always use a fixed scale (0-100 % or 0-total) and show
missing points as gaps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from rich.style import Style
from rich.text import Text

from optui.core.text.safe_text import safe_line

_BLOCKS = " ▁▂▃▄▅▆▇█"
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def fmt_value(value: float | None, fmt: str = "{:.0f}", na: str = "n/a") -> str:
    """Format a possibly missing value (None → "n/a", never 0)."""
    return na if value is None else fmt.format(value)


def fmt_mib(mib: float | None) -> str:
    """MiB as a short human string: ``812M``, ``41.0G``, ``140G`` (GiB above 1 GiB)."""
    if mib is None:
        return "n/a"
    if mib >= 100 * 1024:
        return f"{mib / 1024:.0f}G"
    if mib >= 1024:
        return f"{mib / 1024:.1f}G"
    return f"{mib:.0f}M"


def stacked_bar(
    width: int,
    total: float | None,
    segments: Sequence[tuple[float | None, Style]],
    empty_style: Style,
) -> Text:
    """A bar of ``width`` cells with consecutive ``segments`` (value, style) against
    ``total`` (e.g. used and reserved memory against total MiB), at 1/8-cell resolution.
    Unknown total or first value give a dotted "n/a" bar."""
    if width <= 0:
        return Text()
    if not total or not segments or segments[0][0] is None:
        return Text("·" * width, style=empty_style)
    bounds: list[tuple[float, float, Style]] = []  # (start, end) in eighths of a cell
    pos = 0.0
    for value, style in segments:
        size = max(0.0, value or 0.0) / total * width * 8
        bounds.append((pos, pos + size, style))
        pos += size
    filled_to = min(pos, width * 8.0)
    text = Text()
    for cell in range(width):
        lo, hi = cell * 8, cell * 8 + 8
        level = int(round(max(0.0, min(8.0, filled_to - lo))))
        if level <= 0:
            text.append("░", style=empty_style)
            continue
        style = max(bounds, key=lambda b: min(hi, b[1]) - max(lo, b[0]))[2]
        text.append(_EIGHTHS[level] if level < 8 else "█", style=style)
    return text


def pct_bar(width: int, pct: float | None, style: Style, empty_style: Style) -> Text:
    """A 0-100 % bar (fixed scale)."""
    if pct is None:
        return Text("·" * max(0, width), style=empty_style)
    return stacked_bar(width, 100.0, [(max(0.0, min(100.0, pct)), style)], empty_style)


def sparkline(values: Iterable[float | None], width: int, style: Style, gap_style: Style, top: float = 100.0) -> Text:
    """The last ``width`` values as block characters on a fixed 0..``top`` scale; None
    values are drawn as gaps ("·")."""
    points = list(values)[-width:] if width > 0 else []
    text = Text()
    pad = width - len(points)
    if pad > 0:
        text.append(" " * pad)
    for v in points:
        if v is None:
            text.append("·", style=gap_style)
        else:
            level = max(0, min(8, round(v / top * 8))) if top else 0
            text.append(_BLOCKS[level] if level else "▁", style=style)
    return text


def resample(values: Iterable[float | None], width: int, span: int) -> list[float | None]:
    """The newest ``span`` points of a history squeezed into at most ``width`` cells, so a
    sparkline covers the whole window (e.g. 5 minutes) at any width. Each cell holds the
    maximum of its points (peaks stay visible) or None when all of them were missing; cells
    older than the first point are left out (the sparkline pads them with blanks)."""
    points = list(values)[-span:] if span > 0 else []
    if width <= 0 or not points:
        return []
    if span <= width:
        return points[-width:]
    per = span / width
    offset = span - len(points)  # window position of points[0]
    out: list[float | None] = []
    for cell in range(width):
        lo = cell * per - offset
        first, last = max(0, math.ceil(lo)), min(len(points), math.ceil(lo + per))
        if last <= first:
            continue
        present = [v for v in points[first:last] if v is not None]
        out.append(max(present) if present else None)
    return out


def truncate(text: str, width: int) -> str:
    """``text`` on one line (:func:`~optui.core.text.safe_text.safe_line`: a newline or an
    escape sequence in a name or a flag value shows as ``⏎`` / ``\\x1b``) cut to
    ``width`` cells with an ellipsis."""
    if width <= 0:
        return ""
    text = safe_line(text)
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"
