"""AI coding-agent todo lists: parse, normalise, export (pure: text in, items out).

Formats read (``../shared/reference/bench_todo_ops.md`` §2):

- **todowrite** (opencode's tool, ``packages/opencode/src/tool/todo.ts``): ``{"todos":
  [{content, status, priority}]}``; statuses pending/in_progress/completed/cancelled and
  priorities high/medium/low are *described, not enforced*, so unknown values are kept.
- **opencode legacy storage** (before v1.2.0): ``storage/todo/<sessionID>.json``, a bare
  array of the same objects (older builds also carry ``id``).
- **opencode SQLite** (v1.2.0+): rows of ``todo(session_id, content, status, priority,
  position, time_created, time_updated)`` (:func:`todos_from_rows`).
- **Claude Code TodoWrite** (``~/.claude/todos/<session>-agent-<agent>.json``): a bare array
  of ``{content, status, activeForm}``, no priority, no cancelled (very early builds had
  ``id`` and ``priority`` instead of ``activeForm``); or, when those files are not written,
  the last ``TodoWrite`` tool call of a session transcript ``*.jsonl``
  (:func:`parse_claude_transcript`).
- **Claude Code tasks** (v2.1.16+, the TaskCreate/TaskUpdate tools that replaced TodoWrite):
  one JSON file per task in ``~/.claude/tasks/<list-id>/`` (``<id>.json`` with ``id``,
  ``subject``, ``description``, ``activeForm``, ``status``, ``blocks``, ``blockedBy``,
  ``owner``, ``metadata``), beside a ``.highwatermark`` (the last id given) and a ``.lock``;
  ``$CLAUDE_CODE_TASK_LIST_ID`` names a list several sessions share
  (:func:`parse_claude_task_files`).

Every upstream write is a whole-list snapshot; :mod:`optui.core.todo.merge` matches it
against optui's items. Malformed input raises :class:`TodoFormatError` naming the file,
the line and the field, and nothing is imported.
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from optui.core.text.safe_text import markdown_inline
from optui.core.todo.items import MAX_TODO_CHARS, Priority, TodoItem, TodoStatus, parse_priority, parse_status

KINDS = ("claude", "opencode", "todowrite")


class TodoFormatError(ValueError):
    """A todo file or row that cannot be read; ``str()`` is ``FILE:LINE: FIELD: problem``."""

    def __init__(self, source: str, line: int | str | None, where: str | None, problem: str) -> None:
        self.source, self.line, self.where, self.problem = source, line, where, problem
        parts = [source if line is None else f"{source}:{line}"]
        if where:
            parts.append(where)
        parts.append(problem)
        super().__init__(": ".join(parts))


@dataclass(frozen=True, slots=True)
class AgentTodo:
    """One item of an agent's list, normalised.

    ``status`` is pending for an unknown upstream status, which is kept in ``raw_status``;
    likewise an unknown priority becomes medium (kept in ``raw_priority``). ``position`` is
    the index in the snapshot (opencode's ``position`` column).
    """

    content: str
    status: TodoStatus = TodoStatus.PENDING
    priority: Priority = Priority.MEDIUM
    raw_status: str | None = None
    raw_priority: str | None = None
    active_form: str | None = None
    upstream_id: str | None = None
    position: int = 0
    #: Claude Code task ids this item waits for (``blockedBy``)
    blocked_by: tuple[str, ...] = ()
    #: ``upstream_id`` names the same item in every snapshot (a Claude Code task's file);
    #: the ids of todowrite lists are the model's and may be renumbered, so they are not used
    stable_id: bool = False

    @property
    def upstream(self) -> dict:
        """The fields as the agent wrote them (what a later snapshot is diffed against)."""
        return {"content": self.content, "status": self.raw_status or str(self.status),
                "priority": self.raw_priority or str(self.priority)}

    def to_json(self, origin: str) -> dict:
        """``optui todo import --json`` shape: content, status, priority, origin (+ raw
        status / active form when present)."""
        out: dict[str, object] = {"content": self.content, "status": str(self.status), "priority": str(self.priority),
                                  "origin": origin}
        if self.raw_status:
            out["raw_status"] = self.raw_status
        if self.active_form:
            out["active_form"] = self.active_form
        if self.upstream_id is not None and self.blocked_by:
            out["id"], out["blocked_by"] = self.upstream_id, list(self.blocked_by)
        return out

    @property
    def warnings(self) -> list[str]:
        """What an import says about this item: an unknown status or priority kept
        (``unknown status 'blocked' kept as pending``)."""
        out = []
        if self.raw_status:
            out.append(f"unknown status {self.raw_status!r} kept as {self.status}")
        if self.raw_priority:
            out.append(f"unknown priority {self.raw_priority!r} kept as {self.priority}")
        return out


@dataclass(frozen=True, slots=True)
class FollowSpec:
    """Where an agent's list lives: ``kind`` (claude | opencode | todowrite | auto), ``path``
    (may contain ``~`` or a glob; empty for "discover opencode's DB"), and for an opencode
    DB the ``session`` id (None = the most recently updated session)."""

    kind: str
    path: str
    session: str | None = None
    text: str = field(default="", compare=False)

    @property
    def is_sqlite(self) -> bool:
        """An opencode SQLite DB (not a JSON file)."""
        return self.kind == "opencode" and not self.path.endswith(".json")


def parse_follow_spec(text: str) -> FollowSpec:
    """Parse a follow entry: ``KIND:PATH`` or a bare ``PATH`` (kind from the path), with
    ``#SESSION`` after an opencode DB path. Examples: ``claude:~/.claude/todos/abc.json``,
    ``opencode:~/.local/share/opencode/opencode.db#ses_123``, ``opencode:`` (discover the DB,
    newest session), ``claude:~/.claude/tasks/LIST-ID`` (a task list directory), ``claude:``
    (the list ``$CLAUDE_CODE_TASK_LIST_ID`` names), ``todowrite:plan.json``. Raises
    ValueError with the reason."""
    raw = text
    text = text.strip()
    if not text:
        raise ValueError("empty follow entry")
    kind, sep, rest = text.partition(":")
    if sep and kind in KINDS:
        path = rest.strip()
    elif sep and kind.isalpha() and len(kind) > 1:
        raise ValueError(f"unknown kind {kind!r} (known: {', '.join(KINDS)}; or give a bare path)")
    else:
        kind, path = "auto", text
    session = None
    if "#" in path:
        path, _, session = path.rpartition("#")
        session = session.strip() or None
        if kind == "auto" and not path.endswith(".json"):
            kind = "opencode"
        if kind != "opencode" or path.endswith(".json"):
            raise ValueError("a #SESSION suffix only applies to an opencode database (opencode:PATH.db#ses_...)")
    if kind == "auto":
        kind = guess_kind(path)
    if not path and kind not in ("opencode", "claude"):  # claude: alone = $CLAUDE_CODE_TASK_LIST_ID's list
        raise ValueError(f"{kind}: missing file path")
    return FollowSpec(kind, path, session, raw)


def guess_kind(path: str) -> str:
    """The format a path most likely holds: ``.claude/`` → claude, ``opencode`` in the path
    or a ``.db`` file → opencode, else todowrite."""
    p = path.replace("\\", "/")
    if "/.claude/" in p or p.startswith((".claude/", "~/.claude/")):
        return "claude"
    if "opencode" in p or p.endswith((".db", ".sqlite")):
        return "opencode"
    return "todowrite"


def origin_of(kind: str, path: str, session: str | None = None) -> str:
    """The ``origin`` stored on items from an agent list (``claude:/abs/file.json``,
    ``opencode:/abs/opencode.db#ses_1``)."""
    return f"{kind}:{path}" + (f"#{session}" if session else "")


# ------------------------------------------------------------------ JSON files
#: The most a todo file may hold: characters of text, items, levels of nesting. A real agent
#: list has tens of items three levels deep; past these the file is refused with the limit
#: named (a bigger or deeper one is an attack or a bug, and would stall the window).
MAX_CHARS = 64 * 1024 * 1024
MAX_ITEMS = 100_000
MAX_DEPTH = 64

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


class LineIndex:
    """Offsets of every newline of ``text``, built once (linear): :meth:`line` is then a
    bisect, so numbering every object of a file costs O(n log n), never O(n²)."""

    def __init__(self, text: str) -> None:
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        """1-based line of the character at ``offset``."""
        return bisect.bisect_left(self.newlines, offset) + 1

    def column(self, offset: int) -> int:
        """1-based column of the character at ``offset``."""
        n = bisect.bisect_left(self.newlines, offset)
        return offset - (self.newlines[n - 1] + 1 if n else 0) + 1


def _load_with_lines(text: str) -> tuple[object, dict[int, int]]:
    """``json.loads`` that also returns the line (1-based) where every object starts,
    keyed by ``id(obj)`` (the pure-Python scanner lets us see object starts). Slower than
    ``json.loads``, so only used to name the line of an error; ``text`` must be valid JSON
    no deeper than :data:`MAX_DEPTH` (the scanner recurses)."""
    offsets: dict[int, int] = {}
    decoder = json.JSONDecoder()

    def parse_object(s_and_end, *args, **kwargs):
        obj, new_end = json.decoder.JSONObject(s_and_end, *args, **kwargs)  # type: ignore[attr-defined]  # not in typeshed
        offsets[id(obj)] = s_and_end[1]
        return obj, new_end

    # the pure-Python scanner's hooks (json.scanner), which typeshed does not declare
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    data = decoder.decode(text)
    index = LineIndex(text)
    return data, {key: index.line(offset) for key, offset in offsets.items()}


def _too_deep(data: object, limit: int) -> bool:
    """True when ``data`` nests containers deeper than ``limit`` (iterative: no recursion)."""
    stack = [(data, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > limit:
            return True
        for child in obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ():
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


def _deep_at(text: str, limit: int) -> tuple[int, int] | None:
    """(line, column) of the bracket that opens level ``limit + 1`` of ``text`` (strings
    skipped), or None. Linear; for the error message only."""
    bare = _STRING.sub(lambda m: " " * len(m.group()), text)  # same offsets, no brackets in strings
    depth = 0
    for m in _BRACKET.finditer(bare):
        depth += 1 if m.group() in "[{" else -1
        if depth > limit:
            index = LineIndex(text)
            return index.line(m.start()), index.column(m.start())
    return None


def check_size(size: int, source: str, unit: str = "bytes") -> None:
    """Refuse a todo file of ``size`` bytes (``unit``: or characters) over
    :data:`MAX_CHARS`, before it is read. Raises :class:`TodoFormatError`."""
    if size > MAX_CHARS:
        raise TodoFormatError(source, None, None, f"file too large: {size:,} {unit} (limit {MAX_CHARS:,}; not a todo list?)")


def _depth_error(source: str, text: str, first_line: int = 1) -> TodoFormatError:
    """The error for ``text`` (starting at line ``first_line`` of ``source``) nested
    deeper than :data:`MAX_DEPTH`, naming where."""
    at = _deep_at(text, MAX_DEPTH)
    line, where = (at[0] + first_line - 1, f" (column {at[1]})") if at else (first_line, "")
    return TodoFormatError(source, line, None, f"nested deeper than {MAX_DEPTH} levels{where}")


def _load_bounded_json(text: str, source: str, expected: str):
    """``json.loads(text)`` within :data:`MAX_CHARS` and :data:`MAX_DEPTH`; raises
    :class:`TodoFormatError` naming ``source`` (and the line) for an empty file, invalid JSON
    or a nesting too deep (``expected`` says what the file should hold)."""
    check_size(len(text), source, "characters")
    if not text.strip():
        raise TodoFormatError(source, None, None, f"empty file (expected {expected})")
    try:
        return _json_within_depth(text, source)
    except json.JSONDecodeError as exc:
        raise TodoFormatError(source, exc.lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None


def _json_within_depth(text: str, source: str, first_line: int = 1):
    """``json.loads(text)`` no deeper than :data:`MAX_DEPTH`: a deeper value raises the
    :class:`TodoFormatError` of :func:`_depth_error`, whether the C decoder stopped at
    Python's recursion limit (3.11) or read it whole (3.12 reads 5,000 levels); invalid JSON
    raises ``json.JSONDecodeError`` as ``json.loads`` does."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise _depth_error(source, text, first_line) from None
    if _too_deep(data, MAX_DEPTH):
        raise _depth_error(source, text, first_line)
    return data


def parse_todo_json(text: str, source: str = "<todos>") -> list[AgentTodo]:
    """Parse a todo list file: a bare array of todo objects (opencode legacy storage,
    Claude Code ``~/.claude/todos/*.json``) or an object with a ``todos`` array (the
    todowrite / TodoWrite tool input). Each object needs ``content`` (non-empty string) and
    ``status`` (string); ``priority``, ``activeForm`` and ``id`` are optional; other keys
    are ignored. Raises :class:`TodoFormatError` (``FILE:LINE: todos[2].status: ...``),
    also for a file over :data:`MAX_CHARS`, :data:`MAX_ITEMS` or :data:`MAX_DEPTH`.
    Linear in the size of ``text`` (the C decoder; lines are only looked up for an error).

    A TodoWrite call pasted from a conversation export is read as its input
    (:func:`_tool_call_input`): a ``{"type": "tool_use", "name": "TodoWrite", "input":
    {"todos": [...]}}`` block, a message's ``content`` array of such blocks, or the message;
    several JSON lines (a Claude Code transcript, or a piece of one) are read as a transcript:
    its last TodoWrite call's list (:func:`parse_claude_transcript`)."""
    try:
        data = _load_bounded_json(text, source, "a JSON array of todo objects")
    except TodoFormatError as exc:
        if "Extra data" not in exc.problem:  # one JSON value, broken: its own error
            raise
        transcript = parse_claude_transcript(text, source)
        if transcript is None:
            raise
        return transcript
    data, prefix = _tool_call_input(data)
    try:
        return _items(data, source, lambda obj: None, prefix)
    except TodoFormatError as exc:
        if exc.line is not None:
            raise
    # the same error again, now with its line (this scan is slower, so only on the error path)
    data, lines = _load_with_lines(text)
    data, prefix = _tool_call_input(data)
    return _items(data, source, lambda obj: lines.get(id(obj)), prefix)


_TODO_TOOLS = frozenset({"TodoWrite", "todowrite"})


def _is_todo_call(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "tool_use" and part.get("name") in _TODO_TOOLS


def _tool_call_input(data: object) -> tuple[object, str]:
    """``(todo list data, error-path prefix)``: the ``input`` of the last TodoWrite
    ``tool_use`` block when ``data`` is one (Anthropic Messages API content block, as in
    Claude Code transcripts and conversation exports), a content array holding one, or a
    message (``{"role", "content": [...]}``, or a transcript line ``{"message": {...}}``)
    whose content holds one; else ``(data, "")`` unchanged."""
    if isinstance(data, dict) and isinstance(data.get("message"), dict):
        data = data["message"]
    parts = data.get("content") if isinstance(data, dict) and isinstance(data.get("content"), list) else data
    if _is_todo_call(parts):
        return parts.get("input"), "TodoWrite.input"  # type: ignore[union-attr]
    if isinstance(parts, list):
        calls = [part for part in parts if _is_todo_call(part)]
        if calls:
            return calls[-1].get("input"), "TodoWrite.input"
    return data, ""


def _items(data: object, source: str, line_of, prefix: str = "") -> list[AgentTodo]:
    """A bare array or ``{"todos": [...]}`` → items; ``line_of(obj)`` gives an object's line."""
    if isinstance(data, dict):
        if "todos" not in data:
            raise TodoFormatError(source, line_of(data), prefix or None, 'expected a JSON array of todo objects or an object with a "todos" array')
        data, prefix = data["todos"], f"{prefix}.todos" if prefix else "todos"
        if not isinstance(data, list):
            raise TodoFormatError(source, None, prefix, f"expected an array, got {type(data).__name__}")
    elif not isinstance(data, list):
        raise TodoFormatError(source, 1, None, f"expected a JSON array of todo objects, got {type(data).__name__}")
    if len(data) > MAX_ITEMS:
        raise TodoFormatError(source, None, prefix or None, f"{len(data):,} items (limit {MAX_ITEMS:,}; not a todo list?)")
    out = []
    for i, obj in enumerate(data):
        where = f"{prefix}[{i}]"
        if not isinstance(obj, dict):
            raise TodoFormatError(source, line_of(obj), where, f"expected an object, got {obj!r}"[:120])
        out.append(_item(obj, i, source, line_of(obj), where))
    return out


def parse_claude_transcript(text: str, source: str = "<transcript>") -> list[AgentTodo] | None:
    """The list of the *last* ``TodoWrite`` call in a Claude Code transcript
    (``~/.claude/projects/<encoded-cwd>/<session>.jsonl``: one JSON object per line, tool
    calls as ``message.content[] = {"type": "tool_use", "name": "TodoWrite", "input":
    {"todos": [...]}}``); the fallback when todo files are not written (``-p`` mode,
    anthropics/claude-code#7523). None when the transcript has no TodoWrite call yet. A
    last line without its newline is being written and is skipped; any other broken line
    raises :class:`TodoFormatError` with its number."""
    lines = text.split("\n")
    last = None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = _json_within_depth(line, source, n)
        except json.JSONDecodeError as exc:
            if n == len(lines):  # no trailing newline: mid-write
                break
            raise TodoFormatError(source, n, None, f"invalid JSON line: {exc.msg} (column {exc.colno})") from None
        message = obj.get("message") if isinstance(obj, dict) else None
        parts = message.get("content") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict) and part.get("type") == "tool_use" and part.get("name") == "TodoWrite":
                last = (n, part.get("input"))
    if last is None:
        return None
    n, data = last
    return _items(data, source, lambda obj: n, prefix="TodoWrite.input")


def _item(obj: dict, position: int, source: str, line: int | None, where: str) -> AgentTodo:
    def string(key: str, required: bool) -> str | None:
        if key not in obj or obj[key] is None:
            if required:
                raise TodoFormatError(source, line, f"{where}.{key}", "missing (required)")
            return None
        value = obj[key]
        if not isinstance(value, str):
            raise TodoFormatError(source, line, f"{where}.{key}", f"expected a string, got {value!r}"[:120])
        return value

    def required(key: str) -> str:
        value = string(key, True)
        assert value is not None  # string() raises for a missing required key
        return value

    content = required("content").strip()
    if not content:
        raise TodoFormatError(source, line, f"{where}.content", "must not be empty")
    if len(content) > MAX_TODO_CHARS:
        raise TodoFormatError(source, line, f"{where}.content",
                              f"{len(content):,} characters is over the limit of {MAX_TODO_CHARS:,}")
    status, raw_status = parse_status(required("status"))
    priority_text = string("priority", False)
    priority, raw_priority = parse_priority(priority_text) if priority_text else (Priority.MEDIUM, None)
    active = string("activeForm", False)
    upstream_id = obj.get("id")
    return AgentTodo(content, status, priority, raw_status, raw_priority, active,
                     None if upstream_id is None else str(upstream_id), position)


#: Claude Code task statuses; a task set to "deleted" is gone from the list (Claude Code
#: removes its file; one still on disk is skipped the same way).
TASK_DELETED = "deleted"


def _task_id_order(name: str) -> tuple:
    stem = name.rsplit(".", 1)[0]
    return (0, int(stem), name) if stem.isdigit() else (1, 0, name)


def is_claude_task(text: str) -> bool:
    """True when ``text`` is one Claude Code task file (``tasks/<list>/<n>.json``: a JSON
    object with ``subject`` and ``status``), not a todowrite list; False for anything else,
    unreadable JSON included (the todowrite parser then says what is wrong)."""
    import json

    if not text.lstrip().startswith("{") or '"subject"' not in text:
        return False
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and "subject" in obj and "status" in obj and "todos" not in obj


def parse_claude_task_files(files: Sequence[tuple[str, str]], source: str = "<tasks>") -> list[AgentTodo]:
    """A Claude Code task list directory → items, in task-id order (``1.json``, ``2.json``,
    ... ``10.json``). ``files`` is ``[(file name, text)]`` of its ``*.json`` files (dot files
    such as ``.highwatermark`` and ``.lock`` left out by the caller). Each file is one task
    object: ``subject`` (the item's content) and ``status`` required strings; ``id``
    (string or integer; default the file name's stem), ``activeForm``, ``description``,
    ``owner`` optional strings; ``blocks`` / ``blockedBy`` optional arrays of task ids;
    ``metadata`` and other keys ignored. A task with status ``deleted`` is left out.
    Raises :class:`TodoFormatError` ``DIR/3.json:4: blockedBy: ...`` (also over
    :data:`MAX_ITEMS` tasks or a file over the size/depth limits)."""
    if len(files) > MAX_ITEMS:
        raise TodoFormatError(source, None, None, f"{len(files):,} task files (limit {MAX_ITEMS:,}; not a task list?)")
    out: list[AgentTodo] = []
    for name, text in sorted(files, key=lambda f: _task_id_order(f[0])):
        where = f"{source.rstrip('/')}/{name}"
        obj = _load_bounded_json(text, where, "a JSON task object")
        if not isinstance(obj, dict):
            raise TodoFormatError(where, 1, None, f"expected a JSON task object, got {type(obj).__name__}")
        task = _task(obj, name, where, LineIndex(text), text)
        if task is not None:
            out.append(task)
    return [AgentTodo(t.content, t.status, t.priority, t.raw_status, t.raw_priority, t.active_form, t.upstream_id, i,
                      t.blocked_by, True) for i, t in enumerate(out)]


def _task(obj: dict, name: str, where: str, index: LineIndex, text: str) -> AgentTodo | None:
    def line(key: str) -> int:  # the line of the key (the error path only)
        m = re.search(r'"' + re.escape(key) + r'"\s*:', text)
        return index.line(m.start()) if m else 1

    def string(key: str, required: bool) -> str | None:
        value = obj.get(key)
        if value is None:
            if required:
                raise TodoFormatError(where, 1, key, "missing (required)")
            return None
        if not isinstance(value, str):
            raise TodoFormatError(where, line(key), key, f"expected a string, got {value!r}"[:120])
        return value

    def ids(key: str) -> tuple[str, ...]:
        value = obj.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
            raise TodoFormatError(where, line(key), key, f"expected an array of task ids, got {value!r}"[:120])
        return tuple(str(v) for v in value)

    raw_id = obj.get("id", name.rsplit(".", 1)[0])
    if not isinstance(raw_id, str | int) or isinstance(raw_id, bool):
        raise TodoFormatError(where, line("id"), "id", f"expected a string, got {raw_id!r}"[:120])
    def required(key: str) -> str:
        value = string(key, True)
        assert value is not None  # string() raises for a missing required key
        return value

    subject = required("subject").strip()
    if not subject:
        raise TodoFormatError(where, line("subject"), "subject", "must not be empty")
    status_text = required("status")
    for key in ("description", "owner"):
        string(key, False)
    active = string("activeForm", False)
    blocked_by = ids("blockedBy")
    ids("blocks")
    if status_text.strip().lower() == TASK_DELETED:
        return None
    status, raw_status = parse_status(status_text)
    return AgentTodo(subject, status, Priority.MEDIUM, raw_status, None, active, str(raw_id), 0, blocked_by)


def dependency_labels(items: Iterable[TodoItem]) -> dict[int, str]:
    """``{optui id: "blocked by #3, #5"}`` for the items of a followed Claude Code task list
    whose blockers (``meta["blocked_by"]``, task ids of the same origin) are still open;
    the numbers are optui's ids of those blockers (a blocker not in the list, or done,
    cancelled or dropped by the agent, no longer blocks)."""
    items = list(items)
    by_upstream = {(t.origin, str(t.meta["upstream_id"])): t for t in items if t.meta.get("upstream_id") is not None}
    out: dict[int, str] = {}
    for t in items:
        blockers = t.meta.get("blocked_by")
        if not blockers or not isinstance(blockers, list):
            continue
        open_ids = []
        for up in blockers:
            b = by_upstream.get((t.origin, str(up)))
            if b is not None and not b.done and b.agent_mark != "removed":
                open_ids.append(f"#{b.id}")
        if open_ids:
            out[t.id] = "blocked by " + ", ".join(open_ids)
    return out


def todos_from_rows(rows: Iterable[Sequence], source: str = "opencode.db") -> list[AgentTodo]:
    """opencode's ``SELECT content, status, priority, position FROM todo WHERE session_id=?
    ORDER BY position`` rows → items. Raises :class:`TodoFormatError` naming the row's
    position and the field for a non-text value."""
    out = []
    for i, (content, status, priority, position) in enumerate(rows):
        where = f"todo position {position}"
        for name, value in (("content", content), ("status", status)):
            if not isinstance(value, str):
                raise TodoFormatError(source, None, f"{where}.{name}", f"expected text, got {value!r}"[:120])
        if priority is not None and not isinstance(priority, str):
            raise TodoFormatError(source, None, f"{where}.priority", f"expected text, got {priority!r}"[:120])
        if not content.strip():
            raise TodoFormatError(source, None, f"{where}.content", "must not be empty")
        if len(content.strip()) > MAX_TODO_CHARS:
            raise TodoFormatError(source, None, f"{where}.content",
                                  f"{len(content.strip()):,} characters is over the limit of {MAX_TODO_CHARS:,}")
        st, raw_status = parse_status(status)
        pr, raw_priority = parse_priority(priority) if priority else (Priority.MEDIUM, None)
        out.append(AgentTodo(content.strip(), st, pr, raw_status, raw_priority, None, None, i))
    return out


# ------------------------------------------------------------------ exports
def to_todowrite(items: Iterable[TodoItem]) -> dict:
    """The list as todowrite tool input: ``{"todos": [{content, status, priority}]}``
    (an unknown upstream status is written back as it was, e.g. "blocked")."""
    return {"todos": [{"content": t.content, "status": t.raw_status or str(t.status), "priority": str(t.priority)}
                      for t in items]}


_MD_BOX = {TodoStatus.COMPLETED: "x", TodoStatus.CANCELLED: "-"}


def to_markdown(items: Iterable[TodoItem], title: str = "Todo") -> str:
    """The list as a Markdown checklist: ``- [ ]`` open, ``- [x]`` completed, ``- [-]``
    cancelled (struck through); priority and in-progress marks after the box, a result
    note (experiment summary) as an indented line."""
    lines = [f"# {markdown_inline(title)}", ""]
    for t in items:  # an agent writes these: escaped so they stay one checklist item of plain text
        text = markdown_inline(t.content.replace("\n", " "))
        if t.status is TodoStatus.CANCELLED:
            text = f"~~{text}~~"
        marks = [f"**{t.priority}**"] if t.priority is Priority.HIGH else ([f"({t.priority})"] if t.priority is Priority.LOW else [])
        if t.status is TodoStatus.IN_PROGRESS:
            marks.append("*(in progress)*")
        if t.raw_status:
            marks.append(f"*({markdown_inline(t.raw_status)})*")
        lines.append(f"- [{_MD_BOX.get(t.status, ' ')}] " + " ".join([*marks, text]))
        if t.note:
            for note_line in t.note.splitlines():
                lines.append(f"  - {markdown_inline(note_line)}")
    return "\n".join(lines) + "\n"


#: a followed list unchanged this long (s) while its agent acts through optui mcp reads as silent
SILENT_LIST_S = 300.0
#: how to turn an agent's own todo tools back on (they are off by default on some versions)
TODO_TOOLS_ON = ("Claude Code: CLAUDE_CODE_ENABLE_TODO_TOOLS=1; Codex: turn update_plan on; Gemini CLI: "
                 "enable write_todos; or keep the plan in optui (todo_add, optui://plan)")


def silent_list_hint(follows: Iterable[tuple[str, str, float | None]], agents: Iterable[tuple[str, float]],
                     now: float, silent_s: float = SILENT_LIST_S) -> str | None:
    """What the todo panel says when a followed agent list went quiet while an agent acts
    through ``optui mcp``, else None. ``follows``: ``(entry, state, last_sync)`` of each
    followed list (state "waiting": its file is missing; ``last_sync`` Unix s of its last
    change, None before the first); ``agents``: ``(actor, ts)`` of agents' journaled
    requests and writes. Silent: missing, or unchanged for ``silent_s`` s, while an agent
    acted within the last ``silent_s`` s: its own todo tools may be off."""
    recent = sorted({actor for actor, ts in agents if now - ts <= silent_s})
    if not recent:
        return None
    quiet = [entry for entry, state, last in follows
             if state == "waiting" or (state == "ok" and last is not None and now - last > silent_s)]
    if not quiet:
        return None
    return (f"{', '.join(recent)} acts through optui mcp but its list ({', '.join(quiet)}) is "
            f"{'missing' if all(s == 'waiting' for _, s, _l in follows) else 'silent'}: its todo tools may be off. "
            + TODO_TOOLS_ON)
