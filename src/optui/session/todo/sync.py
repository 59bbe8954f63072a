"""Agents' todo lists in optui's list: one-shot import and live following.

:func:`apply_snapshot` writes one upstream snapshot into the journal in a single
transaction (all of it or nothing after a crash): matched items keep their optui id, the
agent's changes are journaled as ``todo.changed`` with op ``agent.add`` / ``agent.change``
/ ``agent.readd`` / ``agent.remove`` and actor ``agent:<kind>``, and the item's
``meta["agent"]`` drives the badge. :class:`TodoFollowService` (``session.todo_follow``)
runs one :class:`~optui.adapters.todo_follow.TodoFollower` per followed source.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from optui.adapters.journal import Journal, JournalError
from optui.adapters.todo_follow import TodoFollower, cancel
from optui.config import TodoConfig
from optui.core.journal import events as ev
from optui.core.todo.formats import AgentTodo, FollowSpec, parse_follow_spec
from optui.core.todo.merge import SyncPlan, plan_snapshot
from optui.session.errors import SessionError
from optui.session.journal.writer import JournalWriter
from optui.session.snapshot_types import FollowStatus


def agent_actor(origin: str) -> str:
    """``agent:claude`` for ``claude:/path``."""
    return "agent:" + origin.partition(":")[0]


def apply_snapshot(journal: Journal, origin: str, snapshot: list[AgentTodo], *, actor: str | None = None,
                   dry_run: bool = False) -> SyncPlan:
    """Diff ``snapshot`` against the items of ``origin`` and write the result in one
    transaction (nothing with ``dry_run``). The diff is taken inside the write
    transaction, so two optui windows following the same list never both add an item.
    Returns the plan. Raises JournalError. New items go at the end in the agent's order
    (their places are given, so adding n items costs n inserts, not n scans of the list)."""
    actor = actor or agent_actor(origin)

    def diff() -> tuple[SyncPlan, float]:
        every = journal.todos(include_deleted=True)
        existing = [t for t in every if t.origin == origin]
        last = max((t.order for t in every), default=0)
        return plan_snapshot(existing, snapshot, deleted=journal.deleted_todo_ids()), last

    if dry_run:
        return diff()[0]
    with journal.transaction():
        plan, last = diff()
        for n, (todo, meta) in enumerate(plan.adds, start=1):
            journal.add_todo(todo.content, priority=todo.priority, status=todo.status, origin=origin,
                             raw_status=todo.raw_status, meta=meta, actor=actor, op="agent.add", order=last + n)
        for up in plan.updates:
            journal.update_todo(up.item.id, actor=actor, expected=up.seen, op=up.op, **up.changes)
        for item in plan.removes:
            journal.update_todo(item.id, actor=actor, expected=item, op="agent.remove",
                                meta={**item.meta, "agent": "removed", "removed_at": time.time()})
    return plan


class TodoFollowService:
    """``session.todo_follow``: the followed agent lists (from ``[todo] follow`` and the
    palette). Follows only while the session runs; read-only sessions follow nothing
    (they cannot write).

    ``writer``: the session's journal; ``cfg``: the ``[todo]`` config (``follow``,
    ``poll_s``); ``on_change()``: a follow status changed; ``on_failed(key, error)``: a
    list's reading failed (once per distinct error until it reads fine again)."""

    def __init__(self, writer: JournalWriter, cfg: TodoConfig, *, on_change: Callable[[], None],
                 on_failed: Callable[[str, str], None] | None = None) -> None:
        self._writer = writer
        self._cfg = cfg
        self._on_change = on_change
        self._on_failed = on_failed
        self._followers: dict[str, tuple[TodoFollower, asyncio.Task]] = {}
        self.statuses: dict[str, FollowStatus] = {}
        self._reported: dict[str, str] = {}

    def start(self) -> None:
        """Follow every ``[todo] follow`` entry of the config."""
        for text in self._cfg.follow:
            try:
                self.follow(text)
            except SessionError as exc:
                self.statuses[text] = FollowStatus(text, state="error", error=str(exc))
                self._failed(text, str(exc))

    def follow(self, text: str) -> FollowSpec:
        """Start following ``text`` (``claude:~/.claude/todos/x.json``, ...). Raises
        SessionError for a bad entry, a duplicate or a read-only session."""
        self._writer.check_writable("following an agent's todo list")
        try:
            spec = parse_follow_spec(text)
        except ValueError as exc:
            raise SessionError(f"follow {text!r}: {exc}") from None
        key = text.strip()
        if key in self._followers:
            raise SessionError(f"already following {key}")
        follower = TodoFollower(spec, poll_s=self._cfg.poll_s,
                                on_snapshot=lambda origin, items: self._snapshot(key, origin, items),
                                on_error=lambda msg, missing: self._error(key, msg, missing),
                                on_ok=lambda: self._ok(key))
        task = asyncio.create_task(follower.run(), name=f"todo-follow-{key}")
        self._followers[key] = (follower, task)
        self.statuses[key] = FollowStatus(key)
        self._on_change()
        return spec

    async def unfollow(self, key: str) -> None:
        """Stop following ``key`` (its items stay in the list)."""
        entry = self._followers.pop(key, None)
        self.statuses.pop(key, None)
        self._reported.pop(key, None)
        if entry is not None:
            await cancel(entry[1])
        self._on_change()

    async def close(self) -> None:
        """Stop every follower."""
        for key in list(self._followers):
            await self.unfollow(key)

    def _set(self, key: str, **changes) -> None:
        from dataclasses import replace

        old = self.statuses.get(key)
        if old is None:
            return
        new = replace(old, **changes)
        if new != old:
            self.statuses[key] = new
            self._on_change()

    async def _snapshot(self, key: str, origin: str, items: list[AgentTodo]) -> None:
        w = self._writer
        try:  # off the loop (the journal thread): the first read of a 15,000-item list is ~2 s of inserts
            plan = await w.call(lambda: apply_snapshot(w.journal, origin, items), slow=True)
        except JournalError as exc:
            w.failed(exc)
            self._set(key, state="error", error=str(exc))
            self._failed(key, str(exc))
            return
        self._reported.pop(key, None)
        self._set(key, origin=origin, state="ok", error=None, last_sync=time.time(),
                  last_summary=None if plan.empty else plan.summary())
        w.refresh()

    def _ok(self, key: str) -> None:
        if self.statuses.get(key) and self.statuses[key].state != "ok":
            self._reported.pop(key, None)
            self._set(key, state="ok", error=None)

    def _error(self, key: str, message: str, missing: bool) -> None:
        self._set(key, state="waiting" if missing else "error", error=message)
        if not missing and self._failed(key, message):  # journal each distinct error once
            self._writer.record(ev.ALERT, None, {"kind": "todo.follow", "message": message, "source": key})

    def _failed(self, key: str, message: str) -> bool:
        """Say that ``key`` failed with ``message`` unless it was said already since the list
        last read fine; True when said now."""
        if self._reported.get(key) == message:
            return False
        self._reported[key] = message
        if self._on_failed is not None:
            self._on_failed(key, message)
        return True
