"""Todo items: the plan of an optimization session (content, status, priority, order).

Statuses and priorities follow opencode's ``todowrite`` (``pending``, ``in_progress``,
``completed``, ``cancelled``; ``high``, ``medium``, ``low``); Claude Code's ``TodoWrite``
has no priority and no ``cancelled``.
"""

from __future__ import annotations

import enum
import re
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


_STATUS_ALIASES = {"canceled": TodoStatus.CANCELLED, "inprogress": TodoStatus.IN_PROGRESS}


def parse_status(text: str) -> tuple[TodoStatus, str | None]:
    """An upstream status string → ``(status, raw_status)``.

    Known statuses (any case, ``-``/space for ``_``, "canceled") map to themselves with
    ``raw_status`` None; anything else (e.g. "blocked") becomes pending and is kept
    verbatim in ``raw_status`` (opencode describes its statuses but does not enforce them).
    """
    key = re.sub(r"[\s-]+", "_", text.strip().lower())
    if key in TodoStatus.__members__.values():
        return TodoStatus(key), None
    alias = _STATUS_ALIASES.get(key.replace("_", ""))
    if alias is not None:
        return alias, None
    return TodoStatus.PENDING, text.strip()


def parse_priority(text: str) -> tuple[Priority, str | None]:
    """An upstream priority string → ``(priority, raw)``; unknown ones become medium with
    the original kept as ``raw``."""
    key = text.strip().lower()
    if key in Priority.__members__.values():
        return Priority(key), None
    return Priority.MEDIUM, text.strip()


#: The most characters of an item's content or note (a real item is one line; an agent's
#: 5 MB "item" grew the journal by 15 MB and every window's list with it: issue 30).
MAX_TODO_CHARS = 16 * 1024


def check_todo_text(text: str, field: str = "content") -> str:
    """``text`` stripped when it is non-empty (``content``) and at most
    :data:`MAX_TODO_CHARS` characters; raises ``ValueError`` naming ``field`` and the bound."""
    text = text.strip()
    if field == "content" and not text:
        raise ValueError("todo content must not be empty")
    if len(text) > MAX_TODO_CHARS:
        raise ValueError(f"todo {field}: {len(text):,} characters is over the limit of {MAX_TODO_CHARS:,}")
    return text


def normalize_content(text: str) -> str:
    """The matching key of an item's content: case-folded, whitespace collapsed, trailing
    punctuation dropped. Agents rewrite their whole list on every change; equal keys mean
    "the same item" (so optui ids stay stable)."""
    return re.sub(r"\s+", " ", text).strip().rstrip(".:;!").strip().casefold()


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

    @property
    def done(self) -> bool:
        """Completed or cancelled."""
        return self.status in (TodoStatus.COMPLETED, TodoStatus.CANCELLED)

    @property
    def conflict(self) -> dict | None:
        """Fields two writers changed at once, not yet acknowledged (``meta["conflict"]``:
        field → {"theirs", "seen", "mine"}), or None."""
        return self.meta.get("conflict") or None

    @property
    def agent_mark(self) -> str | None:
        """What the followed agent last did to this item: "added", "changed", "removed"
        (``meta["agent"]``), or None for optui's own items."""
        return self.meta.get("agent")

    @property
    def run(self) -> dict | None:
        """The last experiment run of this item (``meta["experiment_run"]``: id, status
        running|ok|failed|aborted|interrupted, step, crash_class, summary, ts), or None."""
        return self.meta.get("experiment_run")

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
