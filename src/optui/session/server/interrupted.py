"""Records an optui process left open when it ended mid-way (SIGKILL, a closed terminal, a
crash): the next writing process closes them, so the journal never shows a benchmark that is
still "started" or an experiment without an outcome.

- a ``bench.started`` without its ``bench.finished`` (same ``run_id``) whose process (its
  ``pid``) is gone gets a ``bench.finished`` with status ``interrupted``;
- a ``server.restart`` followed by no ``server.ready``, ``server.failed`` or later restart
  of that server, whose process is gone and whose server's restart lock nobody holds, gets a
  ``server.restart.interrupted`` (the experiment's outcome; a later observed ``ready``
  still counts, see :mod:`optui.core.journal.experiments`).

Only events that name their process (``pid``) are closed: events written before optui
recorded it cannot be told from a run still going in another process.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from optui.adapters import proc
from optui.adapters.journal import Journal
from optui.core.journal import events as ev
from optui.core.journal.events import Event

#: How many of the newest events of a kind are looked at (a session runs a few at a time).
SCAN = 200


def _gone(pid: object) -> bool:
    return isinstance(pid, int) and pid > 0 and pid != os.getpid() and not proc.pid_alive(pid)


def close_interrupted(journal: Journal, *, actor: str, restart_locked: Callable[[str], bool]) -> int:
    """Journal the end of every run and restart left open by an optui process that is gone
    (see module doc); ``restart_locked(server)`` tells whether a live process holds that
    server's restart lock. Returns how many records were closed. Raises JournalError."""
    closed = 0
    finished = {e.data.get("run_id") for e in journal.events(types=[ev.BENCH_FINISHED], limit=SCAN, newest_first=True)}
    for e in journal.events(types=[ev.BENCH_STARTED], limit=SCAN, newest_first=True):
        run_id = e.data.get("run_id")
        if run_id and run_id not in finished and _gone(e.data.get("pid")):
            journal.append(ev.BENCH_FINISHED, e.target, {
                "bench": e.data.get("bench"), "status": "interrupted", "run_id": run_id,
                "error": f"interrupted: optui process {e.data.get('pid')} ended during the run",
                "duration_s": None, "result": None, "results": None}, actor=actor, experiment=e.experiment)
            closed += 1
    ends = (ev.SERVER_READY, ev.SERVER_FAILED, ev.RESTART_REQUESTED, ev.RESTART_INTERRUPTED)
    newest: dict[str, Event] = {}
    for e in journal.events(types=list(ends), limit=SCAN, newest_first=True):
        newest.setdefault(e.target or "", e)
    for server, e in newest.items():
        if e.type == ev.RESTART_REQUESTED and _gone(e.data.get("pid")) and not restart_locked(server):
            journal.append(ev.RESTART_INTERRUPTED, server, {
                "pid": e.data.get("pid"), "restart_seq": e.seq,
                "message": f"optui process {e.data.get('pid')} ended before the ready gate (SIGKILL, closed terminal?)"},
                actor=actor, experiment=e.experiment)
            closed += 1
    return closed


def close_own_restart(journal: Journal, server: str, *, actor: str, why: str) -> bool:
    """Journal the restart of ``server`` this process asked for as interrupted (``why``: ``was
    ended by SIGTERM``) when it has not ended yet (no ``ready``, ``failed`` or later restart);
    whether it did. For a process that ends its own restart on a signal (``optui restart``),
    rather than leaving it to the next process. Raises JournalError."""
    ends = (ev.SERVER_READY, ev.SERVER_FAILED, ev.RESTART_REQUESTED, ev.RESTART_INTERRUPTED)
    newest = next(iter(journal.events(types=list(ends), target=server, limit=1, newest_first=True)), None)
    if newest is None or newest.type != ev.RESTART_REQUESTED or newest.data.get("pid") != os.getpid():
        return False
    journal.append(ev.RESTART_INTERRUPTED, server, {
        "pid": os.getpid(), "restart_seq": newest.seq,
        "message": f"optui process {os.getpid()} {why} before the ready gate"}, actor=actor, experiment=newest.experiment)
    return True


def bench_running_on(journal: Journal, server: str) -> tuple[str, int] | None:
    """``(bench name, pid)`` of a benchmark another live optui process runs against
    ``server`` now (its ``bench.started`` has no ``bench.finished``), else None. A restart
    under it would credit its results to the old experiment and mix two configurations in
    one run. Raises JournalError."""
    finished = {e.data.get("run_id") for e in journal.events(types=[ev.BENCH_FINISHED], target=server, limit=SCAN,
                                                             newest_first=True)}
    for e in journal.events(types=[ev.BENCH_STARTED], target=server, limit=20, newest_first=True):
        pid = e.data.get("pid")
        if e.data.get("run_id") not in finished and isinstance(pid, int) and pid != os.getpid() and proc.pid_alive(pid):
            return str(e.data.get("bench") or "?"), pid
    return None
