"""The todo panel: the session's plan, edited from the keyboard.

Keys (on the list): ``a`` add, ``e``/Enter edit, space cycle status, ``c`` cancel,
``+``/``-`` priority, ``K``/``J`` move, ``d`` delete, ``u`` undo delete, ``/`` filter,
``h`` show/hide completed, ``E`` attach/edit an experiment, ``x`` run the item's
experiment (queued when one runs), ``X`` queue every pending item with an experiment,
``i`` the item's history (acknowledges a ⚠ conflict). The panel only renders items and
posts :class:`TodoIntent` messages; the app carries them out through the session.

Badges before the text: ``⚠`` a concurrent edit was flagged, ``!blocked`` an unknown
agent status (shown as pending), ``A+``/``A~``/``A-`` the followed agent added / changed /
dropped the item, ``⚗`` an experiment (``⚗…`` queued or running with its step, ``⚗✓``
done, ``⚗✗ oom`` failed). After the text, ``blocked by #3`` names the open items a followed
Claude Code task waits for (its ``blockedBy``).
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from optui.core.safe_text import safe_line
from optui.core.todo import TodoItem, TodoStatus
from optui.core.todo_formats import dependency_labels
from optui.ui.colors import focus_now, style
from optui.ui.policy import allowed
from optui.ui.widgets.cursor_list import CursorList
from optui.ui.widgets.one_line_input import OneLineInput

STATUS_ICON = {"pending": "○", "in_progress": "◐", "completed": "✔", "cancelled": "✖"}
PRIORITY_VAR = {"high": "error", "medium": "warning", "low": "secondary"}


class TodoIntent(Message):
    """The operator asked for ``op`` on ``item`` (None for add/undo); ``text`` for
    add/edit."""

    def __init__(self, op: str, item: TodoItem | None = None, text: str | None = None) -> None:
        super().__init__()
        self.op = op
        self.item = item
        self.text = text


class TodoList(CursorList):
    """The list part of the todo panel (bindings live here so they need focus)."""

    BINDINGS = [
        Binding("a", "intent('add')", "Add", id="todo.add"),
        Binding("e,enter", "intent('edit')", "Edit", id="todo.edit"),
        Binding("space", "intent('cycle')", "Status", id="todo.cycle"),
        Binding("c", "intent('cancel')", "Cancel item", show=False, id="todo.cancel"),
        Binding("plus,equals_sign", "intent('priority_up')", "Prio +", show=False, id="todo.priority_up"),
        Binding("minus", "intent('priority_down')", "Prio -", show=False, id="todo.priority_down"),
        Binding("K", "intent('move_up')", "Move up", show=False, id="todo.move_up"),
        Binding("J", "intent('move_down')", "Move down", show=False, id="todo.move_down"),
        Binding("d,delete", "intent('delete')", "Delete", id="todo.delete"),
        Binding("u", "intent('undo')", "Undo", show=False, id="todo.undo"),
        Binding("slash", "intent('filter')", "Filter", show=False, id="todo.filter"),
        Binding("h", "intent('toggle_done')", "Hide done", show=False, id="todo.toggle_done"),
        Binding("x", "intent('run')", "Run experiment", id="todo.run"),
        Binding("X", "intent('queue_all')", "Run all", show=False, id="todo.queue_all"),
        Binding("E", "intent('experiment')", "Experiment", show=False, id="todo.experiment"),
        Binding("i", "intent('history')", "History", show=False, id="todo.history"),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return allowed(self.app, action, parameters)

    def action_intent(self, op: str) -> None:
        panel = self.parent
        if isinstance(panel, TodoPanel):
            panel.handle(op)


class TodoPanel(Vertical):
    """List + inline input (add, edit, filter)."""


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
        yield TodoList(empty_text="no todo items — press a to add one", id="todo-list")
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
    def show(self, items: tuple[TodoItem, ...], running: dict[int, str] | None = None, subtitle: str | None = None) -> None:
        """Display ``items`` (filter and hide-completed applied here); ``running`` maps ids
        to the experiment runner's step, ``subtitle`` (followed lists, queue) goes under
        the panel. The same values again: nothing to do."""
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

    def _visible(self) -> list[TodoItem]:
        out = []
        needle = self.filter_text.lower()
        for item in self._items:
            if self.hide_done and item.status in (TodoStatus.COMPLETED, TodoStatus.CANCELLED):
                continue
            if needle and needle not in item.content.lower():
                continue
            out.append(item)
        return out

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
        box = self.parent if self.parent is not None and self.parent.id == "todo-box" else self
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

    def _badges(self, item: TodoItem) -> list[tuple[str, str]]:
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

    # ---------------------------------------------------------- intents
    def handle(self, op: str) -> None:
        """Dispatch a key intent from the list."""
        item = self.current
        if op == "add":
            self._open("add", "", "new todo — Enter adds, Esc cancels")
        elif op == "edit" and item is not None:
            self._editing = item
            self._open("edit", item.content, "edit — Enter saves, Esc cancels")
        elif op == "filter":
            self._open("filter", self.filter_text, "filter — type to filter, Enter keeps, Esc clears")
        elif op == "toggle_done":
            self.hide_done = not self.hide_done
            self._render_rows()
        elif op == "undo":
            self.post_message(TodoIntent("undo"))
        elif item is not None:
            self.post_message(TodoIntent(op, item))

    def _open(self, mode: str, value: str, placeholder: str) -> None:
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
            self.post_message(TodoIntent("add", None, text))
        elif self._mode == "edit" and text and self._editing is not None and text != self._editing.content:
            self.post_message(TodoIntent("save", self._editing, text))
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
