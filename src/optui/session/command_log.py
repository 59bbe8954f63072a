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
from dataclasses import dataclass

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
    by a signal, or not known), ``duration_s``, ``what`` (server, bench, gpu, ssh...)."""

    ts: float
    host: str
    argv: tuple[str, ...]
    returncode: int | None
    duration_s: float
    what: str = ""


class CommandLog:
    """A bounded list of :class:`CommandRecord`; ``on_change`` is called after each add."""

    def __init__(self, size: int = 500, on_change: Callable[[], None] | None = None) -> None:
        self.records: deque[CommandRecord] = deque(maxlen=size)
        self.on_change = on_change

    def add(self, host: str, argv: Sequence[str], returncode: int | None, duration_s: float, what: str = "") -> None:
        """Record a command (secrets masked)."""
        self.records.append(CommandRecord(time.time(), host, tuple(mask_secrets(argv)), returncode, duration_s, what))
        if self.on_change is not None:
            self.on_change()
