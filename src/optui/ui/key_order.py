"""Keys handled one at a time, in order, even when several arrive in one read.

Textual hands a key to the focused widget and takes the next one at once; the key's binding
runs only when the key has bubbled back up to the app. Several keys in one read of the
terminal (tmux ``send-keys``, a paste of commands, a fast typist, keys typed during
start-up) therefore all go to the widget that had the focus *before* the first one was
acted on: ``a`` then ``try tp 8`` lost the text (the todo input opened after it had gone
to the list), ``n`` + text + Enter lost the note (the prompt screen was not mounted yet).

:class:`KeySequencer` holds a key (or a paste) while the previous one is still on its way
(not yet back at the app, not consumed by a widget) or while the screen it would go to is
not ready (pushed but not mounted, panels not mounted yet), and re-posts it when that is
over: the order is kept, nothing is dropped. A key is never held longer than
:data:`MAX_WAIT_S` behind another (a widget that swallows keys without stopping them must
not freeze the keyboard), nor longer than :data:`MAX_READY_WAIT_S` for a screen. A single
key pressed alone is never held.

Relies on Textual 8.2's key path (``App.on_event`` forwards raw keys, a key bubbles back to
the app unless a widget stops it; ``Message._stop_propagation``), pinned in pyproject.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from textual import events
from textual.app import App

#: the longest a key waits for the previous one (s)
MAX_WAIT_S = 0.5
#: the longest a key waits for its screen to be ready (s): start-up on a slow machine
MAX_READY_WAIT_S = 10.0
#: how often a held key checks again (s)
RECHECK_S = 0.005

Input = events.Key | events.Paste


class KeySequencer:
    """Admit raw keys and pastes to ``app`` one at a time (see module doc). ``ready()``
    says whether the app can take input now (its panels and the active screen mounted)."""

    def __init__(self, app: App, ready: Callable[[], bool]) -> None:
        self.app = app
        self.ready = ready
        self.held: deque[Input] = deque()
        self._in_flight: Input | None = None
        self._in_flight_since = 0.0
        self._held_since = 0.0
        self._released: Input | None = None  # re-posted, not admitted yet
        self._timer = None

    def admit(self, event: Input) -> bool:
        """True when ``event`` (raw, not forwarded yet) is to be handled now; False when it
        was held (it comes back through the app's queue later)."""
        if event is self._released:
            self._released = None
        elif self.held or self._busy():
            if not self.held:
                self._held_since = time.monotonic()
            self.held.append(event)
            self._schedule()
            return False
        self._in_flight, self._in_flight_since = event, time.monotonic()
        return True

    def handled(self, event: Input) -> None:
        """``event`` is done: handled by a priority binding (not forwarded), or back at the
        app after bubbling (its bindings have run)."""
        if event is self._in_flight:
            self._in_flight = None
            if self.held:
                self._release()

    def _busy(self) -> bool:
        if not self.ready():
            return True
        flying = self._in_flight
        if flying is None or flying._stop_propagation:  # consumed by a widget (typed into an Input)
            return False
        return time.monotonic() - self._in_flight_since < MAX_WAIT_S

    def _schedule(self) -> None:
        if self._timer is None:
            self._timer = self.app.set_timer(RECHECK_S, self._recheck, name="key-order")

    def _recheck(self) -> None:
        self._timer = None
        if self.held:
            self._release()

    def _release(self) -> None:
        """Re-post the oldest held input when nothing is in its way (or it waited long
        enough); else check again shortly."""
        waited = time.monotonic() - self._held_since
        limit = MAX_WAIT_S if self.ready() else MAX_READY_WAIT_S
        if self._released is not None or (self._busy() and waited < limit):
            self._schedule()
            return
        self._released = self.held.popleft()
        self._held_since = time.monotonic()
        self.app.post_message(self._released)
        if self.held:
            self._schedule()
