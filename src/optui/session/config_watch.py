"""The config file edited while optui runs.

optui reads ``optui.toml`` once, at start: a running session keeps the config it started with
(servers, argv, benchmarks, hosts), so a half-finished edit can never restart a server with a
broken setting. Each edit is still checked at once, so a mistake shows now and not at the
next start: the status line says ``config: FILE:LINE: FIELD: problem`` (the first error)
until the file is fixed, a notification says the same, and the journal gets a
``config.changed`` event (``valid``, ``error``, ``applied`` false: takes effect at the next
start). A one-shot CLI command run against the broken file exits 2 with the same message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from optui.adapters.file_signature import files_signature
from optui.config_file import ConfigError


@dataclass(frozen=True, slots=True)
class ConfigCheck:
    """One edit of the config file: ``error`` is None when it is valid, else the
    ``FILE:LINE: FIELD: problem`` lines."""

    path: str
    error: str | None

    @property
    def valid(self) -> bool:
        """The edited file would load."""
        return self.error is None

    def event_data(self) -> dict:
        """The ``config.changed`` event's data."""
        return {"path": self.path, "valid": self.valid, "error": self.error, "applied": False}

    def message(self) -> str:
        """One line for the operator."""
        error = self.error
        if error is None:  # valid
            return f"{self.path} changed; the running session keeps the config it started with (restart optui to apply)"
        first = error.splitlines()[0]
        more = len(error.splitlines()) - 1
        return first + (f" (+{more} more)" if more else "") + "; the running session keeps its last good config"


class ConfigWatcher:
    """Checks ``path`` (the campaign's config file, None: none) on each :meth:`check`."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = Path(path) if path else None
        self._signature = self._stat()
        self.error: str | None = None  # the current file's problem, None when it loads

    def _stat(self) -> tuple | None:
        if self.path is None:
            return None
        return files_signature((self.path,))

    def check(self) -> ConfigCheck | None:
        """A :class:`ConfigCheck` when the file changed since the last call, else None
        (one ``stat``; the file is parsed only when it changed)."""
        signature = self._stat()
        if signature == self._signature or self.path is None:  # no path: both signatures are None
            return None
        self._signature = signature
        from optui.config import parse_config_text

        try:
            parse_config_text(self.path.read_text(encoding="utf-8"), str(self.path))
        except (OSError, UnicodeDecodeError) as exc:
            self.error = f"{self.path}: cannot read: {exc}"
        except ConfigError as exc:
            self.error = str(exc)
        else:
            self.error = None
        return ConfigCheck(str(self.path), self.error)
