"""The UI's door to the session (ui/client.py): its slow calls run off the event loop and
come back as messages."""

from __future__ import annotations

import threading

from optui.adapters.journal import Journal
from optui.core.journal import events as ev
from tests.helpers.snapshot_campaign import make_app
from tests.process.test_app_flows import wait_for


async def test_a_filtered_journal_is_searched_off_the_event_loop(tmp_path, monkeypatch):
    """A filter reaches past the events in memory: the search of the whole journal (a text
    filter scans every event) runs on another thread, and its result is shown when it
    comes back, the title naming the filter of what is on screen."""
    searched_on = []
    query = Journal.query

    def recording(self, *args, **kwargs):
        searched_on.append(threading.current_thread())
        return query(self, *args, **kwargs)

    monkeypatch.setattr(Journal, "query", recording)
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.3)
        app.session.record(ev.NOTE, "qwen", {"text": "a note to find"})
        await pilot.press("5", "t")  # the first type group: a search of the journal
        await wait_for(pilot, lambda: "type:" in app.query_one("#journal-box").border_title)
        assert app.query_one("#journal").shown_seqs
    assert searched_on and threading.main_thread() not in searched_on


async def test_each_client_takes_every_session_event_once_in_order(tmp_path):
    """The session's event stream (issue 33): two alerts raised between two reads reach the
    client once each, in order; a second reader has its own cursor."""
    from optui.session.snapshot_types import Alert
    from optui.session.state import AlertRaised
    from optui.ui.client import SessionClient

    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.3)
        one, other = SessionClient(app.session), SessionClient(app.session)
        one.new_events()  # what came before
        first, second = Alert("hung", "qwen", "qwen is hung"), Alert("gpu_memory", "h:0", "h GPU 0: memory 97% used")
        app.session._raise_alert(first)
        app.session._raise_alert(second)
        assert one.new_events() == (AlertRaised(first), AlertRaised(second))
        assert one.new_events() == ()
        assert other.new_events()[-2:] == (AlertRaised(first), AlertRaised(second))


async def test_the_todo_list_is_exported_beside_the_journal_through_the_client(tmp_path):
    """The palette's todo export: the client writes the file in the campaign's state
    directory (0600), the handler builds the text and says where it went."""
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.3)
        items = app.client.snapshot().todos
        assert items
        app.todo_actions.export_todos("markdown")
        app.todo_actions.export_todos("todowrite")
        state_dir = app.session.state_dir
        md, js = state_dir / "todo.md", state_dir / "todo.json"
        assert items[0].content in md.read_text() and items[0].content in js.read_text()
        assert md.stat().st_mode & 0o777 == 0o600
        await pilot.pause()
        assert any(str(js) in n.message for n in app._notifications)


async def test_a_flag_catalogue_that_cannot_be_learned_comes_back_as_a_reason(tmp_path):
    """The client answers (None, why) when the server's program has no usable --help; the
    flag editor shows why instead of failing."""
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.3)
        catalog, why = await app.client.learn_catalog("qwen")
        assert catalog is None and why
        assert app.client.cached_catalog("qwen") is None
