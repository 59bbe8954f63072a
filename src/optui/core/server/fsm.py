"""The server state machine as a pure function of what the probes and the process say.

:func:`next_state` is called after every probe with an :class:`Observation`; it returns the
new state and never performs I/O, so every transition is unit-testable; the load reading
that follows it may override it (:func:`after_load_reading`). The transitions optui causes
itself are fixed: a start makes a server STARTING (as does following another optui process's
launch), a stop STOPPING then DOWN, a failed start or ready gate CRASHED; every change, from
here or from those, goes through ``session.server_transitions.StatusKeeper.set_state``. Hung detection is
:class:`HungDetector` (requests waiting/running while the generated-token counter stands
still for ``after_s`` seconds).

A stopped process (SIGSTOP: ``Observation.paused``, read from its process group's state)
is HUNG at the first poll that sees it, without waiting for a health probe: within
``poll_interval_s`` plus :data:`PAUSE_CHECK_S` of the stop, and it reads HUNG, never DOWN,
in ``optui status`` too. A process frozen otherwise (alive, not stopped, answering
nothing) leaves READY for DEGRADED when its health probe times out: within
``health_timeout_s + poll_interval_s`` (plus one 5 s load probe at most) of the freeze.

DEGRADED does not last: a server that has not answered its health probe with 200 for
``escalate_after_s`` seconds (the server's ``hung_after_s``) while its process is alive
(timeouts, 503s, refused connections) is HUNG (:func:`unhealthy_reason` says why); a
process that exits is CRASHED at once; an observed server (no process of ours to ask) that
fails :data:`FAILS_TO_DOWN` probes in a row is DOWN, unless they connected and timed out
(a frozen server listens: DEGRADED, then HUNG by the same rule). A HUNG reached that way ends with the
next 200; one from the hung detector only when tokens move again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optui.core.server.state import ServerState

#: Consecutive failed health probes after which a ready server counts as down/crashed.
FAILS_TO_DOWN = 3
#: Seconds between checks of whether the process was stopped while a health probe waits
#: for its answer (a SIGSTOP during a probe is seen then, not when the probe times out).
PAUSE_CHECK_S = 1.0


@dataclass(frozen=True, slots=True)
class Observation:
    """One round of facts about a server.

    ``process``: "running", "exited" or "unknown" (optui does not manage it);
    ``health``: the HTTP status of the health probe, None when no answer;
    ``log_ready``: the log printed the readiness line of this start;
    ``stopping``: optui is stopping it on purpose; ``starting``: optui (re)started it and
    the ready gate is open; ``unhealthy_s``: seconds since the first of the health probes
    failing now (0 when this one answered 200); ``hung_by_load``: the hung detector's
    verdict stands (a HUNG it caused survives a 200); ``paused``: its process group is
    stopped (SIGSTOP: alive, answering nothing until continued); ``timed_out``: the health
    probe connected and waited in vain (something listens: a frozen server, not a gone one).
    """

    process: str = "unknown"
    health: int | None = None
    log_ready: bool = False
    stopping: bool = False
    starting: bool = False
    unhealthy_s: float = 0.0
    hung_by_load: bool = True
    paused: bool = False
    timed_out: bool = False


def next_state(prev: ServerState, obs: Observation, failures: int, *, escalate_after_s: float = math.inf) -> ServerState:
    """The state after ``obs``; ``failures`` counts consecutive health failures including
    this one (0 when this probe answered 200); DEGRADED for ``escalate_after_s`` seconds of
    failing probes becomes HUNG (module doc)."""
    if obs.stopping:
        return ServerState.DOWN if obs.process == "exited" else ServerState.STOPPING
    if obs.process == "exited":
        # a managed process that is gone: crashed if it was meant to run
        if prev in (ServerState.DOWN, ServerState.STOPPING):
            return ServerState.DOWN
        return ServerState.CRASHED
    if obs.paused:
        return ServerState.HUNG  # stopped, not gone: never DOWN, and no health timeout to wait out
    if obs.health == 200:
        if prev is ServerState.HUNG and obs.hung_by_load:
            return ServerState.HUNG  # only the hung detector clears its own verdict
        return ServerState.READY
    answered = obs.health is not None
    if prev in (ServerState.READY, ServerState.DEGRADED, ServerState.HUNG):
        # a probe that connected and timed out found a frozen server, not a gone one: an
        # observed server (no process to ask) that is SIGSTOPped is HUNG in the end, never DOWN
        frozen = obs.process == "unknown" and obs.timed_out
        if failures < FAILS_TO_DOWN or obs.process == "running" and answered or frozen:
            state = ServerState.HUNG if prev is ServerState.HUNG else ServerState.DEGRADED
        elif obs.process == "running":
            state = ServerState.DEGRADED
        else:
            return ServerState.DOWN
        if state is ServerState.DEGRADED and prev is not ServerState.READY and obs.unhealthy_s >= escalate_after_s:
            return ServerState.HUNG
        return state
    if obs.process == "running" or obs.starting:
        # loading (connection refused) or warming (HTTP up, health not 200 yet)
        return ServerState.WARMING if answered else ServerState.STARTING
    if obs.process == "unknown":
        if answered:
            return ServerState.WARMING
        return ServerState.CRASHED if prev is ServerState.CRASHED else ServerState.DOWN
    return prev


def after_load_reading(state: ServerState, event: str | None, *, hung: bool) -> ServerState:
    """The state after a load reading of a server in ``state`` (up or HUNG): ``event`` is
    the hung detector's change at this reading ("hung", "recovered" or None), ``hung`` its
    verdict now. A new hung verdict makes it HUNG, its recovery READY; otherwise a standing
    verdict keeps it HUNG and no verdict leaves ``state``."""
    if event == "hung":
        return ServerState.HUNG
    if event == "recovered":
        return ServerState.READY
    return ServerState.HUNG if hung else state


def unhealthy_reason(status: int | None, error: str | None, failures: int, unhealthy_s: float) -> str:
    """Why a server is not healthy, for the status line, the panel and the journal:
    ``status`` the last health answer's HTTP code (None: no answer, ``error`` "timeout",
    "refused" or another short reason), ``failures`` probes in a row over ``unhealthy_s`` s.
    E.g. ``"health: timeout (3 probes failing for 12 s)"``."""
    if status is not None:
        what = f"HTTP {status}"
    elif error == "refused":
        what = "connection refused"
    else:
        what = error or "no answer"
    return f"health: {what} ({failures} probe{'s' if failures != 1 else ''} failing for {unhealthy_s:.0f} s)"


class HungDetector:
    """Flags a server whose generated-token counter stands still while requests are
    running or waiting for ``after_s`` seconds (health endpoints can say 200 then).

    Feed :meth:`update` with each metrics reading; :attr:`hung` is the verdict and
    :attr:`stalled_s` how long the counter has not moved.
    """

    def __init__(self, after_s: float = 30.0) -> None:
        self.after_s = after_s
        self._last_total: float | None = None
        self._since: float | None = None
        self.hung = False
        self.stalled_s = 0.0

    def reset(self) -> None:
        """Forget the history (after a restart)."""
        self._last_total, self._since, self.hung, self.stalled_s = None, None, False, 0.0

    def update(self, now: float, generated_total: float | None, busy: float | None) -> bool:
        """Record a reading at ``now`` (s): the token counter and running+waiting count.
        Returns the new :attr:`hung` verdict."""
        if generated_total is None or busy is None:
            return self.hung
        if self._last_total is None or generated_total != self._last_total or busy <= 0:
            self._last_total = generated_total
            self._since = now
            self.hung = False
            self.stalled_s = 0.0
            return False
        self.stalled_s = now - (now if self._since is None else self._since)
        self.hung = self.stalled_s >= self.after_s
        return self.hung


def phase_in_state(state: ServerState, phase: str | None) -> str | None:
    """The startup phase to show and journal with ``state``, given the phase the log reached
    (``phase``, one of :data:`optui.core.server.log.PHASES` or None): a server that answers
    ready (READY, and DEGRADED / HUNG after it) is in phase ``ready`` whatever its log said
    (a log read from the middle, a readiness line never printed); one still starting or
    warming is not ``ready`` yet even when its log says so: optui's probe has not seen it
    answer (``probe``). Other states keep ``phase`` (a crash keeps the phase it died in)."""
    if state in (ServerState.READY, ServerState.DEGRADED, ServerState.HUNG):
        return "ready"
    if state in (ServerState.STARTING, ServerState.WARMING) and phase == "ready":
        return "probe"
    return phase
