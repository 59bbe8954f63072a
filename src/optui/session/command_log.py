"""The command log (lazygit's ``@``): every command optui ran for the operator, local or
remote, with host, argv, exit code and duration. Bounded; newest last.

API keys never appear here: argv values of flags that carry secrets (``--api-key``,
``--admin-api-key``, ``--hf-token``, ``--token``...) are masked when recorded.
:func:`hide_value` does the same for a known key value in free text (server log lines,
benchmark output).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

SECRET_FLAGS = ("--api-key", "--admin-api-key", "--hf-token", "--token", "--password", "--secret")


def mask_secrets(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every secret-carrying flag replaced by ``***``
    (``--api-key X`` and ``--api-key=X`` forms)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        name, eq, _value = arg.partition("=")
        if name.lower().startswith(SECRET_FLAGS) and name.startswith("--"):
            if eq:
                out.append(f"{name}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


def hide_value(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` (an API key read from the environment,
    e.g. a server that logs its own arguments like SGLang's ``server_args=``) as ``***``."""
    return text.replace(secret, "***") if secret and secret in text else text


@dataclass(frozen=True, slots=True)
class CommandRecord:
    """One command: Unix ``ts`` when it ended (or started, for long-running ones), ``host``
    ("local" or a rack host), masked ``argv``, ``returncode`` (None: still running, killed
    by a signal, or not known), ``duration_s``, ``what`` (server, bench, gpu, ssh...),
    ``running`` (a long-running command, a server start, whose end has not been seen yet;
    its record is updated with the exit code and the time it ran when it ends)."""

    ts: float
    host: str
    argv: tuple[str, ...]
    returncode: int | None
    duration_s: float
    what: str = ""
    running: bool = False

    def exit_text(self) -> str:
        """The exit column: ``running``, the exit code (``-9``: killed by signal 9, as
        Python's returncode), or ``?`` (ended, status not known: a remote stream, a
        process optui did not start)."""
        if self.running:
            return "running"
        return "?" if self.returncode is None else str(self.returncode)


class CommandLog:
    """A bounded list of :class:`CommandRecord`; ``on_change`` is called after each add
    and each update."""

    def __init__(self, size: int = 500, on_change: Callable[[], None] | None = None) -> None:
        self.records: deque[CommandRecord] = deque(maxlen=size)
        self.on_change = on_change

    def add(self, host: str, argv: Sequence[str], returncode: int | None, duration_s: float, what: str = "",
            running: bool = False) -> Callable[[int | None], None]:
        """Record a command (secrets masked). ``running``: it goes on (a server start): call
        the returned ``ended(returncode)`` when it exits, to put its exit code and its run
        time on the record (later calls, or one for a record already dropped, do nothing)."""
        record = CommandRecord(time.time(), host, tuple(mask_secrets(argv)), returncode, duration_s, what, running)
        self.records.append(record)
        self._changed()
        started = time.monotonic()

        def ended(code: int | None) -> None:
            for index, item in enumerate(self.records):
                if item is record:
                    if item.running:
                        self.records[index] = replace(item, returncode=code, running=False,
                                                      duration_s=time.monotonic() - started)
                        self._changed()
                    return

        return ended

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
