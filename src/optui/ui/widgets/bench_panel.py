"""The benchmark panel: status + progress bar, results table (vs baseline) and output.

Output goes to a bounded ``Log`` fed in batches by the app's render loop (never one widget
update per line: 20k lines/s must not freeze the UI). The results table has one row per
point of a run (repeats folded into a median, ``n`` and spread; the experiment that
measured it: one server configuration, and that experiment's flag diff vs the baseline, the
results view's text; in a side pane the changed flags only, first), the scaling efficiency
of concurrency sweeps and the change of out tok/s and TTFT against the workload's
baseline, green/red by direction, ``~`` when inside the noise (inconclusive).

The table shows the columns that fit the panel whole, each as wide as its header or widest
cell (a header is never cut at the edge; the results view shows every column).

Keys (anywhere in the panel): ``A`` / ``ctrl+c`` abort the run (ctrl+c never quits the
app here), ``s`` sweep, ``R`` repeat, ``B`` pin the selected row as baseline, ``v`` the
results view. Its number key focuses the results table once there are results (arrows
select the row ``B`` pins; Tab moves on to the output log), else the log. The panel posts
its nested messages (``BenchPanel.Abort``, ``BenchPanel.Pin``...); the app carries them out.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, Static

from optui.core.bench.compare import Delta, Row, Sample, pinned_first
from optui.core.bench.result import IMPORTED_KEY, requests_text
from optui.core.flags.abbrev import fit_flag_column
from optui.core.journal.experiments import change_text, change_text_within, with_verdicts
from optui.core.text.safe_text import safe_line
from optui.session.state import BENCH_ROWS_SHOWN
from optui.ui.binding_ids import with_ids
from optui.ui.colors import style
from optui.ui.policy import allowed
from optui.ui.widgets.meters import fmt_value, pct_bar, truncate
from optui.ui.widgets.stream_log import StreamLog

if TYPE_CHECKING:
    from collections.abc import Mapping

    from optui.core.journal.experiments import Experiment
    from optui.session.state import BenchOutput, BenchView  # the snapshot's value types

#: the log is repainted at most this often (s): a flood scrolls the whole log on every
#: repaint, the costliest frame of the app, and is unreadable at 10 Hz anyway
LOG_FRAME_S = 0.25

COLUMNS = (  # what matters for a decision first: the columns that do not fit are left out (v shows all)
    ("bench", "bench", 10),  # (key, header, the most characters of its cells; 0: the change's own rule)
    ("exp", "exp", 8),  # which configuration produced the row
    ("change", "change", 0),  # its flags vs the baseline, at most CHANGE_WIDTH
    ("conc", "conc", 5),
    ("ok", "requests", 16),
    ("out", "out tok/s", 10),
    ("delta", "Δ out", 11),
    ("ttft", "TTFT p50", 9),
    ("dttft", "Δ TTFT", 11),
    ("n", "n ±%", 8),
    ("eff", "scale", 5),
    ("ttft99", "TTFT p99", 9),
    ("itl", "ITL p50", 8),
    ("tpot", "TPOT p50", 9),
    ("e2e", "E2E p50", 9),
)
#: in a side pane (the screen's ``-narrow`` class) the experiment, its configuration and the result
#: against the baseline come first (bench, exp, change, out tok/s, Δ out fit 50 columns: the
#: experiment's number without its ``exp-``, under the header ``exp``)
NARROW_ORDER = ("bench", "exp", "change", "out", "delta", "ok", "conc", "ttft", "dttft", "n", "eff", "ttft99", "itl",
                "tpot", "e2e")
#: a side pane's bench cell: the preset then the row's concurrency (``loadgen c4``: no conc
#: column fits there, and a sweep's rows would read alike), at most this many characters
NARROW_BENCH_W = 14
#: the most characters of a row's change (wide, narrow); a side pane's change takes what bench,
#: out tok/s and Δ out leave it, down to CHANGE_MIN; a longer change is fitted by
#: :func:`~optui.core.flags.abbrev.fit_flags` (flag names whole or abbreviated, never cut)
CHANGE_WIDTH = {False: 30, True: 24}
CHANGE_MIN = 10
#: the columns that share a side pane's width with the change
_NARROW_FIRST = ("bench", "exp", "out", "delta")
#: Rows the panel shows (newest last); the results view (``v``) shows all.
PANEL_ROWS = BENCH_ROWS_SHOWN


def delta_pct(value: float | None, base: float | None) -> float | None:
    """Relative change in % (None when either side is missing or base is 0)."""
    if value is None or base in (None, 0):
        return None
    return 100.0 * (value - base) / base


def delta_cell(app, row: Row, metric: str) -> Text:
    """The Δ cell of ``metric``: "baseline", "—" (no baseline), "n/a", or ``+3.2%``
    green/red by direction with ✓/✗ when outside the noise; ``~`` marks a change inside the
    noise (inconclusive), ``?`` one with too few runs to judge (untested noise); a trailing
    ``⚠`` a run the prefix cache served otherwise than its baseline (``Row.cache_note``)."""
    if row.is_baseline:
        return Text("baseline", style="bold dim")
    d: Delta | None = row.deltas.get(metric)
    if d is None:
        return Text("—", style="dim")
    if d.pct is None:
        return Text("n/a", style="dim")
    if d.verdict == "inconclusive":
        cell = Text(f"~{d.pct:+.1f}%", style=style(app, "state-busy"))
    elif d.verdict == "untested noise":  # too few runs to know the noise: a number, never a verdict
        cell = Text(f"?{d.pct:+.1f}%", style="dim")
    elif d.good is None:
        cell = Text(f"{d.pct:+.1f}%", style="dim")
    else:
        mark = {"better": " ✓", "worse": " ✗"}.get(d.verdict or "", "")
        cell = Text(f"{d.pct:+.1f}%{mark}", style=style(app, "delta-good" if d.good else "delta-bad"))
    if row.cache_note:  # the prefix cache served it and the baseline differently: not the same prefill work
        cell.append(" ⚠", style=style(app, "warning"))
    return cell


def spread_cell(s: Sample) -> str:
    """``"3 ±1.2%"`` (runs and half-range around the median), ``"1"`` for a single run."""
    spread = s.spread_pct
    return f"{s.n}" if spread is None else f"{s.n} ±{spread:.1f}%"


class ResultsTable(DataTable):
    """The panel's results table: keeps the cursor row (the newest unless moved) in view
    when its height changes (a resize to a side pane shrinks it to two rows and would
    otherwise keep showing the oldest ones)."""

    # DataTable's own keys, with ids so that a keymap can move them
    BINDINGS = with_ids(DataTable.BINDINGS, "bench.table")

    def on_resize(self) -> None:
        if self.row_count:
            self.call_after_refresh(self.move_cursor, row=self.cursor_row)


class BenchPanel(Vertical):
    """Progress + results + output log of the current benchmark run."""

    BINDINGS = [
        # A, not x: x runs a todo item's experiment (restarts a server) in the todo panel
        Binding("A", "abort", "Abort", id="bench.panel_abort"),
        Binding("ctrl+c", "abort", "Abort", show=False, id="bench.panel_abort_ctrl_c"),
        Binding("s", "sweep", "Sweep", id="bench.sweep"),
        Binding("R", "repeat", "Repeat", id="bench.repeat"),
        Binding("B", "pin", "Pin baseline", id="bench.pin"),
        Binding("v", "results", "Results", id="bench.results"),
    ]

    class Abort(Message):
        """Abort the running benchmark."""

    class Sweep(Message):
        """Choose a preset and sweep it."""

    class Repeat(Message):
        """Choose a preset and repeat it."""

    @dataclass
    class Pin(Message):
        """Pin results row ``row`` as its workload's baseline (None: there is no row)."""

        row: Row | None

    class Results(Message):
        """Open the results view."""

    def __init__(self, *, max_lines: int = 10_000, id: str | None = None) -> None:
        super().__init__(id=id)
        self.max_lines = max_lines
        self.seen_lines = 0
        self._run_id: str | None = None
        self._rows: tuple[Row, ...] = ()
        self._given: tuple[Row, ...] = ()  # the rows as shown last, before the verdicts judged them
        #: (rows given, experiments, those rows judged by the verdicts): reused while neither changes
        self._judged: tuple[tuple[Row, ...], object, tuple[Row, ...]] | None = None
        self._experiments: Mapping[str, Experiment] | None = None
        self._narrow = False
        self._swept: set[str | None] = set()  # presets shown at several concurrencies (a side pane)
        self._width = 0  # the room the columns were fitted to (0: not laid out yet)
        self._view: BenchView | None = None
        self._status_plain = ""
        self._pending: deque[str] = deque(maxlen=max_lines)
        self._flushed_at = 0.0
        self._flush_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("no benchmark yet — press b", id="bench-status", markup=False)
        table = ResultsTable(id="bench-results", cursor_type="row", zebra_stripes=True)
        yield table
        yield StreamLog(max_lines=self.max_lines, id="bench-log")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.display = False  # shown once there are results
        self._fill(table)

    def on_resize(self) -> None:
        if self._rows and self._room() != self._width:  # the columns that fit, again; the cursor kept
            table = self.query_one(DataTable)
            self._fill(table, cursor=table.cursor_row)

    def _room(self) -> int:
        """The characters the table's columns may take: the panel's width less a vertical
        scrollbar (0 before the first layout: every column)."""
        width = self.size.width
        return max(0, width - self.query_one(DataTable).styles.scrollbar_size_vertical) if width else 0

    def _fill(self, table: DataTable, cursor: int | None = None) -> None:
        """The table again: the columns in the order of the layout (:data:`NARROW_ORDER` in a
        side pane), each as wide as its header or its widest cell (at most its :data:`COLUMNS`
        limit), those that fit the width whole (a header is never cut; ``v`` shows them all),
        then the rows, the cursor on row ``cursor`` (None: the newest)."""
        self._width = room = self._room()
        order = NARROW_ORDER if self._narrow else tuple(key for key, _, _ in COLUMNS)
        labels = {key: label for key, label, _ in COLUMNS}
        concs: dict[str | None, set] = {}
        for row in self._rows:
            concs.setdefault(row.group.bench, set()).add(row.group.concurrency)
        # a side pane has no room for the conc column: a preset run at several concurrencies
        # (a sweep) says each row's in its bench cell
        self._swept = {bench for bench, cs in concs.items() if len(cs) > 1} if self._narrow else set()
        rows = [self._cells(row) for row in self._rows]
        limits = {key: NARROW_BENCH_W if key == "bench" and self._swept else limit for key, _, limit in COLUMNS}
        widths = {key: max(cell_len(labels[key]), min(limits[key], max((_cell_len(r[key]) for r in rows), default=0)))
                  for key, _, _ in COLUMNS if key != "change"}
        pad = 2 * table.cell_padding
        change_w = CHANGE_WIDTH[self._narrow]
        if self._narrow and room:  # the change takes what bench, out tok/s and Δ out leave
            change_w = max(CHANGE_MIN, min(change_w, room - sum(widths[key] + pad for key in _NARROW_FIRST) - pad))
        changes = self._changes(change_w)
        widths["change"] = max([cell_len(labels["change"]), *(c.cell_len for c in changes)])
        shown: list[str] = []
        used = 0
        for key in order:
            used += widths[key] + pad
            if room and used > room and shown:
                break
            shown.append(key)
        table.clear(columns=True)
        for key in shown:
            table.add_column(labels[key], key=key, width=widths[key])
        for i, (cells, change) in enumerate(zip(rows, changes, strict=True)):
            cells["change"] = change
            table.add_row(*(cells[key] for key in shown), key=str(i))
        if rows:
            table.move_cursor(row=cursor if cursor is not None and 0 <= cursor < len(rows) else len(rows) - 1)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "abort" and not self.running:  # only while a benchmark runs
            return False
        return allowed(self.app, action, parameters)

    def action_abort(self) -> None:
        self.post_message(self.Abort())

    def action_sweep(self) -> None:
        self.post_message(self.Sweep())

    def action_repeat(self) -> None:
        self.post_message(self.Repeat())

    def action_pin(self) -> None:
        self.post_message(self.Pin(self.selected_row()))

    def action_results(self) -> None:
        self.post_message(self.Results())

    @property
    def running(self) -> bool:
        """The run on screen is still running."""
        return self._view is not None and self._view.status == "running"

    def focus_target(self) -> Widget:
        """What the panel's number key focuses: the results table once it has rows (arrows
        pick the row ``B`` pins), else the output log (Tab moves between them)."""
        table = self.query_one(ResultsTable)
        return table if table.display and table.row_count else self.query_one(StreamLog)

    @property
    def shown_rows(self) -> tuple[Row, ...]:
        """The results rows in the table, top to bottom (a side pane may leave the ``exp``
        column out: the rows say their experiment)."""
        return self._rows

    def selected_row(self) -> Row | None:
        """The results row under the table's cursor (the newest when never moved)."""
        table = self.query_one(DataTable)
        if not self._rows:
            return None
        index = table.cursor_row if 0 <= table.cursor_row < len(self._rows) else len(self._rows) - 1
        return self._rows[index]

    # ---------------------------------------------------------- output
    def new_run(self, run_id: str) -> None:
        """A new run started: clear the output and the line counter."""
        if run_id != self._run_id:
            self._run_id = run_id
            self.seen_lines = 0
            self._pending.clear()
            self.query_one(StreamLog).clear()

    def append_lines(self, lines: list[str]) -> None:
        """Append a batch of output lines: shown at once when the log was last repainted
        :data:`LOG_FRAME_S` ago or more, else with the next repaint (a timer); at most the
        log's capacity is kept meanwhile."""
        if not lines:
            return
        self._pending.extend(lines[-self.max_lines:])
        wait = self._flushed_at + LOG_FRAME_S - time.monotonic()
        if wait <= 0:
            self._flush()
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(wait, self._flush)

    def _flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._flushed_at = time.monotonic()
        if not self._pending:
            return
        log = self.query_one(StreamLog)
        batch = list(self._pending)
        self._pending.clear()
        log.append(batch)

    # ---------------------------------------------------------- status
    def show(self, view: BenchView | None, rows: tuple[Row, ...], output: BenchOutput | None = None,
             experiments: Mapping[str, Experiment] | None = None) -> None:
        """Render the run's status line, the results table (``rows`` oldest first; the
        newest :data:`PANEL_ROWS` are shown, their pinned baselines first and fixed at the top:
        :func:`~optui.core.bench.compare.pinned_first`) and the output lines ``output`` has beyond
        those already shown (a new run clears the log first). ``experiments``: the campaign's
        experiments by id, for each row's change vs the baseline
        (:func:`~optui.core.journal.experiments.change_text`; None: not read yet, ``…``)."""
        if output is not None:
            self.new_run(output.run_id)
            lines = output.since(self.seen_lines)
            self.seen_lines = output.total
            self.append_lines(list(lines))
        self._view = view
        # the reference of what is shown stays on screen: pinned baselines lead, fixed at the top
        rows, fixed = pinned_first(rows[-PANEL_ROWS:])
        text = self._status_text(view, bool(rows))
        if text.plain != self._status_plain:  # one fixed-height line: no layout pass needed
            self._status_plain = text.plain
            self.query_one("#bench-status", Static).update(text, layout=False)
        narrow = self.screen.has_class("-narrow")
        if rows == self._given and experiments is self._experiments and narrow == self._narrow:
            return
        self._given = rows
        if experiments:  # each mark is its workload's verdict against the baseline's runs, never one run's delta
            judged = self._judged
            if judged is not None and judged[0] == rows and judged[1] is experiments:
                rows = judged[2]  # the same row objects (a resize keeps the selected row)
            else:
                given, rows = rows, with_verdicts(rows, experiments.values())
                self._judged = (given, experiments, rows)
        table = self.query_one(DataTable)
        cursor = table.cursor_row if rows == self._rows else None  # the same rows (a new layout): kept
        self._rows, self._experiments, self._narrow = rows, experiments, narrow
        table.display = bool(rows)
        table.fixed_rows = fixed
        self._fill(table, cursor)

    def _status_text(self, view: BenchView | None, have_results: bool) -> Text:
        app = self.app
        if view is None:
            hint = "stored results below — b runs a benchmark, v shows all" if have_results else "no benchmark yet — press b to run one"
            return Text(hint, style="dim")
        t = Text(no_wrap=True, overflow="ellipsis")
        st = {"running": "state-busy", "ok": "state-ready"}.get(view.status, "state-failed")
        t.append(f"{view.name} → {view.server}  ", style="bold")
        t.append(view.status.upper(), style=style(app, st, bold=True))
        if view.status == "running":
            p = view.progress
            # where the run is first (a side pane's 60 columns cut the rest: 'run 2/3' was lost)
            step = f"{view.points_done + 1}/{view.points_total}"
            if view.points_total > 1 and not view.point.endswith(f"run {step}"):  # repeats alone: the label says it
                t.append(f"  point {step}")
            if view.point:
                t.append(f"  {view.point}")
            if p.phase not in ("running", "results"):
                t.append(f"  {p.phase}", style="dim")
            if p.total:
                t.append("  ")
                bar = 8 if self.screen.has_class("-narrow") else 16
                t.append_text(pct_bar(bar, 100.0 * min(p.done, p.total) / p.total, style(app, "gpu-util"), style(app, "meter-empty")))
                t.append(f" {p.done}/{p.total}")
            elif p.done:
                t.append(f"  {p.done} done")
            if p.rate:
                t.append(f"  {p.rate:.1f} req/s")
            if p.eta_s is not None and p.phase != "results":
                t.append(f"  ETA {_clock(p.eta_s)}")
            if not p.total and p.text:
                t.append("  " + safe_line(p.text[-60:]), style="dim")
            if view.plan:
                t.append(f"  {view.plan}", style="dim")
            t.append("   A: abort", style="dim")
        else:
            if view.plan:
                t.append(f"  {view.plan}", style="dim")
            if view.error:
                t.append(f"  {safe_line(view.error[:160])}", style=style(app, "error"))
        return t

    def _cells(self, row: Row) -> dict[str, object]:
        """The row's cells by column key (its change: :meth:`_changes`, at the column's width)."""
        app = self.app
        g = row.group
        r = g.result
        cells: dict[str, object] = dict.fromkeys((key for key, _, _ in COLUMNS), "")
        # a result read from a file (optui bench import) and put in no experiment says so
        exp = g.experiment or ("imported" if IMPORTED_KEY in r.extra else "-")
        bench = g.bench or "?"
        if g.bench in self._swept and g.concurrency is not None:  # which point of the sweep
            tag = f" c{fmt_value(g.concurrency, na='-')}"
            bench = truncate(bench, NARROW_BENCH_W - len(tag)) + tag
        if self._narrow and exp.startswith("exp-"):  # a side pane: the number says it under the header exp
            exp = exp[len("exp-"):]
        cells.update(bench=bench, exp=exp, conc=fmt_value(g.concurrency, na="-"))
        ok = requests_text(g.requests)  # "15/400 ok": over the group's runs
        if not g.ok:  # failed / degraded: its counts, never a number compared
            status = r.status if r.status != "ok" else "degraded"
            cells["ok"] = Text(f"{ok} {status}", style=style(app, "error"))
        else:
            s = row.samples
            cells.update(
                ok=ok,
                out=fmt_value(s["output_throughput_tok_s"].median, "{:,.1f}"),
                delta=delta_cell(app, row, "output_throughput_tok_s"),
                ttft=fmt_value(s["ttft_ms.median"].median, "{:.1f}"),
                dttft=delta_cell(app, row, "ttft_ms.median"),
                n=spread_cell(s["output_throughput_tok_s"]),
                eff="" if row.scaling is None else f"{row.scaling:.2f}",
                ttft99=fmt_value(s["ttft_ms.p99"].median, "{:.1f}"),
                itl=fmt_value(s["itl_ms.median"].median, "{:.2f}"),
                tpot=fmt_value(s["tpot_ms.median"].median, "{:.2f}"),
                e2e=fmt_value(s["e2e_ms.median"].median, "{:.0f}"),
            )
        return cells

    def _changes(self, width: int) -> list[Text]:
        """Each row's change vs the baseline in at most ``width`` characters: the results
        view's text where it fits outside a side pane, else the changed flags as they run,
        abbreviated alike on every row (:func:`~optui.core.flags.abbrev.fit_flag_column`: names
        whole or abbreviated, never cut); ``…`` until the experiments are read, ``?`` for one
        they do not have, ``-`` for a result of no experiment."""
        found = self._experiments or {}
        xs = [found.get(row.group.experiment) if row.group.experiment else None for row in self._rows]
        texts = [change_text(x) if x is not None else "" for x in xs]
        # one rendering per flag: once a row's text does not fit, every row's flags are fitted
        flags_col = self._narrow or any(x is not None and x.changed_flags and len(t) > width
                                        for x, t in zip(xs, texts, strict=True))
        as_flags = [x is not None and bool(x.changed_flags) and flags_col for x in xs]
        fitted = iter(fit_flag_column([x.changed_flags for x, f in zip(xs, as_flags, strict=True) if f and x], width))
        cells = []
        for row, x, flags in zip(self._rows, xs, as_flags, strict=True):
            if row.group.experiment is None:
                cells.append(Text("-", style="dim"))
            elif x is None:
                cells.append(Text("…" if self._experiments is None else "?", style="dim"))
            else:  # the new values matter most: kept
                cells.append(Text(next(fitted) if flags else truncate(change_text_within(x, width), width),
                                  style="" if x.diff_vs_baseline else "dim"))
        return cells


def _cell_len(cell: object) -> int:
    """The characters a cell takes on its one line."""
    return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))


def _clock(seconds: float) -> str:
    """``"42s"``, ``"3m05s"``, ``"1h02m"``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
