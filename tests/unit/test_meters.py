"""Fixed-scale meters: bars and sparklines never auto-scale, gaps stay gaps, and a history
sparkline covers the whole window at any width."""

from __future__ import annotations

from rich.style import Style

from optui.ui.widgets.meters import fmt_mib, fmt_value, pct_bar, resample, sparkline, stacked_bar

USED, RESERVED, EMPTY = Style(color="blue"), Style(color="yellow"), Style(dim=True)


def test_stacked_bar_segments_against_total():
    bar = stacked_bar(10, 100.0, [(50.0, USED), (20.0, RESERVED)], EMPTY)
    assert bar.plain == "███████░░░"
    styled = [(span.start, span.end, span.style) for span in bar.spans]
    assert styled[:5] == [(i, i + 1, USED) for i in range(5)] and styled[5][2] == RESERVED
    assert stacked_bar(8, None, [(1.0, USED)], EMPTY).plain == "········"  # unknown total: n/a
    assert stacked_bar(4, 100.0, [(500.0, USED)], EMPTY).plain == "████"  # clipped, not wider


def test_pct_bar_is_a_fixed_0_to_100_scale():
    assert pct_bar(10, 5.0, USED, EMPTY).plain.startswith("▌░")
    assert pct_bar(10, 95.0, USED, EMPTY).plain == "█████████▌"
    assert pct_bar(6, None, USED, EMPTY).plain == "······"


def test_sparkline_fixed_scale_and_gaps():
    line = sparkline([5.0, None, 95.0, 100.0], 6, USED, EMPTY)
    assert line.plain == "  ▁·██"
    flat_high, flat_low = sparkline([95.0] * 3, 3, USED, EMPTY), sparkline([5.0] * 3, 3, USED, EMPTY)
    assert flat_high.plain != flat_low.plain  # not auto-scaled to min..max


def test_resample_covers_the_whole_window():
    span = 300  # 5 min at 1 s
    hist = [10.0] * 150 + [None] * 30 + [90.0] * 120  # full window: busy at the end, a gap before
    cells = resample(hist, 10, span)
    assert len(cells) == 10
    assert cells[:4] == [10.0] * 4 and cells[5] is None and cells[-1] == 90.0
    # half a window of data fills the right half of the cells only
    assert len(resample([50.0] * 150, 10, span)) == 5
    # peaks survive squeezing (max per cell)
    spiky = [0.0] * 299 + [100.0]
    assert resample(spiky, 10, span)[-1] == 100.0
    # narrow windows or wide charts: points pass through unchanged
    assert resample([1.0, 2.0, 3.0], 10, 3) == [1.0, 2.0, 3.0]
    assert resample([], 10, span) == [] and resample([1.0], 0, span) == []


def test_formatting_never_turns_missing_into_zero():
    assert fmt_value(None) == "n/a" and fmt_value(0.0) == "0"
    assert fmt_mib(812) == "812M" and fmt_mib(41.0 * 1024) == "41.0G" and fmt_mib(140 * 1024) == "140G"
