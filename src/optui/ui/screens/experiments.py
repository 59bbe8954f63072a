"""The experiments view: one row per experiment (change vs baseline, outcome, ready time,
key metrics and deltas, runs and ok requests, verdict with its evidence, decision), sortable.
Later starts of a configuration that measured nothing (rollbacks, unchanged restarts, failed
starts) are folded into its row, as in ``optui journal experiments``
(:func:`~optui.core.journal.experiments.fold_repeats`); its outcome counts them, ok and
failed (``ready · 3 starts: 2 ok, 1 failed``).

Keys: ``s`` next sort column, ``S`` reverse (or click a column header), Enter details,
``k`` keep / ``x`` reject / ``i`` inconclusive (each asks why, empty allowed; journaled
``verdict`` with the reason), ``f`` show the
experiment in the journal panel, ``ctrl+l`` reload, Esc close. The rows reload by
themselves when the journal changes (other optui windows, the CLI).

Nothing here touches the journal: ``load`` and ``decide`` are awaited in a worker (the
session runs them on its journal thread, ``adapters/journal_thread``), and an update only
repaints the rows it names as changed, unless the order of the rows changed; a new order
moves the rows, which keep their rendered cells (``widgets/experiment_table``). The view is
opaque: under a translucent modal Textual draws the whole dashboard again, dimmed, for each
of its frames (every frame while a benchmark streams: most of a key press's time here,
``bench/keypress_experiments.py``), for the two columns and rows of it around the box.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey

from optui.core.bench.compare import STATISTIC
from optui.core.flags.abbrev import fit_flag_column
from optui.core.journal.experiments import (
    Experiment,
    change_text,
    change_text_within,
    fold_repeats,
    runs_text,
    sort_experiments,
    starts_brief,
    verdict_evidence,
)
from optui.ui.colors import style
from optui.ui.process_setup import freeze_long_lived_objects
from optui.ui.screens.details import DetailsScreen
from optui.ui.screens.text_prompt import TextPrompt
from optui.ui.widgets.experiment_table import RowCachedTable
from optui.ui.widgets.key_bar import screen_key_bar

if TYPE_CHECKING:
    from optui.core.journal.experiments import ExperimentsUpdate

#: (column key, header, sort key for :func:`sort_experiments`); a header of two lines is as
#: wide as its cells (one line: 'TTFT p50 ms' and 'runs, requests' took the room the evidence
#: was cut for at 200 columns)
COLUMNS = (
    ("id", "experiment", "id"),
    ("server", "server", "server"),
    ("change", "change vs\nbaseline", "change"),
    ("outcome", "outcome", "outcome"),
    ("ready", "ready\ns", "ready"),
    ("tput", "out\ntok/s", "throughput"),
    ("delta", "Δ out", "delta"),
    ("ttft", "TTFT\np50 ms", "ttft"),
    ("ttft_delta", "Δ TTFT", "ttft_delta"),
    ("runs", "runs,\nrequests", None),
    ("verdict", "verdict", "verdict"),
    ("evidence", "evidence", None),
    ("decision", "decision", None),
)
_SORTABLE = [c for c in COLUMNS if c[2]]
#: below this many columns the change and its result come first (they fit the width), the rest
#: after them (scrolled to)
NARROW_BELOW = 100
_NARROW_ORDER = ("id", "change", "delta", "verdict", "tput", "evidence", "outcome", "runs", "ttft", "ttft_delta", "ready",
                 "decision", "server")
#: the columns that share the width with the change in a narrow view
_NARROW_FIRST = ("id", "delta", "verdict")
#: the fewest characters a shortened column keeps: wide, the change gives way first (its flags
#: abbreviated read as well), then the evidence a verdict rests on
_MIN_CHANGE_WIDE, _MIN_EVIDENCE, _MIN_CHANGE_NARROW = 20, 24, 12
#: ``mixed`` (better at one workload, worse at another) in the warning colour: neither a win nor a loss;
#: sorted after ``better`` (:func:`~optui.core.journal.experiments.sort_experiments`), its evidence says each workload
_VERDICT_VAR = {"better": "delta-good", "worse": "delta-bad", "mixed": "warning", "failed": "state-failed",
                "baseline": "primary"}


class ExperimentsUnderlay(Screen[None]):
    """An empty opaque screen under ``over`` (the view, or a details screen over it),
    popped as soon as ``over`` is gone and it is on top. Textual keeps the screen right
    under the top one current whatever the top one's opacity: each frame of it (the
    dashboard: every frame while a benchmark streams) is laid out and repaints the whole
    top screen, and a translucent top screen (details) draws it again, dimmed, on each of
    its own frames. Under this one the screens below are neither drawn nor laid out until
    ``over`` closes."""

    #: the class of the screen over it: opaque, in the colour that screen's translucent
    #: background shows over this empty one (the same picture), so Textual composes no
    #: background screen under each of its frames (a frame of the details: ~half of the
    #: Enter press, bench/keypress_experiments.py --mode details)
    OVER_CLASS = "-over-experiments-underlay"
    SCOPED_CSS = False  # the rule below is for the screen over it, not for a widget inside it
    DEFAULT_CSS = f"""
    ExperimentsUnderlay {{ background: $background; }}
    Screen.{OVER_CLASS} {{ background: $background; }}
    """
    BINDINGS: ClassVar[list[BindingType]] = []  # none of its own (Screen's tab / shift+tab are inherited)

    def __init__(self, over: Screen | None = None) -> None:
        super().__init__()
        self.over = over
        if over is not None:
            over.add_class(self.OVER_CLASS)

    def on_mount(self) -> None:
        # immediate: popped within the pop of ``over``, before any frame shows it empty
        self.app.screen_change_signal.subscribe(self, self._screen_changed, immediate=True)
        self._screen_changed(self.app.screen)  # ``over`` may have closed before this mounted

    def _screen_changed(self, top: Screen) -> None:
        app = self.app
        if app.screen is self and self.over not in app.screen_stack and len(app.screen_stack) > 1:
            # unsubscribed first: Signal.publish drops a subscriber that stopped running, and
            # the publish of this pop, nested in the current one, would drop it twice (KeyError)
            app.screen_change_signal.unsubscribe(self)
            app.pop_screen()

    def on_unmount(self) -> None:
        self.app.screen_change_signal.unsubscribe(self)


def push_over_underlay(app: App, screen: Screen, callback: Callable | None = None) -> None:
    """Push ``screen`` over an :class:`ExperimentsUnderlay` (popped with it); ``callback``
    gets its result as with ``App.push_screen``."""
    app.push_screen(ExperimentsUnderlay(over=screen))
    app.push_screen(screen, callback)


def push_experiments_screen(app: App, screen: ExperimentsScreen, callback: Callable[[str | None], None]) -> None:
    """Push ``screen`` over an :class:`ExperimentsUnderlay` (popped when the view closes);
    ``callback`` gets the view's result as with ``App.push_screen``."""
    push_over_underlay(app, screen, callback)


class ExperimentsScreen(ModalScreen[str | None]):
    """Returns an experiment id to show in the journal (``f``), else None.

    ``load()`` is awaited for an :class:`~optui.core.journal.experiments.ExperimentsUpdate`
    (every experiment, and the ids changed since the previous call: a session's
    ``experiments_reader()``); ``decide(exp_id, decision, reason)`` is awaited to record a verdict
    (raising shows a notification); ``version()`` (cheap, on the event loop) tells whether
    the journal changed (reload then); ``details(x, repeats)`` gives the ``(title, body)`` of
    an experiment's details (a :class:`~optui.ui.screens.details.DetailsScreen`'s arguments;
    ``repeats``: the later starts of its configuration folded into its row), shown by Enter
    in one details screen that the view keeps while it is open.
    """

    BINDINGS = [
        Binding("escape,q", "close", "Close", id="experiments.close"),
        Binding("s", "next_sort", "Sort column", id="experiments.sort"),
        Binding("S", "reverse_sort", "Reverse", id="experiments.reverse"),
        Binding("enter", "details", "Details", id="experiments.details"),
        Binding("k", "decide('keep')", "Keep", id="experiments.keep"),
        Binding("x", "decide('reject')", "Reject", id="experiments.reject"),
        Binding("i", "decide('inconclusive')", "Inconclusive", id="experiments.inconclusive"),
        Binding("f", "show_in_journal", "In journal", id="experiments.journal"),
        Binding("ctrl+l", "reload", "Reload", show=False, id="experiments.reload"),
    ]
    DEFAULT_CSS = """
    ExperimentsScreen { align: center middle; background: $background; }
    ExperimentsScreen > Vertical { width: 98%; height: 90%; border: thick $primary; background: $surface; }
    ExperimentsScreen #experiments-title { text-style: bold; height: 1; }
    ExperimentsScreen #experiments-help { color: $text-muted; height: auto; }
    ExperimentsScreen #experiments-change { height: auto; max-height: 3; color: $warning; }
    ExperimentsScreen DataTable { height: 1fr; }
    """

    def __init__(self, load: Callable[[], Awaitable[ExperimentsUpdate]], decide: Callable[[str, str, str], Awaitable[None]],
                 version: Callable[[], int],
                 details: Callable[[Experiment, list[Experiment]], tuple[str, str | Text]]) -> None:
        super().__init__()
        self.load = load
        self.decide = decide
        self.version = version
        self.details_of = details
        self._details: DetailsScreen | None = None  # kept (installed) from the first Enter until the view closes
        self.sort_key = "id"
        self.reverse = False
        self.experiments: list[Experiment] = []
        #: listed experiment id -> the later starts of its configuration folded into its row
        self._repeats: dict[str, list[Experiment]] = {}
        self._seen_version = -1
        self._loading = self._again = False
        self._shown: list[str] = []  # the row keys in the table, top to bottom
        self._title = ""
        self._fitted_width = 0  # the table's width the columns were fitted to (0: not laid out yet)

    def compose(self) -> ComposeResult:
        width = self.app.size.width
        narrow = width < NARROW_BELOW
        self._order = _NARROW_ORDER if narrow else tuple(key for key, _, _ in COLUMNS)
        self._narrow = narrow
        self._change_w: int | None = max(16, min(48, width - 100))  # until the rows are there (_fit_widths)
        with Vertical():
            yield Static("Experiments", id="experiments-title", markup=False)
            yield Static("s/S sort · Enter details · k keep · x reject · i inconclusive · f show in journal · Esc close\n"
                         f"verdicts: {STATISTIC}", id="experiments-help", markup=False)
            # narrow, the cursor row's change with its flag names whole (the column abbreviates them)
            change_line = Static("", id="experiments-change", markup=False)
            change_line.display = narrow
            yield change_line
            table = self._table = RowCachedTable(id="experiments-table", cursor_type="row", zebra_stripes=True,
                                                 header_height=2)
            headers = {key: header for key, header, _ in COLUMNS}
            for key in self._order:
                table.add_column(headers[key], key=key, width=self._change_w if key == "change" else None)
            self._change_w = None  # the rows' own width until they are fitted
            yield table
        yield screen_key_bar()

    def on_mount(self) -> None:
        self.action_reload()
        self.query_one(DataTable).focus()
        self.set_interval(1.0, self._reload_if_changed)

    def on_resize(self) -> None:
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        """The layout again for the width the table has now: the narrow order below
        :data:`NARROW_BELOW` columns, each column's width fitted to it (issue 34: a pane
        resized from 200 to 50 columns kept the wide order and widths, the change's Δ and
        verdict scrolled off; a table filled before its first layout kept a guessed width,
        and its columns moved at the next rebuild)."""
        narrow = self.app.size.width < NARROW_BELOW
        width = self._table.size.width
        if not self.experiments or not width or (narrow == self._narrow and width == self._fitted_width):
            return
        self._narrow = narrow
        self.query_one("#experiments-change", Static).display = narrow
        self._order = ()  # built again (_fill), in the order and widths of this width
        self._fill()

    def _reload_if_changed(self) -> None:
        if self.version() != self._seen_version and not self._loading:
            self.action_reload()

    # ------------------------------------------------------------ rows
    def action_reload(self) -> None:
        """Load what changed, in a worker; a reload asked for while one runs follows it
        (never cancelled: the update it would drop names rows no later update names)."""
        if self._loading:
            self._again = True
            return
        self._loading, self._again = True, False
        self.run_worker(self._reload(), group="experiments-load", exit_on_error=False)

    async def _reload(self) -> None:
        seen = self.version()
        try:
            update = await self.load()
        except Exception as exc:  # noqa: BLE001 - a locked or broken journal is shown, never a crash
            self.notify(f"experiments: {exc}", severity="error")
            update = None
        self._loading = False
        if update is not None:
            first = not self._shown
            self._seen_version = seen
            self.experiments = list(update.experiments)
            self._fill(update.changed)
            if first and self.experiments and gc.get_freeze_count():
                # the process froze its startup objects (process_setup): what the view loaded
                # (~100k objects for 1000 experiments) would make every full collection
                # traverse them again, 80-280 ms on a key press (bench/keypress_experiments.py)
                self.call_after_refresh(freeze_long_lived_objects)
        if self._again:
            self.action_reload()

    def _fill(self, changed: frozenset[str] | None = None) -> None:
        """Show :attr:`experiments` in the current sort. The rows on screen are kept: only
        those in ``changed`` are repainted (None: none), new experiments are added, and a
        new order moves the rows (``DataTable.sort``) without building their cells again;
        the table is rebuilt only when a row went away."""
        table = self.query_one(DataTable)
        rows, folded = fold_repeats(sort_experiments(self.experiments, self.sort_key, self.reverse))
        by_id = {x.id: x for x in self.experiments}
        self._repeats = {exp_id: [by_id[r] for r in ids] for exp_id, ids in folded.items()}
        if changed:  # a repeat that changed changes the row it is folded into (its outcome)
            changed = changed | {exp_id for exp_id, ids in folded.items() if changed.intersection(ids)}
        order = [x.id for x in rows]
        shown = set(self._shown)
        columns = self._columns()
        updates = {x.id: self._cells(x) for x in rows if changed and x.id in changed and x.id in shown}
        if (not shown.issubset(order) or not self._shown or columns != self._order or not shown.issuperset(order)
                or self._outgrown(table, updates)):
            # a new row (its change abbreviated as the others are) or a cell wider than its
            # column ('inconclusive' where the decision column was sized for 'keep'): built again
            current = self.current_id()
            self._order = columns
            self._change_w = None
            cells = [self._cells(x) for x in rows]
            table.clear(columns=True)
            headers = {key: header for key, header, _ in COLUMNS}
            widths = self._fit_widths(cells)
            self._change_w = widths.get("change")
            if self._change_w is not None:  # a change that does not fit: its flags, abbreviated alike
                at = self._order.index("change")
                cut = [n for n, row in enumerate(cells) if _cell_width(row[at]) > self._change_w and rows[n].changed_flags]
                if cut:  # then every row's flags, so that a flag reads the same on every row
                    cut = [n for n in range(len(rows)) if rows[n].changed_flags]
                for n, text in zip(cut, _fit_changes([rows[n] for n in cut], self._change_w), strict=True):
                    cells[n][at] = Text(text, no_wrap=True, overflow="ellipsis")
                for n, x in enumerate(rows):  # 'same flags as exp-0001' in fewer words, before any cut
                    if not x.changed_flags and _cell_width(cells[n][at]) > self._change_w:
                        cells[n][at] = Text(change_text_within(x, self._change_w), no_wrap=True, overflow="ellipsis")
            for key in self._order:
                table.add_column(headers[key], key=key, width=widths.get(key))
            for x, row in zip(rows, cells, strict=True):
                table.add_row(*row, key=x.id)
            if current is not None and current in set(order):
                table.move_cursor(row=table.get_row_index(current))
            self._shown = order
        else:
            for exp_id, cells in updates.items():  # only the cells that differ: a note changes none of them
                for col, old, cell in zip(self._order, table.get_row(exp_id), cells, strict=True):
                    if cell != old and col != "change":  # a listed change stays as the column abbreviated it
                        table.update_cell(exp_id, col, cell)
            if order != self._shown:
                current = self.current_id()
                rank = {exp_id: n for n, exp_id in enumerate(order)}
                table.sort("id", key=rank.__getitem__)  # the id column holds the row's id as it is
                self._shown = order
                if current is not None:
                    table.move_cursor(row=table.get_row_index(current), animate=False)
        arrow = "↓" if self.reverse else "↑"
        header = next(h for _, h, k in COLUMNS if k == self.sort_key).replace("\n", " ")
        starts = f", {len(self.experiments)} starts" if len(self.experiments) != len(rows) else ""
        servers = sorted({x.server for x in self.experiments})
        of = f" of {servers[0]}" if len(servers) == 1 else ""
        title = f"Experiments{of} ({len(rows)}{starts})   {_baselines_text(self.experiments)}sorted by {header} {arrow}"
        room = self.app.size.width - 6
        if cell_len(title) > room:  # a side pane keeps the baseline: the sort goes first, then the server
            title = f"Experiments{of} ({len(rows)}{starts})   {_baselines_text(self.experiments)}".rstrip()
            if cell_len(title) > room:
                title = f"Experiments ({len(rows)}{starts})  {_baselines_text(self.experiments)}".rstrip()
        if title != self._title:
            self._title = title
            self.query_one("#experiments-title", Static).update(title, layout=False)  # one line, always
        self._show_change()

    def _outgrown(self, table: DataTable, updates: dict[str, list]) -> bool:
        """Whether a cell of ``updates`` (row id → its new cells) is wider than its column
        (the change aside: it keeps the cell it was listed with)."""
        for cells in updates.values():
            for key, cell in zip(self._order, cells, strict=True):
                if key != "change" and _cell_width(cell) > table.columns[ColumnKey(key)].get_render_width(table) - 2 * table.cell_padding:
                    return True
        return False

    def _columns(self) -> tuple[str, ...]:
        """The columns in the layout's order; the decision only once an experiment has one
        (empty, it took the room the evidence was cut for at 200 columns), the server only
        when there are several (the title names the one)."""
        order = _NARROW_ORDER if self._narrow else tuple(key for key, _, _ in COLUMNS)
        left_out = set()
        if not any(x.decision for x in self.experiments):
            left_out.add("decision")
        if len({x.server for x in self.experiments}) <= 1:  # the title names it (its room went to the evidence)
            left_out.add("server")
        return tuple(key for key in order if key not in left_out)

    def _cells(self, x: Experiment) -> list:
        app = self.app
        tput, ttft = x.metric("output_throughput_tok_s"), x.metric("ttft_ms.median")
        outcome = x.outcome if x.outcome != "failed" else f"failed: {x.crash_class or '?'}"
        change = change_text(x)
        if self._change_w is not None and len(change) > self._change_w:
            if x.changed_flags:  # never a name cut
                change = _fit_changes([x], self._change_w)[0]
            else:  # 'same flags as exp-0001' in fewer words, before any cut
                change = change_text_within(x, self._change_w)
        verdict_var = _VERDICT_VAR.get(x.verdict)
        # the title names each server's baseline; a restart spread as the threshold it sets (details say both)
        evidence = verdict_evidence(x, name_baseline=False, compact=True)
        cells = {
            "id": x.id, "server": x.server, "change": Text(change, no_wrap=True, overflow="ellipsis"),
            "outcome": self._outcome(outcome, x),
            "ready": _num(x.ready_s, 1), "tput": _num(tput.value if tput else None, 1),
            "delta": self._delta(tput, x), "ttft": _num(ttft.value if ttft else None, 1), "ttft_delta": self._delta(ttft, x),
            "verdict": Text(self._verdict_text(x), style=style(app, verdict_var) if verdict_var else ""),
            "runs": runs_text(x.primary, unit=False) if x.primary else "-",
            "evidence": Text(evidence or "-", style="" if evidence else "dim", no_wrap=True, overflow="ellipsis"),
            "decision": x.decision or "",
        }
        return [cells[key] for key in self._order]

    def _verdict_text(self, x: Experiment) -> str:
        """The verdict cell: narrow, a failed row's crash class (``oom``, ``bad_flag``) instead
        of ``failed``: its outcome column (``failed: oom``) is off a side pane's edge (the walk
        of issue 34 read ``exp-0003  --mfs 0.99 +1  -  failed`` at 50 columns)."""
        if self._narrow and x.verdict == "failed" and x.crash_class:
            return f"✗ {x.crash_class}"
        return x.verdict

    def _fit_widths(self, rows: list[list]) -> dict[str, int]:
        """Fixed widths (characters, without padding) for the columns that give way, so that
        the table fits its width: narrow, the change takes what the id, Δ and verdict leave;
        wide, every column at its full width where that fits, else the change and then the
        evidence are shortened (never below :data:`_MIN_CHANGE_WIDE` / :data:`_MIN_EVIDENCE`; a
        change cut shows its flags: :func:`~optui.core.flags.abbrev.fit_flag_column`)."""
        table = self._table
        self._fitted_width = table.size.width  # 0: before its first layout (refitted once laid out: _refit)
        if not table.size.width:
            self.call_after_refresh(self._refit)
        avail = table.size.width or self.app.size.width - 4
        if len(rows) > table.size.height - 2:
            avail -= table.styles.scrollbar_size_vertical
        pad = 2 * table.cell_padding
        headers = {key: header for key, header, _ in COLUMNS}
        natural = {key: max([*map(cell_len, headers[key].split("\n")), *(_cell_width(row[n]) for row in rows)])
                   for n, key in enumerate(self._order)}
        if self._narrow:
            room = avail - sum(natural[key] + pad for key in _NARROW_FIRST) - pad
            return {"change": max(_MIN_CHANGE_NARROW, min(natural["change"], room))}
        excess = sum(w + pad for w in natural.values()) - avail
        widths = {}
        for key, least in (("change", _MIN_CHANGE_WIDE), ("evidence", _MIN_EVIDENCE)):
            give = max(0, min(excess, natural[key] - least))
            widths[key], excess = natural[key] - give, excess - give
        return widths

    def _outcome(self, outcome: str, x: Experiment) -> Text:
        text = Text(outcome, style=style(self.app, "state-failed") if x.outcome == "failed" else "")
        if x.unverified:  # the server reported running other flags than this row is credited to
            text.append(" unverified", style=style(self.app, "warning"))
        repeats = self._repeats.get(x.id)
        if repeats:  # the configuration's later starts that measured nothing, folded into this row
            failed = any(r.outcome == "failed" for r in repeats)
            text.append(f", {starts_brief(x, repeats)}", style=style(self.app, "warning") if failed else "dim")
        return text

    def _delta(self, d, x: Experiment) -> Text:
        if d is None or d.rel_pct is None or x.is_baseline:
            return Text("-", style="dim")
        var = None if d.good is None else ("delta-good" if d.good else "delta-bad")
        return Text(f"{d.rel_pct:+.1f}%", style=style(self.app, var) if var else "")

    def current_id(self) -> str | None:
        """The experiment under the cursor."""
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return key.value if key is not None else None

    def _current(self) -> Experiment | None:
        exp_id = self.current_id()
        return next((x for x in self.experiments if x.id == exp_id), None)

    # ------------------------------------------------------------ keys
    def action_next_sort(self) -> None:
        """Sort by the next sortable column the table shows (in the columns' order)."""
        shown = set(self._columns())
        keys = [k for c, _, k in _SORTABLE if c in shown or k == self.sort_key]
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self._fill()

    def action_reverse_sort(self) -> None:
        self.reverse = not self.reverse
        self._fill()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = next((k for c, _, k in COLUMNS if c == event.column_key.value), None)
        if key is None:
            return
        if key == self.sort_key:
            self.reverse = not self.reverse
        else:
            self.sort_key, self.reverse = key, False
        self._fill()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_details()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_change()

    def _show_change(self) -> None:
        """Narrow, the line above the table: the cursor row's change, every flag name whole
        (``exp-0003: --max-running-requests 32``; issue 34: the change column read ``--mrr 32``
        in a 50-column pane), the flag that changed from the previous configuration first."""
        if not self._narrow:
            return
        x = self._current()
        text = "" if x is None else f"{x.id}: {' '.join(x.changed_flags) or change_text(x)}"
        line = self.query_one("#experiments-change", Static)
        if str(line.render()) != text:
            line.update(text)

    def action_details(self) -> None:
        """Show the experiment's details over an underlay of their own, so that the view is
        not drawn again under them (dimmed: its whole screen per frame). The details screen
        is made once and kept (installed) while the view is open: a new one per Enter was
        composed, styled, and laid out and drawn twice from nothing (16-21 ms per drawing on
        the 16-core machine: most of the ~50 ms press; ``bench/keypress_experiments.py
        --mode details``, the old code traced)."""
        x = self._current()
        if x is None:
            return
        title, body = self.details_of(x, self._repeats.get(x.id, []))  # with the starts folded into its row
        if self._details is None:
            self._details = DetailsScreen(title, body)
            self.app.install_screen(self._details, f"experiments-details-{id(self)}")
        else:
            self._details.show(title, body)
        push_over_underlay(self.app, self._details)

    def action_decide(self, decision: str) -> None:
        """Ask why (a :class:`TextPrompt`, empty allowed; Esc records nothing), then record
        ``decision`` on the experiment under the cursor with that reason."""
        x = self._current()
        if x is None:
            return

        def answered(reason: str | None, exp_id: str = x.id) -> None:
            if reason is not None:
                self.run_worker(self._decide(exp_id, decision, reason.strip()), group="experiments-decide",
                                exit_on_error=False)

        self.app.push_screen(TextPrompt(f"{decision} {x.id}: why? (Enter: no reason, Esc: cancel)",
                                        placeholder="reason (optional)"), answered)

    async def _decide(self, exp_id: str, decision: str, reason: str = "") -> None:
        try:
            await self.decide(exp_id, decision, reason)
        except Exception as exc:  # noqa: BLE001 - shown, never a crash
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{exp_id}: {decision}")
        self.action_reload()

    def on_unmount(self) -> None:
        """Let go of the rows and the reader: frozen objects are never collected, and this
        screen (a cycle, like every widget) may be among them; its data is freed by refcount."""
        self.experiments, self._shown = [], []
        self.load = _closed
        self._table.clear()  # (its children are unmounted first: no query)
        details, self._details = self._details, None
        if details is not None and details not in self.app.screen_stack:
            self.app.uninstall_screen(details)
            details.remove()  # an installed screen stays mounted until removed

    def action_show_in_journal(self) -> None:
        self._leave(self.current_id())

    def action_close(self) -> None:
        self._leave(None)

    def _leave(self, result: str | None) -> None:
        self.dismiss(result)  # its underlay pops itself


async def _closed():
    raise RuntimeError("the experiments view is closed")


def _fit_changes(xs: list[Experiment], width: int) -> list[str]:
    """The changes of ``xs`` in ``width`` characters as their flags, abbreviated alike
    (:func:`~optui.core.flags.abbrev.fit_flag_column`); a repeat of an earlier configuration
    keeps its name after them (``--max-run-req 64 (as exp-0002)``) where that leaves 8."""
    tags = [f" (as {x.same_config_as})" if x.same_config_as and width - len(f" (as {x.same_config_as})") >= 8 else ""
            for x in xs]  # one level of abbreviation for all of them, tagged or not
    fitted = fit_flag_column([x.changed_flags for x in xs], [width - len(tag) for tag in tags])
    return [text + tag for text, tag in zip(fitted, tags, strict=True)]


def _baselines_text(experiments: list[Experiment]) -> str:
    """The baseline each server's rows are compared with, for the title (``"baseline
    exp-0001   "``; several servers: ``"baselines qwen exp-0001, llama exp-0007   "``; none:
    ``""``): the evidence cells name only another one (a workload measured against it)."""
    bases = {x.server: x.id for x in experiments if x.is_baseline}
    if not bases:
        return ""
    if len(bases) == 1 and len({x.server for x in experiments}) == 1:
        return f"baseline {next(iter(bases.values()))}   "
    return "baselines " + ", ".join(f"{server} {exp_id}" for server, exp_id in sorted(bases.items())) + "   "


def _cell_width(cell) -> int:
    """The characters a cell takes (a str cell here is plain text)."""
    return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))


def _num(value, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"
