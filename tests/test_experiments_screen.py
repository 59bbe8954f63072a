"""The experiments view in the real app (Pilot) reads and writes the journal only on the
session's journal thread, and a change by another process repaints only its row."""

from __future__ import annotations

import threading

import pytest

from optui.adapters.journal import Journal
from optui.core import events as ev
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.test_app_flows import wait_for
from tests.test_journal_view import seeded  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(120)


async def test_the_view_reads_and_writes_the_journal_off_the_event_loop(seeded, monkeypatch):  # noqa: F811
    loaded, ids = seeded
    threads: list[tuple[str, str]] = []  # (what, thread) of every whole-campaign read and verdict write
    results, append = Journal.results, Journal.append

    def watched_results(self, *args, **kwargs):
        if kwargs.get("limit", 200) is None:
            threads.append(("results", threading.current_thread().name))
        return results(self, *args, **kwargs)

    def watched_append(self, type, *args, **kwargs):
        if type == ev.VERDICT and kwargs.get("actor") != "cli":  # not the other process's
            threads.append(("verdict", threading.current_thread().name))
        return append(self, type, *args, **kwargs)

    monkeypatch.setattr(Journal, "results", watched_results)
    monkeypatch.setattr(Journal, "append", watched_append)
    app = OptuiApp(Session(loaded))
    async with app.run_test(size=(180, 45)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("E")
        table = app.screen.query_one("#experiments-table")
        await wait_for(pilot, lambda: table.row_count == 5)
        assert threads and all(name == "optui-journal" for _, name in threads), threads
        first = {key.value: table.get_row(key) for key in table.rows}

        other = Journal(loaded.journal_path)  # another optui process writes a verdict on one row
        other.append(ev.VERDICT, "qwen", {"decision": "reject"}, experiment=ids["radix"], actor="cli")
        other.close()
        await wait_for(pilot, lambda: str(table.get_row(ids["radix"])[12]) == "reject")
        for key, cells in first.items():
            if key != ids["radix"]:
                assert table.get_row(key) == cells

        await pilot.press("k")  # the row under the cursor: kept, journaled from the journal thread
        await wait_for(pilot, lambda: any(what == "verdict" for what, _ in threads))
        assert [name for what, name in threads if what == "verdict"] == ["optui-journal"]
        assert all(name == "optui-journal" for _, name in threads), threads
        await pilot.press("escape", "q")
