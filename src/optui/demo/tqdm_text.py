"""tqdm's default progress-bar text, reproduced without tqdm (stdlib only).

``tqdm_line(450, 1000, 30.0)`` → ``" 45%|████▌     | 450/1000 [00:30<00:36, 15.00it/s]"``:
tqdm's ``{l_bar}{bar}{r_bar}`` with the 10-character bar it uses when the terminal width
is unknown. Callers add the ``\\r`` (live bar) or ``\\n`` (SGLang's line-per-update bars).
"""

from __future__ import annotations

_BLOCKS = " ▏▎▍▌▋▊▉█"
_BAR_WIDTH = 10


def format_interval(seconds: float) -> str:
    """tqdm's ``MM:SS`` (or ``H:MM:SS``) for a duration in seconds."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours:d}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}"


def format_rate(n: int, elapsed: float) -> str:
    """``15.12it/s``, or ``5.00s/it`` below one item per second, or ``?it/s`` when unknown."""
    rate = n / elapsed if elapsed > 0 and n > 0 else None
    if rate is None:
        return "?it/s"
    if rate < 1.0:
        return f"{1.0 / rate:5.2f}s/it"
    return f"{rate:5.2f}it/s"


def timing(n: int, total: int, elapsed: float) -> str:
    """The bracket part: ``[00:30<00:36, 15.12it/s]``."""
    remaining = "?"
    if n > 0 and elapsed > 0:
        remaining = format_interval((total - n) * elapsed / n)
    return f"[{format_interval(elapsed)}<{remaining}, {format_rate(n, elapsed)}]"


def bar(fraction: float) -> str:
    """The 10-character block bar for ``fraction`` (0..1), with a partial eighth block."""
    fraction = min(max(fraction, 0.0), 1.0)
    full, rem = divmod(fraction * _BAR_WIDTH, 1.0)
    text = "█" * int(full)
    if len(text) < _BAR_WIDTH:
        text += _BLOCKS[int(rem * 8)]
    return text.ljust(_BAR_WIDTH)


def tqdm_line(n: int, total: int, elapsed: float, desc: str = "") -> str:
    """One full tqdm line (no ``\\r``/newline); ``elapsed`` in seconds."""
    fraction = n / total if total else 1.0
    prefix = f"{desc}: " if desc else ""
    return f"{prefix}{fraction * 100:3.0f}%|{bar(fraction)}| {n}/{total} {timing(n, total, elapsed)}"
