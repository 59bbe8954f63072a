"""Changed flags in a cell of a given width: flag names whole or abbreviated, never cut.

A table cell too narrow for ``--max-running-requests 64 --chunked-prefill-size 512`` showed
``--max-…`` or ``--max-run… 64…``: the name the operator reads the row by was cut where
the cell ended. :func:`fit_flags` shortens by rules applied to every name in the cell alike:
full names, then each word of a name to its first :data:`WORD_CHARS` letters
(``--max-run-req``), then to its initial (``--mrr``); the flags that do not fit are counted
(``+1``), and only a value, never a name, is cut (with ``…``) when one flag alone does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence

#: letters kept of each word of a flag name at the first level of abbreviation
WORD_CHARS = 3
#: the levels of :func:`abbreviate`, lightest first
LEVELS = (0, 1, 2)


def abbreviate(name: str, level: int) -> str:
    """``name`` (``--max-running-requests``) at abbreviation ``level``: 0 as it is, 1 each
    word to :data:`WORD_CHARS` letters (``--max-run-req``), 2 each word to its initial
    (``--mrr``). A name without dashes in front (a positional's value) is kept."""
    stripped = name.lstrip("-")
    dashes = name[: len(name) - len(stripped)]
    if level == 0 or not dashes or not stripped:
        return name
    words = [w for w in stripped.replace("_", "-").split("-") if w]
    if level == 1:
        return dashes + "-".join(w[:WORD_CHARS] for w in words)
    return dashes + "".join(w[0] for w in words)


def _flag(flag: str, level: int) -> str:
    """One changed flag (``--name value``, ``-(--name)`` dropped) at ``level``."""
    if flag.startswith("-(") and flag.endswith(")"):
        return f"-({abbreviate(flag[2:-1], level)})"
    name, sep, value = flag.partition(" ")
    return abbreviate(name, level) + sep + value


def _fit_at(flags: Sequence[str], width: int, level: int) -> str | None:
    """All of ``flags`` at ``level`` in ``width``, else as many as fit and ``+N``; None when
    not even one does."""
    shown = [_flag(f, level) for f in flags]
    for k in range(len(shown), 0, -1):
        text = " ".join(shown[:k]) + (f" +{len(shown) - k}" if k < len(shown) else "")
        if len(text) <= width:
            return text
    return None


def _cut_value(flags: Sequence[str], width: int) -> str:
    """The first flag at the last level with its value cut (``--mfs 0.9…``), the others
    counted; only when the name alone leaves no room, the name cut too."""
    first = _flag(flags[0], LEVELS[-1])
    rest = f" +{len(flags) - 1}" if len(flags) > 1 else ""
    name, sep, value = first.partition(" ")
    room = width - len(name) - len(sep) - len(rest)
    if sep and room >= 2:
        return name + sep + value[: room - 1] + "…" + rest
    return (first + rest)[: max(0, width - 1)] + "…"


def fit_flag_column(rows: Sequence[Sequence[str]], width: int | Sequence[int]) -> list[str]:
    """Each row's changed flags (:meth:`~optui.core.flags.argv.FlagChange.short`: ``"--tp-size 8"``,
    ``"-(--name)"``) in at most ``width`` characters, at one level of :func:`abbreviate` for
    the whole column (the lightest at which every row fits), so that one flag reads the same
    on every row: a row's flags all, else as many as fit followed by ``+N`` (the others'
    count). When no level fits every row, every row takes the heaviest level (still one
    name per flag on every row), and a row that does not fit even so has its first value
    cut with ``…``. ``""`` for a row without flags. ``width``: one for every row, or each
    row's own (a row that keeps a tag after its flags has less room)."""
    widths = [width] * len(rows) if isinstance(width, int) else list(width)
    for level in LEVELS:
        texts = [_fit_at(flags, w, level) if flags and w > 0 else "" for flags, w in zip(rows, widths, strict=True)]
        if all(t is not None for t in texts):
            return [t or "" for t in texts]
    return [(_fit_at(flags, w, LEVELS[-1]) or _cut_value(flags, w)) if flags and w > 0 else ""
            for flags, w in zip(rows, widths, strict=True)]


def fit_flags(flags: Sequence[str], width: int) -> str:
    """One row's changed flags in at most ``width`` characters: its lightest level of
    :func:`abbreviate` that fits (see :func:`fit_flag_column`), ``""`` for no flags."""
    if not flags or width <= 0:
        return ""
    for level in LEVELS:
        text = _fit_at(flags, width, level)
        if text is not None:
            return text
    return _cut_value(flags, width)
