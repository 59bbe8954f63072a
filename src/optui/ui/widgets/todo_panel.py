"""The todo panel: the session's plan, edited from the keyboard.

Keys (on the list): ``a`` add, ``e``/Enter edit, space cycle status, ``c`` cancel,
``+``/``-`` priority, ``K``/``J`` move, ``d`` delete, ``u`` undo delete, ``/`` filter,
``h`` show/hide completed, ``E`` attach/edit an experiment, ``x`` run the item's
experiment (queued when one runs), ``X`` queue every pending item with an experiment,
``i`` the item's history (acknowledges a ⚠ conflict). The panel only renders items and
posts :class:`TodoPanel`'s nested messages (``TodoPanel.Add``...); the app carries them
out through the session.

Badges before the text: ``⚠`` a concurrent edit was flagged, ``!blocked`` an unknown
agent status (shown as pending), ``A+``/``A~``/``A-`` the followed agent added / changed /
dropped the item, ``⚗`` an experiment (``⚗…`` queued or running with its step, ``⚗✓``
done, ``⚗✗ oom`` failed). After the text, ``blocked by #3`` names the open items a followed
Claude Code task waits for (its ``blockedBy``).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input

from optui.core.text.safe_text import safe_line
from optui.core.todo.formats import dependency_labels
from optui.core.todo.items import TodoItem, TodoStatus
from optui.ui.colors import focus_now, style
from optui.ui.policy import allowed
from optui.ui.widgets.cursor_list import LOADING_TEXT, CursorList
from optui.ui.widgets.one_line_input import OneLineInput

#: what the list says when it has no items (once the session's first state came)
EMPTY_TEXT = "no todo items — press a to add one"

STATUS_ICON = {"pending": "○", "in_progress": "◐", "completed": "✔", "cancelled": "✖"}
PRIORITY_VAR = {"high": "error", "medium": "warning", "low": "secondary"}


def _is_done(item: TodoItem) -> bool:
    """Completed or cancelled: shown after the open items."""
    return item.status in (TodoStatus.COMPLETED, TodoStatus.CANCELLED)


class TodoList(CursorList):
    """The list part of the todo panel (bindings live here so they need focus); its keys
    call the panel's verbs."""

    BINDINGS = [
        Binding("a", "add", "Add", id="todo.add"),
        Binding("e,enter", "edit", "Edit", id="todo.edit"),
        Binding("space", "cycle", "Status", id="todo.cycle"),
        Binding("c", "cancel_item", "Cancel item", show=False, id="todo.cancel"),
        Binding("plus,equals_sign", "priority(True)", "Prio +", show=False, id="todo.priority_up"),
        Binding("minus", "priority(False)", "Prio -", show=False, id="todo.priority_down"),
        Binding("K", "move(-1)", "Move up", show=False, id="todo.move_up"),
        Binding("J", "move(1)", "Move down", show=False, id="todo.move_down"),
        Binding("d,delete", "delete", "Delete", id="todo.delete"),
        Binding("u", "undo", "Undo", show=False, id="todo.undo"),
        Binding("slash", "filter", "Filter", show=False, id="todo.filter"),
        Binding("h", "toggle_done", "Hide done", show=False, id="todo.toggle_done"),
        Binding("x", "run_experiment", "Run experiment", id="todo.run"),
        Binding("X", "queue_all", "Run all", show=False, id="todo.queue_all"),
        Binding("E", "experiment", "Experiment", show=False, id="todo.experiment"),
        Binding("i", "history", "History", show=False, id="todo.history"),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return allowed(self.app, action, parameters)

    @property
    def panel(self) -> TodoPanel:
        """The todo panel this list belongs to."""
        return self.query_ancestor(TodoPanel)

    def action_add(self) -> None:
        self.panel.open_input("add", "", "new todo — Enter adds, Esc cancels")

    def action_edit(self) -> None:
        self.panel.edit_current()

    def action_filter(self) -> None:
        self.panel.open_input("filter", self.panel.filter_text, "filter — type to filter, Enter keeps, Esc clears")

    def action_toggle_done(self) -> None:
        self.panel.toggle_done()

    def action_undo(self) -> None:
        self.post_message(TodoPanel.Undo())

    def action_queue_all(self) -> None:
        self.post_message(TodoPanel.QueueAll())

    def action_cycle(self) -> None:
        self.panel.post_for_current(TodoPanel.Cycle)

    def action_cancel_item(self) -> None:
        self.panel.post_for_current(TodoPanel.Cancel)

    def action_priority(self, up: bool) -> None:
        self.panel.post_for_current(TodoPanel.Prioritize, up=up)

    def action_move(self, delta: int) -> None:
        self.panel.move_current(delta)

    def action_delete(self) -> None:
        self.panel.post_for_current(TodoPanel.Delete)

    def action_run_experiment(self) -> None:
        self.panel.post_for_current(TodoPanel.Run)

    def action_experiment(self) -> None:
        self.panel.post_for_current(TodoPanel.EditExperiment)

    def action_history(self) -> None:
        self.panel.post_for_current(TodoPanel.History)


class TodoPanel(Vertical):
    """List + inline input (add, edit, filter). The panel renders the items it is given
    and posts what the operator asked for as the nested messages below (the app carries
    them out through the session)."""

    @dataclass
    class Add(Message):
        """Add an item with ``text``."""

        text: str

    @dataclass
    class Save(Message):
        """Set ``item``'s content to ``text``."""

        item: TodoItem
        text: str

    @dataclass
    class Cycle(Message):
        """Move ``item`` to its next status."""

        item: TodoItem

    @dataclass
    class Cancel(Message):
        """Cancel ``item``."""

        item: TodoItem

    @dataclass
    class Prioritize(Message):
        """Raise (``up``) or lower ``item``'s priority."""

        item: TodoItem
        up: bool

    @dataclass
    class Move(Message):
        """Move ``item`` ``delta`` places in the list (negative: up)."""

        item: TodoItem
        delta: int

    @dataclass
    class Delete(Message):
        """Delete ``item`` (u undoes)."""

        item: TodoItem

    @dataclass
    class Undo(Message):
        """Bring back the last deleted item."""

    @dataclass
    class Run(Message):
        """Run ``item``'s experiment (queued when one runs)."""

        item: TodoItem

    @dataclass
    class QueueAll(Message):
        """Queue every pending item's experiment."""

    @dataclass
    class EditExperiment(Message):
        """Attach or edit ``item``'s experiment."""

        item: TodoItem

    @dataclass
    class History(Message):
        """Show ``item``'s history."""

        item: TodoItem

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._items: tuple[TodoItem, ...] = ()
        self._shown: tuple | None = None  # the (items, running, subtitle) on screen
        self._deps: dict[int, str] = {}  # item id → "blocked by #3" (dependency_labels)
        self._mode: str | None = None  # add | edit | filter
        self._editing: TodoItem | None = None
        self.filter_text = ""
        self.hide_done = False
        #: todo id → what the experiment runner is doing with it ("queued", "restart"...)
        self.running: dict[int, str] = {}
        self.subtitle = ""
        #: item id → (item, how it was drawn, row): a row is built again only when its item
        #: or its look changed, and only when it is on screen (15,000 items draw ~40 rows)
        self._row_cache: dict[int, tuple[TodoItem, tuple, Text]] = {}

    def compose(self) -> ComposeResult:
        yield TodoList(empty_text=LOADING_TEXT, id="todo-list")  # until the session's first state
        yield OneLineInput(id="todo-input")

    @property
    def list(self) -> TodoList:
        return self.query_one(TodoList)

    @property
    def current(self) -> TodoItem | None:
        """The item under the cursor."""
        key = self.list.current_key
        return next((t for t in self._items if t.id == key), None)

    # ---------------------------------------------------------- rendering
    def campaign_loaded(self) -> None:
        """The session exists: an empty list from now on means no items."""
        todo_list = self.list
        if todo_list.empty_text == LOADING_TEXT:
            todo_list.empty_text = EMPTY_TEXT
            todo_list.refresh()

    def show(self, items: tuple[TodoItem, ...], running: dict[int, str] | None = None, subtitle: str | None = None,
             hint: str | None = None) -> None:
        """Display ``items`` (filter and hide-completed applied here); ``running`` maps ids
        to the experiment runner's step, ``subtitle`` (followed lists, queue) goes under
        the panel; ``hint`` (a followed agent list gone quiet) is what an empty list says
        instead of "no todo items". The same values again: nothing to do."""
        self.campaign_loaded()
        empty = hint or EMPTY_TEXT
        if self.list.empty_text != empty:
            self.list.empty_text = empty
            self.list.refresh()
        shown = (items, running if running is not None else self.running, subtitle if subtitle is not None else self.subtitle)
        if shown == self._shown:
            return
        self._shown = shown
        self._items = items
        self._deps = dependency_labels(items)
        if running is not None:
            self.running = running
        if subtitle is not None:
            self.subtitle = subtitle
        self._render_rows()

    def on_resize(self) -> None:
        self._render_rows()

    def _visible(self) -> builtins.list[TodoItem]:  # builtins: this class has a `list` property
        """The rows in display order: open items first, then completed and cancelled ones
        (each part in list order), so a finished campaign's done items never push the
        open ones off screen; filter and hide-done applied."""
        open_items: builtins.list[TodoItem] = []
        done_items: builtins.list[TodoItem] = []
        needle = self.filter_text.lower()
        for item in self._items:
            done = _is_done(item)
            if self.hide_done and done:
                continue
            if needle and needle not in item.content.lower():
                continue
            (done_items if done else open_items).append(item)
        return open_items + done_items

    def move_current(self, delta: int) -> None:
        """Move the item under the cursor past its neighbour on screen (``delta`` -1: the
        row above, 1: the row below), whatever hidden or differently placed items lie
        between them in the list."""
        item = self.current
        if item is None:
            return
        rows = self._visible()
        at = next(i for i, t in enumerate(rows) if t.id == item.id)
        if not 0 <= at + delta < len(rows):
            self.post_message(self.Move(item, delta))  # the list's end: the session leaves it there
            return
        if _is_done(rows[at + delta]) != _is_done(item):
            return  # the end of the open part: moving would change nothing on screen
        places = {t.id: i for i, t in enumerate(self._items)}
        self.post_message(self.Move(item, places[rows[at + delta].id] - places[item.id]))

    def _render_rows(self) -> None:
        width = max(20, self.size.width or 60)
        wrap = self.screen.has_class("-wide")
        items = self._visible()
        look = (width, wrap, self.app.theme)
        if len(self._row_cache) > 2 * len(self._items) + 100:  # items gone for good
            ids = {t.id for t in self._items}
            self._row_cache = {k: v for k, v in self._row_cache.items() if k in ids}

        def build(index: int) -> Text:
            item = items[index]
            key = (*look, self.running.get(item.id), self._deps.get(item.id))  # a blocker's change relabels
            cached = self._row_cache.get(item.id)
            if cached is not None and cached[1] == key and cached[0] == item:
                return cached[2]
            row = self._row(item, width, wrap)
            self._row_cache[item.id] = (item, key, row)
            return row

        self.list.set_lazy_rows([t.id for t in items], build)
        title = "[3] Todo"
        if self.filter_text:
            title += f"  /{self.filter_text}"
        if self.hide_done:
            title += "  (done hidden)"
        box = self.parent if isinstance(self.parent, Widget) and self.parent.id == "todo-box" else self
        box.border_title = title
        box.border_subtitle = self.subtitle

    def _row(self, item: TodoItem, width: int, wrap: bool) -> Text:
        app = self.app
        done = item.status in (TodoStatus.COMPLETED, TodoStatus.CANCELLED)
        row = Text()
        icon_style = style(app, "state-ready") if item.status is TodoStatus.COMPLETED else (
            style(app, "state-busy") if item.status is TodoStatus.IN_PROGRESS else "")
        row.append(STATUS_ICON.get(item.status.value, "?") + " ", style=icon_style)
        row.append(item.priority.value[0].upper(), style=style(app, PRIORITY_VAR[item.priority.value], bold=True))
        row.append(" ")
        for text, var in self._badges(item):
            row.append(text + " ", style=style(app, var, bold=var != "accent"))
        prefix = len(row.plain)
        body_style = "dim strike" if item.status is TodoStatus.CANCELLED else ("dim" if done else "")
        content = safe_line(item.content.replace("\n", " "))
        deps = self._deps.get(item.id)
        room = max(5, width - prefix - (len(deps) + 2 if deps else 0))
        if wrap and len(content) > room:
            chunks = Text(content).wrap(app.console, room)
            for i, chunk in enumerate(chunks):
                if i:
                    row.append("\n" + " " * prefix)
                row.append(chunk.plain.rstrip(), style=body_style)
        else:
            row.append(content if len(content) <= room else content[: room - 1] + "…", style=body_style)
        if deps:
            row.append(f"  {deps}", style=style(app, "warning"))
        if wrap and item.note:
            note = "↳ " + safe_line(item.note.splitlines()[0])
            row.append("\n" + " " * prefix)
            row.append(note if len(note) <= room else note[: room - 1] + "…", style="dim")
        return row

    def _badges(self, item: TodoItem) -> builtins.list[tuple[str, str]]:
        """(text, theme variable) of the item's badges, in display order."""
        out = []
        if item.conflict:
            out.append(("⚠", "warning"))
        if item.raw_status:
            out.append((f"!{safe_line(item.raw_status)}", "warning"))
        mark = {"added": "A+", "changed": "A~", "removed": "A-"}.get(item.agent_mark or "")
        if mark:
            out.append((mark, "state-down" if mark == "A-" else "accent"))
        if item.experiment or item.run:
            out.append(self._experiment_badge(item))
        return out

    def _experiment_badge(self, item: TodoItem) -> tuple[str, str]:
        step = self.running.get(item.id)
        if step:
            return (f"⚗…{step}", "state-busy")
        run = item.run or {}
        status = run.get("status")
        if status == "ok":
            return ("⚗✓", "state-ready")
        if status == "failed":
            return (f"⚗✗ {run.get('crash_class') or run.get('step') or 'failed'}", "state-failed")
        if status == "running":
            return ("⚗ running", "state-busy")
        if status in ("aborted", "interrupted"):
            return (f"⚗ {status}", "warning")
        return ("⚗", "accent")

    # ---------------------------------------------------------- verbs
    def post_for_current(self, message: Callable[..., Message], **fields) -> None:
        """Post ``message(item, **fields)`` for the item under the cursor (none: nothing)."""
        item = self.current
        if item is not None:
            self.post_message(message(item, **fields))

    def edit_current(self) -> None:
        """Open the inline input on the item under the cursor."""
        item = self.current
        if item is not None:
            self._editing = item
            self.open_input("edit", item.content, "edit — Enter saves, Esc cancels")

    def toggle_done(self) -> None:
        """Show or hide completed and cancelled items."""
        self.hide_done = not self.hide_done
        self._render_rows()

    def open_input(self, mode: str, value: str, placeholder: str) -> None:
        """Open the inline input for ``mode`` (add | edit | filter) holding ``value``."""
        self._mode = mode
        field = self.query_one(Input)
        field.placeholder = placeholder
        field.value = value
        self.add_class("-editing")
        focus_now(field)

    def _close(self) -> None:
        self._mode = None
        self._editing = None
        self.remove_class("-editing")
        focus_now(self.list)

    @on(Input.Submitted, "#todo-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if self._mode == "add" and text:
            self.post_message(self.Add(text))
        elif self._mode == "edit" and text and self._editing is not None and text != self._editing.content:
            self.post_message(self.Save(self._editing, text))
        self._close()

    @on(Input.Changed, "#todo-input")
    def _changed(self, event: Input.Changed) -> None:
        if self._mode == "filter":
            self.filter_text = event.value
            self._render_rows()

    def key_escape(self) -> None:
        if self._mode is not None:
            if self._mode == "filter":
                self.filter_text = ""
                self._render_rows()
            self._close()

    @property
    def editing(self) -> bool:
        """True while the inline input is open."""
        return self._mode is not None
