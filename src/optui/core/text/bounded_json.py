"""JSON from outside optui (an HTTP answer, a spec file, an agent's text) decoded within
bounds: a size in bytes and a nesting depth, each refusal naming the bound it hit.

``json.loads`` recurses once per level of nesting: a 200,000-deep answer (``[[[[…``) raised
``RecursionError`` deep inside a parser and killed the poller that called it (issue 30). Here
that error is caught, the decoded value's depth is checked without recursion, and the offset
of the first level too deep is found by one linear pass over the text that skips strings.
"""

from __future__ import annotations

import math
import re

#: Bytes (or characters) of a JSON text optui reads from outside unless the caller says less.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Levels of nesting (objects and arrays) unless the caller says less; every answer optui
#: reads is under 10 levels deep.
DEFAULT_MAX_DEPTH = 64

_STRING_B = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET_B = re.compile(rb"[\[\]{}]")


class JsonBoundError(ValueError):
    """A JSON text over a bound or not JSON; ``bound`` is ``size``, ``depth`` or ``syntax``
    and ``str()`` says which limit and where (byte offset)."""

    def __init__(self, bound: str, message: str) -> None:
        super().__init__(message)
        self.bound = bound


def too_deep_at(text: bytes | str, max_depth: int) -> int | None:
    """The offset of the bracket that opens level ``max_depth + 1`` of ``text`` (brackets in
    strings skipped), or None. Linear in ``len(text)``; never recurses."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if raw.count(b"[") + raw.count(b"{") <= max_depth:  # the common case: nothing to scan
        return None
    bare = _STRING_B.sub(lambda m: b" " * len(m.group()), raw)  # same offsets, no brackets in strings
    depth = 0
    for m in _BRACKET_B.finditer(bare):
        depth += 1 if m.group() in b"[{" else -1
        if depth > max_depth:
            return m.start()
    return None


def loads_bounded(text: bytes | str, *, what: str, max_bytes: int = DEFAULT_MAX_BYTES,
                  max_depth: int = DEFAULT_MAX_DEPTH) -> object:
    """``json.loads(text)`` when ``text`` is at most ``max_bytes`` long and nests at most
    ``max_depth`` levels. ``what`` names the text in a message (a URL, a file). Raises
    :class:`JsonBoundError` (``bound`` ``size`` / ``depth`` / ``syntax``), never
    ``RecursionError``. The C decoder runs first (it stops at Python's recursion limit with a
    ``RecursionError``, caught here); the depth is then checked on the decoded value without
    recursion, and the text is scanned for the offset only when it is too deep: a normal
    answer costs one ``json.loads`` and one walk (the scan first cost 6x the decode)."""
    import json  # here: too_deep_at (a TOML theme's depth check) comes before the first frame, json not

    if len(text) > max_bytes:
        raise JsonBoundError("size", f"{what}: {len(text):,} bytes is over the limit of {max_bytes:,}")
    try:
        data = json.loads(text)
    except RecursionError:
        raise _depth_error(text, what, max_depth) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonBoundError("syntax", f"{what}: cannot parse: {str(exc)[:200]}") from None
    if too_deep(data, max_depth):
        raise _depth_error(text, what, max_depth)
    return data


def too_deep(data: object, max_depth: int) -> bool:
    """True when ``data`` (decoded JSON) nests objects and arrays deeper than ``max_depth``
    (iterative: no recursion)."""
    level: list = [data] if type(data) in (dict, list) else []
    depth = 1
    while level:  # level by level (the values json.loads makes are exactly dict and list)
        if depth > max_depth:
            return True
        deeper: list = []
        for obj in level:
            for child in obj.values() if type(obj) is dict else obj:
                if type(child) in (dict, list):
                    deeper.append(child)
        level, depth = deeper, depth + 1
    return False


def _depth_error(text: bytes | str, what: str, max_depth: int) -> JsonBoundError:
    at = too_deep_at(text, max_depth)
    where = f" (at byte {at:,})" if at is not None else ""
    return JsonBoundError("depth", f"{what}: nested deeper than {max_depth} levels{where}")


def bounded_number(value: float, low: float, high: float) -> float | None:
    """``value`` when it is finite and within ``[low, high]``, else None (shown as invalid,
    never printed raw: ``inf``, a 309-digit ``1e308``, a negative MiB)."""
    if not math.isfinite(value) or value < low or value > high:
        return None
    return value
