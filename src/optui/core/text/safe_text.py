"""Untrusted text made safe to show: no character of it can drive the terminal.

Text from outside (todo items, notes, agents' lists, server responses, log lines, flag
values, file names, config values) may carry escape sequences: OSC 2 sets a tmux pane's
title, OSC 52 writes the clipboard, CSI clears the screen and draws forged text, bidi
overrides reorder what a line appears to say. Rich strips only BEL, BS, VT, FF and CR;
click strips CSI only when stdout is not a terminal, and OSC never. Everything optui
shows or prints goes through :func:`safe_text` (or :func:`safe_line`) at its layer's
boundary; what is stored (the journal) keeps the raw text.

What is escaped, each character on its own (so a stream can be escaped chunk by chunk):

- C0 controls except newline (ESC, BEL, NUL, ...), DEL, C1 controls (U+0080-U+009F:
  0x9b is an 8-bit CSI, 0x9d an 8-bit OSC): ``\\x1b``;
- invisible format characters that reorder or hide text: bidi embeddings, overrides and
  isolates (U+202A-U+202E, U+2066-U+2069), marks (U+200E/F, U+061C), zero-width space,
  word joiner and invisible operators (U+200B, U+2060-U+2064), deprecated format
  characters (U+206A-U+206F), BOM (U+FEFF), interlinear annotations (U+FFF9-U+FFFB), line
  and paragraph separators (U+2028/9): ``\\u202e``; zero-width (non-)joiners stay, they
  are part of emoji and of several scripts' spelling;
- lone surrogates (bytes that were not UTF-8, decoded with ``surrogateescape``): printed,
  the byte would come back raw: ``\\udc9b``;
- a tab becomes a space (a tab moves the cursor to a column the layout does not know).

A backslash is left alone: ``\\x1b`` typed literally reads the same as an escaped ESC,
which misleads no terminal.
"""

from __future__ import annotations

import re

#: every character :func:`safe_text` rewrites (newline excluded; :func:`safe_line` adds it)
UNSAFE_RE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff]"
)
_UNSAFE_OR_NEWLINE_RE = re.compile(UNSAFE_RE.pattern[:-1] + "\n]")
#: what :func:`strip_unsafe` removes: the unsafe characters but the tab
STRIP_RE = re.compile(UNSAFE_RE.pattern.replace("\x00-\x09", "\x00-\x08", 1))
#: the mark that stands for a line break in one-line text
NEWLINE_MARK = "⏎"


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if ch == "\t":
        return " "
    if ch in "\r\n":
        return NEWLINE_MARK
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """``text`` with every control / invisible format character written visibly
    (``"a\\x1b]2;x\\x07"`` → ``"a\\\\x1b]2;x\\\\x07"``, U+202E → ``"\\\\u202e"``), tabs as
    spaces, newlines kept (``\\r\\n`` as ``\\n``; a lone ``\\r``, which would overwrite
    the line, as ``⏎``). Safe to print to a terminal; lines stay lines."""
    if not UNSAFE_RE.search(text):
        return text
    return UNSAFE_RE.sub(_visible, text.replace("\r\n", "\n"))


def safe_line(text: str) -> str:
    """:func:`safe_text` for one row of a layout (a panel row, a table cell, a flag value,
    a name): line breaks (``\\n``, ``\\r\\n``, a lone ``\\r``) become ``⏎`` as well, so
    the text can never start a second line."""
    if not _UNSAFE_OR_NEWLINE_RE.search(text):
        return text
    return _UNSAFE_OR_NEWLINE_RE.sub(_visible, text.replace("\r\n", "\n"))


def strip_unsafe(text: str) -> str:
    """``text`` without the characters :func:`safe_text` escapes (tabs, newlines kept).
    Every one of them is zero cells wide to Rich and Textual, so removing them changes no
    layout: the TUI's last filter before the terminal uses this."""
    return STRIP_RE.sub("", text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def safe_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with every unsafe character
    written as a ``\\uXXXX`` escape: the same JSON value, readable non-ASCII text kept, and
    nothing raw for a terminal. (json escapes U+0000-U+001F itself, but not DEL, C1, bidi
    or lone surrogates.) Only valid for JSON text: those characters can only occur inside
    its strings, where ``\\uXXXX`` means the character itself."""
    return UNSAFE_RE.sub(_json_escape, text)


# ``_`` inside a word (CUDA_VISIBLE_DEVICES) is literal in GitHub's Markdown: left readable
_MD_SPECIAL_RE = re.compile(r"([\\`*\[\]|<>]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")


def markdown_inline(text: str) -> str:
    """``text`` as literal inline Markdown on one line: :func:`safe_line`, then backslash,
    backtick, ``*``, ``[``, ``]``, table pipes, HTML's ``<``/``>`` and a ``_`` that is not
    inside a word escaped with a backslash, and a leading ``#`` escaped (a heading)."""
    out = _MD_SPECIAL_RE.sub(r"\\\1", safe_line(str(text)))
    return "\\" + out if out.startswith("#") else out


def markdown_code(text: str) -> str:
    """``text`` inside a Markdown code span (`` `text` ``): :func:`safe_line`, backticks
    (which would end the span) as ``'``. Nothing else needs escaping there."""
    return safe_line(str(text)).replace("`", "'")


def markdown_block_line(text: str) -> str:
    """One line inside a fenced code block: :func:`safe_line`, and a fence (```` ``` ````)
    written ``'''`` so the line cannot close the block."""
    return safe_line(str(text)).replace("```", "'''")


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell: a string becomes :func:`safe_line` (no control characters, one line),
    and one that a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``
    or ``@``) gets a leading ``'``; numbers and None pass unchanged."""
    if not isinstance(value, str):
        return value
    out = safe_line(value)
    return "'" + out if value.startswith(_FORMULA_START) else out


#: how long a toast's one line may be (characters): room for a whole file path (the findings
#: report's, ~170 characters in a deep campaign directory, must be shown whole:
#: tests/process/test_tmux_smoke.py), folded by the toast; a traceback's other lines never come
HEADLINE_MAX = 320


def headline(text: str, limit: int = HEADLINE_MAX) -> str:
    """One line that stands for ``text`` (a journal row, a toast): its first non-blank
    line, or for a Python traceback its exception line (``ValueError: x``, the line that
    says what happened), cut at ``limit`` characters; `` …`` marks that more follows (other
    lines, or the cut). Made safe with :func:`safe_line`."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.lstrip().startswith("Traceback (most recent call last)"):
        first = next((line for line in reversed(lines) if not line[:1].isspace()), first)
    more = len(lines) > 1 or len(first) > limit
    line = safe_line(first[:limit].rstrip())
    return line + " …" if more else line
