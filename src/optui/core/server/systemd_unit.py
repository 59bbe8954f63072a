"""systemd text formats: drop-in rendering with ExecStart quoting, ``systemctl show``
output, ``journalctl -o json`` entries (pure functions).

Facts (``../shared/reference/bench_todo_ops.md`` section 3.1, systemd.service(5),
systemd.syntax(7), https://systemd.io/JOURNAL_EXPORT_FORMATS/):

- ``ExecStart=`` is not a shell line: the first word must be an absolute path; words are
  quoted with ``"…"`` with C-style escapes (``\\\\``, ``\\"``, ``\\n``); ``%`` starts a
  specifier (write ``%%``) and ``$`` a variable (write ``$$``). A drop-in replaces the
  command with an empty ``ExecStart=`` followed by the new one.
- ``Environment="K=V"`` expands specifiers but not variables (``%%`` only).
- ``systemctl show -p A,B UNIT`` prints ``A=value`` lines; ``ExecMainCode`` is the
  ``si_code`` (1 exited, 2 killed, 3 dumped), ``ExecMainStatus`` the exit status or signal.
- ``journalctl -o json`` prints one object per entry; a field that is not valid printable
  UTF-8 (ANSI colours, ``\\r`` progress bars) is an array of byte values, a repeated field an
  array of values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SHOW_PROPERTIES = ("ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "ExecMainPID",
                   "ExecMainCode", "ExecMainStatus", "ControlGroup")
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_./+:,=@-]+$")


class UnitError(ValueError):
    """An argv that cannot be written as ExecStart (e.g. a relative program path)."""


def _escape(text: str, *, dollar: bool) -> str:
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("%", "%%")
    return out.replace("$", "$$") if dollar else out


def quote_word(word: str) -> str:
    """One ExecStart argument, always double-quoted (``"--api-key" "a b $x"`` →
    ``"a b $$x"``): nothing in it is split, expanded or taken as a specifier."""
    return '"' + _escape(word, dollar=True) + '"'


def render_exec_start(argv: Sequence[str]) -> str:
    """The value of ``ExecStart=`` for ``argv``. Raises UnitError when the program is not
    an absolute path (systemd requires one)."""
    if not argv:
        raise UnitError("empty argv")
    program = argv[0]
    if not program.startswith("/"):
        raise UnitError(f"ExecStart needs an absolute program path, got {program!r} (e.g. /usr/bin/python3)")
    first = program if _SAFE_WORD.match(program) else quote_word(program)
    return " ".join([first, *(quote_word(a) for a in argv[1:])])


def render_dropin(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """The ``optui.conf`` drop-in text: ``ExecStart=`` reset, then the new command,
    ``PYTHONUNBUFFERED=1`` plus ``env``, and ``WorkingDirectory=`` when given."""
    lines = [
        "# Written by optui (restart with new flags). `systemctl revert UNIT` removes every drop-in.",
        "[Service]",
        "ExecStart=",
        "ExecStart=" + render_exec_start(argv),
    ]
    merged = {"PYTHONUNBUFFERED": "1", **(env or {})}
    for key, value in merged.items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise UnitError(f"invalid environment variable name {key!r}")
        lines.append('Environment="' + _escape(f"{key}={value}", dollar=False) + '"')
    if cwd:
        lines.append("WorkingDirectory=" + _escape(cwd, dollar=False))
    return "\n".join(lines) + "\n"


_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "s": " "}


def parse_exec_start(value: str) -> list[str]:
    """Split an ``ExecStart=`` value back into argv (quotes, C escapes, ``%%``, ``$$``).
    Raises UnitError on an unterminated quote."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quoted = [], False
        while i < n and (quoted or value[i] not in " \t"):
            ch = value[i]
            if ch in "\"'" and not quoted:
                quoted, quote = True, ch
            elif quoted and ch == quote:
                quoted = False
            elif ch == "\\" and i + 1 < n:
                i += 1
                word.append(_C_ESCAPES.get(value[i], value[i]))
            elif ch in "%$" and i + 1 < n and value[i + 1] == ch:
                word.append(ch)
                i += 1
            else:
                word.append(ch)
            i += 1
        if quoted:
            raise UnitError(f"unterminated quote in ExecStart: {value!r}")
        words.append("".join(word))
    return words


def dropin_exec_start(text: str) -> list[str] | None:
    """The argv of the last non-empty ``ExecStart=`` of a drop-in, or None."""
    argv = None
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            value = line[len("ExecStart="):].strip()
            argv = parse_exec_start(value) if value else None
    return argv


@dataclass(frozen=True, slots=True)
class UnitState:
    """A unit's state from ``systemctl show`` (strings as systemd prints them).

    ``returncode`` is the main process' exit status, negative for a signal (-9 = SIGKILL),
    None when it has not exited.
    """

    active_state: str = ""
    sub_state: str = ""
    result: str = ""
    n_restarts: int | None = None
    invocation_id: str = ""
    main_pid: int = 0
    main_code: str = ""
    main_status: int | None = None
    control_group: str = ""

    @classmethod
    def from_show(cls, text: str) -> UnitState:
        """Parse ``systemctl show -p ...`` output (``Key=value`` lines, unknown keys ignored)."""
        props: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                props[key.strip()] = value.strip()

        def num(key: str) -> int | None:
            try:
                return int(props.get(key, ""))
            except ValueError:
                return None

        return cls(props.get("ActiveState", ""), props.get("SubState", ""), props.get("Result", ""), num("NRestarts"),
                   props.get("InvocationID", ""), num("ExecMainPID") or 0, props.get("ExecMainCode", ""), num("ExecMainStatus"),
                   props.get("ControlGroup", ""))

    @property
    def returncode(self) -> int | None:
        code = self.main_code.lower()
        if self.main_status is None or code in ("", "0"):
            return None
        if code in ("2", "3", "killed", "dumped"):
            return -self.main_status
        return self.main_status

    @property
    def needs_reset(self) -> bool:
        """A failed unit (e.g. ``start-limit-hit``) must be ``reset-failed`` before a start."""
        return self.active_state == "failed" or self.result == "start-limit-hit"

    def describe(self) -> str:
        """``ActiveState=failed SubState=failed Result=oom-kill`` (for crash lines)."""
        return f"systemd: ActiveState={self.active_state} SubState={self.sub_state} Result={self.result}"


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One ``journalctl -o json`` entry: cursor, message (decoded), PID, invocation."""

    cursor: str
    message: str
    pid: int | None = None
    invocation: str = ""


def _field_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(v, int) for v in value):
            return bytes(v & 0xFF for v in value).decode("utf-8", errors="replace")
        return "\n".join(_field_text(v) for v in value)  # a repeated field
    return str(value)


def parse_journal_line(line: str) -> JournalEntry | None:
    """Parse one ``journalctl -o json`` line; None for a blank or non-JSON line."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        pid = int(_field_text(data.get("_PID")) or 0) or None
    except ValueError:
        pid = None
    return JournalEntry(_field_text(data.get("__CURSOR")), _field_text(data.get("MESSAGE")), pid,
                        _field_text(data.get("_SYSTEMD_INVOCATION_ID")))
