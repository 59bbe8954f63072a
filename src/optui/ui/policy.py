"""Which actions are allowed right now (Textual ``check_action``), in one place.

- ``--read-only`` (or ``read_only = true``): every action that changes a server or puts load
  on it is hidden from the footer and refused (restart, roll back, run/sweep/repeat a
  benchmark, run a todo item's experiment...). The session refuses them as well, so the
  palette and the CLI cannot get around it.
- While the campaign loads (the first frame comes before the session exists), only the
  view actions work.
"""

from __future__ import annotations

#: (action name, first parameter or None) pairs that change a server or run load
MUTATING: frozenset[tuple[str, object]] = frozenset({
    ("restart", None), ("rollback", None), ("bench", None), ("stop_experiments", None),
    ("sweep", None), ("repeat", None),  # the bench panel's
    ("run_experiment", None), ("queue_all", None),  # the todo list's
})
#: actions that need no session (work during loading)
VIEW_ONLY = frozenset({"quit", "help", "focus_panel", "zoom", "cursor", "cursor_to", "command_palette"})


def allowed(app, action: str, parameters: tuple[object, ...]) -> bool:
    """False when ``action`` must be hidden and refused now (see module doc)."""
    client = getattr(app, "client", None)
    if client is None:
        return action in VIEW_ONLY
    if action == "abort_bench" and not client.bench_running:
        return False  # nothing to abort: not offered (key bar, help, palette)
    if client.snapshot().read_only:
        key = (action, parameters[0] if parameters else None)
        if key in MUTATING or (action, None) in MUTATING and not parameters:
            return False
    return True
