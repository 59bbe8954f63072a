"""Issue 17 §2: in the TUI the event loop never waits on SQLite. The session's own journal
traffic (events, syncs, the watch, todo edits, notes) runs on the journal thread, so another
process holding the write lock (``BEGIN EXCLUSIVE``, a ``sqlite3`` shell) freezes nothing, and
what the operator did meanwhile lands, in order, once the lock is free.

The guard: the session's journal connection lock (``Journal._lock``, taken by every read and
write of the connection) is wrapped so that each time the event loop's thread takes it is
recorded with where from; while the lock is held elsewhere the loop must never take it.
"""

from __future__ import annotations

import threading
import time
import traceback

import pytest

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.faults import Heartbeat, Locker, stored_events, wait_for

pytestmark = pytest.mark.timeout(120)


class LoopGuard:
    """A reentrant lock in place of a Journal's ``_lock`` that records (while ``armed``) every
    acquisition made on ``loop_thread``: the stack of each, in :attr:`on_loop`."""

    def __init__(self, inner, loop_thread: threading.Thread) -> None:
        self._inner = inner
        self._loop_thread = loop_thread
        self.armed = False
        self.on_loop: list[str] = []

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.armed and threading.current_thread() is self._loop_thread:
            self.on_loop.append("".join(traceback.format_stack(limit=8)))
        return self._inner.acquire(blocking, timeout)

    def release(self) -> None:
        self._inner.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


def _campaign(tmp_path):
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "none"\n')
    return load_config(cfg)


async def test_a_locked_journal_never_stalls_the_tui_and_loses_no_edit(tmp_path):
    session = Session(_campaign(tmp_path))
    guard = LoopGuard(session.journal._lock, threading.current_thread())
    session.journal._lock = guard
    db = session.journal.path
    app = OptuiApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3", "a", *"before the lock", "enter")
        await wait_for(pilot, lambda: [t.content for t in session.snapshot().todos] == ["before the lock"],
                       what="first item")
        await pilot.pause(0.6)  # the watch and the start-up writes are done
        guard.armed = True
        locker = Locker(db)
        release = threading.Timer(2.0, locker.release)
        try:
            beat = Heartbeat(app, interval_s=0.02)
            started = time.monotonic()
            release.start()
            # each edit waits out the lock on the journal thread; the next key waits for it
            await pilot.press("a", *"during the lock", "enter")
            await pilot.press("space")  # cycles the new item (the cursor is on it)
            await pilot.press("n")
            await wait_for(pilot, lambda: "TextPrompt" in type(app.screen).__name__, what="note prompt")
            await pilot.press(*"noted under the lock", "enter")
            await wait_for(pilot, lambda: any(e.type == "note" for e in session.snapshot().events), what="note")
            assert time.monotonic() - started >= 1.9  # the edits did wait for the lock
            gap = beat.stop()
        finally:
            release.join()
            locker.kill()
        guard.armed = False
        assert not guard.on_loop, f"the event loop took the journal's lock {len(guard.on_loop)}x, first from:\n" \
                                  + guard.on_loop[0]
        assert gap < 0.3, f"the UI froze {gap * 1000:.0f} ms while another process held the journal's lock"
        todos = session.snapshot().todos
        assert [(t.content, t.status.value) for t in todos] == [("before the lock", "pending"),
                                                              ("during the lock", "in_progress")]
        assert "during the lock" in app.query_one("#todo-list").render().plain
        await pilot.press("q")
    stored = [e for e in stored_events(db) if e.type in ("todo.changed", "note")]
    assert [(e.type, e.data.get("op") or e.data.get("text")) for e in stored] == [
        ("todo.changed", "add"), ("todo.changed", "add"), ("todo.changed", "status"), ("note", "noted under the lock")]
