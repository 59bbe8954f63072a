"""The servers panel: state, phase with elapsed times, model, uptime, URL, flags, load.

One row per configured server (three lines wide, one line narrow; zoomed, ``z``, every
field on lines of its own, the full command wrapped: :meth:`ServerPanel.set_zoomed`). The cursor selects the
server that ``r`` (restart with new flags), ``ctrl+r`` (roll back) and ``b`` act on; ``i``
shows its full running command. The flags line lists the flags that differ from the
configured launch first, in the experiments view's order (the change from the flags that ran
before, e.g. the one a failed restart added, before the others: the tuned flag is never where
the row is cut, nor folded into ``+N``).
"""

from __future__ import annotations

import shlex
import time

from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from optui.core.flags.abbrev import fit_flags
from optui.core.server.log import flag_named_in, phase_durations
from optui.core.server.state import ServerState, ServerStatus
from optui.core.text.safe_text import safe_line
from optui.ui.colors import STATE_VARIABLE, style
from optui.ui.widgets.cursor_list import LOADING_TEXT, CursorList
from optui.ui.widgets.meters import fmt_value, truncate

_DOT = {"ready": "●", "degraded": "◐", "starting": "◔", "warming": "◑", "stopping": "◌", "down": "○", "crashed": "✖", "hung": "⧗"}


def fmt_duration(seconds: float | None) -> str:
    """``42s``, ``3m12s``, ``2h05m`` (None → "")."""
    if seconds is None or seconds < 0:
        return ""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def flags_text(argv: tuple[str, ...]) -> str:
    """The argv after the program part, shell-quoted for display only."""
    from optui.core.flags.argv import Flags

    flags = Flags.parse(argv)
    return shlex.join(flags.to_argv()[len(flags.program):])


def changed_first(argv: tuple[str, ...], reference: tuple[str, ...], prev: tuple[str, ...] | None = None,
                  lead: str | None = None) -> tuple[str, str]:
    """``(changed, rest)``: the flags of ``argv`` that differ from ``reference`` (the
    configured argv) as they run, flags it dropped as ``-(--name)``, in the order of
    :func:`~optui.core.journal.experiments.ordered_changes` (``lead``, then those that differ
    from ``prev``, the flags that ran before), then the other flags, each part shell-quoted
    for display. Listen-only flags (``--port``...) are never a change. Without a reference,
    or nothing changed: ``("", flags_text(argv))``."""
    changed, rest = _split_changed(argv, reference, prev, lead)
    if not changed:
        return "", flags_text(argv)
    return " ".join(changed), shlex.join(rest)


def changed_flags(argv: tuple[str, ...], reference: tuple[str, ...], *, prev: tuple[str, ...] | None = None,
                  lead: str | None = None) -> list[str]:
    """The changes of :func:`changed_first` one per flag (``"--max-running-requests 3"``,
    ``"-(--name)"``), for :func:`~optui.core.flags.abbrev.fit_flags`; ``[]`` for none."""
    return _split_changed(argv, reference, prev, lead)[0]


def status_changes(s: ServerStatus) -> tuple[tuple[str, ...] | None, str | None]:
    """``(prev, lead)`` of :func:`changed_first` for server ``s``'s row, the experiments
    view's rule (:func:`~optui.core.journal.experiments.config_changes`): the flags that ran
    before it (its last good flags: the change of a failed or starting launch comes first;
    ready, the launch before it: the change of this start comes first) and the flag a
    ``bad_flag`` crash was refused for (before all)."""
    from optui.core.journal.experiments import refused_flag

    prev = s.last_good_argv if s.last_good_argv and tuple(s.last_good_argv) != tuple(s.argv) else None
    if s.state is ServerState.READY and s.prev_argv and tuple(s.prev_argv) != tuple(s.argv):
        prev = s.prev_argv  # ready, its last good flags are its own: the launch before it is the reference
    lead = refused_flag(s.crash_class, (*s.crash_lines, s.crash_cause or s.message or "")) \
        if s.state is not ServerState.READY else None
    return prev, lead


def _canonical(name: str) -> str:
    from optui.core.flags.argv import canonical_name

    return canonical_name(name)


def _shown(change) -> str:
    """One change as it runs, shell-quoted (``--max-running-requests 3``), ``-(--name)`` dropped."""
    if change.new is None:
        return f"-({change.name})"
    return shlex.join(change.new if change.name.startswith("<") else (change.name, *change.new))


def _split_changed(argv: tuple[str, ...], reference: tuple[str, ...], prev: tuple[str, ...] | None,
                   lead: str | None) -> tuple[list[str], list[str]]:
    from optui.core.flags.argv import Flags, canonical_name
    from optui.core.journal.experiments import ordered_changes

    if not reference:
        return [], []
    flags = Flags.parse(argv)
    changes = ordered_changes(Flags.parse(reference), flags, first=Flags.parse(prev) if prev else None, lead=lead)
    names = {c.name for c in changes}
    rest = [token for arg in flags.args if arg.name is None or canonical_name(arg.name) not in names
            for token in arg.to_argv()]
    return [_shown(c) for c in changes], rest


class ServerPanel(CursorList):
    """Renders :class:`ServerStatus` rows; emits :class:`CursorList.Highlighted`, and
    :class:`ServerPanel.Command` for ``i`` (the selected server's full command)."""

    BINDINGS = [Binding("i", "command", "Command", id="server.command")]

    class Command(Message):
        """Show server ``name``'s full running command (the panel's row cuts it)."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def action_command(self) -> None:
        name = self.current_key
        if isinstance(name, str):
            self.post_message(ServerPanel.Command(name))

    def __init__(self, *, id: str | None = None) -> None:
        # until the session's first state: the panel is drawn before the campaign is loaded
        super().__init__(empty_text=LOADING_TEXT, id=id)
        self._servers: tuple[ServerStatus, ...] = ()
        self._zoomed = False

    def campaign_loaded(self) -> None:
        """The session exists: no servers from now on means none are configured."""
        if self.empty_text == LOADING_TEXT:
            self.empty_text = "no servers configured (add [servers.NAME] to optui.toml)"
            self.refresh()

    def show(self, servers: tuple[ServerStatus, ...]) -> None:
        """Display ``servers`` (the campaign's: none means none are configured)."""
        self.campaign_loaded()
        self._servers = servers
        self._draw()

    def _draw(self) -> None:
        servers = self._servers
        width = max(20, self.size.width or 80)
        if self._zoomed:
            self.set_rows([s.name for s in servers], [self._zoomed_row(s, width) for s in servers])
            return
        compact = width < 50 or self.screen.has_class("-narrow")
        self.set_rows([s.name for s in servers], [self._row(s, width, compact) for s in servers])

    def set_zoomed(self, zoomed: bool) -> None:
        """Zoomed (``z``), the panel has the screen: each server gets the lines it needs
        (state, phase or load, changed flags, the whole command wrapped), also in a side
        pane, where it otherwise has one line."""
        if zoomed != self._zoomed:
            self._zoomed = zoomed
            self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _row(self, s: ServerStatus, width: int, compact: bool) -> Text:
        app = self.app
        row = self._head(s)
        if compact:
            failed = self._failed(s)
            prev, lead = status_changes(s)
            # the flag that changed from the previous configuration whole (issue 34: --mrr 16 at
            # 50 columns): the start time and the state's age give it their room first
            tuned = changed_flags(s.argv, s.configured_argv, prev=prev, lead=lead)
            if tuned:
                need = len(tuned[0]) + 2 + (len(str(s.crash_class or "failed")) + 1 if failed else 0)
                if width - row.cell_len - 2 < need:
                    row = self._head(s, brief=True)
            bad = None
            if failed:  # the class, and a bad_flag's flag, before anything that may be cut
                crash = str(s.crash_class or "failed")
                row.append(f" {crash}", style=style(app, "state-failed", bold=True))
                bad = flag_named_in(self._cause(s)) if crash == "bad_flag" else None
                if bad:
                    row.append(f" {safe_line(bad)}", style=style(app, "state-failed"))
            # in the experiments view's order: the change from the flags that ran before first
            if bad and lead and _canonical(bad.partition("=")[0]) == lead:
                tuned = [t for t in tuned if t.split(" ", 1)[0] != lead]  # named after the class already
            if tuned:  # the one line still says which configuration runs: the first flag whole,
                # the others abbreviated alike (as the bench panel does) or counted (fit_flags)
                room = width - row.cell_len - 2  # less the separator
                row.append(f"  {fit_flags(tuned, max(room, 8))}", style=style(app, "warning"))
            detail = Text(safe_line(self._cause(s)[:200])) if failed else self._detail(s)
            if detail and (not tuned or width - row.cell_len >= 10):  # never cut right after a value
                row.append("  ")
                row.append_text(detail)
            return row
        row.append(f"  {safe_line(s.kind)}  {safe_line(s.url)}", style="dim")
        if s.model:
            row.append(f"  {truncate(s.model, 32)}")
        row.append("\n  ")
        row.append_text(self._detail(s) or self._idle_hint(s))
        row.append("\n  ")
        changed, rest = changed_first(s.argv, s.configured_argv, *status_changes(s))  # the tuned flags are never cut off
        room = max(10, width - 4)
        if changed:
            changed = truncate(changed, room)
            row.append(changed, style=style(app, "warning"))
            room -= len(changed) + 3
            if rest and room >= 4:
                row.append(" · " + truncate(rest, room), style="dim")
        else:
            row.append(truncate(rest or "(no argv)", room), style="dim")
        return row

    def _head(self, s: ServerStatus, *, brief: bool = False) -> Text:
        """A row's first part: state dot, name, state and for how long, what it is busy with,
        its host's problem, flags it does not run (one line). ``brief``: without for how long
        and the start time (a side pane's row makes room for the changed flag)."""
        app = self.app
        state = s.state.value
        st = style(app, STATE_VARIABLE.get(state, "state-down"), bold=True)
        now = time.time()
        row = Text(no_wrap=True, overflow="ellipsis")
        row.append(f"{_DOT.get(state, '?')} ", style=st)
        row.append(truncate(s.name, 14), style="bold")
        row.append(f" {state.upper()}", style=st)
        if brief:
            pass
        elif s.state is ServerState.READY and s.ready_at:
            row.append(f" {fmt_duration(now - s.ready_at)}")
            started = startup_seconds(s.phases)
            if started is not None:
                row.append(f" (start {started:.1f}s)", style="dim")
        elif s.state.is_transitional and s.state_since:
            row.append(f" {fmt_duration(now - (s.started_at or s.state_since))}")
        if s.busy:
            row.append(f" [{safe_line(s.busy)}]", style=style(app, "warning"))
        if s.host_problem:  # the host's link, not the server, is the problem: say so on its row
            row.append(f"  ⚠ {safe_line(s.host)}: {safe_line(s.host_problem)}", style=style(app, "warning"))
        if s.config_mismatch and s.state is not ServerState.CRASHED:  # it does not run the flags shown below
            more = f" (+{len(s.config_mismatch) - 1} more)" if len(s.config_mismatch) > 1 else ""
            row.append(f"  ⚠ UNVERIFIED {safe_line(s.config_mismatch[0])}{more}", style=style(app, "warning"))
        if s.fleet is not None:  # [fleet]: its live load as Prometheus scrapes it (ui/widgets/fleet_grid.py)
            from optui.ui.widgets.fleet_grid import prometheus_load

            row.append(f"  {safe_line(prometheus_load(s.fleet))}", style=style(app, "warning") if s.fleet.stale else "dim")
        return row

    def _zoomed_row(self, s: ServerStatus, width: int) -> Text:
        """The zoomed row (see :meth:`set_zoomed`): the state line, then where it runs, the
        model, its phase / load / crash, the changed flags and the whole command, each
        wrapped to ``width`` under a two-column indent (a row is one Text, its lines split
        by newlines: the list counts them)."""
        app = self.app
        console = app.console
        room = max(10, width - 2)
        out = self._head(s)

        def block(label: str, text: Text) -> None:  # label, then the text wrapped under itself
            for n, line in enumerate(text.wrap(console, max(10, room - len(label) - 1), overflow="fold")):
                line.rstrip()
                out.append("\n  ")
                out.append(f"{label} " if n == 0 else " " * (len(label) + 1), style="dim")
                out.append_text(line)

        block("where  ", Text(f"{safe_line(s.kind)}  {safe_line(s.url)}  on {safe_line(s.host)}"))
        if s.model:
            block("model  ", Text(safe_line(s.model)))
        block("now    ", self._detail(s) or self._idle_hint(s) or Text("-", style="dim"))
        changed, _ = changed_first(s.argv, s.configured_argv, *status_changes(s))
        block("changed", Text(safe_line(changed), style=style(app, "warning")) if changed
              else Text("none (the configured flags)", style="dim"))
        block("command", Text(safe_line(shlex.join(s.argv))) if s.argv else Text("(no argv)", style="dim"))
        return out

    def _idle_hint(self, s: ServerStatus) -> Text:
        if s.state is ServerState.DOWN:
            how = "r starts it with new flags" if s.managed and s.kind and s.argv else "not answering"
            return Text(f"not running — {how}" if s.managed else "not answering", style="dim")
        return Text("")

    @staticmethod
    def _failed(s: ServerStatus) -> bool:
        """Its last start or run failed and it is not ready again (its row says why)."""
        return s.state is ServerState.CRASHED or (s.crash_class is not None and s.state is not ServerState.READY)

    @staticmethod
    def _cause(s: ServerStatus) -> str:
        """Why it failed in one line: the cause line, else its last log line or message."""
        return s.crash_cause or (s.crash_lines[-1] if s.crash_lines else s.message or "")

    def _detail(self, s: ServerStatus) -> Text:
        app = self.app
        t = Text()
        if self._failed(s):
            t.append(f"{s.crash_class or 'failed'}: ", style=style(app, "state-failed", bold=True))
            t.append(safe_line(self._cause(s)[:200]))
            if s.last_good_argv and tuple(s.last_good_argv) != tuple(s.argv):
                t.append("  (ctrl+r: roll back to last good)", style=style(app, "warning"))
            t.append("  (l: log)", style="dim")
            return t
        if s.state in (ServerState.STARTING, ServerState.WARMING):
            phase = s.phase or ("warming" if s.state is ServerState.WARMING else "launching")
            t.append(f"phase {safe_line(phase)}", style=style(app, "state-busy"))
            if s.phases and s.started_at:
                current = time.time() - s.started_at - s.phases[-1].t
                if current == current and current >= 0:
                    t.append(f" {current:.1f}s", style=style(app, "state-busy"))
            done = phase_steps(s.phases)[:-1]
            if done:
                t.append("  (" + ", ".join(done[-4:]) + ")", style="dim")
            return t
        load = s.load
        if s.state is ServerState.HUNG:
            busy = (load.running or 0) + (load.waiting or 0)
            why = safe_line(s.message) if s.message else f"{busy:.0f} requests running/waiting, no tokens generated"
            t.append(f"HUNG: {why}", style=style(app, "state-failed", bold=True))
            return t
        if s.state is ServerState.DEGRADED and s.message:  # why: timeouts, 503s, refused
            t.append(f"{safe_line(s.message)}  ", style=style(app, "warning"))
        if load.running is not None or load.gen_tok_s is not None:
            t.append(f"run {fmt_value(load.running)}  wait {fmt_value(load.waiting)}  ")
            t.append(f"kv {fmt_value(load.kv_cache_pct)}%  gen {fmt_value(load.gen_tok_s, '{:,.0f}')} tok/s")
            if load.prefix_hit_pct is not None:
                t.append(f"  prefix {load.prefix_hit_pct:.0f}%")
            if load.accept_length is not None:
                t.append(f"  accept {load.accept_length:.2f}")
            if load.source == "log":
                t.append("  (from log lines)", style="dim")
            if load.stale:
                t.append("  (stale: the server did not answer)", style=style(app, "warning"))
        elif load.hint:
            t.append(safe_line(load.hint), style="dim")
        if s.state is ServerState.READY:
            # longest first: a row cut at the pane's edge keeps what the start spent most on
            # (vLLM's compile warm-up, 26 s of 65, was cut off after 'launch' and 'dist')
            steps = phase_steps(s.phases, longest_first=True)
            if steps:
                total = startup_seconds(s.phases)
                head = "start: " if total is None else f"start {total:.1f}s: "
                t.append(("  ·  " if t.plain else "") + head + " · ".join(steps), style="dim")
        return t


def startup_seconds(phases) -> float | None:
    """Seconds from launch to ready (the 1-token probe when it ran last), or None."""
    marks = [p.t for p in phases if p.phase in ("probe", "ready") and p.t == p.t]
    return max(marks) if marks else None


_SHORT = {"launching": "launch", "init_dist": "dist", "loading_weights": "load", "kv_cache": "kv", "cuda_graph": "graph",
          "http_up": "http", "warmup": "warmup", "compile": "compile", "probe": "probe"}


def phase_steps(phases, *, longest_first: bool = False) -> list[str]:
    """``["load 8.0s", "kv 1.2s", ...]``: each finished phase with its duration in s (the
    journal's ``server.ready`` phases carry the same numbers), in the order they ran or,
    ``longest_first``, the longest first (ties in the order they ran)."""
    rows = [r for r in phase_durations(phases) if r["phase"] != "ready" and r["dur"] is not None and r["dur"] >= 0.05]
    if longest_first:
        rows.sort(key=lambda r: -r["dur"])
    return [f"{_SHORT.get(r['phase'], r['phase'])} {r['dur']:.1f}s" for r in rows]
