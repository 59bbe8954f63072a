"""Finding ``optui.toml`` and peeking at it cheaply — no pydantic.

The TUI's first frame must not wait for the config's full validation (pydantic is the
heaviest import of optui): the CLI finds the file and reads the few UI settings the first
frame needs (theme, keymap) with ``tomllib`` here; :mod:`optui.config` validates the whole
file right after. A TOML syntax error is reported here already, with its line.
:func:`toml_string` quotes a value for a TOML file optui writes (the demo campaign's);
:func:`format_validation` turns pydantic's errors into ``FILE:LINE: FIELD: problem`` lines
(optui.toml's and search spec files', so :mod:`optui.core.search.spec` needs no
:mod:`optui.config`).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

CONFIG_FILE_NAME = "optui.toml"
#: The campaign's state directory beside its config (journal, logs, pidfiles, locks).
STATE_DIR_NAME = ".optui"
ENV_CONFIG = "OPTUI_CONFIG"


class ConfigError(Exception):
    """A configuration file that cannot be used; ``str()`` is the operator-facing message
    (``FILE:LINE: FIELD: problem``, one line per problem)."""


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string, quotes included, that reads back as exactly
    ``value`` (``"``, ``\\``, newlines and every other control character escaped). Raises
    ValueError for text TOML cannot hold (a lone surrogate: an undecodable file name)."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"{value!r} holds bytes that are not UTF-8 text (TOML cannot store it)")
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def find_config(explicit: str | os.PathLike | None = None) -> Path | None:
    """The config file to use: ``explicit``, else ``$OPTUI_CONFIG``, else ``./optui.toml``
    when it exists, else None. Raises ConfigError when an explicit file is missing."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        return path
    env = os.environ.get(ENV_CONFIG)
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file (from ${ENV_CONFIG})")
        return path
    local = Path.cwd() / CONFIG_FILE_NAME
    return local if local.is_file() else None


def default_state_dir() -> Path:
    """Where optui keeps state without a config file (platformdirs user state dir)."""
    from platformdirs import user_state_dir

    return Path(user_state_dir("optui", appauthor=False))


#: The most bytes of a config or spec file (a real one is a few KB) and its deepest nesting of
#: arrays and inline tables (tomllib recurses per level: a 5,000-deep spec was a traceback).
MAX_TOML_BYTES = 4 * 1024 * 1024
MAX_TOML_DEPTH = 64


def read_config_text(path: Path) -> str:
    """The text of a config or spec file ``path`` (TOML, JSON, YAML), read no further than :data:`MAX_TOML_BYTES`;
    raises :class:`ConfigError` naming the file for one that cannot be read, is larger or is
    not UTF-8 (random bytes)."""
    # one read of at most the bound + 1 bytes (a device such as /dev/zero ends there); not
    # adapters.bounded_read: core's spec parsers import this module, and core imports no adapters
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TOML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_TOML_BYTES:
        raise ConfigError(f"{path}: cannot read: larger than the limit of {MAX_TOML_BYTES:,} bytes (not read further)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start:,})") from None


def load_toml(text: str, filename: str) -> dict:
    """``tomllib.loads(text)`` within :data:`MAX_TOML_BYTES` and :data:`MAX_TOML_DEPTH`;
    raises :class:`ConfigError` ``FILE:LINE: problem`` (a syntax error, the bound hit),
    never ``RecursionError``."""
    from optui.core.text.bounded_json import too_deep_at

    if len(text) > MAX_TOML_BYTES:
        raise ConfigError(f"{filename}: {len(text):,} characters is over the limit of {MAX_TOML_BYTES:,}")
    at = too_deep_at(text, MAX_TOML_DEPTH)
    if at is not None:
        line = text.encode("utf-8", "surrogatepass")[:at].count(b"\n") + 1
        raise ConfigError(f"{filename}:{line}: nested deeper than {MAX_TOML_DEPTH} levels")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_syntax_error(exc, filename, text) from exc
    except RecursionError:  # brackets the scan did not count (in a comment or literal string)
        raise ConfigError(f"{filename}: nested too deep to read") from None


def toml_syntax_error(exc: tomllib.TOMLDecodeError, filename: str, text: str) -> ConfigError:
    """``FILE:LINE: TOML syntax error (column C): ...`` for a tomllib error on ``text`` (the
    document that was parsed). Python 3.11's tomllib names no position for an error it
    meets at the end of the document (an unterminated string or array, ``a =`` on the last
    line): that position is the end of the last line holding text."""
    message = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)", message)
    if m:
        line, column = int(m.group(1)), int(m.group(2))
    else:
        end = text.rstrip("\r\n")
        line = end.count("\n") + 1
        column = len(end) - (end.rfind("\n") + 1) + 1
        m = re.search(r"\s*\(at end of document\)", message)
    if m:
        message = message[: m.start()] + message[m.end():]
    return ConfigError(f"{filename}:{line}: TOML syntax error (column {column}): {message}")


def peek_ui_settings(path: Path | None) -> dict:
    """``{"theme": ..., "keymap": {...}}`` from the file's top level (unvalidated; the full
    validation follows). Raises ConfigError for a missing file or a TOML syntax error."""
    if path is None:
        return {}
    data = load_toml(read_config_text(path), str(path))
    out = {}
    if isinstance(data.get("theme"), str):
        out["theme"] = data["theme"]
    if isinstance(data.get("keymap"), dict):
        out["keymap"] = {str(k): str(v) for k, v in data["keymap"].items()}
    return out


def journal_path_for(file: Path, journal: str | None) -> Path:
    """The campaign DB of the config ``file`` whose ``journal`` setting is ``journal``: that
    path (a relative one from the file's directory), or ``.optui/optui.db`` beside the file."""
    path = Path(journal) if journal else Path(STATE_DIR_NAME) / "optui.db"
    return path if path.is_absolute() else file.resolve().parent / path


def peek_journal(explicit: str | os.PathLike | None = None) -> tuple[Path, bool] | None:
    """``(journal path, read_only setting)`` of the config file :func:`find_config` finds, read
    with ``tomllib`` (unvalidated, no pydantic: for commands that never load the config but
    close what a dead optui left in its journal); None when no config file is found. Raises
    ConfigError (a missing explicit file, a TOML syntax error, a bound)."""
    file = find_config(explicit)
    if file is None:
        return None
    data = load_toml(read_config_text(file), str(file))
    journal = data.get("journal")
    return journal_path_for(file, journal if isinstance(journal, str) else None), data.get("read_only") is True


class FieldError(ValueError):
    """A validator's error about another field than the one it validates: ``loc`` the
    field's path (e.g. ``("servers", "qwen", "host")``), reported at that field's line by
    :func:`format_validation`."""

    def __init__(self, loc: tuple, message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


def format_validation(exc: ValidationError, text: str, filename: str) -> str:
    """pydantic's ``exc`` about the TOML ``text`` of ``filename`` as one line per problem,
    ``FILE:LINE: FIELD: message`` (LINE found by indexing ``text``'s table headers and keys;
    a :class:`FieldError` raised by a validator names its own field). Used for optui.toml
    and search spec files alike."""
    index = index_toml_lines(text)
    lines = []
    seen: set[tuple[str, ...]] = set()
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldError):
            loc, message = tuple(str(p) for p in cause.loc), cause.message
        else:
            message = err["msg"]
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            if err["type"] == "extra_forbidden":
                message = "unknown field (check the spelling; see docs/config.md)"
            elif err["type"] != "value_error" and "input" in err and not isinstance(err["input"], dict):
                message += f" (got {err['input']!r})"
        # drop pydantic's internal loc parts (union members, validator names)
        loc = tuple(p for p in loc if p not in _TYPE_TAGS and not p.startswith(("function-", "union[", "list[", "dict[", "tag:")))
        if loc in seen:
            continue
        seen.add(loc)
        line = find_line(index, loc)
        lines.append(f"{filename}:{line}: {'.'.join(loc) or '(top level)'}: {message}")
    return "\n".join(lines)


_TYPE_TAGS = {"str", "int", "float", "bool", "none", "literal"}
_HEADER = re.compile(r"^\s*\[\[?\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def _split_key(key: str) -> tuple[str, ...]:
    parts = re.findall(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+)", key)
    return tuple(a or b or c for a, b, c in parts)


def index_toml_lines(text: str) -> dict[tuple[str, ...], int]:
    """Map every table header and key path to its first line number (1-based)."""
    index: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    depth = 0  # inside a multi-line array/inline table: keys there are values, skip
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if depth == 0:
            header = _HEADER.match(raw)
            if header and "=" not in line.split("]")[0]:
                table = _split_key(header.group(1))
                for i in range(1, len(table) + 1):
                    index.setdefault(table[:i], number)
                continue
            key = _KEY.match(raw)
            if key:
                path = table + _split_key(key.group(1))
                for i in range(len(table) + 1, len(path) + 1):
                    index.setdefault(path[:i], number)
                # inline tables: index their keys too (set = { "--x" = "1" })
                rest = raw[key.end() :]
                for inner in re.finditer(r"(?:\"([^\"]+)\"|([A-Za-z0-9_-]+))\s*=", rest):
                    index.setdefault(path + (inner.group(1) or inner.group(2),), number)
        depth += raw.count("[") - raw.count("]") if depth or raw.rstrip().endswith(("[", ",")) else 0
        depth = max(depth, 0)
    return index


def find_line(index: dict[tuple[str, ...], int], loc: tuple[str, ...]) -> int | str:
    """The line of field path ``loc`` (or of its nearest indexed parent) in an
    :func:`index_toml_lines` index; 1 when none is indexed ("1" for an empty file)."""
    for n in range(len(loc), 0, -1):
        if loc[:n] in index:
            return index[loc[:n]]
    return 1 if index else "1"
