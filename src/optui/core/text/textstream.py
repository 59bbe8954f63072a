"""Turning a subprocess's raw output bytes into display lines.

- Bytes arrive in arbitrary chunks (a chunk may end inside a line or inside a UTF-8
  sequence); invalid UTF-8 becomes U+FFFD.
- ``\\r`` without ``\\n`` is a progress-bar update (tqdm): it replaces the current line
  instead of adding one; ``\\r\\n`` is a plain newline.
- ANSI escape sequences (colours, cursor moves) are removed.
- A line longer than ``max_line`` characters is cut (the rest counted, not kept), so a
  1 MB line cannot exhaust memory or stall the UI.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences and other control characters (tabs kept)."""
    return _CONTROL_RE.sub("", ANSI_RE.sub("", text))


@dataclass(slots=True)
class Chunked:
    """Result of one :meth:`LineSplitter.feed`: completed lines, and the current
    carriage-return line (a progress bar) if it changed."""

    lines: list[str] = field(default_factory=list)
    progress: str | None = None


class LineSplitter:
    """Incremental splitter of an output byte stream into clean lines (see module doc)."""

    def __init__(self, max_line: int = 64 * 1024) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._current: list[str] = []
        self._current_len = 0
        self._dropped = 0
        self._pending_cr = False
        self._after_cr = False  # the current line is a redraw (text after a lone \r)
        self.max_line = max_line

    def feed(self, data: bytes) -> Chunked:
        """Consume ``data``; return the lines it completed and the progress line."""
        return self._feed_text(self._decoder.decode(data))

    def close(self) -> Chunked:
        """Flush at end of stream: an unterminated last line is returned as a line."""
        out = self._feed_text(self._decoder.decode(b"", final=True))
        if self._pending_cr:
            self._pending_cr = False
        if self._current or self._dropped:
            out.lines.append(self._take())
            out.progress = None
        return out

    def _feed_text(self, text: str) -> Chunked:
        out = Chunked()
        if not text:
            return out
        pieces = text.split("\n")
        clean = _CONTROL_RE.search(text) is None  # no escape sequence or control character at all
        last = len(pieces) - 1
        for i, piece in enumerate(pieces):
            if i == last:
                self._feed_piece(piece, out)
            elif "\r" in piece or self._current or self._pending_cr or self._dropped:
                self._feed_piece(piece, out)
                self._pending_cr = False  # the "\n" ends the line ("\r\n" is a plain newline)
                out.lines.append(self._take())
                out.progress = None
            else:  # fast path: a whole plain line, nothing pending (most lines of a flood)
                if len(piece) > self.max_line:
                    line = self._clean(piece[: self.max_line], clean) + f" …[{len(piece) - self.max_line} more characters cut]"
                else:
                    line = self._clean(piece, clean)
                out.lines.append(line)
                out.progress = None
                self._after_cr = False
        return out

    @staticmethod
    def _clean(line: str, clean: bool) -> str:
        return line if clean else strip_ansi(line)

    def _feed_piece(self, piece: str, out: Chunked) -> None:
        """Text without ``\n``: lone ``\r`` redraws the current line."""
        start = 0
        while (cr := piece.find("\r", start)) >= 0:
            self._append(piece[start:cr])
            start = cr + 1
            # progress update: keep it as the current line, replaced by the next one
            self._pending_cr = True
            out.progress = self._peek()
        self._append(piece[start:])

    def _append(self, piece: str) -> None:
        if not piece:
            return
        if self._pending_cr:
            # text after a lone \r overwrites the line (tqdm redraw)
            self._current, self._current_len, self._dropped = [], 0, 0
            self._pending_cr = False
            self._after_cr = True
        room = self.max_line - self._current_len
        if room <= 0:
            self._dropped += len(piece)
            return
        if len(piece) > room:
            self._dropped += len(piece) - room
            piece = piece[:room]
        self._current.append(piece)
        self._current_len += len(piece)

    def pending_redraw(self) -> str | None:
        """The unterminated current line when it is a redraw (tqdm writes ``"\\r" + bar``
        and leaves it there), else None. Unlike ``Chunked.progress`` (the last line a
        ``\\r`` ended) it is the newest state, though possibly cut mid-write."""
        if self._after_cr and self._current:
            return self._peek()
        return None

    def _peek(self) -> str:
        return strip_ansi("".join(self._current))

    def _take(self) -> str:
        line = strip_ansi("".join(self._current))
        if self._dropped:
            line += f" …[{self._dropped} more characters cut]"
        self._current, self._current_len, self._dropped = [], 0, 0
        self._after_cr = False
        return line


async def iter_lines(read_chunk: Callable[[], Awaitable[bytes]]) -> AsyncIterator[str]:
    """The display lines of a byte stream read by ``read_chunk()`` until it returns ``b""``
    (a subprocess's or an SSH channel's stdout), through one :class:`LineSplitter`; the
    unterminated last line comes out at the end."""
    splitter = LineSplitter()
    while chunk := await read_chunk():
        for line in splitter.feed(chunk).lines:
            yield line
    for line in splitter.close().lines:
        yield line
