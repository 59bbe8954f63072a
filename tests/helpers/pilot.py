"""Waiting in Pilot tests without fixed sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.css.query import NoMatches


async def wait_for(pilot, predicate: Callable[[], object], timeout: float = 40.0, step: float = 0.05,
                   what: str | Callable[[], object] = "condition") -> bool:
    """Pause the app in ``step`` s slices until ``predicate()`` is true; AssertionError naming
    ``what`` after ``timeout`` s (a bound for slow machines, not an expected duration);
    ``what`` may be a callable, called then, to show the state that was found instead. A
    widget the predicate queries that is not mounted yet (the panels mount just after the
    first frame) counts as "not yet"."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except NoMatches:
            pass
        await pilot.pause(step)
    if callable(what):
        try:
            what = f"condition (found: {what()!r})"
        except Exception as exc:  # noqa: BLE001 - only describes a failure already certain
            what = f"condition (state unreadable: {exc!r})"
    raise AssertionError(f"{what} not reached in {timeout} s")


def experiment_row(table, exp_id: str) -> dict[str, str]:
    """The experiments view's row of ``exp_id`` as text, by column key (columns come and go
    with the width and the campaign: a server column only with several servers, a decision
    column once one is made)."""
    return {c.key.value: str(cell) for c, cell in zip(table.ordered_columns, table.get_row(exp_id), strict=True)}
