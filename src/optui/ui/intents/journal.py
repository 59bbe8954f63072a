"""Journal actions: filtered timeline, event details, notes linked to the current
experiment, the experiments view, verdicts, and the findings report export."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from textual.message import Message

from optui.ui.client import SessionError
from optui.ui.intents.base import Actions

if TYPE_CHECKING:  # the panels load after the first frame (see OptuiApp.compose)
    from optui.core.journal.events import Event, EventFilter
    from optui.session.state import SessionState

#: how many matching events a filtered journal view loads
FILTERED_LIMIT = 500


@dataclass
class JournalQueried(Message):
    """A filtered journal search came back: ``events`` (oldest first) match ``filter`` in
    the journal up to seq ``known`` at least."""

    filter: EventFilter
    events: tuple[Event, ...]
    known: int


class JournalActions(Actions):
    """Journal actions (see module doc)."""

    #: (filter, matching events oldest first, seq up to which the journal was searched)
    _journal_cache: tuple[EventFilter, tuple[Event, ...], int] | None = None
    #: the (filter, seq) of the search under way
    _journal_asked: tuple[EventFilter, int] | None = None

    # ------------------------------------------------------------ timeline
    def show_journal(self, state: SessionState) -> None:
        """Push the journal into its panel: the snapshot's events, or — with a filter — the
        matching events from the DB (newest :data:`FILTERED_LIMIT`), extended as the
        journal grows by searching only what is new. The search runs off the event loop
        (:meth:`~optui.ui.client.SessionClient.query_events` in a worker) and comes back as
        :class:`JournalQueried`."""
        panel = self.query_one("#journal")
        panel.servers = tuple(s.name for s in state.servers)
        flt = panel.filter
        if not flt.active:
            self._journal_cache = None
            self._journal_asked = None
            self._title_journal(flt)
            panel.show(state.events)
            return
        known = state.events[-1].seq if state.events else 0  # searched up to here at least
        cached = self._journal_cache
        if cached is not None and cached[0] == flt and cached[2] == known:  # the journal did not grow
            return
        if self._journal_asked == (flt, known):  # that search is under way
            return
        self._journal_asked = (flt, known)
        self.run_worker(self._query_journal(flt, known, cached if cached is not None and cached[0] == flt else None),
                        group="journal-query", exclusive=True, exit_on_error=False)

    async def _query_journal(self, flt: EventFilter, known: int,
                             cached: tuple[EventFilter, tuple[Event, ...], int] | None) -> None:
        try:
            if cached is not None:
                last = cached[1][-1].seq if cached[1] else 0
                found = await self._matching(flt, since_seq=cached[2])
                new = [e for e in reversed(found) if e.seq > last]  # a second look at the newest must not duplicate them
                events = (cached[1] + tuple(new))[-FILTERED_LIMIT:]
            else:
                events = tuple(reversed(await self._matching(flt)))
        except Exception as exc:  # a locked or broken DB must not crash the UI
            self._journal_asked = None
            self.fail(exc)
            return
        self.app.post_message(JournalQueried(flt, events, known))

    async def _matching(self, flt: EventFilter, **since) -> list[Event]:
        """The newest :data:`FILTERED_LIMIT` events matching ``flt``, newest first: the
        journal's search, and for a text filter also the newest events whose row reads so
        (``/ready in`` finds ``ready in 6.7s``: the row's text is not stored, so the search
        cannot see it)."""
        found = await self.client.query_events(flt, limit=FILTERED_LIMIT, **since)
        if not flt.text:
            return found
        seen = {e.seq for e in found}
        recent = await self.client.query_events(replace(flt, text=None), limit=FILTERED_LIMIT, **since)
        found += [e for e in recent if e.seq not in seen and flt.matches(e)]
        return sorted(found, key=lambda e: e.seq, reverse=True)[:FILTERED_LIMIT]

    def journal_queried(self, msg: JournalQueried) -> None:
        """A search came back: show it unless the filter changed meanwhile."""
        panel = self.query_one("#journal")
        if msg.filter != panel.filter:  # the filter changed meanwhile: its own search comes
            return
        self._journal_cache = (msg.filter, msg.events, msg.known)
        self._title_journal(msg.filter)
        panel.show(msg.events)

    def _title_journal(self, flt: EventFilter) -> None:
        """The journal box's title names the filter of the events on screen."""
        from textual.markup import escape

        box = self.query_one("#journal-box")
        # the filter's text is the operator's (``[tui]`` is no markup tag: escaped, it shows)
        title = "[5] Journal" + (f"  {escape(flt.describe())}  (c clears)" if flt.active else "")
        if box.border_title != title:
            box.border_title = title

    def filter_changed(self) -> None:
        """The panel's filter changed: search (or show the snapshot's events)."""
        self.show_journal(self.client.snapshot())

    def filter_journal(self, **changes) -> None:
        """Set journal filter fields (e.g. ``experiment="exp-0003"``) and focus the panel."""
        panel = self.query_one("#journal")
        panel.set_filter(replace(panel.filter, **changes))
        panel.focus()

    # ------------------------------------------------------------ details
    async def open_event(self, e: Event) -> None:
        """The details of event ``e`` (with the baselines of its results, read on the
        journal thread)."""
        from optui.core.journal.event_details import bench_results_of, event_sections
        from optui.ui.screens.event_details import EventDetailsScreen

        baselines = {}
        for result in bench_results_of(e):
            base = await self.client.baseline_for(result)
            if base is not None:
                baselines[result.workload.key()] = base.result
        self.push_screen(EventDetailsScreen(e, event_sections(e, baselines)))

    # ------------------------------------------------------------ notes
    async def note(self) -> None:
        """Ask for a note and journal it (the experiment read and the write on the journal
        thread: awaited, never waited on)."""
        from optui.ui.screens.text_prompt import TextPrompt

        server = self.selected_server()
        exp = await self.client.current_experiment(server)
        where = f" (linked to {exp} on {server})" if exp else ""

        async def noted(text: str | None) -> None:
            if text and text.strip():
                try:
                    await self.client.add_note(text, server=server)
                except SessionError as exc:
                    self.fail(exc)

        self.push_screen(TextPrompt(f"Note for the journal{where}:"), noted)

    # ------------------------------------------------------------ experiments
    def experiments(self) -> None:
        from optui.ui.screens.experiments import ExperimentsScreen, push_experiments_screen

        def chosen(exp_id: str | None) -> None:
            if exp_id:
                self.filter_journal(experiment=exp_id)

        def journal_seq() -> int:  # reload the rows only when the journal grew
            events = self.client.snapshot().events
            return events[-1].seq if events else 0

        # the rows load on the session's journal thread (adapters/journal_thread), only what is new
        push_experiments_screen(self.app, ExperimentsScreen(self.client.experiments_reader(), self.client.set_verdict,
                                                            journal_seq, self.experiment_details), chosen)

    def experiment_details(self, x, repeats=()):
        """The title and body of experiment ``x``'s details (the view shows them), with the
        later starts of its configuration the view folded into its row (``repeats``)."""
        from optui.core.journal.event_details import experiment_sections
        from optui.ui.screens.event_details import sections_text

        return f"{x.id} on {x.server}", sections_text(self.app, experiment_sections(x, repeats))

    # ------------------------------------------------------------ export
    async def export_report(self, fmt: str = "md") -> None:
        """Write the findings report into the campaign directory (on the journal thread) and say where."""
        try:
            path = await self.client.export_report(fmt)
        except (OSError, ValueError) as exc:
            self.fail(exc)
            return
        self.notify(f"findings report written to {path}", title="export", timeout=10)
