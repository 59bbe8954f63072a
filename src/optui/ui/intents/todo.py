"""Todo actions: the todo panel's intents carried out through ``session.todos``."""

from __future__ import annotations

from optui.session import SessionError
from optui.ui.intents.base import IntentBase
from optui.ui.widgets.todo_panel import TodoIntent


class TodoIntents(IntentBase):
    """Todo actions: the todo panel's intents carried out through ``session.todos``."""

    def on_todo_intent(self, intent: TodoIntent) -> None:
        t = self.session.todos
        item = intent.item
        try:
            if intent.op == "add":
                added = t.add(intent.text or "")
                self.query_one("#todo").show(t.items)
                self.query_one("#todo-list").select_key(added.id)
            elif intent.op == "save":
                t.update(item, content=intent.text)
            elif intent.op == "cycle":
                _, warning = t.cycle(item)
                if warning:
                    self.notify(warning, severity="warning")
            elif intent.op == "cancel":
                t.cancel(item)
            elif intent.op in ("priority_up", "priority_down"):
                t.bump_priority(item, up=intent.op == "priority_up")
            elif intent.op in ("move_up", "move_down"):
                t.move(item, -1 if intent.op == "move_up" else 1)
            elif intent.op == "delete":
                t.delete(item)
                self.notify("deleted — u to undo", timeout=3)
            elif intent.op == "undo":
                if t.undo_delete() is None:
                    self.notify("nothing to undo", severity="warning")
        except (SessionError, ValueError, KeyError) as exc:
            self._fail(exc)
        # show the change now (the render loop would anyway, one frame later)
        self.query_one("#todo").show(t.items)

