"""Keys handled one at a time, in order, even when several arrive together.

Textual hands a key to the focused widget and takes the next one at once; the key's binding
runs only when the key has bubbled back up to the app, and what the binding starts (an
Input's ``Submitted``, a pushed screen's mount) runs later still. Several keys in one read
of the terminal (tmux ``send-keys``, a paste of commands, a fast typist, keys typed during
start-up) therefore went to the widget that had the focus *before* the previous key was
acted on: ``a`` then ``try tp 8`` lost the text (the todo input opened after it had gone to
the list), ``n`` + text + Enter lost the note (the prompt was not mounted yet), text +
Enter + ``+`` typed the ``+`` into the closing input.

:class:`KeySequencer` admits a key (or a paste) only when the previous one is done, and
holds it otherwise (re-posted later: the order is kept, nothing is dropped). "Done" is
proved by a :class:`KeyBarrier`, a message that bubbles from the focused widget up to the
app: it is posted right behind the key (so it comes back once the key was consumed by a
widget or has bubbled up and its bindings ran) and, when the key's bindings ran, once more
from the widget focused then (so it comes back once what the binding posted there, and a
screen it pushed, has been handled), and again (up to :data:`MAX_ROUNDS` times) while the
handlers it reached keep posting messages on the focus chain. A key pressed alone is never
delayed; a held key waits at most :data:`MAX_WAIT_S` for the previous one (a barrier can be
lost; up to :data:`MAX_BUSY_WAIT_S` while messages are still queued on its path, as on a
loaded machine) and :data:`MAX_READY_WAIT_S` for the app to be ready (start-up). A barrier whose widget
is removed (a dismissed prompt) is replaced by one from the new focus.

Relies on Textual 8.2's key path (``App.on_event`` forwards raw keys; a key bubbles back
to the app unless a widget stops it; one queue per widget, first in first out), pinned in
pyproject.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable

from textual import events
from textual.app import App
from textual.dom import DOMNode
from textual.message import Message
from textual.timer import Timer

#: how long a barrier may stay away while nothing it could be behind is queued (s): then it
#: is taken as lost
MAX_WAIT_S = 0.5
#: the longest a key waits for the previous one while that one is still on its way (messages
#: queued on the barrier's path: a loaded machine), so a lost barrier never holds keys for good (s)
MAX_BUSY_WAIT_S = 10.0
#: the longest a key waits for the app to be ready (s): the campaign loading on a slow machine
MAX_READY_WAIT_S = 5.0
#: extra barriers after a key while its handlers keep posting messages on the focus chain
MAX_ROUNDS = 3
#: how often held keys look for what no barrier reports: the app becoming ready (start-up),
#: a barrier's widget removed (s)
POLL_S = 0.02

KeyInput = events.Key | events.Paste


class KeyBarrier(Message, bubble=True):
    """Bubbles from a widget up to the app; ``seq`` names the key it follows."""

    def __init__(self, seq: int) -> None:
        super().__init__()
        self.seq = seq


class KeySequencer:
    """Admit raw keys and pastes to ``app`` one at a time (see module doc). ``ready()``
    says whether the app can take input at all (panels mounted, session loaded). The app
    calls :meth:`admit` for each raw key, :meth:`handled` when one is back after bubbling
    (or was taken by a priority binding), :meth:`barrier_back` for each KeyBarrier."""

    def __init__(self, app: App, ready: Callable[[], bool]) -> None:
        self.app = app
        self.ready = ready
        self.held: deque[KeyInput] = deque()
        self._seq = itertools.count(1)
        self._waiting: int | None = None  # seq of the barrier the next key waits for
        self._waiting_since = 0.0
        self._in_flight = False  # a key was admitted and its first barrier is not sent yet
        self._released: KeyInput | None = None  # re-posted, not admitted yet
        self._barrier_at: DOMNode | None = None  # the widget the awaited barrier was posted to
        self._held_since = 0.0
        self._rounds = 0  # extra barriers sent for the key in flight
        self._timer: Timer | None = None

    # ------------------------------------------------------------ the app's calls
    def admit(self, event: KeyInput) -> bool:
        """True when ``event`` (raw, not forwarded yet) is to be handled now, False when it
        was held (it comes back through the app's queue later)."""
        if event is self._released:
            self._released = None
            if self._busy():  # a key's binding ran between the release and now: wait for it
                self.held.appendleft(event)
                self._arm_timer()
                return False
        elif self.held or self._busy():
            if not self.held:
                self._held_since = time.monotonic()
            self.held.append(event)
            self._arm_timer()
            return False
        self._in_flight = True
        self._rounds = 0
        return True

    def forwarded(self, event: KeyInput) -> None:
        """``event`` was handed to the focused widget: a barrier follows it there."""
        self._send_barrier()

    def handled(self, event: KeyInput) -> None:
        """``event`` is back at the app and its bindings ran (or a priority binding took
        it): wait once more, for what they posted to the now focused widget."""
        self._send_barrier()

    def barrier_back(self, barrier: KeyBarrier) -> None:
        """A barrier reached the app: the key it follows is done when it is the awaited one
        and nothing was posted on the focus chain meanwhile (a handler's own message: the
        todo input's Submitted posts the "add" intent); else one more barrier follows that."""
        if barrier.seq != self._waiting:
            return
        if not self.app.screen_stack:  # the app is closing (its screens gone): nothing to deliver to
            self._waiting = None
            self.held.clear()
            return
        if self._rounds < MAX_ROUNDS and self._chain_busy():
            self._rounds += 1
            self._send_barrier()
            return
        self._waiting = None
        self._release()

    def _chain_busy(self) -> bool:
        node: DOMNode | None = self.app.focused or self.app.screen
        while node is not None and node is not self.app:
            if node.message_queue_size:
                return True
            node = node.parent
        return False

    def _on_its_way(self) -> bool:
        """Whether the awaited barrier may still be queued: a message waits on the path from
        the widget it was posted to up to the app (the app's own queue included). The barrier
        travels right behind its key, so while the key is handled anywhere on that path the
        barrier waits in a queue at or below it."""
        node: DOMNode | None = self._barrier_at
        while node is not None:
            if node.message_queue_size:
                return True
            if node is self.app:
                return False
            node = node.parent
        return bool(self.app.message_queue_size)

    # ------------------------------------------------------------ internals
    def _send_barrier(self) -> None:
        self._in_flight = False
        self._waiting = next(self._seq)
        self._waiting_since = time.monotonic()
        barrier_at: DOMNode = self.app.focused or self.app.screen
        self._barrier_at = barrier_at
        barrier_at.post_message(KeyBarrier(self._waiting))

    def _busy(self) -> bool:
        if not self.ready():  # start-up: wait for it, but never keep q from quitting a stuck load
            return not self.held or time.monotonic() - self._held_since < MAX_READY_WAIT_S
        if self._waiting is not None and self._barrier_at is not None and not self._barrier_at.is_attached:
            self._send_barrier()  # its widget was removed (a prompt dismissed): follow from the new focus
        elif self._waiting is not None and time.monotonic() - self._waiting_since > MAX_WAIT_S:
            # late is not lost: on a loaded machine (issue 30) the previous key was still on
            # its way up to the app, its binding (the one that opens the input) not run yet,
            # and the next key went to the old focus (`3 a b…` ran the bench key)
            if not (self._on_its_way() and time.monotonic() - self._waiting_since < MAX_BUSY_WAIT_S):
                self._waiting = None  # lost: do not wait for it any more
        return self._in_flight or self._waiting is not None or self._released is not None

    def _arm_timer(self) -> None:
        """A held key is re-checked when its barrier comes back; the timer covers start-up
        (not ready yet) and a barrier that never comes back."""
        if self._timer is None:
            self._timer = self.app.set_timer(POLL_S, self._on_timer, name="key-order")

    def _on_timer(self) -> None:
        self._timer = None
        if not self.app.screen_stack:  # the app is closing (its screens gone): nothing to deliver to
            self.held.clear()
            return
        self._release()

    def _release(self) -> None:
        """Re-post the oldest held input when nothing is in its way."""
        if not self.held:
            return
        if self._busy():
            self._arm_timer()
            return
        self._released = self.held.popleft()
        self.app.post_message(self._released)
