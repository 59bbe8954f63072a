"""Benchmark actions: choose and run a preset (plain, sweep, repeats), abort the run, pin a
baseline, open the results view; the experiments the bench panel's rows name (their flag
diff vs the baseline), read off the event loop when the rows change."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING

from textual.app import SystemCommand

from optui.ui.client import SessionError
from optui.ui.colors import focus_now
from optui.ui.intents.base import Actions

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from textual.app import App

    from optui.core.bench.compare import Row
    from optui.core.journal.experiments import Experiment, ExperimentsUpdate


class BenchActions(Actions):
    """Benchmark actions: choose and run a preset (plain, sweep, repeats), abort the run,
    pin a baseline, open the results view."""

    def __init__(self, app: App) -> None:
        super().__init__(app)
        self._experiments: Mapping[str, Experiment] | None = None  # None: not read yet
        self._rows_read: tuple | None = None  # the rows (ids, experiment) they were read for
        self._reader: Callable[[], Awaitable[ExperimentsUpdate]] | None = None
        self._reading = self._again = False

    def experiments_of(self, rows: tuple[Row, ...]) -> Mapping[str, Experiment] | None:
        """The campaign's experiments by id, for the bench panel's ``rows`` (their change vs
        the baseline): those read so far (None: none yet). Rows other than those of the last
        read (a new result, another experiment) start a read on the journal thread, in a
        worker (one at a time; the panel is painted again when it is back)."""
        key = tuple((r.group.ids, r.group.experiment) for r in rows)
        if key != self._rows_read and any(r.group.experiment for r in rows):
            self._rows_read = key
            if self._reading:
                self._again = True
            else:
                self._reading = True
                self.run_worker(self._read_experiments(), group="bench-experiments", exit_on_error=False)
        return self._experiments

    async def _read_experiments(self) -> None:
        from optui.core.journal.experiments import named_by_row  # after the first frame (see OptuiApp.compose)

        while True:
            self._again = False
            if self._reader is None:
                self._reader = self.client.experiments_reader()
            try:
                update = await self._reader()
            except Exception:  # noqa: BLE001 - a locked or broken journal: the cells say ?, the results view tells why
                update = None
            if update is not None:
                # 'same flags as' names the row the experiments view lists (named_by_row)
                self._experiments = {x.id: x for x in named_by_row(update.experiments)}
            elif self._experiments is None:
                self._experiments = {}  # not readable: ? rather than … for ever
            if not self._again:
                break
        self._reading = False
        self.host.paint_now()

    def choose_and_run(self) -> None:
        self._choose_preset("Benchmark to run", self.start_bench)

    def _choose_preset(self, title: str, then: Callable[[str], None]) -> None:
        """Call ``then(name)`` with the preset to use: the only one for the selected
        server, else the operator's choice from a list of every configured preset, the
        selected server's first (the first of them, the default, highlighted)."""
        from optui.ui.screens.choice import ChoiceScreen

        benchmarks = self.client.config.benchmarks
        names = list(benchmarks)
        if not names:
            self.notify("no benchmarks configured ([benchmarks.NAME] in optui.toml)", severity="warning")
            return
        server = self.selected_server()
        preferred = [n for n in names if benchmarks[n].server == server] or names
        if len(preferred) == 1:
            then(preferred[0])
            return
        ordered = preferred + [n for n in names if n not in preferred]
        width = max(len(n) for n in ordered)
        choices = [(n, f"{n:<{width}}  {benchmarks[n].description or ''}  → {benchmarks[n].server}"
                       + ("  (default)" if i == 0 else "")) for i, n in enumerate(ordered)]

        def chosen(value: str | None) -> None:
            if value:
                then(value)

        self.push_screen(ChoiceScreen(f"{title}:", choices), chosen)

    def start_bench(self, name: str, *, sweep=None, repeats: int | None = None) -> None:
        """Start benchmark preset ``name`` (optionally a sweep / repeats). A plain run is
        repeated ``repeat`` times (config, default 3), as a benchmark is everywhere else: one
        run can only give ``untested noise``; a sweep repeats as its spec says. A server that is
        not READY is asked about first (Cancel focused): its numbers would not be its own
        (DEGRADED says why). The bench panel gets the focus first (its keys: A / ctrl+c
        abort) and the run starts after that repaint, so the full-screen redraw of a focus
        change never competes with a flood of output."""
        from optui.core.server.state import ServerState
        from optui.ui.screens.confirm import ConfirmScreen

        try:
            if repeats is None:
                repeats = 1 if sweep is not None else self.client.config.repeat_of(name)
            server = self.client.bench_server(name)
            status = self.client.server_status(server)
        except SessionError as exc:
            self.fail(exc)
            return
        if status.state is not ServerState.READY:
            why = f": {status.message}" if status.message else ""
            body = (f"{server} is {status.state.value.upper()}{why}.\n\nA benchmark now measures a server that is not "
                    f"healthy: its numbers are journaled with the state, and the run stops when the server stalls it.")

            def confirmed(ok: bool | None) -> None:
                if ok:
                    self._focus_and_start(name, sweep, repeats)

            self.push_screen(ConfirmScreen(f"Benchmark {name}: {server} is not ready", body, "Run anyway"), confirmed)
            return
        self._focus_and_start(name, sweep, repeats)

    def _focus_and_start(self, name: str, sweep, repeats: int) -> None:
        log = self.query_one("#bench-log")
        if self.app.focused is log:
            self._start_bench_now(name, sweep, repeats)
            return
        focus_now(log)
        # two refreshes: the focus repaint, then the footer's recompose for the panel's keys
        self.app.call_after_refresh(self.app.call_after_refresh, self._start_bench_now, name, sweep, repeats)

    def _start_bench_now(self, name: str, sweep, repeats: int) -> None:
        try:
            self.client.run_bench(name, sweep=sweep, repeats=repeats)
        except SessionError as exc:
            self.fail(exc)
            return
        self.host.paint_now()  # the panel shows the run (and offers its abort) before the next frame

    def abort(self) -> None:
        if self.client.abort_bench():
            self.notify("benchmark aborted: its process group is being killed")
        else:
            self.notify("no benchmark is running", severity="warning", timeout=3)

    def ask_sweep(self, name: str) -> None:
        """Prompt for the sweep of preset ``name`` (default: its configured sweep), run it."""
        from optui.core.bench.sweep import parse_sweep
        from optui.ui.screens.text_prompt import TextPrompt

        try:
            default = self.client.default_sweep(name).describe()
        except (SessionError, ValueError) as exc:
            self.fail(exc)
            return

        def typed(value: str | None) -> None:

            if not value or not value.strip():
                return
            try:
                spec = parse_sweep(value)
            except ValueError as exc:
                self.fail(exc)
                return
            self.start_bench(name, sweep=spec)

        self.push_screen(TextPrompt(f"Sweep {name}: concurrency list, or 'rate 1,2,4' (req/s); 'x3' repeats each point",
                                    default), typed)

    def start_repeats(self, name: str) -> None:
        """Run preset ``name`` ``repeat`` times (config, default 3) for median and spread."""
        try:
            self.client.bench_server(name)  # an unknown name: SessionError
            repeats = self.client.config.repeat_of(name)
        except SessionError as exc:
            self.fail(exc)
            return
        self.start_bench(name, repeats=repeats)

    def pin_baseline(self, row) -> None:
        """Pin the newest result of results row ``row`` (in a worker: the write runs on the
        journal thread and may wait out another process's lock there)."""
        self.run_worker(self._pin_baseline(row), group="pin-baseline", exit_on_error=False)

    async def _pin_baseline(self, row) -> None:
        """Pin the newest result of results row ``row`` as its workload's baseline."""
        if row is None:
            self.notify("no result to pin yet", severity="warning")
            return
        if not row.group.ok:
            self.notify("a failed run cannot be a baseline", severity="warning")
            return
        try:
            await self.client.pin_baseline(row.group.ids[-1])
        except SessionError as exc:
            self.fail(exc)
            return
        self.notify(f"baseline pinned: {row.group.bench or 'result'} #{row.group.ids[-1]} "
                    f"(c={row.group.concurrency if row.group.concurrency is not None else '-'})")

    def show_results(self) -> None:
        from optui.ui.screens.results import ResultsScreen

        self.push_screen(ResultsScreen(self.client.result_rows, self.client.experiments_reader(),
                                       search=self.client.search_status))

    def writable(self) -> bool:
        """False (and the operator told) in read-only mode: no benchmark, no baseline."""
        if self.client.snapshot().read_only:
            self.notify("read-only mode: benchmarks and baselines are disabled", severity="warning")
            return False
        return True

    def abort_asked(self) -> None:
        """The bench panel's abort (A, ctrl+c)."""
        if self.writable():
            self.abort()

    def sweep_asked(self) -> None:
        if self.writable():
            self._choose_preset("Benchmark to sweep", self.ask_sweep)

    def repeat_asked(self) -> None:
        if self.writable():
            self._choose_preset("Benchmark to repeat", self.start_repeats)

    def pin_asked(self, row) -> None:
        if self.writable():
            self.pin_baseline(row)


def bench_palette_commands(app, hints: Mapping[str, str] | None = None) -> Iterator[SystemCommand]:
    """Palette entries for benchmarks (per preset: run, sweep, repeat; pin; results), each
    naming its key from ``hints`` (binding id → key) where it has one."""
    from optui.ui.key_table import hinted

    hints = dict(hints or {})
    config = app.client.config
    actions = app.bench_actions
    if not app.client.snapshot().read_only:
        for name, bench in config.benchmarks.items():
            yield SystemCommand(f"Run benchmark {name}", hinted(bench.description or f"against {bench.server}", hints, "bench.run"),
                                partial(actions.start_bench, name))
            yield SystemCommand(f"Sweep benchmark {name}", hinted("One result per concurrency or request rate", hints, "bench.sweep"),
                                partial(actions.ask_sweep, name))
            yield SystemCommand(f"Repeat benchmark {name} x{config.repeat_of(name)}",
                                hinted("Median and spread of several runs", hints, "bench.repeat"),
                                partial(actions.start_repeats, name))
        yield SystemCommand("Pin selected result as baseline", hinted("The selected row of the bench results table", hints, "bench.pin"),
                            lambda: actions.pin_baseline(app.query_one("#bench").selected_row()))
    yield SystemCommand("Show benchmark results", hinted("All results: deltas vs baseline, repeats, scaling, chart", hints,
                                                         "bench.results_view"),
                        actions.show_results)
