"""Learning and caching each server program's flag catalogue from its own ``--help``.

The help command is the launch argv's program part plus ``--help`` (``vllm serve
--help=all`` for vLLM, falling back to ``--help``), run through the server host's
:class:`~optui.adapters.shell.Shell` with the server's env and cwd. The parsed catalogue is
cached per (host, program, kind) in ``STATE_DIR/flag_catalogs/*.json``, so the server's
(slow) import happens once; ``learn(refresh=True)`` runs it again after an upgrade.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path

from optui.adapters.private_files import private_dir, private_file
from optui.adapters.shell import Shell, ShellError
from optui.core.flags.argv import Flags
from optui.core.flags.catalog import FlagCatalog
from optui.core.flags.help_parse import HelpParseError, parse_help

HELP_TIMEOUT_S = 120.0


class CatalogError(Exception):
    """The catalogue could not be learned (program missing, help unparseable); the message
    names the command."""


def help_commands(argv: list[str], kind: str) -> list[list[str]]:
    """The help commands to try for a launch argv, best first."""
    program = list(Flags.parse(argv).program)
    if not program:
        return []
    if kind == "vllm" and program[-1] == "serve":
        return [[*program, "--help=all"], [*program, "--help"]]
    return [[*program, "--help"]]


class CatalogStore:
    """The cache directory plus the learning step (see module doc)."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "flag_catalogs"

    def _path(self, host: str, program: tuple[str, ...], kind: str) -> Path:
        key = hashlib.sha1(json.dumps([host, list(program), kind]).encode()).hexdigest()[:16]
        return self.dir / f"{key}.json"

    def cached(self, host: str, argv: list[str], kind: str) -> FlagCatalog | None:
        """The cached catalogue for this program, None when not learned yet (or unreadable)."""
        program = Flags.parse(argv).program
        try:
            data = json.loads(self._path(host, program, kind).read_text())
            return FlagCatalog.from_json(data["catalog"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    async def learn(self, shell: Shell, argv: list[str], kind: str, *, env: dict[str, str] | None = None,
                    cwd: str | None = None, refresh: bool = False) -> FlagCatalog:
        """The catalogue (cached unless ``refresh``); runs the help command when needed.
        Raises CatalogError."""
        if not refresh and (found := self.cached(shell.host, argv, kind)) is not None:
            return found
        program = Flags.parse(argv).program
        errors = []
        for command in help_commands(argv, kind):
            try:
                result = await shell.run(command, timeout_s=HELP_TIMEOUT_S, env=env, cwd=cwd)
            except ShellError as exc:
                errors.append(str(exc))
                continue
            text = result.stdout if result.stdout.strip() else result.stderr
            try:
                catalog = parse_help(text, kind=kind, program=program)
            except HelpParseError as exc:
                errors.append(f"`{' '.join(command)}` (exit {result.returncode}): {exc}")
                continue
            self._save(shell.host, program, kind, catalog)
            return catalog
        raise CatalogError("; ".join(errors) or f"no program in argv {argv!r}")

    def _save(self, host: str, program: tuple[str, ...], kind: str, catalog: FlagCatalog) -> None:
        path = self._path(host, program, kind)
        with contextlib.suppress(OSError):
            private_dir(path.parent)
            tmp = private_file(path.with_suffix(".tmp"))
            tmp.write_text(json.dumps({"host": host, "program": list(program), "kind": kind, "learned_at": time.time(),
                                       "catalog": catalog.to_json()}))
            os.replace(tmp, path)
