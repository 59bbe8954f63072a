"""Which toasts show (no Textual here: the app asks, then shows what it is told).

Every toast goes to the message log (``m``); the gate decides what is drawn:

- the same toast as one on screen (title, text, severity) is not drawn twice;
- at most ``most`` toasts at once (the app: 5, 3 in a side pane); the last slot is one toast
  saying more came, drawn again only for a more severe one (a rack's eight GPU memory
  alerts covered a whole side pane);
- while a dialog asks a question, toasts are held, those on screen as it opens too (one
  covered the rollback offer's buttons at 50x30), and one toast says, once it closes, how
  many were held.

Times are monotonic seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from optui.core.text.safe_text import headline

SEVERITY_RANK = {"information": 0, "warning": 1, "error": 2}
#: the titles of the gate's own toasts about other toasts (never held, never counted)
HELD_TITLE, MORE_TITLE = "messages", "more messages"


@dataclass(frozen=True, slots=True)
class ShownMessage:
    """A toast as it was raised (Unix time, severity, title, the whole text), for the message log."""

    ts: float
    severity: str
    title: str
    text: str


class ToastGate:
    """The toasts on screen, the "more messages" toast and the toasts held for a dialog."""

    def __init__(self) -> None:
        self._on: list[tuple[float, ShownMessage]] = []  # each toast drawn: when it goes
        self._more: tuple[float, int] = (0.0, -1)  # the "more messages" toast: until when, its severity's rank
        self._held: list[ShownMessage] = []

    def admit(self, shown: ShownMessage, timeout_s: float, *, most: int, holding: bool) -> tuple[str, str] | None:
        """``(title, text)`` to draw for ``shown`` (its own, or the "more messages" toast), or
        None: not drawn. ``most``: toasts on screen at most; ``holding``: a dialog asks."""
        if holding and shown.title not in (HELD_TITLE, MORE_TITLE):
            self._held.append(shown)
            return None
        now = time.monotonic()
        self._on = [(t, m) for t, m in self._on if t > now]
        if any((m.title, m.text, m.severity) == (shown.title, shown.text, shown.severity) for _, m in self._on):
            return None  # the same toast is on screen (X pressed again): once is enough
        if len(self._on) < most - 1:
            self._on.append((now + timeout_s, shown))
            return shown.title, shown.text
        rank = SEVERITY_RANK.get(shown.severity, 0)
        until, shown_rank = self._more
        if until > now and rank <= shown_rank:
            return None
        self._more = (now + timeout_s, rank)
        return MORE_TITLE, f"{shown.title or headline(shown.text, limit=60)} and more: m opens the message log"

    def clear(self) -> None:
        """Every toast is gone from the screen."""
        self._on.clear()
        self._more = (0.0, -1)

    def dialog_opened(self) -> bool:
        """Hold the toasts on screen as a dialog opens; True when there were any to clear."""
        now = time.monotonic()
        self._held.extend(m for t, m in self._on if t > now and m.title not in (HELD_TITLE, MORE_TITLE))
        return bool(self._on)

    def dialog_closed(self) -> ShownMessage | None:
        """The toast that says what was held while the dialog was open (None: nothing): a
        pointer to the message log, a ``warning`` when an error or warning was held (never an
        ``error`` itself: it is not one), else ``information``."""
        if not self._held:
            return None
        held, self._held = self._held, []
        worst = "warning" if any(SEVERITY_RANK.get(m.severity, 0) > 0 for m in held) else "information"
        titles = list(dict.fromkeys(m.title for m in held if m.title))
        untitled = sum(not m.title for m in held)
        what = ", ".join(titles + ([f"{untitled} other{'s' if untitled != 1 else ''}"] if untitled else []))
        return ShownMessage(time.time(), worst, HELD_TITLE,
                            f"{len(held)} held while the dialog was open ({what}): m opens the message log")
