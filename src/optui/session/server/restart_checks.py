"""One set of checks for every door that restarts a server with changed flags.

The TUI's flag editor and preset command, ``optui restart`` and (later) an agent interface
all go through :meth:`optui.session.Session.restart_checked`, which uses this module:

1. **Base flags** (:func:`base_argv`): the argv the server runs now, or — when nothing of it
   runs (down, crashed after a failed restart) — its last good flags (the last argv that
   passed the ready gate), else the configured argv. A failed ``-np=abc`` never becomes
   the starting point of the next change.
2. **Changes** (:func:`apply_changes`): preset, unsets, sets, in that order.
3. **Flag checks before anything stops** (:func:`plan_restart`): the argv is checked against
   the server program's learned flag catalogue (``--help``, cached); an error (a value of
   the wrong type, a choice not offered, a value for an on/off flag, a value unlike the
   values seen for a flag whose help prints no type) refuses the restart
   with :class:`RestartRefused` while the old server keeps running; warnings (unknown flag,
   abbreviation) are returned to be shown. A door that cannot ask (``optui restart``) also
   refuses an unknown flag (``refuse_unknown``); ``force`` (the operator who knows better)
   refuses nothing and returns every issue as a warning. With no catalogue (never learned,
   ``--help`` failed) nothing is checked and the plan says so (``unchecked``).
4. **Rollback policy** (:func:`rollback_offer`, ``Session.restart_server``): ``rollback =
   "auto"`` restarts with the last good flags after a failure; ``"offer"`` hands the last
   good flags back to the caller, which asks (TUI) or says how (CLI); ``"off"`` does
   neither.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from optui.adapters.aio import within
from optui.core.flags.argv import Flags, parse_assignment
from optui.core.flags.catalog import UNKNOWN_FLAG, FlagCatalog, Issue
from optui.core.server.state import ServerState, ServerStatus
from optui.session.errors import SessionError
from optui.session.server.flag_catalogs import CatalogError
from optui.session.snapshot_types import RestartEnd, RestartResult

#: How long a fresh session waits for its monitor to re-attach to a running server before
#: it decides the base flags (s).
ATTACH_WAIT_S = 10.0


class RestartRefused(SessionError):
    """The new flags fail the catalogue's checks; nothing was stopped. ``issues`` are the
    errors."""

    def __init__(self, message: str, issues: tuple[Issue, ...]) -> None:
        super().__init__(message)
        self.issues = issues


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """What a checked restart will run: ``argv``; the ``base`` argv it was derived from and
    where that came from (``base_from``: "running", "last good", "config"); the catalogue's
    ``warnings``; ``unchecked`` says why no catalogue checked it (None: checked)."""

    server: str
    argv: tuple[str, ...]
    base: tuple[str, ...]
    base_from: str
    warnings: tuple[Issue, ...] = ()
    unchecked: str | None = None


def restart_end(status: ServerStatus) -> RestartEnd:
    """The end of a restart that left the server in ``status`` (no rollback involved)."""
    if status.state is ServerState.READY:
        return RestartEnd.UNVERIFIED if status.config_mismatch else RestartEnd.READY
    return RestartEnd.FAILED


@dataclass(frozen=True, slots=True)
class RestartOutcome:
    """How a checked restart ended: its ``plan`` and the restart's ``result``; ``offer``: the
    last good argv to offer (``rollback = "offer"``, the new flags failed), else None."""

    plan: RestartPlan
    result: RestartResult
    offer: tuple[str, ...] | None = None

    @property
    def status(self) -> ServerStatus:
        """The server's status after the restart (and its rollback)."""
        return self.result.status

    @property
    def rolled_back(self) -> bool:
        """``rollback = "auto"`` restored the last good flags after the new ones failed."""
        return self.result.end is RestartEnd.ROLLED_BACK

    @property
    def ok(self) -> bool:
        """The server is ready with the planned flags."""
        return self.status.state is ServerState.READY and tuple(self.status.argv) == self.plan.argv


def base_argv(status: ServerStatus, *, running: bool, last_good: Iterable[str] | None) -> tuple[tuple[str, ...], str]:
    """``(argv, where from)`` a change starts from (see module doc, step 1): the running
    argv while a process of the server runs and it has not crashed, else its last good flags,
    else ``status.argv`` (the configured argv when nothing ever ran)."""
    if running and status.state is not ServerState.CRASHED:
        return tuple(status.argv), "running"
    last_good = tuple(last_good or ())
    if last_good:
        return last_good, "last good"
    return tuple(status.argv), "config"


def apply_changes(base: Iterable[str], *, sets: Iterable[str] = (), unsets: Iterable[str] = (),
                  preset: tuple[Mapping, Iterable[str]] | None = None, catalog: FlagCatalog | None = None) -> Flags:
    """``base`` with ``preset`` (its set mapping and unset list), then ``unsets`` (flag
    names), then ``sets`` (``FLAG=VALUE`` / ``FLAG VALUE`` / ``FLAG``) applied; with a
    ``catalog``, a set replaces another spelling of its flag (``--threads 2`` for ``-t 1``).
    Raises FlagError for a malformed edit."""
    flags = Flags.parse(base)
    if preset is not None:
        flags = flags.apply(preset[0], preset[1])
    for name in unsets:
        flags = flags.unset(name)
    for item in sets:
        name, value = parse_assignment(item)
        flags = flags.set(name, value, aliases=catalog.aliases(name) if catalog is not None else ())
    return flags


def rollback_offer(policy: str, plan_argv: Iterable[str], status: ServerStatus) -> tuple[str, ...] | None:
    """The last good argv to offer after a restart to ``plan_argv`` ended in ``status``
    under rollback ``policy``; None when it became ready, the policy is not "offer", or
    there is nothing different to go back to."""
    if policy != "offer" or status.state is ServerState.READY or not status.last_good_argv:
        return None
    last_good = tuple(status.last_good_argv)
    return last_good if last_good != tuple(plan_argv) else None


def changed_port(base: Iterable[str], new: Iterable[str]) -> tuple[str, int, str] | None:
    """``(flag, port, listen host)`` when ``new`` sets a ``--port`` other than ``base``'s
    (the spelling the argv uses; host from ``--host``, else 0.0.0.0); None otherwise or when
    the value is not a port number."""
    old_flags, new_flags = Flags.parse(list(base)), Flags.parse(list(new))
    old, values = old_flags.get("--port"), new_flags.get("--port")
    if not values or values == old or not values[-1].isdecimal() or not 0 < int(values[-1]) < 65536:
        return None
    host = new_flags.get("--host")
    return "--port", int(values[-1]), host[-1] if host else "0.0.0.0"


def _port_issues(rt, base: Iterable[str], new: Iterable[str]) -> tuple[Issue, ...]:
    """An error when the restart moves the server to a port that a listener on this machine
    holds (the new server would die with "address already in use" after the old one stopped).
    Servers on another host are not checked."""
    moved = changed_port(base, new)
    if moved is None or not getattr(rt.shell, "local", False):
        return ()
    from optui.adapters.probe import port_taken

    flag, port, host = moved
    if not port_taken(port, "0.0.0.0" if host in ("", "::", "0.0.0.0") else host):
        return ()
    return (Issue("error", flag, f"port {port} is in use on this machine: the server could not listen there"),)


async def plan_restart(rt, *, argv: Iterable[str] | None = None, sets: Iterable[str] = (), unsets: Iterable[str] = (),
                       preset: str | None = None, learn: bool = True, refuse_unknown: bool = False,
                       force: bool = False) -> RestartPlan:
    """Decide and check what a restart of runtime ``rt`` will run (module doc, steps 1-3):
    ``argv`` given (the flag editor's result) is checked as it is; otherwise the changes are
    applied to the base flags. The catalogue is learned first when ``learn`` and not cached.
    ``refuse_unknown``: a flag name the catalogue does not know is refused too (else a
    warning); ``force``: nothing is refused, errors come back among the warnings.
    Raises SessionError (unknown preset), FlagError (a malformed edit) or RestartRefused
    (catalogue errors, unknown flags with ``refuse_unknown``); never stops or starts anything."""
    with contextlib.suppress(TimeoutError):  # a fresh session (the CLI) must know first whether it runs
        await within(rt.attached.wait(), ATTACH_WAIT_S)
    last_good = None
    with contextlib.suppress(Exception):  # an unreadable journal: no last good flags to start from
        last_good = await rt.read_journal(lambda: rt.journal.last_good(rt.name))
    last_good = last_good or rt.status.last_good_argv
    running = rt.controller.process_state() == "running"
    base, base_from = base_argv(rt.status, running=running, last_good=last_good)
    p = None
    if argv is None and preset is not None:  # refused before the catalogue is learned
        found = rt.cfg.presets.get(preset)
        if found is None:
            raise SessionError(f"unknown preset {preset!r} (known: {', '.join(rt.cfg.presets) or 'none'})")
        p = (found.set, found.unset)
    catalog, unchecked = rt.cached_catalog(), None
    if catalog is None and learn:
        try:
            catalog = await rt.learn_catalog()
        except CatalogError as exc:
            unchecked = f"no flag catalogue ({exc}): names and values are not checked"
    elif catalog is None:
        unchecked = "no flag catalogue learned yet: names and values are not checked"
    if argv is None:
        new = apply_changes(base, sets=sets, unsets=unsets, preset=p, catalog=catalog).to_argv()
    else:
        new = list(argv)
    issues: tuple[Issue, ...] = ()
    if catalog is not None:
        parsed = Flags.parse(new, catalog.booleans())
        seen = [Flags.parse(list(a), catalog.booleans()) for a in (base, last_good or (), rt.cfg.argv or ())]
        issues = (*catalog.check(parsed), *catalog.check_seen_forms(parsed, seen))
    issues = (*issues, *_port_issues(rt, base, new))
    refused = tuple(i for i in issues if i.level == "error" or (refuse_unknown and i.code == UNKNOWN_FLAG))
    if refused and not force:
        raise RestartRefused(f"{rt.name}: not restarted, the flags fail the checks of "
                             f"`{catalog.help_command()}`: " + "; ".join(map(str, refused))
                             + " (the server was not stopped)", refused)
    warnings = issues if force else tuple(i for i in issues if i not in refused)
    return RestartPlan(rt.name, tuple(new), base, base_from, warnings, unchecked)
