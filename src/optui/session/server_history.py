"""What the journal already says about a server, for a session that did not see it happen.

Several optui processes share one journal (a TUI, CLI commands, an agent's CLI calls). A
server's transitions are journaled by the process that caused or first saw them; another
process reads them here instead of journaling them twice or inventing its own:

- :func:`last_journaled_state`: the state the journal last recorded (a session's first
  observation is journaled only when it differs, and from that state);
- :func:`failure_journaled_since`: the failure another process journaled for the launch it
  made (a TUI following a CLI restart shows that crash class instead of DOWN).

Both raise :class:`~optui.adapters.journal.JournalError` when the journal cannot be read.
"""

from __future__ import annotations

from optui.adapters.journal import Event, Journal
from optui.core import events as ev
from optui.core.server_state import CrashClass


def last_journaled_state(journal: Journal, server: str) -> str | None:
    """The ``new`` state of ``server``'s newest ``server.state`` event ("ready", "down"...),
    None when it has none."""
    found = journal.events(target=server, types=[ev.SERVER_STATE], limit=1, newest_first=True)
    return found[0].data.get("new") if found else None


def failure_journaled_since(journal: Journal, server: str, since_ts: float) -> Event | None:
    """The ``server.failed`` event of ``server`` written at or after ``since_ts`` (Unix
    seconds) when it is the newest of its starts, readies and failures (no later launch has
    started or become ready since), else None."""
    found = journal.events(target=server, types=[ev.SERVER_STARTING, ev.SERVER_READY, ev.SERVER_FAILED],
                           since_ts=since_ts, limit=1, newest_first=True)
    return found[0] if found and found[0].type == ev.SERVER_FAILED else None


def crash_class_of(value: object) -> CrashClass:
    """The :class:`CrashClass` named by a journaled ``class`` field (``UNKNOWN`` for a name
    this version does not know)."""
    try:
        return CrashClass(str(value))
    except ValueError:
        return CrashClass.UNKNOWN
