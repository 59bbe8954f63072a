"""The results view: every stored benchmark result group with medians, spread, deltas per
metric against its workload's baseline, scaling efficiency, and two plots (plotext,
:mod:`optui.ui.plots`) of out tok/s and TTFT against concurrency for the selected row's
workload and experiment (one server configuration: a plot never mixes two), its baseline
experiment's sweep of the same workload marked beside it; with one concurrency measured, that
configuration's runs of the workload over time, the baseline's marked. Every row
names its experiment and that experiment's flag diff vs the server's baseline experiment
(the experiments view's "change vs baseline", read through the session's journal thread).

Keys: ``B`` pin the selected row as baseline, ``p`` the Pareto view of the newest flag
search (out tok/s against TTFT p99 of every configuration it measured, the pinned baseline
marked; instead of the plots, again: back), ``escape``/``q`` close. The screen renders
what ``session.benches.rows()`` returns (refreshed twice a second) and posts
:class:`~optui.ui.widgets.bench_panel.BenchPanel.Pin` for the pin, like the bench panel.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static

from optui.core.bench.chart import nice_max
from optui.core.bench.compare import METRIC_TITLES, METRICS, STATISTIC, Row, family_key, sweep_series
from optui.core.bench.result import requests_text
from optui.core.flags.abbrev import fit_flag_column
from optui.core.journal.experiments import Experiment, change_text, named_by_row, row_verdict_text, with_verdicts
from optui.ui.colors import style
from optui.ui.widgets.bench_panel import BenchPanel, delta_cell, spread_cell
from optui.ui.widgets.key_bar import KeyBar, screen_key_bar
from optui.ui.widgets.meters import fmt_value

if TYPE_CHECKING:
    from optui.core.journal.experiments import ExperimentsUpdate

_FIXED = (("id", "#", 5), ("exp", "experiment", 10), ("change", "change vs baseline", 30), ("bench", "bench", 10), ("tool", "tool", 13), ("workload", "workload", 22),
          ("conc", "conc", 5), ("rate", "rate", 5), ("n", "n ±%", 8), ("status", "status", 8),
          ("requests", "requests", 13), ("vs", "vs", 9))
#: the columns' keys in the order of :meth:`ResultsScreen._cells`
_KEYS = (*(key for key, _, _ in _FIXED), *METRICS, "scale")
#: below this width (a side pane) the numbers come right after the row's experiment, then its
#: change (at 60 columns out tok/s was ten columns to the right, one → press each)
NARROW_BELOW = 100
_NARROW_FIRST = ("id", "exp", "output_throughput_tok_s", "ttft_ms.median", "change")
_FORMATS = {"output_throughput_tok_s": "{:,.1f}", "total_throughput_tok_s": "{:,.1f}", "request_throughput": "{:.2f}",
            "itl_ms.median": "{:.2f}", "tpot_ms.median": "{:.2f}", "e2e_ms.median": "{:.0f}"}
#: the narrowest a sweep's plot is drawn at; two side by side from twice that
SWEEP_MIN_WIDTH = 26
#: the baseline's point or line in a plot
BASELINE_MARK = "◆"


def workload_text(row: Row) -> str:
    """``"random 128/64 x32"``: dataset, input/output tokens, prompts."""
    wl = row.group.result.workload
    lengths = f" {fmt_value(wl.input_len, na='?')}/{fmt_value(wl.output_len, na='?')}" if wl.input_len or wl.output_len else ""
    prompts = f" x{wl.num_prompts}" if wl.num_prompts else ""
    return f"{wl.dataset or '?'}{lengths}{prompts}"


def _versus(row: Row) -> Text:
    """What the row is compared with: "baseline" (it is), ``#id`` of the baseline, "—"."""
    if row.is_baseline:
        return Text("baseline", style="bold")
    if row.baseline is None:
        return Text("—", style="dim")
    return Text(f"#{row.baseline.ids[-1]}", style="dim")


class ResultsScreen(Screen[None]):
    """Full-screen results table + chart (see module doc)."""

    BINDINGS = [
        Binding("escape,q", "close", "Close", id="results.close"),
        Binding("B", "pin", "Pin baseline", id="results.pin"),
        Binding("p", "pareto", "Pareto view", id="results.pareto"),
    ]
    DEFAULT_CSS = """
    ResultsScreen { layout: vertical; }
    ResultsScreen #results-title { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    ResultsScreen #results-table { height: 1fr; min-height: 4; }
    ResultsScreen #results-chart { height: auto; max-height: 60%; padding: 0 1; border-top: solid $panel; }
    """

    def __init__(self, rows: Callable[[], list[Row]],
                 experiments: Callable[[], Awaitable[ExperimentsUpdate]] | None = None,
                 search: Callable[[], Awaitable[dict | None]] | None = None) -> None:
        """``rows()``: every result group's comparison row, oldest first, the same list
        until the results change (it is asked twice a second). ``experiments()``: awaited
        (in a worker) for the campaign's experiments when the rows change, for each row's
        flag diff (a session's ``experiments_reader()``; None: the column says ``?``).
        ``search()``: awaited when ``p`` opens the Pareto view, for the newest flag search
        (``optui.session.search.search_status``'s dict, None: no search)."""
        self._order: tuple[str, ...] = _KEYS  # the columns' order (a side pane's: on_mount)
        super().__init__()
        self._rows_now = rows
        self._rows: list[Row] | None = None
        self._experiments = experiments
        #: workload key → restart-to-restart spread (%), and the experiments of the baseline's flags again
        #: the experiments each row's change is judged with (its workload's verdict: :func:`with_verdicts`)
        self._judged_by: list[Experiment] = []
        self._changes: dict[str, str] = {}  # experiment id -> its change vs the baseline
        self._search = search
        self._pareto: Text | None = None  # the Pareto view shown instead of the chart
        self._pareto_data: dict | None = None  # the search it shows

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Benchmark results — B pins the selected row as baseline of its workload; "
                              "✓/✗ = outside the noise, ~ = inside it (inconclusive), ? = too few runs (untested noise), "
                              "⚠ = the prefix cache served it otherwise than its baseline; "
                              f"scale = T(N) / (N·T(1)); verdicts: {STATISTIC}"),
                         id="results-title")
            yield DataTable(id="results-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="results-chart")
        yield screen_key_bar()  # the main screen's: keys from the one key table, none cut (Textual's Footer
        # overflowed a 60-column pane: 'z ▏^p palettea')

    def on_mount(self) -> None:
        self.call_after_refresh(self.query_one(KeyBar).update_keys)
        table = self.query_one(DataTable)
        columns = {key: (label, width) for key, label, width in _FIXED}
        columns.update({metric: (METRIC_TITLES[metric], 18) for metric in METRICS}, scale=("scale", 5))
        narrow = self.app.size.width < NARROW_BELOW
        self._order = (*_NARROW_FIRST, *(k for k in _KEYS if k not in _NARROW_FIRST)) if narrow else _KEYS
        for key in self._order:
            table.add_column(columns[key][0], key=key, width=columns[key][1])
        self._refresh()
        self.set_interval(0.5, self._refresh)
        table.focus()

    def _refresh(self) -> None:
        rows = self._rows_now()
        if rows is self._rows:
            return
        if self._experiments is not None:
            self.run_worker(self._load_changes(), group="results-changes", exclusive=True, exit_on_error=False)
        self._fill(rows)

    async def _load_changes(self) -> None:
        """Each experiment's change vs the baseline (off the event loop); the rows again
        when one of theirs is new."""
        try:
            update = await self._experiments()  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - a locked or broken journal is shown, never a crash
            self.notify(f"experiments: {exc}", severity="error")
            return
        named = named_by_row(update.experiments)  # 'same flags as' names a row the experiments view lists
        changes = {x.id: change_text(x) for x in named}
        # a change longer than its column shows its flags, names whole or abbreviated alike (never cut)
        width = next(w for key, _, w in _FIXED if key == "change")
        cut = [x for x in named if len(changes[x.id]) > width and x.changed_flags]
        if cut:  # then every changed row's flags: one configuration read two ways ('+ --x (on)' and '--x')
            cut = [x for x in named if x.changed_flags]
        for x, text in zip(cut, fit_flag_column([x.changed_flags for x in cut], width), strict=True):
            changes[x.id] = text
        # each change judged as the verdicts judge it: the workload's verdict against the baseline's runs
        judged_by = list(update.experiments)
        if changes != self._changes or judged_by != self._judged_by:
            self._changes, self._judged_by = changes, judged_by
            if self._rows is not None:
                self._fill(self._rows)

    def _fill(self, rows: list[Row]) -> None:
        table = self.query_one(DataTable)
        keep = table.cursor_row if self._rows else None
        self._rows = rows
        table.clear()
        for i, row in enumerate(with_verdicts(rows, self._judged_by)):
            cells = dict(zip(_KEYS, self._cells(row), strict=True))
            table.add_row(*(cells[key] for key in self._order), key=str(i))
        if rows:
            table.move_cursor(row=keep if keep is not None and keep < len(rows) else len(rows) - 1)
        self._show_chart()

    def _cells(self, row: Row) -> list:
        app = self.app
        g = row.group
        r = g.result
        rate = r.request_rate if r.request_rate is not None else r.workload.request_rate
        cells: list = [
            str(g.ids[-1]), g.experiment or "-", self._change(g.experiment), g.bench or "?", r.tool, workload_text(row), fmt_value(g.concurrency, na="-"),
            "inf" if rate is not None and math.isinf(rate) else fmt_value(rate, "{:g}", na="-"),
            spread_cell(row.samples["output_throughput_tok_s"]),
            Text(r.status if g.ok or r.status != "ok" else "degraded", style="" if g.ok else style(app, "error")),
            requests_text(g.requests),
            _versus(row),
        ]
        for metric in METRICS:
            value = row.samples[metric].median
            cell = Text(fmt_value(value, _FORMATS.get(metric, "{:.1f}"), na="-"))
            if g.ok and row.deltas:
                cell.append(" ")
                cell.append_text(delta_cell(app, row, metric))
            cells.append(cell)
        cells.append("" if row.scaling is None else f"{row.scaling:.2f}")
        return cells

    def _change(self, experiment: str | None) -> Text:
        if experiment is None:
            return Text("-", style="dim")
        text = self._changes.get(experiment)
        if text is None:
            return Text("?" if self._experiments is None or self._changes else "…", style="dim")
        return Text(text, no_wrap=True, overflow="ellipsis")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_chart()

    def selected(self) -> Row | None:
        """The highlighted row (None without rows)."""
        table = self.query_one(DataTable)
        if not self._rows or not 0 <= table.cursor_row < len(self._rows):
            return None
        return self._rows[table.cursor_row]

    def _show_chart(self) -> None:
        chart = self.query_one("#results-chart", Static)
        if self._pareto is not None:
            chart.update(self._pareto)
            return
        row = self.selected()
        if row is None or not self._rows:
            chart.update(Text("no results yet", style="dim"))
            return
        experiment = row.group.experiment
        where = f"{workload_text(row)} on {experiment or 'no experiment'}"
        # the row's mark on demand: its workload's verdict with the evidence, and the runner-up's test
        verdict = row_verdict_text(self._judged_by, experiment, row.group.workload_key)
        head = Text(f"verdict {verdict}\n" if verdict else "")
        series = sweep_series(self._rows, family_key(row.group.result.workload), experiment)
        if len(series) < 2:
            hint = head + Text(f"{where}: one concurrency measured — run a sweep (s in the bench panel) "
                        "for the throughput / TTFT chart", style="dim")
            runs = self._runs_plot(row)
            if runs is not None:
                hint.append("; its runs over time:\n")
                hint.append_text(runs)
            chart.update(hint)
            return
        base_exp = row.baseline.experiment if row.baseline is not None else None
        base = sweep_series(self._rows, family_key(row.group.result.workload), base_exp) \
            if base_exp is not None and base_exp != experiment else []
        text = head + Text(f"{where} — newest result per concurrency of this configuration"
                    + (f", {BASELINE_MARK} the baseline's ({base_exp})" if base else "") + "\n", style="bold")
        side = self.size.width >= 2 * SWEEP_MIN_WIDTH + 6
        width = (self.size.width - 4) // 2 if side else self.size.width - 2
        room = min(30, int(self.app.size.height * 0.6) - 2)  # the chart's max-height, less its border and title
        height = room - 3 if side else room // 2 - 3  # each: its y name, legend and values lines
        plots = [self._sweep_plot(series, base, metric, title, colour, width=width, height=height)
                 for metric, title, colour in (("output_throughput_tok_s", "out tok/s", "gpu-util"),
                                               ("ttft_ms.median", "TTFT p50 (ms)", "gpu-mem-reserved"))]
        if side:
            left, right = (list(p.split("\n")) for p in plots)
            left += [Text()] * (len(right) - len(left))
            right += [Text()] * (len(left) - len(right))
            for a, b in zip(left, right):
                a.pad_right(width + 2 - a.cell_len)
                text.append_text(a)
                text.append_text(b)
                text.append("\n")
        else:
            for p in plots:
                text.append_text(p)
                text.append("\n")
        chart.update(text)

    def _runs_plot(self, row: Row) -> Text | None:
        """Every run of the selected row's workload on its configuration (experiment) by the
        time it was stored, its baseline's runs marked; None for a single run or when a run's
        time is not known."""
        from optui.ui.plots import Series, plot_text, round_ticks

        mine = [e for r in self._rows or [] if r.group.experiment == row.group.experiment
                and r.group.workload_key == row.group.workload_key for e in r.group.entries]
        base = list(row.baseline.entries) if row.baseline is not None else []
        every = [*mine, *base]
        if not mine or len(every) < 2 or any(e.ts is None for e in every):  # one run: nothing over time
            return None
        t0 = min(e.ts for e in every if e.ts is not None)

        def points(entries) -> tuple[tuple[float, float], ...]:
            return tuple(((e.ts - t0) / 60.0, v) for e in entries
                         if e.ts is not None and (v := e.result.metric("output_throughput_tok_s")) is not None)

        span = nice_max(max((e.ts - t0) / 60.0 for e in every if e.ts is not None) * 1.1 or 1.0)
        clock = "%H:%M" if span >= 10 else "%H:%M:%S"  # runs minutes apart: minutes; a few seconds apart: seconds
        ticks = [(m, time.strftime(clock, time.localtime(t0 + m * 60))) for m in round_ticks(span)]
        lines = [Series("baseline", points(base), BASELINE_MARK, "primary")] if base else []
        lines.append(Series("this config", points(mine), "●", "gpu-util"))
        room = min(30, int(self.app.size.height * 0.6) - 3)
        return plot_text(self.app, lines, x_label="time stored (local)", y_label="out tok/s", width=self.size.width - 2,
                         height=max(8, room - 2), x_max=span, x_ticks=ticks)

    def _sweep_plot(self, series: list[Row], base: list[Row], metric: str, title: str, colour: str, *,
                    width: int, height: int) -> Text:
        """One metric of a sweep against concurrency (one x tick per concurrency measured), the
        baseline's sweep of the same workload beside it, then the values in one line."""
        from optui.ui.plots import Series, plot_text

        concs = sorted({r.group.concurrency for r in (*series, *base) if r.group.concurrency is not None})
        at = {c: i + 1 for i, c in enumerate(concs)}

        def points(rows: list[Row]) -> tuple[tuple[float, float], ...]:
            return tuple((float(at[r.group.concurrency]), v) for r in rows
                         if r.group.concurrency is not None and (v := r.samples[metric].median) is not None)

        # the baseline first: where both measured the same, this configuration's point is on top
        lines = [Series("baseline", points(base), BASELINE_MARK, "primary")] if base else []
        lines.append(Series("this config", points(series), "●", colour))
        plot = plot_text(self.app, lines, x_label="concurrency (requests)", y_label=title, width=width, height=height,
                         x_max=len(concs) + 1.0, x_ticks=[(float(at[c]), str(c)) for c in concs])
        values = [f"c={r.group.concurrency} {fmt_value(r.samples[metric].median, '{:,.1f}', na='-')}" for r in series]
        row = ""
        for item in values:  # the values measured, wrapped to the plot's width
            if row and len(row) + 3 + len(item) > width:
                plot.append("\n" + row, style="dim")
                row = item
            else:
                row = f"{row} · {item}" if row else item
        plot.append("\n" + row, style="dim")
        return plot

    async def action_pareto(self) -> None:
        if self._pareto is not None:
            self._pareto = None
            self._show_chart()
            return
        if self._search is None:
            return
        try:
            data = await self._search()
        except Exception as exc:  # noqa: BLE001 - a locked or broken journal is shown, never a crash
            self.notify(f"flag search: {exc}", severity="error")
            return
        if data is None:
            self.notify("no flag search in this campaign yet (optui search run)", severity="warning")
            return
        self._pareto_data = data
        self._pareto = self._pareto_plot()
        self._show_chart()

    def _pareto_plot(self) -> Text:
        """The Pareto view sized to the screen (redrawn on a resize), the search's benchmark's
        pinned baseline marked."""
        data = self._pareto_data or {}
        bench = (data.get("spec") or {}).get("bench")
        base = next((r for r in reversed(self._rows or []) if r.is_baseline and r.group.bench == bench), None)
        point = None
        if base is not None:
            x, y = base.samples["ttft_ms.p99"].median, base.samples["output_throughput_tok_s"].median
            point = (x, y) if x is not None and y is not None else None
        # the chart's room: 60 % of the screen (its max-height), less its top border, at most 30 lines
        return pareto_text(self.app, data, width=max(self.size.width - 2, 24), lines=min(30, int(self.size.height * 0.6) - 1),
                           baseline=point)

    def on_resize(self) -> None:
        if self._pareto is not None:
            self._pareto = self._pareto_plot()
            self._show_chart()

    def action_pin(self) -> None:
        row = self.selected()
        if row is not None:
            self.post_message(BenchPanel.Pin(row))

    def action_close(self) -> None:
        self.dismiss(None)


def pareto_text(app, data: dict, *, width: int, lines: int, baseline: tuple[float, float] | None = None) -> Text:
    """The Pareto view (:func:`optui.core.search.pareto.pareto_view`) of a search's status
    dict in ``lines`` lines of ``width`` cells (the plot as tall as what else they hold leaves,
    :func:`optui.ui.plots.plot_text`):
    out tok/s against TTFT p99 ms, the front, the other feasible points, the infeasible ones
    and the ``baseline`` (TTFT p99 ms, out tok/s) of the search's benchmark when one is pinned;
    then the front's configurations, one line each."""
    from optui.core.search.pareto import FRONT, INFEASIBLE, OTHER, pareto_view
    from optui.core.search.spec import SearchSpec
    from optui.core.search.strategies import Trial, standings
    from optui.ui.plots import Series, plot_text

    try:
        spec = SearchSpec.model_validate(data.get("spec") or {})
    except ValueError as exc:
        return Text(f"search {data.get('search_id')}: its spec cannot be read here ({exc})", style="dim")
    view = pareto_view(standings(spec, [Trial.from_json(t) for t in data.get("trials") or []]))
    header = (f"search {data.get('search_id')} ({data.get('status')}): Pareto view, out tok/s against TTFT p99"
              + (f"; {view.unplotted} failed, not drawn" if view.unplotted else ""))
    text = Text(header + "\n", style="bold")
    # the header (wrapped), the y axis' name, the legend and the front's lines take the rest
    def rows(line: str) -> int:  # lines once wrapped
        return -(-len(line) // max(width, 1))

    height = lines - rows(header) - 2 - sum(rows(f"  {FRONT} {line}") for line in view.front)
    marks = ((FRONT, "Pareto front", "delta-good"), (OTHER, "feasible", "state-down"),
             (INFEASIBLE, "infeasible", "delta-bad"))
    series = [Series(name, tuple((x, y) for x, y, m in view.points if m == mark), mark, colour) for mark, name, colour in marks]
    x_max, y_max = view.x_max, view.y_max
    if baseline is not None and all(math.isfinite(v) for v in baseline):
        series.append(Series("baseline", (baseline,), BASELINE_MARK, "primary"))
        x_max, y_max = max(x_max, nice_max(baseline[0])), max(y_max, nice_max(baseline[1]))
    text.append_text(plot_text(app, series, x_label="TTFT p99 (ms)", y_label="out tok/s", width=width, height=height,
                               x_max=x_max, y_max=y_max))
    text.append("\n")
    for line in view.front:
        text.append(f"  {FRONT} {line}\n")
    return text
