"""Reading the result file a benchmark tool wrote during a run (blocking; call through
``asyncio.to_thread``).

Before the run :func:`mark` notes what is already there (an SGLang ``--output-file`` is
appended to, so its size; a vLLM ``--result-dir`` may hold older results, so their
mtimes); after the run :func:`read_new` parses only what the run added. Formats:
:mod:`optui.core.bench.files`.

A benchmark that ran on an SSH host left its file there: :func:`mark_remote` /
:func:`read_new_remote` do the same through its Shell, for an exact file (SGLang
``--output-file``, vLLM ``--result-filename``) and for a vLLM ``--result-dir`` (listed
with GNU ``find -printf``: the hosts are Linux).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from optui.core.bench.canon import BenchParseError
from optui.core.bench.cmd import ResultFileSpec
from optui.core.bench.files import parse_result_file_text
from optui.core.bench.result import BenchResult

if TYPE_CHECKING:
    from optui.adapters.shell import Shell

MAX_BYTES = 256 * 1024 * 1024  # --output-details files carry per-request arrays; refuse absurd ones


@dataclass(frozen=True, slots=True)
class FileMark:
    """The state before a run: ``size`` of the exact file (0 when absent) and, for a
    directory spec, ``seen`` name → mtime_ns of the ``*.json`` files already there."""

    size: int = 0
    mtime_ns: int = 0
    seen: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FileRead:
    """What a run left: ``results`` (possibly empty), the ``path`` read (None when no new
    file was found) and ``error`` (a message naming the file) when it could not be used."""

    results: list[BenchResult]
    path: str | None = None
    error: str | None = None


def _resolve(path: str, cwd: str | None) -> Path:
    p = Path(os.path.expanduser(path))
    return p if p.is_absolute() or cwd is None else Path(cwd) / p


def mark(spec: ResultFileSpec, cwd: str | None) -> FileMark:
    """Note the result file's state before the run (see module doc)."""
    if spec.path is not None:
        try:
            st = _resolve(spec.path, cwd).stat()
            return FileMark(st.st_size, st.st_mtime_ns)
        except OSError:
            return FileMark()
    return FileMark(seen=_json_files(_resolve(spec.directory, cwd)))


def _json_files(directory: Path) -> dict[str, int]:
    out = {}
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(".json") and not entry.name.endswith(".pytorch.json") and entry.is_file():
                    out[entry.name] = entry.stat().st_mtime_ns
    except OSError:
        pass
    return out


def read_new(spec: ResultFileSpec, cwd: str | None, before: FileMark) -> FileRead:
    """Parse what the run added to its result file. An appended file (SGLang JSONL, vLLM
    ``--append-result``) is read from the size noted before the run; a rewritten one (vLLM
    without ``--append-result``, or an appended file that shrank) whole. Never raises:
    problems come back in ``error``."""
    if spec.path is not None:
        path = _resolve(spec.path, cwd)
        try:
            st = path.stat()
        except OSError:
            return FileRead([], None, f"{path}: the tool wrote no result file")
        if st.st_size == before.size and st.st_mtime_ns == before.mtime_ns:
            return FileRead([], None, f"{path}: not written by this run")
        offset = before.size if spec.append and st.st_size > before.size else 0
        return _parse(path, offset)
    directory = _resolve(spec.directory, cwd)
    now = _json_files(directory)
    fresh = [name for name, mtime in now.items() if before.seen.get(name) != mtime]
    if not fresh:
        return FileRead([], None, f"{directory}: no new *.json result file")
    newest = max(fresh, key=lambda name: now[name])
    return _parse(directory / newest, 0)


def _parse(path: Path, offset: int) -> FileRead:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        return FileRead([], str(path), f"{path}: {exc.strerror or exc}")
    if len(data) > MAX_BYTES:
        return FileRead([], str(path), f"{path}: larger than {MAX_BYTES >> 20} MiB, not read")
    return _parse_text(data.decode("utf-8", errors="replace"), str(path))


def _parse_text(text: str, path: str) -> FileRead:
    try:
        return FileRead(parse_result_file_text(text, path), path)
    except BenchParseError as exc:
        return FileRead([], path, str(exc))


def _remote_path(path: str, cwd: str | None) -> str:
    """``path`` on the remote host: relative to ``cwd``, else to the home (``~/`` dropped:
    remote commands start there)."""
    full = path if path.startswith(("/", "~")) or not cwd else f"{cwd.rstrip('/')}/{path}"
    return full[2:] if full.startswith("~/") else full


async def mark_remote(shell: Shell, spec: ResultFileSpec, cwd: str | None) -> FileMark:
    """:func:`mark` on ``shell``'s host (the file's size, or the directory's ``*.json``
    files with their mtimes). Raises ShellError."""
    if spec.path is None:
        return FileMark(seen=await _remote_json_files(shell, _remote_path(spec.directory, cwd)))
    return FileMark(await shell.file_size(_remote_path(spec.path, cwd)))


async def _remote_json_files(shell: Shell, directory: str) -> dict[str, int]:
    """name → mtime (ns) of the ``*.json`` result files in ``directory`` on ``shell``'s host
    (vLLM's ``*.pytorch.json`` siblings left out); empty when the directory is missing.
    Raises ShellError when the host cannot be asked."""
    done = await shell.run(["find", directory or ".", "-maxdepth", "1", "-type", "f", "-name", "*.json",
                            "!", "-name", "*.pytorch.json", "-printf", "%T@ %f\\0"], timeout_s=30.0)
    out = {}
    for entry in done.stdout.split("\0"):
        stamp, _, name = entry.partition(" ")
        try:
            out[name] = int(float(stamp) * 1e9)
        except ValueError:
            continue
    return out


async def read_new_remote(shell: Shell, spec: ResultFileSpec, cwd: str | None, before: FileMark) -> FileRead:
    """:func:`read_new` on ``shell``'s host: what the run appended (or the whole rewritten
    file). Never raises: problems come back in ``error``."""
    from optui.adapters.shell import ShellError

    try:
        if spec.path is None:
            directory = _remote_path(spec.directory, cwd)
            now = await _remote_json_files(shell, directory)
            fresh = [name for name, mtime in now.items() if before.seen.get(name) != mtime]
            if not fresh:
                return FileRead([], None, f"{shell.host}:{directory}: no new *.json result file")
            path, offset = f"{directory.rstrip('/')}/{max(fresh, key=lambda name: now[name])}", 0
            size = await shell.file_size(path)
        else:
            path = _remote_path(spec.path, cwd)
            size = await shell.file_size(path)
            if size == 0 or size == before.size:
                return FileRead([], None, f"{shell.host}:{path}: not written by this run")
            offset = before.size if spec.append and size > before.size else 0
        where = f"{shell.host}:{path}"
        if size - offset > MAX_BYTES:
            return FileRead([], where, f"{where}: larger than {MAX_BYTES >> 20} MiB, not read")
        done = await shell.run(["tail", "-c", f"+{offset + 1}", "--", path], timeout_s=60.0)
    except ShellError as exc:
        return FileRead([], None, f"{shell.host}: {exc}")
    if not done.ok:
        return FileRead([], where, f"{where}: {done.stderr.strip() or f'tail exited {done.returncode}'}")
    return _parse_text(done.stdout, where)
