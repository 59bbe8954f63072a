"""Fault injection, the journal (issue 8): another process holds the campaign DB's write lock
(a ``sqlite3`` shell left in ``BEGIN EXCLUSIVE``), and the disk fills up (SQLite's
``max_page_count``: the same SQLITE_FULL "database or disk is full" a full disk gives).
The real app over the demo campaign; the UI never freezes over 1 s, nothing written before is
lost, and every outcome is on the status line and (once it can be) in the journal.

Kill -9 while writing and concurrent writers: tests/process/test_journal_durability.py.
"""

from __future__ import annotations

import asyncio

import pytest

from optui.session.errors import SessionError
from tests.helpers.faults import Heartbeat, Locker, demo_app, page_limit, ready, status_line, stored_events, wait_for

pytestmark = [pytest.mark.timeout(120), pytest.mark.serial]  # the UI gaps bench/ui_gaps.py prints come from here


async def test_journal_locked_by_another_process_loses_nothing_and_never_freezes(tmp_path, monkeypatch):
    # the lock is held through a whole restart: each of its journal reads (the experiment's
    # id...) waits out the lock for EDIT_WAIT_S, then the restart goes on without it; 2 s
    # instead of the product's 10 s (the same path, ~20 s less of the suite)
    import optui.session.journal.writer as journal_writer
    import optui.session.server.transitions as server_transitions

    monkeypatch.setattr(server_transitions, "EDIT_WAIT_S", 2.0)
    monkeypatch.setattr(journal_writer, "EDIT_WAIT_S", 2.0)
    app = demo_app(tmp_path)
    session, rt = app.session, app.session.servers["demo"]
    db = session.journal.path
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        session.add_note("before the lock")
        locker = Locker(db)
        try:
            beat = Heartbeat(app)
            session.add_note("during the lock 1")  # waits 0.5 s at most, then waits in memory
            # it returns while the lock is held: not after a write's wait for the lock (a minute,
            # WRITE_WAIT_S) behind which the read-back of its events was queued (the bound is that
            # minute's half: the restart itself takes its two EDIT_WAIT_S reads and a start)
            async with asyncio.timeout(30):
                status = await session.restart_server("demo", list(rt.status.argv), reason="restart under a lock")
            assert status.state.value == "ready"  # the server work goes on
            session.add_note("during the lock 2")
            with pytest.raises(SessionError, match="database is locked"):
                session.todos.add("a todo edit fails visibly instead")
            await wait_for(pilot, lambda: "event(s) waiting, written when the lock is free" in status_line(app),
                           what="lock on the status line")
            assert "journal:" in status_line(app) and "database is locked" in status_line(app)
            assert not [e for e in stored_events(db, types=["note"]) if "during" in e.data["text"]]
            beat.stop()
        finally:
            locker.release() if locker.proc.poll() is None else None
            locker.kill()
        beat = Heartbeat(app)
        await wait_for(pilot, lambda: session.journal.deferred == 0 and "journal:" not in status_line(app),
                       what="waiting events written")
        notes = [e.data["text"] for e in stored_events(db, types=["note"])]
        assert notes == ["before the lock", "during the lock 1", "during the lock 2"]
        restart = [e.type for e in stored_events(db, target="demo", since_seq=stored_events(db, types=["note"])[0].seq)]
        for step in ("server.restart", "server.stopped", "server.starting", "server.ready"):
            assert step in restart, (step, restart)
        assert restart.index("server.restart") < restart.index("server.stopped") < restart.index("server.ready")
        await wait_for(pilot, lambda: "during the lock 2" in app.query_one("#journal").render().plain, what="journal panel")
        beat.stop()
        assert locker.proc.returncode is not None
        await pilot.press("q")


async def test_disk_full_shows_a_clear_error_and_turns_read_only(tmp_path):
    app = demo_app(tmp_path)
    session, rt = app.session, app.session.servers["demo"]
    db = session.journal.path
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        beat = Heartbeat(app)
        session.add_note("written before the disk filled up")
        written = [e.seq for e in stored_events(db)]
        page_limit(session.journal)
        for i in range(500):  # events keep coming until the file cannot grow (the TUI's way: on the journal thread)
            await app.client.add_note(f"note {i} " + "x" * 200)
            if session.read_only:
                break
        assert session.read_only, "the journal never filled up"
        await wait_for(pilot, lambda: "READ-ONLY" in status_line(app), what="read-only on the status line")
        line = status_line(app)
        # the failed write's error, or the next write's (refused by the read-only journal) when
        # one came after it: both name the cause
        assert "journal: " in line and ("cannot write journal: database or disk is full" in line
                                        or "journal is read-only (database or disk is full)" in line), line
        with pytest.raises(SessionError, match=r"read-only mode: restarting a server is disabled \(the journal cannot be "
                                               r"written: database or disk is full\)"):
            await session.restart_server("demo", list(rt.status.argv))
        with pytest.raises(SessionError, match="disk is full"):
            session.benches.run("sweep")
        await pilot.press("2", "r")  # the restart key is hidden and refused
        await pilot.pause(0.3)
        assert len(app.screen_stack) == 1
        assert not [c for c in app.get_system_commands(app.screen) if c.title.startswith(("Restart", "Run benchmark"))]
        # optui keeps running: the server is still monitored, the UI answers
        assert rt.status.state.value == "ready"
        assert {e.seq for e in stored_events(db)} >= set(written)  # nothing written before is lost
        beat.stop()
        await pilot.press("q")
    assert stored_events(db, types=["note"])[0].data["text"] == "written before the disk filled up"
