"""Todo operations of a session: every edit is one journal write (with before/after) and
is visible to other optui windows on the same campaign within 0.5 s."""

from __future__ import annotations

from collections.abc import Callable

from optui.config import TodoConfig
from optui.core.journal.events import Event
from optui.core.todo.experiment import ExperimentSpec
from optui.core.todo.items import Priority, TodoItem, TodoStatus, lower_priority, next_status, raise_priority
from optui.session.journal.writer import JournalWriter


class TodoService:
    """``session.todos``: add, edit, cycle, cancel, prioritise, move, delete/undo,
    attach an experiment, acknowledge a flagged concurrent edit, history.

    ``writer``: the session's journal; ``cfg``: the ``[todo]`` config; ``items()``: the
    session's current list (its snapshot's, display order)."""

    def __init__(self, writer: JournalWriter, cfg: TodoConfig, *, items: Callable[[], tuple[TodoItem, ...]],
                 written: Callable[[TodoItem], None] | None = None) -> None:
        """``written(item)``: told of each item an add or an update wrote, so the list the
        next edit reads has it at once (the session's list is otherwise refreshed by its
        journal read, a tick later: two quick ``J`` moved an item once on a loaded machine)."""
        self._writer = writer
        self._cfg = cfg
        self._items = items
        self._written = written
        self._deleted: list[int] = []  # undo stack of deleted ids

    @property
    def items(self) -> tuple[TodoItem, ...]:
        """The current list (display order)."""
        return self._items()

    def _write(self, fn):
        return self._writer.write(fn)

    def add(self, content: str, priority: Priority | str = Priority.MEDIUM, experiment: dict | None = None) -> TodoItem:
        """Add an item at the end (ValueError for empty content or a bad experiment)."""
        w = self._writer
        if experiment is not None:
            experiment = ExperimentSpec.from_dict(experiment).to_dict()
        return self._told(self._write(lambda: w.journal.add_todo(content, priority=priority, experiment=experiment, actor=w.actor)))

    def set_experiment(self, item: TodoItem, experiment: dict | None) -> TodoItem:
        """Attach (or with None remove) an experiment; ValueError when it is invalid."""
        if experiment is not None:
            experiment = ExperimentSpec.from_dict(experiment).to_dict()
        return self.update(item, op="experiment", experiment=experiment)

    def ack_conflict(self, item: TodoItem) -> TodoItem:
        """The operator saw a flagged concurrent edit: clear the ⚠ (the history keeps it)."""
        if not item.conflict:
            return item
        meta = {k: v for k, v in item.meta.items() if k != "conflict"}
        return self.update(item, op="ack_conflict", meta=meta)

    def history(self, item: TodoItem) -> list[Event]:
        """Every journal event about ``item`` (its edits, agent changes, experiment runs),
        oldest first."""
        return self._writer.journal.events(target=f"todo:{item.id}")

    def in_progress_warning(self, item: TodoItem) -> str | None:
        """A warning when more items than ``[todo] max_in_progress`` are in progress."""
        limit = self._cfg.max_in_progress
        others = [t for t in self.items if t.status is TodoStatus.IN_PROGRESS and t.id != item.id]
        if limit and len(others) + 1 > limit:
            return f"{len(others) + 1} items are in progress (set [todo] max_in_progress to change this warning)"
        return None

    def update(self, item: TodoItem, op: str = "edit", **changes) -> TodoItem:
        """Change fields of ``item`` as the operator saw it (concurrent edits are flagged
        in the history, last writer wins per field)."""
        w = self._writer
        return self._told(self._write(lambda: w.journal.update_todo(item.id, actor=w.actor, expected=item, op=op, **changes)))

    def _told(self, item: TodoItem) -> TodoItem:
        """``item`` as written, after telling ``written`` of it (in the writer's thread: the
        journal's in the TUI, the caller's elsewhere; the session swaps its list's tuple)."""
        if self._written is not None and isinstance(item, TodoItem):
            self._written(item)
        return item

    def cycle(self, item: TodoItem) -> tuple[TodoItem, str | None]:
        """pending → in_progress → completed → pending. Returns the item and a warning
        when more than one item is now in progress (warn, don't block)."""
        new = next_status(item.status)
        updated = self.update(item, op="status", status=new, raw_status=None)
        warning = self.in_progress_warning(item) if new is TodoStatus.IN_PROGRESS else None
        return updated, warning

    def cancel(self, item: TodoItem) -> TodoItem:
        """Mark cancelled (or back to pending when already cancelled)."""
        status = TodoStatus.PENDING if item.status is TodoStatus.CANCELLED else TodoStatus.CANCELLED
        return self.update(item, op="status", status=status, raw_status=None)

    def bump_priority(self, item: TodoItem, up: bool) -> TodoItem:
        """Raise (``up``) or lower the priority one step; at the top (bottom) already,
        nothing changes and nothing is journaled."""
        new = raise_priority(item.priority) if up else lower_priority(item.priority)
        if new == item.priority:
            return item
        return self.update(item, op="priority", priority=new)

    def move(self, item: TodoItem, delta: int) -> TodoItem:
        """Move up (-1) or down (+1) in the list."""
        todos = list(self.items)
        idx = next((i for i, t in enumerate(todos) if t.id == item.id), None)
        if idx is None:
            return item
        j = idx + delta
        if j < 0 or j >= len(todos):
            return item
        other = todos[j]
        if j == 0:
            order = other.order - 1
        elif j == len(todos) - 1:
            order = other.order + 1
        else:
            beyond = todos[j + (1 if delta > 0 else -1)]
            order = (other.order + beyond.order) / 2
        return self.update(item, op="move", order=order)

    def delete(self, item: TodoItem) -> TodoItem:
        """Delete (kept in history; :meth:`undo_delete` restores it)."""
        w = self._writer
        deleted = self._write(lambda: w.journal.delete_todo(item.id, actor=w.actor))
        self._deleted.append(item.id)
        return deleted

    def undo_delete(self) -> TodoItem | None:
        """Restore the most recently deleted item; None when nothing to undo."""
        if not self._deleted:
            return None
        w = self._writer
        todo_id = self._deleted.pop()
        return self._write(lambda: w.journal.restore_todo(todo_id, actor=w.actor))
