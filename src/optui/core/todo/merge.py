"""Match an agent's whole-list snapshot against optui's items (pure).

Agents (opencode ``todowrite``, Claude Code ``TodoWrite``) rewrite their whole list on every
change and keep no ids, and they lose items on overwrite or context compaction
(``bench_todo_ops.md`` §6 rows 13-14). So optui's store is the source of truth and a new
snapshot is *diffed* against it:

1. items with a stable upstream id (Claude Code task ids) are matched by it first; the others
   by normalised content (:func:`~optui.core.todo.items.normalize_content`),
   then unmatched ones by similarity (≥ :data:`FUZZY_RATIO` and the same numbers, so a
   reworded item keeps its id but "try tp 4" never becomes "try tp 8");
2. a matched item only takes the fields the *agent* changed since its previous snapshot
   (``meta["upstream"]``), so the operator's own edits in optui are not overwritten by a
   stale upstream value; when both changed a field, the journal flags the conflict;
3. new upstream items are added, items the agent dropped are marked "removed" (never
   deleted), items the operator deleted in optui stay deleted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from optui.core.todo.formats import AgentTodo
from optui.core.todo.items import TodoItem, normalize_content, parse_priority, parse_status

FUZZY_RATIO = 0.8


@dataclass(frozen=True, slots=True)
class Update:
    """Apply ``changes`` (TodoItem field → value) to ``item``; ``seen`` is the item as the
    agent last saw it (for the journal's per-field conflict check); ``op`` is
    "agent.change" or "agent.readd"."""

    item: TodoItem
    changes: dict
    seen: TodoItem
    op: str


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What one snapshot does: items to add (with their meta), updates, items the agent
    dropped (to mark "removed"), and counts of unchanged items and of items the operator
    deleted in optui (left deleted)."""

    adds: tuple[tuple[AgentTodo, dict], ...] = ()
    updates: tuple[Update, ...] = ()
    removes: tuple[TodoItem, ...] = ()
    unchanged: int = 0
    kept_deleted: int = 0
    deleted_ids: frozenset[int] = field(default_factory=frozenset)

    @property
    def empty(self) -> bool:
        """Nothing to write."""
        return not (self.adds or self.updates or self.removes)

    def summary(self) -> str:
        """``+2 ~1 -1`` style counts for notifications and the journal."""
        return f"+{len(self.adds)} ~{len(self.updates)} -{len(self.removes)}"


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", text)


def _upstream(item: TodoItem) -> dict:
    up = item.meta.get("upstream")
    if isinstance(up, dict) and "content" in up:
        return up
    return {"content": item.content, "status": item.raw_status or str(item.status), "priority": str(item.priority)}


def _agent_meta(item_meta: dict, todo: AgentTodo, mark: str) -> dict:
    meta = {**item_meta, "agent": mark, "upstream": todo.upstream}
    if todo.active_form:
        meta["active_form"] = todo.active_form
    if todo.raw_priority:
        meta["raw_priority"] = todo.raw_priority
    meta.update(_task_meta(todo))
    if "blocked_by" in meta and not todo.blocked_by:
        meta["blocked_by"] = []  # the agent cleared it
    return meta


def _task_meta(todo: AgentTodo) -> dict:
    """An upstream item's id and its blockers (Claude Code task ids), for ``blocked by #N``
    (:func:`~optui.core.todo.formats.dependency_labels`)."""
    if todo.upstream_id is None or not todo.stable_id:
        return {}
    return {"upstream_id": todo.upstream_id, **({"blocked_by": list(todo.blocked_by)} if todo.blocked_by else {})}


def plan_snapshot(existing: Iterable[TodoItem], snapshot: Sequence[AgentTodo], *, deleted: Iterable[int] = ()) -> SyncPlan:
    """Diff ``snapshot`` (the agent's whole list, in order) against ``existing`` (every
    optui item of that origin, deleted ones included, with ``deleted`` naming their ids).

    Cost: exact matches through a dict (linear); the similarity pass compares an
    unmatched item only with unmatched items carrying the same numbers, at most
    :data:`FUZZY_BUDGET` comparisons per snapshot (past it, an unmatched item is new), so
    a 15,000-item list rewritten by the agent never stalls the session."""
    deleted = frozenset(deleted)
    candidates = list(existing)
    by_key: dict[str, list[TodoItem]] = {}  # normalised content → candidates, in order
    keys: dict[int, list[str]] = {}
    for c in candidates:
        keys[c.id] = list(dict.fromkeys((normalize_content(_upstream(c)["content"]), normalize_content(c.content))))
        for k in keys[c.id]:
            by_key.setdefault(k, []).append(c)
    matched: dict[int, TodoItem] = {}  # snapshot index → item
    used: set[int] = set()
    # a Claude Code task keeps its id through a rewording: match ids first
    by_upstream_id = {str(c.meta["upstream_id"]): c for c in candidates if c.meta.get("upstream_id") is not None}
    if by_upstream_id:
        for i, todo in enumerate(snapshot):
            hit = by_upstream_id.get(todo.upstream_id) if todo.stable_id and todo.upstream_id is not None else None
            if hit is not None and hit.id not in used:
                matched[i] = hit
                used.add(hit.id)
    snapshot_keys = [normalize_content(todo.content) for todo in snapshot]
    start: dict[str, int] = {}  # per key: candidates before this index are used (so duplicates stay linear)
    for i, key in enumerate(snapshot_keys):
        same = by_key.get(key) if i not in matched else None
        if not same:
            continue
        j = start.get(key, 0)
        while j < len(same) and same[j].id in used:
            j += 1
        if j < len(same):
            matched[i] = same[j]
            used.add(same[j].id)
            j += 1
        start[key] = j
    _match_similar(candidates, keys, snapshot_keys, matched, used)
    adds, updates, unchanged, kept_deleted = [], [], 0, 0
    for i, todo in enumerate(snapshot):
        item = matched.get(i)
        if item is None:
            adds.append((todo, _agent_meta({}, todo, "added")))
            continue
        if item.id in deleted:
            kept_deleted += 1
            continue
        update = _update_for(item, todo)
        if update is None:
            unchanged += 1
        else:
            updates.append(update)
    removes = [c for c in candidates if c.id not in used and c.id not in deleted and c.agent_mark != "removed"]
    return SyncPlan(tuple(adds), tuple(updates), tuple(removes), unchanged, kept_deleted, deleted)


#: Most similarity comparisons (``SequenceMatcher.ratio``) one snapshot may cost.
FUZZY_BUDGET = 20_000


def _match_similar(candidates: list[TodoItem], keys: dict[int, list[str]], snapshot_keys: list[str],
                   matched: dict[int, TodoItem], used: set[int]) -> None:
    """The similarity pass of :func:`plan_snapshot`: fills ``matched``/``used`` in place.
    Same choice as comparing every pair (the best ratio ≥ :data:`FUZZY_RATIO`, the later
    candidate on a tie), but only pairs with the same numbers, each bounded first by the
    cheap upper bounds of the ratio."""
    if len(matched) == len(snapshot_keys) or len(used) == len(candidates):
        return
    by_numbers: dict[tuple[str, ...], dict[int, list[str]]] = {}  # numbers → candidate id → its keys
    for c in candidates:
        if c.id not in used:
            for k in keys[c.id]:
                by_numbers.setdefault(tuple(_numbers(k)), {}).setdefault(c.id, []).append(k)
    by_id = {c.id: c for c in candidates}
    budget = FUZZY_BUDGET
    for i, key in enumerate(snapshot_keys):
        if i in matched:
            continue
        group = by_numbers.get(tuple(_numbers(key)))
        if not group:
            continue
        best, best_ratio = None, FUZZY_RATIO
        for cid, ks in group.items():
            if cid in used:
                continue
            for k in ks:
                if budget <= 0:
                    return
                budget -= 1
                m = SequenceMatcher(None, key, k)
                if m.real_quick_ratio() >= best_ratio and m.quick_ratio() >= best_ratio and m.ratio() >= best_ratio:
                    best, best_ratio = by_id[cid], m.ratio()
        if best is not None:
            matched[i] = best
            used.add(best.id)


def _update_for(item: TodoItem, todo: AgentTodo) -> Update | None:
    last = _upstream(item)
    new = todo.upstream
    changes: dict = {}
    seen: dict = {}
    if new["content"] != last["content"]:
        changes["content"], seen["content"] = todo.content, last["content"]
    if new["status"] != last["status"]:
        old_status, old_raw = parse_status(last["status"])
        changes["status"], seen["status"] = todo.status, old_status
        changes["raw_status"], seen["raw_status"] = todo.raw_status, old_raw
    if new["priority"] != last["priority"]:
        changes["priority"], seen["priority"] = todo.priority, parse_priority(last["priority"])[0]
    readd = item.agent_mark == "removed"
    if not changes and not readd:
        extra = _task_meta(todo)
        if "blocked_by" in item.meta and not todo.blocked_by:
            extra["blocked_by"] = []  # the agent cleared it
        if todo.active_form and todo.active_form != item.meta.get("active_form"):
            extra["active_form"] = todo.active_form
        if any(item.meta.get(k) != v for k, v in extra.items()):
            return Update(item, {"meta": {**item.meta, **extra}}, item, "agent.change")
        return None
    changes["meta"] = _agent_meta(item.meta, todo, "added" if readd else "changed")
    return Update(item, changes, item.with_changes(**seen), "agent.readd" if readd else "agent.change")
