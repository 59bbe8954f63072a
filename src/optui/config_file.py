"""Finding ``optui.toml`` and peeking at it cheaply — no pydantic.

The TUI's first frame must not wait for the config's full validation (pydantic is the
heaviest import of optui): the CLI finds the file and reads the few UI settings the first
frame needs (theme, keymap) with ``tomllib`` here; :mod:`optui.config` validates the whole
file right after. A TOML syntax error is reported here already, with its line.
:func:`toml_string` quotes a value for a TOML file optui writes (the demo campaign's).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

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
    from optui.adapters.bounded_read import read_bytes_bounded

    try:
        raw = read_bytes_bounded(path, MAX_TOML_BYTES)
    except OSError as exc:  # InputTooLarge names the bound
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start:,})") from None


def load_toml(text: str, filename: str) -> dict:
    """``tomllib.loads(text)`` within :data:`MAX_TOML_BYTES` and :data:`MAX_TOML_DEPTH`;
    raises :class:`ConfigError` ``FILE:LINE: problem`` (a syntax error, the bound hit),
    never ``RecursionError``."""
    from optui.core.bounded_json import too_deep_at

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
