"""Only valid runs count (issue 29): a benchmark run during which its server was HUNG or
DEGRADED, or whose largest gap between streamed tokens exceeded the stall watchdog
(``stall_s``), measured a sick server or a stalled client, not the configuration.

Such a result gets status ``"invalid"`` (:data:`INVALID`) with its reason in ``error``
(``"invalid: server hung 65 s during the run"``) and in ``extra["invalid"]``: it is stored
and shown, never compared and never a baseline (:func:`~optui.core.bench.result.comparable`
is False for it). The states are the ones optui's own state machine entered
(:mod:`optui.core.server.fsm`, journaled as ``server.state``), fed to a
:class:`StateTimeline` as they change. Pure: no I/O, no clock of its own (times are given).
"""

from __future__ import annotations

from optui.core.bench.result import BenchResult

#: The status of a result that measured a sick server (see module doc).
INVALID = "invalid"
#: ``extra`` key of the reason a result is invalid (without the ``"invalid: "`` prefix).
INVALID_KEY = "invalid"
#: Server states during which a run measures no configuration (``ServerState`` values).
BAD_STATES = ("degraded", "hung")


class StateTimeline:
    """The states a server went through, each from the time it was entered.

    ``initial``: the state at ``t0`` (seconds on any monotonic clock, the same for every
    call). :meth:`enter` records a change; :meth:`bad_seconds` says how long the server was
    in each of :data:`BAD_STATES` within an interval.
    """

    def __init__(self, initial: str, t0: float) -> None:
        self._changes: list[tuple[float, str]] = [(t0, str(initial))]

    def enter(self, state: str, t: float) -> None:
        """The server entered ``state`` at ``t`` (a repeat of the current state is ignored)."""
        if self._changes[-1][1] != str(state):
            self._changes.append((t, str(state)))

    def bad_seconds(self, t0: float, t1: float) -> dict[str, float]:
        """Seconds within ``[t0, t1]`` spent in each of :data:`BAD_STATES` that occurred
        (one entered before ``t0`` counts from ``t0``; absent: never in it within the interval)."""
        out: dict[str, float] = {}
        ends = [t for t, _ in self._changes[1:]] + [max(t1, self._changes[-1][0])]
        for (start, state), end in zip(self._changes, ends, strict=True):
            if state not in BAD_STATES:
                continue
            if start < t1 and end > t0:  # overlaps the run (one entered before it and still on counts)
                out[state] = out.get(state, 0.0) + min(end, t1) - max(start, t0)
        return out


def _seconds(s: float) -> str:
    return "<1 s" if s < 1 else f"{s:.0f} s"


def invalid_reason(bad: dict[str, float], *, max_gap_ms: float | None = None,
                   stall_s: float | None = None) -> str | None:
    """Why a run is invalid, or None: ``bad`` is :meth:`StateTimeline.bad_seconds` of its
    interval (``"server hung 65 s during the run"``, ``"server degraded 4 s and hung 61 s
    during the run"``); ``max_gap_ms`` its largest gap between streamed tokens (ms) against
    the stall watchdog's ``stall_s`` (s): ``"largest token gap 130 s > stall watchdog 120
    s"``. Both reasons joined by ``"; "`` when both hold."""
    parts = []
    states = [f"{state} {_seconds(bad[state])}" for state in BAD_STATES if state in bad]
    if states:
        parts.append("server " + " and ".join(states) + " during the run")
    if max_gap_ms is not None and stall_s is not None and max_gap_ms / 1000.0 > stall_s:
        parts.append(f"largest token gap {max_gap_ms / 1000.0:.0f} s > stall watchdog {stall_s:g} s")
    return "; ".join(parts) or None


def mark_invalid(result: BenchResult, reason: str) -> BenchResult:
    """Make ``result`` (in place; returned) :data:`INVALID` with ``reason``: ``error``
    ``"invalid: <reason>"`` (an error it had already is kept after it), ``extra["invalid"]``."""
    result.status = INVALID
    result.extra[INVALID_KEY] = reason
    result.error = f"invalid: {reason}" + (f"; {result.error}" if result.error else "")
    return result


def max_token_gap_ms(result: BenchResult) -> float | None:
    """The largest gap between two streamed tokens of one request (ms): the built-in
    generator's ``extra["max_itl_ms"]``; None when the tool did not record it."""
    value = result.extra.get("max_itl_ms")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
