"""Campaign state that only its owner can read: directories 0700, files 0600.

A campaign's state (``.optui/``: the journal DB and its ``-wal``/``-shm``, server logs,
pidfiles, locks, the flag catalogue cache) and its exports can hold secrets: a server's log
may print its API key, the journal holds every flag value. Everything optui creates there is
private to the user whatever the umask; an existing file or directory that optui owns is
tightened when it is opened again (a campaign made by an older optui was 0644/0755).

SQLite creates ``-wal`` and ``-shm`` with the database file's mode, so a 0600 DB file made
here (before SQLite opens it) keeps its companions private too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def _tighten(path: Path | int, mode: int) -> None:
    """chmod ``path`` (a path or an open descriptor) to ``mode`` when this user owns it and
    it is looser; never follows a symlink, never raises (a read-only filesystem, a file of
    another user: left as it is)."""
    with contextlib.suppress(OSError, NotImplementedError):
        st = os.fstat(path) if isinstance(path, int) else os.lstat(path)
        if st.st_uid != os.geteuid() or stat.S_ISLNK(st.st_mode) or stat.S_IMODE(st.st_mode) & ~mode == 0:
            return
        if isinstance(path, int):
            os.fchmod(path, mode)
        else:
            os.chmod(path, mode)


def private_dir(path: str | os.PathLike, *, tighten: bool = True) -> Path:
    """Create ``path`` and its missing parents with mode 0700 (parents that exist are left
    as they are); with ``tighten`` an existing ``path`` owned by this user becomes 0700 too.
    Returns the Path. Raises OSError when it cannot be created."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(d, DIR_MODE)
        _tighten(d, DIR_MODE)  # mkdir's mode goes through the umask
    if tighten and not missing:
        _tighten(path, DIR_MODE)
    return path


def private_file(path: str | os.PathLike) -> Path:
    """Make sure ``path`` exists as a file only its owner can read (created empty with 0600,
    an existing one owned by this user tightened to 0600). Returns the Path. Raises OSError
    when it cannot be created."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        tighten_file(path)
        return path
    try:
        _tighten(fd, FILE_MODE)  # the umask may have dropped bits, never added: this is a no-op then
    finally:
        os.close(fd)
    return path


def tighten_file(path: str | os.PathLike) -> None:
    """An existing file owned by this user becomes 0600 (missing, foreign or unchangeable:
    nothing happens)."""
    _tighten(Path(path), FILE_MODE)


def open_private_append(path: str | os.PathLike) -> int:
    """Open ``path`` for appending (created with its missing parent directories, 0600 / 0700)
    and return the descriptor; an existing log file owned by this user is tightened to 0600
    (a server's log may print its API key). Raises OSError.

    This is how a server's log is opened (``adapters/proc.py`` and ``adapters/shell.py``)."""
    path = Path(path)
    private_dir(path.parent, tighten=False)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    _tighten(fd, FILE_MODE)
    return fd
