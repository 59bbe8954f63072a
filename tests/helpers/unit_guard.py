"""What keeps ``tests/unit`` unit tests: no process started, no TCP/UDP socket.

``tests/unit/conftest.py`` turns :func:`guard` on around every test of that folder: starting a
process (``subprocess``, ``asyncio.create_subprocess_*``, ``os.fork``, ``os.posix_spawn``) or
connecting / binding an ``AF_INET`` or ``AF_INET6`` socket (a server on 127.0.0.1 included)
raises :class:`UnitKindViolation`, naming what was tried. Such a test belongs in
``tests/process``. Unix-domain sockets (the asyncio loop's self-pipe) stay allowed.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

_INET = (socket.AF_INET, socket.AF_INET6)


class UnitKindViolation(PermissionError):
    """A unit test started a process or opened a network socket (move it to tests/process)."""


@contextlib.contextmanager
def guard(report: Callable[[str], None] | None = None) -> Iterator[None]:
    """Within the block, process creation and INET sockets raise :class:`UnitKindViolation`.

    ``report`` (optional) is called with a one-line description of each attempt before the
    raise, so an attempt that the code under test swallows is still seen. Everything patched
    is restored on exit.
    """

    def refuse(what: str) -> UnitKindViolation:
        text = f"a unit test may not {what} (tests/unit: no process, no network; move the test to tests/process)"
        if report is not None:
            report(what)
        return UnitKindViolation(text)

    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        saved.append((owner, name, original))
        setattr(owner, name, make(original))

    def no_process(what: str) -> Callable[[Any], Any]:
        def make(_original: Any) -> Any:
            def refused(*args: Any, **kwargs: Any) -> Any:
                detail = args[1] if what == "start a process" and len(args) > 1 else ""
                raise refuse(f"{what} {detail!r}" if detail else what)

            return refused

        return make

    def inet_only(what: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def checked(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
                if self.family in _INET:
                    raise refuse(f"{what} {args[0]!r}" if args else what)
                return original(self, *args, **kwargs)

            return checked

        return make

    patch(subprocess.Popen, "_execute_child", no_process("start a process"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
        patch(os, name, no_process(f"os.{name}"))
    for name in ("connect", "connect_ex", "bind"):
        patch(socket.socket, name, inet_only(f"{name} a network socket to"))
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)
