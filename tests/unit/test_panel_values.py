"""Each panel rendered from a value alone (no session): the frozen values of
:class:`~optui.session.state.SessionState` go in, the text on screen comes out, and the same
value again is not drawn again (the panels compare their input with ``==``)."""

from __future__ import annotations

import time
from pathlib import Path

from textual.app import App

from optui.core.bench.compare import Entry, build_rows, group_entries
from optui.core.bench.parse import parse_bench_output
from optui.core.gpu.samples import GpuSample, HostSnapshot, HostStatus
from optui.core.journal import events as ev
from optui.core.journal.events import Event
from optui.core.server.state import ServerState, ServerStatus
from optui.core.todo.items import TodoItem
from optui.session.snapshot_types import BenchView
from optui.session.state import BenchOutput, GpuHistoryWindow, GpuSeries
from optui.ui.colors import OPTUI_VARIABLES
from tests.helpers.pilot import wait_for

FIXTURES = Path(__file__).parents[1] / "fixtures"


class PanelApp(App):
    """One panel on a bare screen, with optui's theme variables."""

    def __init__(self, panel) -> None:
        super().__init__()
        self.panel = panel

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(OPTUI_VARIABLES)

    def compose(self):
        yield self.panel


def text_of(widget) -> str:
    return str(widget.render())


def counting(panel, method: str) -> list:
    """Count the calls of ``panel.method`` (the drawing step after the ``==`` check)."""
    calls = []
    original = getattr(panel, method)

    def wrapped(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    setattr(panel, method, wrapped)
    return calls


async def test_gpu_panel_renders_hosts_and_history_window():
    from optui.ui.widgets.gpu_panel import GpuPanel

    sample = GpuSample(0, "u0", "NVIDIA H200", mem_used_mib=40_000, mem_total_mib=143_771, util_gpu_pct=87.0,
                       temp_c=61.0, power_w=420.0, power_limit_w=700.0)
    hosts = (HostSnapshot("gpu-a", (sample,), taken_at=time.time(), status=HostStatus.LIVE),)
    history = GpuHistoryWindow(10, (GpuSeries("gpu-a", 0, (0.0, 50.0, 100.0) * 3, (10.0,) * 9),))
    panel = GpuPanel(id="gpus")
    async with PanelApp(panel).run_test(size=(120, 10)) as pilot:
        drawn = counting(panel, "_render_hosts")
        panel.show(hosts, history)
        await pilot.pause()
        text = text_of(panel)
        assert "H200" in text and "87%" in text and "61°C" in text
        assert any(c in text for c in "▁▄█")  # the utilization history's sparkline
        panel.show(hosts, GpuHistoryWindow(10, (GpuSeries("gpu-a", 0, (0.0, 50.0, 100.0) * 3, (10.0,) * 9),)))
        assert len(drawn) == 1  # an equal value (another object) is not drawn again


async def test_a_gpu_line_is_drawn_again_only_when_what_it_shows_changes():
    """A GPU source reads every second; an idle GPU's power moves in tenths of a W and its
    history window slides where its line does not: the line was drawn again each time (an
    idle H200 window: 55 times in 55 s for 10 changes). The noisy case (power 420.04 ->
    420.31 W, both printed 420) draws nothing; a warning colour crossing its threshold at the
    same printed temperature (84.6 -> 85.2 °C, both 85) and a history change draw again."""
    from optui.ui.widgets.gpu_panel import GpuPanel

    def hosts(**changes):
        fields = {"mem_used_mib": 40_000, "mem_total_mib": 143_771, "util_gpu_pct": 0.0, "temp_c": 40.0,
                  "power_w": 420.04, "power_limit_w": 700.0, **changes}
        return (HostSnapshot("gpu-a", (GpuSample(0, "u0", "NVIDIA H200", **fields),), taken_at=time.time(),
                             status=HostStatus.LIVE),)

    def history(util):
        return GpuHistoryWindow(10, (GpuSeries("gpu-a", 0, util, (10.0,) * len(util)),))

    panel = GpuPanel(id="gpus")
    async with PanelApp(panel).run_test(size=(120, 10)) as pilot:
        drawn = counting(panel, "_draw_gpu_line")
        panel.show(hosts(), GpuHistoryWindow())  # no history window yet: no charts on the line
        panel.show(hosts(), history((0.0,) * 9))  # the window came: the charts appear
        assert len(drawn) == 2, drawn
        drawn.clear()
        panel.show(hosts(power_w=420.31), history((0.0,) * 9))  # another reading, the same line
        await pilot.pause()
        assert len(drawn) == 0, drawn
        assert "420/700 W" in text_of(panel)
        panel.show(hosts(temp_c=84.6), history((0.0,) * 9))
        panel.show(hosts(temp_c=85.2), history((0.0,) * 9))  # 85 °C both, hot only the second
        assert len(drawn) == 2, drawn
        panel.show(hosts(temp_c=85.2), history((0.0,) * 8 + (100.0,)))  # the history shows a busy second
        assert len(drawn) == 3, drawn
        panel.show(hosts(temp_c=85.2, util_gpu_pct=7.0), history((0.0,) * 8 + (100.0,)))
        await pilot.pause()
        assert len(drawn) == 4 and "  7%" in text_of(panel), (drawn, text_of(panel))


async def test_server_panel_renders_statuses():
    from optui.ui.widgets.server_panel import ServerPanel

    servers = (ServerStatus("qwen", "sglang", "http://127.0.0.1:30000", state=ServerState.CRASHED,
                            crash_class="oom", crash_cause="CUDA out of memory", last_good_argv=("python", "-m", "x")),)
    panel = ServerPanel(id="servers")
    async with PanelApp(panel).run_test(size=(100, 10)) as pilot:
        panel.show(servers)
        await pilot.pause()
        text = text_of(panel)
        assert "qwen CRASHED" in text and "oom: CUDA out of memory" in text and "ctrl+r" in text


async def test_a_ready_rows_start_phases_come_longest_first():
    """A real vLLM's cold start at 120 columns read ``start: launch 25.6s · dist 27.3s …``:
    the row is cut at the pane's edge and its longest phase, the compile warm-up, was never
    seen (issue 32). The start's total and its longest phases come first; the order they ran
    in stays for the zoomed history."""
    from optui.core.server.state import PhaseMark
    from optui.ui.widgets.server_panel import ServerPanel, phase_steps

    phases = tuple(PhaseMark(p, t) for p, t in (("launching", 0.0), ("init_dist", 25.6), ("loading_weights", 52.9),
                                                ("compile", 53.4), ("kv_cache", 79.6), ("http_up", 82.0), ("ready", 86.0)))
    assert phase_steps(phases)[:2] == ["launch 25.6s", "dist 27.3s"]  # the order they ran in
    servers = (ServerStatus("vllm", "vllm", "http://127.0.0.1:8000", state=ServerState.READY, phases=phases),)
    panel = ServerPanel(id="servers")
    async with PanelApp(panel).run_test(size=(100, 10)) as pilot:
        panel.show(servers)
        await wait_for(pilot, lambda: "start" in text_of(panel), what=lambda: text_of(panel))
        text = text_of(panel)
        assert "start 86.0s: dist 27.3s · compile 26.2s · launch 25.6s" in text, text


async def test_a_crashed_one_line_row_names_its_class_and_the_bad_flag():
    """At 50 columns a bad_flag crash read ``✖ demo CRASHED --chunked-prefill-size 4096``
    (issue 34): the tuned flag, neither the class nor the flag the server refused."""
    from optui.ui.widgets.server_panel import ServerPanel

    argv = ("python", "-m", "sglang.launch_server", "--chunked-prefill-size", "4096", "--no-such-flag", "1")
    servers = (ServerStatus("demo", "sglang", "http://127.0.0.1:30000", state=ServerState.CRASHED, argv=argv,
                            configured_argv=argv[:3], crash_class="bad_flag",
                            crash_cause="launch_server.py: error: unrecognized arguments: --no-such-flag 1"),
               ServerStatus("qwen", "sglang", "http://127.0.0.1:30001", state=ServerState.CRASHED,
                            argv=(*argv[:3], "--mem-fraction-static", "0.99"), configured_argv=argv[:3],
                            crash_class="oom", crash_cause="torch.OutOfMemoryError: CUDA out of memory"))
    panel = ServerPanel(id="servers")
    async with PanelApp(panel).run_test(size=(48, 6)) as pilot:
        panel.show(servers)
        await pilot.pause()
        demo, qwen = text_of(panel).splitlines()[:2]
        assert demo.startswith("✖ demo CRASHED bad_flag --no-such-flag"), demo
        assert qwen.startswith("✖ qwen CRASHED oom"), qwen


async def test_a_ready_one_line_row_leads_with_the_flag_this_start_changed():
    """Walk of issue 34 at 50x30: ``--chunked-prefill-size 4096`` added on top of
    ``--max-running-requests 32``, the ready row read ``● demo READY  --max-running-requests 32 +1``,
    the flag just changed folded into ``+1`` (a ready server's last good flags are its own:
    there was no previous configuration to order by)."""
    from optui.ui.widgets.server_panel import ServerPanel

    base = ("python", "-m", "sglang.launch_server", "--model-path", "m")
    before = (*base, "--max-running-requests", "32")
    argv = (*before, "--chunked-prefill-size", "4096")
    now = time.time()
    servers = (ServerStatus("demo", "sglang", "http://127.0.0.1:30000", state=ServerState.READY, argv=argv,
                            configured_argv=base, last_good_argv=argv, prev_argv=before, ready_at=now, state_since=now),)
    panel = ServerPanel(id="servers")
    async with PanelApp(panel).run_test(size=(48, 4)) as pilot:
        panel.show(servers)
        await pilot.pause()
        row = text_of(panel).splitlines()[0]
        assert "--chunked-prefill-size 4096" in row, row
        assert row.index("--chunked-prefill-size") < row.index("+1"), row  # the other flag counted


async def test_todo_panel_renders_items_steps_and_subtitle():
    from optui.ui.widgets.todo_panel import TodoList, TodoPanel

    items = (TodoItem(1, "try fp8 kv cache", experiment={"server": "qwen", "set": {}}), TodoItem(2, "baseline"))
    panel = TodoPanel(id="todo")
    async with PanelApp(panel).run_test(size=(80, 10)) as pilot:
        drawn = counting(panel, "_render_rows")
        panel.show(items, {1: "restart"}, "⚗ 1 (S stops)")
        await pilot.pause()
        text = text_of(panel.query_one(TodoList))
        assert "⚗…restart" in text and "try fp8 kv cache" in text and "baseline" in text
        assert panel.border_subtitle == "⚗ 1 (S stops)"
        panel.show(tuple(items), {1: "restart"}, "⚗ 1 (S stops)")
        assert len(drawn) == 1


async def test_journal_panel_renders_events_newest_first():
    from optui.ui.widgets.journal_panel import JournalPanel

    events = (Event(1, time.time() - 5, ev.NOTE, None, "tui", data={"text": "first note"}),
              Event(2, time.time(), ev.NOTE, None, "tui", data={"text": "second note"}))
    panel = JournalPanel(id="journal")
    async with PanelApp(panel).run_test(size=(100, 10)) as pilot:
        drawn = counting(panel, "_render_events")
        panel.show(events)
        await pilot.pause()
        text = text_of(panel)
        assert text.index("second note") < text.index("first note")
        panel.show(tuple(events))
        assert len(drawn) == 1


async def test_bench_panel_renders_status_rows_and_new_output_lines():
    from textual.widgets import DataTable

    from optui.ui.widgets.bench_panel import BenchPanel

    results = parse_bench_output((FIXTURES / "bench" / "sglang_0.5.23_spec.log").read_text())
    groups = group_entries([Entry(i + 1, r, "c64", False) for i, r in enumerate(results)])
    rows = tuple(build_rows(groups, groups))
    view = BenchView("c64", "qwen", "running", time.time())
    panel = BenchPanel(id="bench")
    async with PanelApp(panel).run_test(size=(120, 24)) as pilot:
        panel.show(view, rows, BenchOutput("run-1", 2, ("line 1", "line 2")))
        panel.show(view, rows, BenchOutput("run-1", 3, ("line 1", "line 2", "line 3")))  # only line 3 is new
        await wait_for(pilot, lambda: list(panel.query_one("#bench-log").lines) == ["line 1", "line 2", "line 3"],
                       what=lambda: list(panel.query_one("#bench-log").lines))
        assert "c64 → qwen  RUNNING" in str(panel.query_one("#bench-status").render())
        table = panel.query_one(DataTable)
        assert table.row_count == len(rows) and table.get_row_at(0)[0] == "c64"
        assert list(panel.query_one("#bench-log").lines) == ["line 1", "line 2", "line 3"]
        assert panel.running
        panel.show(BenchView("c64", "qwen", "ok", time.time()), rows, BenchOutput("run-2", 1, ("other run",)))
        # a new run clears the log
        await wait_for(pilot, lambda: list(panel.query_one("#bench-log").lines) == ["other run"],
                       what=lambda: list(panel.query_one("#bench-log").lines))
        assert not panel.running
        # the step of a run: repeats alone say it once (it read "run 1/3 run 1/3"), a sweep's point and its repeat
        from dataclasses import replace
        running = BenchView("c64", "qwen", "running", time.time())
        # where the run is comes first (a side pane cut 'run 2/3' off the end); A, the key that
        # aborts (x is the todo panel's run), last
        for points_done, total, label, shown in ((0, 3, "run 1/3", "RUNNING  run 1/3  "),
                                                 (3, 6, "c=4 run 1/3", "RUNNING  point 4/6  c=4 run 1/3  "),
                                                 (1, 2, "c=4", "RUNNING  point 2/2  c=4  ")):
            panel.show(replace(running, points_done=points_done, points_total=total, point=label), rows,
                       BenchOutput("run-3", 0, ()))
            await wait_for(pilot, lambda shown=shown: shown in str(panel.query_one("#bench-status").render()),
                           what=lambda: str(panel.query_one("#bench-status").render()))
            status = str(panel.query_one("#bench-status").render())
            assert shown in status and status.count("run ") == label.count("run ") and status.endswith("   A: abort"), status


async def test_the_bench_panel_judges_a_change_with_the_verdicts_restart_spread():
    """`-6.4% ✗` in the bench panel against `same` (restarts ±7.2 %) in the verdict."""
    from textual.widgets import DataTable

    from optui.core.bench.compare import judge
    from optui.core.journal.experiments import Experiment, WorkloadOutcome
    from optui.ui.widgets.bench_panel import BenchPanel
    from tests.unit.test_bench_compare import result

    entries = [Entry(i, result(v, run="r1"), "sweep", False, "exp-0002") for i, v in enumerate((100.0, 101.0, 99.5), 1)]
    entries += [Entry(i, result(v, run="r2"), "sweep", False, "exp-0009") for i, v in enumerate((93.6, 94.0, 93.2), 4)]
    groups = group_entries(entries)
    rows = tuple(build_rows(groups, groups))
    verdict = judge([93.6, 94.0, 93.2], [100.0, 101.0, 99.5], +1, restart_spread_pct=14.4)
    outcome = WorkloadOutcome(groups[-1].workload_key, "random", "sweep", (), {}, {}, "exp-0002", None, (), verdict)
    experiments = {x.id: x for x in (Experiment("exp-0002", "demo", 0.0, "tui", "", (), (), ()),
                                     Experiment("exp-0009", "demo", 1.0, "tui", "", (), (), (), workloads=(outcome,)))}
    panel = BenchPanel(id="bench")
    async with PanelApp(panel).run_test(size=(200, 24)) as pilot:
        row = lambda: " ".join(map(str, panel.query_one(DataTable).get_row_at(1)))  # noqa: E731
        panel.show(None, rows)
        await wait_for(pilot, lambda: panel.query_one(DataTable).row_count > 1 and "-6.4% ✗" in row(), what=row)  # the repeats' noise alone
        panel.show(None, rows, experiments=experiments)
        await wait_for(pilot, lambda: "~-6.4%" in row(), what=row)
        cells = " ".join(map(str, panel.query_one(DataTable).get_row_at(1)))
        assert "~-6.4%" in cells and "✗" not in cells, cells


def test_bench_output_since():
    out = BenchOutput("r", 10, ("l8", "l9", "l10"))  # 10 lines, the newest 3 buffered
    assert out.since(10) == ()
    assert out.since(9) == ("l10",)
    assert out.since(0) == ("l8", "l9", "l10")  # fell behind the buffer: its tail


async def test_the_cache_share_warning_shows_on_every_delta_cell():
    """The ⚠ (the prefix cache served the run otherwise than its baseline) was left off
    ``?`` and ``~`` cells (issue 34)."""
    from textual.widgets import Static

    from optui.core.bench.compare import Delta, Row
    from optui.ui.widgets.bench_panel import delta_cell

    app = PanelApp(Static())
    async with app.run_test(size=(40, 5)):
        cells = {}
        for verdict, good in (("inconclusive", True), ("untested noise", True), (None, None), ("better", True),
                              ("worse", False)):
            row = Row(None, None, False, deltas={"m": Delta(3.0, verdict, good)},  # type: ignore[arg-type]
                      cache_note="prefix cache 97% vs 0% in the baseline")
            cells[verdict] = delta_cell(app, row, "m").plain
        assert cells == {"inconclusive": "~+3.0% ⚠", "untested noise": "?+3.0% ⚠", None: "+3.0% ⚠",
                         "better": "+3.0% ✓ ⚠", "worse": "+3.0% ✗ ⚠"}
