"""The benchmark panel: progress line, results table (vs baseline) and streaming output.

Output goes to a bounded ``Log`` fed in batches by the app's flush timer (never one widget
update per line: 20k lines/s must not freeze the UI). Results show TTFT/ITL/TPOT/E2E and
output tok/s, with the change against the workload's baseline in %.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Log, Static

from optui.core.bench_result import DIRECTION, BenchResult
from optui.session.bench_run import BenchView
from optui.ui.colors import style
from optui.ui.widgets.meters import fmt_value, pct_bar

COLUMNS = (
    ("bench", "bench", 10),
    ("conc", "conc", 5),
    ("ok", "ok/fail", 8),
    ("out", "out tok/s", 10),
    ("ttft", "TTFT p50", 9),
    ("ttft99", "TTFT p99", 9),
    ("itl", "ITL p50", 8),
    ("tpot", "TPOT p50", 9),
    ("e2e", "E2E p50", 9),
    ("delta", "Δ out vs base", 14),
)


def delta_pct(value: float | None, base: float | None) -> float | None:
    """Relative change in % (None when either side is missing or base is 0)."""
    if value is None or base in (None, 0):
        return None
    return 100.0 * (value - base) / base


class BenchPanel(Vertical):
    """Progress + results + output log of the current benchmark run."""


    def __init__(self, *, max_lines: int = 10_000, id: str | None = None) -> None:
        super().__init__(id=id)
        self.max_lines = max_lines
        self.seen_lines = 0
        self._run_id: int | None = None
        self._rows_key: tuple = ()

    def compose(self) -> ComposeResult:
        yield Static("no benchmark yet — press b", id="bench-status", markup=False)
        table = DataTable(id="bench-results", cursor_type="row", zebra_stripes=True)
        yield table
        yield Log(max_lines=self.max_lines, id="bench-log", auto_scroll=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.display = False  # shown once there are results
        for key, label, width in COLUMNS:
            table.add_column(label, key=key, width=width)

    # ---------------------------------------------------------- output
    def new_run(self, run_id: int) -> None:
        """A new run started: clear the output and the line counter."""
        if run_id != self._run_id:
            self._run_id = run_id
            self.seen_lines = 0
            self.query_one(Log).clear()

    def append_lines(self, lines: list[str]) -> None:
        """Append a batch of output lines (one widget update)."""
        if lines:
            self.query_one(Log).write_lines(lines)

    # ---------------------------------------------------------- status
    def show(self, view: BenchView | None, results: list[tuple[str, BenchResult, BenchResult | None, bool]]) -> None:
        """Render the run's status line and the results table; ``results`` are
        ``(bench name, result, its baseline or None, is-the-baseline)``, newest last."""
        status = self.query_one("#bench-status", Static)
        status.update(self._status_text(view, bool(results)))
        key = tuple((n, id(r), id(b), is_base) for n, r, b, is_base in results)
        if key == self._rows_key:
            return
        self._rows_key = key
        table = self.query_one(DataTable)
        table.display = bool(results)
        table.clear()
        for i, (name, r, base, is_base) in enumerate(results):
            table.add_row(*self._cells(name, r, base, is_base), key=str(i))
        if results:
            table.move_cursor(row=len(results) - 1)

    def _status_text(self, view: BenchView | None, have_results: bool) -> Text:
        app = self.app
        if view is None:
            hint = "stored results below — b runs a benchmark" if have_results else "no benchmark yet — press b to run one"
            return Text(hint, style="dim")
        t = Text(no_wrap=True, overflow="ellipsis")
        st = {"running": "state-busy", "ok": "state-ready"}.get(view.status, "state-failed")
        t.append(f"{view.name} → {view.server}  ", style="bold")
        t.append(view.status.upper(), style=style(app, st, bold=True))
        p = view.progress
        if view.status == "running":
            if p.total:
                pct = 100.0 * p.done / p.total
                t.append("  ")
                t.append_text(pct_bar(16, pct, style(app, "gpu-util"), style(app, "meter-empty")))
                t.append(f" {p.done}/{p.total}")
            if p.rate:
                t.append(f"  {p.rate:.1f} req/s")
            if p.eta_s is not None:
                t.append(f"  ETA {p.eta_s:.0f}s")
            if not p.total and p.text:
                t.append("  " + p.text[-60:], style="dim")
            t.append("   x: abort", style="dim")
        elif view.error:
            t.append(f"  {view.error[:120]}", style=style(app, "error"))
        return t

    def _cells(self, name: str, r: BenchResult, base: BenchResult | None, is_base: bool) -> list:
        app = self.app
        conc = r.max_concurrency if r.max_concurrency is not None else r.workload.max_concurrency
        ok = f"{fmt_value(r.completed)}/{fmt_value(r.failed, na='-')}"
        if r.status != "ok":
            return [name, fmt_value(conc, na="-"), Text(r.status, style=style(app, "error")), "", "", "", "", "", "", ""]
        d = delta_pct(r.output_throughput_tok_s, base.output_throughput_tok_s if base else None)
        if base is None or is_base:
            delta = Text("baseline" if is_base else "—", style="dim")
        elif d is None:
            delta = Text("n/a", style="dim")
        else:
            good = d * DIRECTION["output_throughput_tok_s"] > 0
            delta = Text(f"{d:+.1f}%", style=style(app, "delta-good" if good else "delta-bad"))
        return [
            name,
            fmt_value(conc, na="-"),
            ok,
            fmt_value(r.output_throughput_tok_s, "{:,.1f}"),
            fmt_value(r.ttft_ms.get("median"), "{:.1f}"),
            fmt_value(r.ttft_ms.get("p99"), "{:.1f}"),
            fmt_value(r.itl_ms.get("median"), "{:.2f}"),
            fmt_value(r.tpot_ms.get("median"), "{:.2f}"),
            fmt_value(r.e2e_ms.get("median"), "{:.0f}"),
            delta,
        ]
