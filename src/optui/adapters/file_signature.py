"""A cheap "did these files change?" test for pollers: ``stat`` only, no read.

Used by the journal watch (the journal and its ``-wal``), the todo follower (a followed file,
an opencode database and its ``-wal``, a task directory's files) and the config watch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: what a path that cannot be ``stat``-ed (missing, no permission) contributes
MISSING: tuple[None, None, None] = (None, None, None)


def files_signature(paths: Iterable[str | os.PathLike]) -> tuple[tuple[int, int, int] | tuple[None, None, None], ...]:
    """(size in bytes, mtime in ns, inode) of each of ``paths``, :data:`MISSING` for one that
    cannot be ``stat``-ed. Equal signatures: the files are very likely unchanged (a write
    changes size or mtime; a file replaced by rename changes the inode; SQLite in WAL mode
    writes every commit to ``-wal``). One ``stat`` per path; never raises."""
    out: list = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(MISSING)
        else:
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)
