"""Todo items: the plan of an optimization session (content, status, priority, order).

Statuses and priorities follow opencode's ``todowrite`` (``pending``, ``in_progress``,
``completed``, ``cancelled``; ``high``, ``medium``, ``low``); Claude Code's ``TodoWrite``
has no priority and no ``cancelled``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class TodoStatus(enum.StrEnum):
    """Lifecycle of a todo item."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class Priority(enum.StrEnum):
    """Priority of a todo item, highest first."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


_CYCLE = {
    TodoStatus.PENDING: TodoStatus.IN_PROGRESS,
    TodoStatus.IN_PROGRESS: TodoStatus.COMPLETED,
    TodoStatus.COMPLETED: TodoStatus.PENDING,
    TodoStatus.CANCELLED: TodoStatus.PENDING,
}
_PRIORITIES = (Priority.HIGH, Priority.MEDIUM, Priority.LOW)


def next_status(status: TodoStatus) -> TodoStatus:
    """The status after ``status`` when the operator cycles it (space):
    pending → in_progress → completed → pending; cancelled → pending."""
    return _CYCLE[status]


def raise_priority(priority: Priority) -> Priority:
    """One step up (low → medium → high; high stays)."""
    i = _PRIORITIES.index(priority)
    return _PRIORITIES[max(0, i - 1)]


def lower_priority(priority: Priority) -> Priority:
    """One step down (high → medium → low; low stays)."""
    i = _PRIORITIES.index(priority)
    return _PRIORITIES[min(len(_PRIORITIES) - 1, i + 1)]


@dataclass(frozen=True, slots=True)
class TodoItem:
    """One todo item as stored in the journal DB.

    ``id`` is optui's own stable id; ``order`` sorts the list (lower first); ``origin`` is
    "optui" or where the item came from (``claude:<file>``, ``opencode:<session>``);
    ``raw_status`` keeps an unknown upstream status (e.g. "blocked") that is shown as
    pending with a warning. ``experiment`` optionally describes a runnable experiment.
    """

    id: int
    content: str
    status: TodoStatus = TodoStatus.PENDING
    priority: Priority = Priority.MEDIUM
    order: float = 0.0
    origin: str = "optui"
    raw_status: str | None = None
    experiment: dict | None = None
    note: str | None = None
    updated_at: float = 0.0
    meta: dict = field(default_factory=dict)

    def with_changes(self, **changes) -> TodoItem:
        """A copy with fields replaced."""
        return replace(self, **changes)

    def to_json(self) -> dict:
        """The item as plain JSON (``optui todo list --json``)."""
        return {
            "id": self.id,
            "content": self.content,
            "status": str(self.status),
            "priority": str(self.priority),
            "order": self.order,
            "origin": self.origin,
            "raw_status": self.raw_status,
            "experiment": self.experiment,
            "note": self.note,
        }
