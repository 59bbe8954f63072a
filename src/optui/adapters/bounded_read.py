"""Reading a file or stream optui did not write, with a bound on its size.

``Path.read_text`` reads until EOF: ``replay_file = "/dev/zero"`` took ``optui status`` to
7.5 GB in 6 s (issue 30). Here a reader takes at most ``max_bytes + 1`` bytes, so a device, a
FIFO or a huge file costs that much memory and a :class:`InputTooLarge` naming the file and
the bound. :func:`read_response_bounded` does the same for an HTTP answer streamed by httpx
(a server's probe answers, Prometheus's query answers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import httpx

#: A saved ``nvidia-smi --query-gpu`` capture (a few hundred bytes a reading).
MAX_CAPTURE_BYTES = 4 * 1024 * 1024
#: A saved server log or benchmark output read whole (``optui log classify``, ``bench parse``).
MAX_LOG_BYTES = 256 * 1024 * 1024

_CHUNK = 1 << 20


class InputTooLarge(OSError):
    """A file or stream over its bound; ``str()`` names it and the bound (bytes)."""


def read_bytes_bounded(source: str | Path | BinaryIO, max_bytes: int, *, name: str | None = None) -> bytes:
    """The bytes of ``source`` (a path, or a binary stream such as stdin's buffer) when there
    are at most ``max_bytes``; ``name`` is what a message calls it (default: the path). Raises
    :class:`InputTooLarge` past the bound (having read ``max_bytes + 1`` bytes at most) and
    ``OSError`` when it cannot be read."""
    label = name if name is not None else str(source)
    if isinstance(source, str | Path):
        with open(source, "rb") as fh:
            return _read(fh, max_bytes, label)
    return _read(source, max_bytes, label)


def read_text_bounded(source: str | Path | BinaryIO, max_bytes: int, *, name: str | None = None,
                      errors: str = "replace") -> str:
    """:func:`read_bytes_bounded` decoded as UTF-8 (``errors`` as ``bytes.decode``'s)."""
    return read_bytes_bounded(source, max_bytes, name=name).decode("utf-8", errors)


def _read(fh: BinaryIO, max_bytes: int, label: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        chunk = fh.read(min(_CHUNK, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    raise InputTooLarge(f"{label}: larger than the limit of {max_bytes:,} bytes (not read further)")


async def read_response_bounded(resp: httpx.Response, max_bytes: int, too_large: Callable[[], Exception]) -> bytes:
    """The body of ``resp`` (a response of ``httpx``'s ``stream()``, not read yet) read in
    chunks while it holds at most ``max_bytes``; raises ``too_large()`` past the bound, announced
    by Content-Length (nothing read) or received (the download stops there: an endless or
    huge answer never sits in memory)."""
    announced = resp.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > max_bytes:
        raise too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)
