"""The panels' verbs are typed messages (``TodoPanel.Add``, ``BenchPanel.Pin``...): a panel
in a tiny app, given a value, posts them for its keys; the app is composed of one action
handler per domain, not of mixins."""

from __future__ import annotations

import time
from types import SimpleNamespace

from textual.app import App

from optui.core.todo.items import TodoItem
from optui.session.snapshot_types import BenchView
from optui.ui.colors import OPTUI_VARIABLES


class Recorder(App):
    """One panel on a bare screen; every message that bubbles up to the app is kept."""

    def __init__(self, panel) -> None:
        super().__init__()
        self.panel = panel
        self.seen: list = []
        # what ui/policy.py asks of a loaded campaign's client (without one, only view keys work)
        snapshot = SimpleNamespace(read_only=False)
        self.client = SimpleNamespace(bench_running=False, snapshot=lambda: snapshot)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(OPTUI_VARIABLES)

    def compose(self):
        yield self.panel

    def post_message(self, message) -> bool:
        self.seen.append(message)  # what bubbled up to the app (or was posted to it)
        return super().post_message(message)


async def test_todo_panel_keys_post_typed_messages():
    from optui.ui.widgets.todo_panel import TodoList, TodoPanel

    items = (TodoItem(1, "first"), TodoItem(2, "second"))
    panel = TodoPanel(id="todo")
    app = Recorder(panel)
    async with app.run_test(size=(80, 12)) as pilot:
        panel.show(items, {}, "")
        panel.query_one(TodoList).focus()
        await pilot.press("down", "space", "plus", "J", "d", "u", "x", "i")
        await pilot.press("a", *"new item", "enter")
        await pilot.pause()
    posted = [m for m in app.seen if type(m).__qualname__.startswith("TodoPanel.")]
    assert [type(m).__name__ for m in posted] == ["Cycle", "Prioritize", "Move", "Delete", "Undo", "Run", "History", "Add"]
    assert posted[0].item.id == 2 and posted[1].up is True and posted[2].delta == 1
    assert posted[-1].text == "new item"


async def test_bench_panel_keys_post_typed_messages():
    from optui.ui.widgets.bench_panel import BenchPanel

    panel = BenchPanel(id="bench")
    app = Recorder(panel)
    async with app.run_test(size=(100, 20)) as pilot:
        panel.show(BenchView("c64", "qwen", "running", time.time()), ())
        panel.query_one("#bench-log").focus()
        await pilot.press("A", "s", "R", "B", "v")
        await pilot.pause()
    posted = [m for m in app.seen if type(m).__qualname__.startswith("BenchPanel.")]
    assert [type(m).__name__ for m in posted] == ["Abort", "Sweep", "Repeat", "Pin", "Results"]
    assert posted[3].row is None  # no results row to pin yet


def test_the_app_is_composed_not_mixed():
    from textual.app import App

    from optui.ui.app import OptuiApp
    from optui.ui.intents import BenchActions, HostActions, JournalActions, ServerActions, TodoActions

    assert OptuiApp.__bases__ == (App,)
    handlers = (ServerActions, BenchActions, TodoActions, JournalActions, HostActions)
    assert not any(issubclass(OptuiApp, h) for h in handlers)
