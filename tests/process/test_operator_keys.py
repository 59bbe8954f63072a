"""Keys a new operator relies on (issue 20, "keys"): refresh while paused, keys that restart
servers ask first, the run-all queue's failures, one key table, the benchmark picker —
the real app (Pilot) over real sessions (the demo GPU rack, the demo server on loopback)."""

from __future__ import annotations

import pytest

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(120)


def toasts(app) -> list[str]:
    """The notifications shown so far (their messages)."""
    return [n.message for n in app._notifications]


async def test_ctrl_l_refreshes_once_while_paused(tmp_path):
    """``p`` pauses the GPU refresh; ``ctrl+l`` still reads every host once (one fresh
    frame), and the pause holds after it."""
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "demo"\ninterval_s = 60\n')  # no read of its own for 60 s
    app = OptuiApp(Session(load_config(cfg)), title="test")
    async with app.run_test(size=(120, 40)) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.gpus.snapshots["local"].taken_at > 0)
        await pilot.press("p")
        await wait_for(pilot, lambda: s.paused and "PAUSED" in str(app.query_one("#status-line").render()))
        before = s.gpus.snapshots["local"].taken_at
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: s.gpus.snapshots["local"].taken_at > before, timeout=10,
                       what="a GPU read after ctrl+l while paused")
        assert s.paused and "PAUSED" in str(app.query_one("#status-line").render())
        await pilot.press("q")


async def test_x_and_X_show_the_restart_and_ask_first(tmp_path):
    """``x`` (one item) and ``X`` (the queue) restart a server: both show the flag diff and
    exactly what will run, Cancel focused; cancelled, nothing runs."""
    from optui.ui.screens.confirm import ConfirmScreen
    from tests.process.test_todo_runs import demo_campaign, make_app

    app = make_app(demo_campaign(tmp_path))
    s = app.session
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: app.panels_mounted and app.client is not None)
        one = s.todos.add("More concurrent requests", "high", {"server": "demo", "set": {"--max-running-requests": "8"},
                                                              "bench": ["tiny"]})
        s.todos.add("Find the OOM edge", "medium", {"server": "demo", "set": {"--mem-fraction-static": "0.99"}, "bench": ["tiny"]})
        await pilot.press("3", "home")
        await wait_for(pilot, lambda: "More concurrent" in app.query_one("#todo-list").render().plain)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="a question before x restarts")
        body = str(app.screen.query_one("#confirm-body").render())
        title = str(app.screen.query_one("#confirm-title").render())
        assert f"#{one.id}" in title and "restarts demo" in title
        assert "~ --max-running-requests: 4 → 8" in body and "will run:" in body and "then: tiny" in body
        assert "--max-running-requests 8" in body  # the exact command
        assert app.focused.id == "cancel"
        await pilot.press("enter")  # Cancel is focused
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="a question before X restarts")
        body = str(app.screen.query_one("#confirm-body").render())
        assert "Run 2 experiments" in str(app.screen.query_one("#confirm-title").render())
        assert "~ --max-running-requests: 4 → 8" in body and "--mem-fraction-static 0.99" in body
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert not s.todo_runs.running and not s.journal.events(types=["todo.run.started"])
        await pilot.press("q")


async def test_X_shows_each_item_against_the_flags_the_items_before_it_leave(tmp_path):
    """The ``X`` confirm diffed every item against the flags running now, although item 1
    will have changed them when item 2 starts (issue 34); a ``base = "current"`` item builds
    on them too."""
    from optui.ui.screens.confirm import ConfirmScreen
    from tests.process.test_todo_runs import demo_campaign, make_app

    app = make_app(demo_campaign(tmp_path))
    s = app.session
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: app.panels_mounted and app.client is not None)
        one = s.todos.add("More concurrent requests", "high", {"server": "demo", "set": {"--max-running-requests": "8"},
                                                              "bench": ["tiny"]})
        two = s.todos.add("Smaller chunks on top", "medium", {"server": "demo", "set": {"--chunked-prefill-size": "512"},
                                                             "base": "current", "bench": ["tiny"]})
        three = s.todos.add("Find the OOM edge", "medium", {"server": "demo", "set": {"--mem-fraction-static": "0.99"},
                                                           "bench": ["tiny"]})
        await wait_for(pilot, lambda: len(app.client.snapshot().todos) == 3)
        plans = app.client.plan_experiments(None)
        assert [p.todo_id for p in plans] == [one.id, two.id, three.id]
        assert plans[1].old_argv == plans[0].argv and plans[2].old_argv == plans[1].argv
        assert "--max-running-requests" in plans[1].argv and plans[1].argv[plans[1].argv.index("--max-running-requests") + 1] == "8"
        await pilot.press("3", "X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="a question before X restarts")
        body = str(app.screen.query_one("#confirm-body").render())
        first, second, third = (body[body.index(f"#{t.id} "):] for t in (one, two, three))
        assert first.splitlines()[2:4] == ["", "changes:"]  # the first against the flags running now
        assert "~ --max-running-requests: 4 → 8" in first[:first.index("will run:")]
        second = second[:second.index("will run:")]
        assert f"changes from #{one.id}'s flags:" in second and "--chunked-prefill-size" in second
        assert "--max-running-requests" not in second  # item 1 already set it; current keeps it
        third = third[:third.index("will run:")]
        assert f"changes from #{two.id}'s flags:" in third
        assert "~ --max-running-requests: 8 → 4" in third  # base config: back to the configured 4
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        helps = {c.title: c.help for c in app.get_system_commands(app.screen)}  # the palette names the keys
        assert helps["Restart demo with new flags"] == "Open the flag editor for demo — key r"
        assert helps["Roll back demo to last good flags"].endswith("— key ^r")
        assert helps["Run all pending experiments"].endswith("— key X in Todo")
        assert helps["Run benchmark tiny"].endswith("— key b") and helps["Sweep benchmark tiny"].endswith("— key s in Bench")
        await pilot.press("q")


async def test_confirm_queue_false_runs_X_without_asking(tmp_path):
    """``[todo] confirm_queue = false``: ``X`` queues at once (``x`` still asks)."""
    from optui.ui.screens.confirm import ConfirmScreen
    from tests.process.test_todo_runs import demo_campaign, make_app

    cfg = demo_campaign(tmp_path)
    cfg.write_text(cfg.read_text() + "\n[todo]\nconfirm_queue = false\n")
    app = make_app(cfg)
    s = app.session
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: app.panels_mounted and app.client is not None)
        s.todos.add("Baseline", "high", {"server": "demo", "bench": ["tiny"]})
        await pilot.press("3", "x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="x asks whatever confirm_queue says")
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await pilot.press("X")
        await wait_for(pilot, lambda: s.todo_runs.running, what="X queued without a question")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("S")
        await wait_for(pilot, lambda: not s.todo_runs.running, timeout=60)
        await pilot.press("q")


def test_no_key_means_abort_in_one_panel_and_run_in_another():
    """The keys that restart a server from the todo panel (x, X) are bound to nothing else
    anywhere on the dashboard, and neither are the keys that abort a benchmark."""
    from optui.ui.app import OptuiApp
    from optui.ui.widgets.bench_panel import BenchPanel
    from optui.ui.widgets.gpu_panel import GpuPanel
    from optui.ui.widgets.journal_panel import JournalPanel
    from optui.ui.widgets.server_panel import ServerPanel
    from optui.ui.widgets.todo_panel import TodoList, TodoPanel

    bindings = [b for cls in (OptuiApp, BenchPanel, GpuPanel, JournalPanel, ServerPanel, TodoPanel, TodoList)
                for b in cls.BINDINGS]
    keys_of: dict[str, set[str]] = {}
    for b in bindings:
        for key in b.key.split(","):
            keys_of.setdefault(key.strip(), set()).add(b.id)
    guarded = {"todo.run", "todo.queue_all", "bench.abort", "bench.panel_abort", "bench.panel_abort_ctrl_c"}
    same_verb = {frozenset({"bench.abort", "bench.panel_abort"}), frozenset({"bench.abort", "bench.panel_abort_ctrl_c"})}
    for key, ids in keys_of.items():
        if ids & guarded and len(ids) > 1:
            assert frozenset(ids) in same_verb, f"{key!r} means {sorted(ids)}"


async def test_a_failed_queued_experiment_offers_the_rollback_and_is_not_requeued(tmp_path):
    """The queue's item fails (``oom``) and leaves the server crashed: the rollback is offered
    as after a failed ``r`` (``rollback = "offer"``, the default), and a later ``X`` leaves the
    known-failing item out, saying so; ``x`` on it still runs it again when asked."""
    from optui.ui.screens.confirm import ConfirmScreen
    from tests.process.test_todo_runs import confirm, demo_campaign, make_app, ready

    app = make_app(demo_campaign(tmp_path))
    s = app.session
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: ready(s) and s.servers["demo"].status.last_good_argv)
        good = tuple(s.servers["demo"].status.argv)
        oom = s.todos.add("Find the OOM edge", "medium", {"server": "demo", "set": {"--mem-fraction-static": "0.99"},
                                                         "bench": ["tiny"]})
        await pilot.press("3", "X")
        await confirm(pilot)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and "roll back" in
                       str(app.screen.query_one("#confirm-title").render())
                       and "oom" in str(app.screen.query_one("#confirm-body").render()), timeout=60,
                       what="the rollback offer")
        assert s.todo_runs.outcomes[-1].status == "failed" and s.todo_runs.outcomes[-1].crash_class == "oom"
        await pilot.press("y")
        await wait_for(pilot, lambda: ready(s) and tuple(s.servers["demo"].status.argv) == good, timeout=60)
        assert s.journal.todo(oom.id).run["status"] == "failed"
        await pilot.press("3", "X")  # the only pending experiment failed last time: nothing is queued
        await wait_for(pilot, lambda: any("failed last time" in text and f"#{oom.id} oom" in text for text in toasts(app)),
                       what=lambda: toasts(app))
        assert not isinstance(app.screen, ConfirmScreen) and not s.todo_runs.running
        assert len(s.journal.events(types=["todo.run.started"])) == 1
        await pilot.press("home", "x")  # asked for by name: it may run again
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#confirm-body")),
                       what="x on the failed item")
        body = str(app.screen.query_one("#confirm-body").render())  # saying what happened last time
        assert f"⚠ its last run failed (todo-{oom.id}.1): oom" in body, body
        await pilot.press("n")
        await pilot.press("q")


async def test_b_offers_the_configured_benchmarks_as_a_list(tmp_path):
    """``b`` with several benchmarks: a list of every configured one (name, description,
    server), the default first and highlighted; ↓ Enter runs the next one; Esc runs none."""
    from optui.ui.screens.choice import ChoiceScreen
    from tests.process.test_todo_runs import demo_campaign, make_app, ready

    app = make_app(demo_campaign(tmp_path))
    s = app.session
    names = list(s.config.benchmarks)
    assert len(names) >= 2 and names[-1] == "tiny"
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: ready(s))
        await pilot.press("2", "b")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen), what="a list of benchmarks")
        choices = app.screen.query_one("#choice-list")
        await wait_for(pilot, lambda: choices.option_count == len(names))
        shown = [choices.get_option_at_index(i) for i in range(choices.option_count)]
        assert [o.id for o in shown] == names  # all of them for demo: the configured order, the default first
        assert choices.highlighted == 0 and "(default)" in str(shown[0].prompt)
        assert "8 short requests" in str(shown[-1].prompt)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ChoiceScreen))
        assert s.benches.current is None
        await pilot.press("2", "b")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen))
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: s.benches.current is not None, what="the chosen benchmark running")
        assert s.benches.current.name == names[1]
        await pilot.press("A")
        await wait_for(pilot, lambda: not s.benches.running, timeout=30)
        await pilot.press("q")


def _bar_items(app) -> list[str]:
    """The key bar's items (``"A Abort"``), the palette hint left out."""
    from optui.ui.widgets.key_bar import KeyBar

    return [item.strip() for item in app.query_one(KeyBar)._text.plain.split("  ")
            if item.strip() and item.strip() != "^p palette"]


async def _compare_help_palette_and_bar(pilot) -> list:
    """Open the help on the focus of the moment and check that it, the key bar and the
    palette say what the key table says; the table's rows."""
    from optui.ui.key_table import GLOBAL, PALETTE_IDS, key_rows
    from optui.ui.widgets.key_help import KeyHelp

    app = pilot.app
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: app.screen.query(KeyHelp))
    await pilot.pause(0.1)
    rows = key_rows(app.screen)  # with the help open (Esc closes it)
    assert any(r.binding_id == "app.close_help" for r in rows)
    wheres = {r.where for r in rows}
    lines = [line.strip() for line in str(app.screen.query_one(KeyHelp).query_one("Static").render()).splitlines() if line.strip()]
    assert sorted(line for line in lines if line not in wheres) == sorted(f"{r.keys} {r.label}" for r in rows)
    # the bar: the shown keys, and the help's way out first (never a key the table lacks)
    bar = _bar_items(app)
    assert bar[0] == "esc Close help" and sorted(bar[1:]) == sorted({f"{r.keys.split(' ')[0]} {r.label}" for r in rows if r.shown})
    commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
    for r in rows:
        if r.binding_id in PALETTE_IDS:
            assert (commands.get(r.label) or "").endswith(f"key {r.keys}"), (r, sorted(commands))
        elif r.where != GLOBAL:  # every key of the focused panel too, by its label, with its key (issue 34)
            assert commands.get(f"{r.where}: {r.label}") == f"key {r.keys} in {r.where}", (r, sorted(commands))
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: not app.screen.query(KeyHelp))
    return rows


async def test_help_palette_and_key_bar_read_one_table(tmp_path):
    """Help (``?``), command palette and key bar list the same keys with the same words, on
    every panel; the palette has the command log (``@``) and says Zoom, not Maximize."""
    from tests.helpers.snapshot_campaign import make_app, settle

    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        for panel in "12345":
            await pilot.press(panel)
            await pilot.pause(0.2)
            rows = await _compare_help_palette_and_bar(pilot)
            assert {r.label for r in rows} >= {"Quit", "Help", "Zoom", "Command log"}
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Command log" in titles and "Zoom" in titles and "Maximize" not in titles and "Keys" not in titles
        assert len(titles) == len(set(titles)), titles
        # every entry that has a key names it (issue 34: r, ctrl+r, l, v, b were missing)
        helps = {c.title: c.help for c in app.get_system_commands(app.screen)}
        keyed = {"Restart ": "key r", "Roll back ": "key ^r", "Show log of ": "key l", "Run benchmark ": "key b",
                 "Show benchmark results": "key v", "Sweep benchmark ": "key s in Bench",
                 "Run all pending experiments": "key X in Todo"}
        matched = set()
        for prefix, key in keyed.items():
            found = [(t, h) for t, h in helps.items() if t.startswith(prefix) and " preset " not in t]
            assert all(h.endswith(f"— {key}") for _, h in found), (prefix, found)
            matched |= {prefix} if found else set()
        assert matched >= {"Show log of ", "Show benchmark results", "Run all pending experiments"}, matched
        # the focused panel's keys, which only the help listed (issue 34): each by its label and key
        for panel, expected in (("3", {"Todo: Add": "a", "Todo: Edit": "e ⏎", "Todo: Run experiment": "x",
                                       "Todo: Run all": "X"}),
                                ("4", {"Bench: Sweep": "s", "Bench: Repeat": "R", "Bench: Pin baseline": "B"}),
                                ("5", {"Journal: Type": "t", "Journal: Server": "s", "Journal: Experiment": "e",
                                       "Journal: Clear": "c"})):
            await pilot.press(panel)
            await pilot.pause(0.2)
            helps = {c.title: c.help for c in app.get_system_commands(app.screen)}
            where = next(iter(expected)).split(":")[0]
            assert {t: helps.get(t) for t in expected} == {t: f"key {k} in {where}" for t, k in expected.items()}
        await pilot.press("3")  # the todo list takes E for its own: the palette says how to reach the global one
        await pilot.pause(0.2)
        helps = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert helps["Experiments"] == ("every experiment: its flags, runs and verdict per workload — key E from "
                                        "another panel (the focused one uses E for its own)")
        # the walk: 'Experiments' and 'Command log' said only their key, not what they open
        assert helps["Command log"].startswith("every command optui ran") and helps["Command log"].endswith("— key @")
        await pilot.press("q")


async def test_help_in_the_bench_panel_says_ctrl_c_aborts_while_a_benchmark_runs(tmp_path):
    """While a benchmark runs, ctrl+c in the bench panel aborts it: the help says so (not
    "Copy"), and so do the key bar (A) and the palette (Abort bench)."""
    from tests.process.test_bench_ui import make_app, run_anyway

    app = make_app(tmp_path, "--silent", "300")
    benches = app.session.benches
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("b")
        await run_anyway(pilot)
        await wait_for(pilot, lambda: benches.running and app.focused.id == "bench-log")
        await wait_for(pilot, lambda: "A Abort" in _bar_items(app))
        rows = await _compare_help_palette_and_bar(pilot)
        (abort,) = [r for r in rows if r.binding_id == "bench.panel_abort"]
        assert abort.keys.split(" ") == ["A", "^c"] and abort.label == "Abort" and abort.where == "Bench"
        assert not [r for r in rows if "^c" in r.keys.split(" ") and r is not abort]  # not also "Copy"
        assert "Abort bench" in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("A")
        await wait_for(pilot, lambda: not benches.running, timeout=30)
        await pilot.press("q")


async def test_a_failed_queued_experiment_under_rollback_auto_is_rolled_back(tmp_path):
    """``rollback = "auto"``: the queue's failed restart is rolled back at once, as a failed
    ``r`` would be, and the run's summary says so (no offer is asked)."""
    from optui.ui.screens.confirm import ConfirmScreen
    from tests.process.test_todo_runs import confirm, demo_campaign, make_app, ready

    cfg = demo_campaign(tmp_path)
    cfg.write_text(cfg.read_text().replace("[servers.demo]\n", '[servers.demo]\nrollback = "auto"\n', 1))
    app = make_app(cfg)
    s = app.session
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: ready(s) and s.servers["demo"].status.last_good_argv)
        good = tuple(s.servers["demo"].status.argv)
        s.todos.add("Find the OOM edge", "medium", {"server": "demo", "set": {"--mem-fraction-static": "0.99"},
                                                    "bench": ["tiny"]})
        await pilot.press("3", "X")
        await confirm(pilot)
        await wait_for(pilot, lambda: s.todo_runs.outcomes and not s.todo_runs.running, timeout=90)
        (outcome,) = s.todo_runs.outcomes
        assert outcome.status == "failed" and outcome.crash_class == "oom" and outcome.rollback_offer is None
        assert "rolled back to the last good flags" in outcome.summary, outcome.summary
        await wait_for(pilot, lambda: ready(s) and tuple(s.servers["demo"].status.argv) == good, timeout=60)
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("q")


@pytest.mark.usefixtures("snapshot_clock")
def test_help_snapshot_beside_the_bench_panel_at_60x40(snap_compare, tmp_path):
    """The help in a tmux side pane: the bench panel's keys, then the global ones, one line each."""
    from tests.helpers.snapshot_campaign import make_app, settle

    async def open_help(pilot) -> None:
        await settle(pilot)
        await pilot.press("4", "question_mark")
        await pilot.pause(0.3)
        pilot.app.clear_notifications()  # the seeded GPU's memory alert: its toast times out at no fixed frame
        await pilot.pause(0.1)

    assert snap_compare(make_app(tmp_path), terminal_size=(60, 40), run_before=open_help)


async def test_at_50x30_the_rollback_offer_shows_what_it_does_and_its_buttons(tmp_path):
    """Issue 20's verifier: at 50x30 the offer after a todo run's oom filled with the log's
    traceback, the diff, the command and the buttons off screen with no way to scroll, and a
    toast over it: ``y`` rolled back blind. The diff and both buttons show, no toast covers
    them, the log's last lines are below and reached with the arrows."""
    from textual.widgets import Button
    from textual.widgets._toast import Toast

    from optui.ui.screens.confirm import ConfirmScreen
    from tests.process.test_todo_runs import confirm, demo_campaign, make_app, ready

    app = make_app(demo_campaign(tmp_path))
    s = app.session
    async with app.run_test(size=(50, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: ready(s) and s.servers["demo"].status.last_good_argv)
        s.todos.add("Find the OOM edge", "medium", {"server": "demo", "set": {"--mem-fraction-static": "0.99"},
                                                    "bench": ["tiny"]})
        await pilot.press("3", "X")
        await confirm(pilot)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and "roll back" in
                       str(app.screen.query_one("#confirm-title").render()), timeout=60, what="the rollback offer")
        await pilot.pause(1.2)  # the todo run's outcome and the session's alerts have come
        dialog = app.screen
        screen_region = dialog.region
        buttons = [b.region for b in dialog.query(Button)]
        assert len(buttons) == 2 and all(screen_region.contains_region(b) for b in buttons), (buttons, screen_region)
        covering = [(t.region, str(t.render())) for t in dialog.query(Toast) if any(t.region.overlaps(b) for b in buttons)]
        assert covering == [], covering
        body = dialog.query_one("#confirm-body")
        scroll = body.parent
        seen = body.render().plain.splitlines()
        assert seen[0] == "The restart failed: oom" and any("--mem-fraction-static" in line for line in seen[:6]), seen
        assert "the last lines of its log:" in body.render().plain
        assert scroll.scroll_y == 0
        await pilot.press("pagedown")
        assert scroll.max_scroll_y == 0 or scroll.scroll_y > 0
        await pilot.press("n")
        await pilot.pause(0.3)  # what came while it was open is said once it closed
        assert any("held while the dialog was open (" in str(t.render()) and "oom" in str(t.render())
                   for t in app.screen.query(Toast)), \
            [str(t.render()) for t in app.screen.query(Toast)]
        await pilot.press("q")


async def test_v_opens_the_results_view_from_any_panel(tmp_path):
    """A new user pressed v in the todo panel and nothing happened (it was the bench panel's
    key only); E already worked from anywhere."""
    from tests.process.test_todo_runs import demo_campaign, make_app

    app = make_app(demo_campaign(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.panels_mounted)
        for panel in ("3", "1", "5"):
            await pilot.press(panel, "v")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "ResultsScreen", what=lambda: type(app.screen).__name__)
            await pilot.press("escape")
            await wait_for(pilot, lambda: type(app.screen).__name__ != "ResultsScreen")
        await pilot.press("q")


#: screen module → how the operator opens it on the snapshot campaign (keys, or a push), the
#: bar's first item (the way to leave it, every key bound to it) and a key of its own it shows
DIALOG_BARS = {
    "confirm": ("push_confirm", "esc/n Cancel", "y Confirm"),
    "choice": ("push_choice", "esc Cancel", None),
    "text_prompt": (["n"], "esc Cancel", None),
    "details": (["m"], "esc/q/⏎ Close", None),
    "event_details": (["5", "enter"], "esc/q/⏎ Close", "j Raw JSON"),
    "command_log": (["at"], "esc/q/@ Close", None),
    "server_log": (["2", "l"], "esc/q/⏎ Close", "h Hide/show probe lines"),
    "flag_editor": ("push_flag_editor", "esc Cancel", "^s Review & restart"),
    "experiment_editor": (["3", "down", "E"], "esc Cancel", "^s Save"),
    "results": (["4", "v"], "esc/q Close", "B Pin baseline"),
    "experiments": (["E"], "esc/q Close", "k Keep"),
    "agent_requests": ("push_agent_request", "esc Later", "a Approve"),
}


@pytest.mark.parametrize("size", [(200, 50), (60, 40)])
async def test_a_dialogs_key_bar_shows_its_own_keys_the_way_out_first(tmp_path, size):
    """Issue 34: with a dialog or a view open, the bottom line showed the dashboard's ``q Quit``
    and ``r Restart`` (which do not work there); it shows that screen's keys, first how to leave
    it with every key that does, at 200x50 and in a 60x40 side pane."""
    import time

    from textual.widgets import Input

    from optui.ui.key_table import LEAVE_IDS, key_rows
    from optui.ui.widgets.key_bar import KeyBar
    from tests.helpers.snapshot_campaign import make_app, settle
    from tests.process import test_snapshots_screens as screens

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for module, (open_it, leave, own) in DIALOG_BARS.items():
            screen_class = screens.CASES[module][0]
            if isinstance(open_it, str):
                getattr(screens, open_it)(app)
            else:
                await pilot.press(*open_it)
            deadline = time.monotonic() + 10
            while type(app.screen).__name__ != screen_class and time.monotonic() < deadline:
                await pilot.pause(0.05)
            screen = app.screen
            assert type(screen).__name__ == screen_class, (module, [type(s).__name__ for s in app.screen_stack])
            await pilot.pause(0.3)
            bottom = [strip.text for strip in screen._compositor.render_strips()][-1]
            bar = screen.query_one(KeyBar)
            assert bar.region.y == size[1] - 1 and bar.region.width == size[0], (module, bar.region)
            assert bottom.startswith(leave + "  ") or bottom.rstrip() == leave, (module, bottom)
            quits = module == "agent_requests"  # its own q quits optui (a request may wait while you leave)
            assert ("q Quit" in bottom) == quits and "Restart" not in bottom, (module, bottom)
            assert len(bottom.rstrip()) <= size[0]
            if own and size[0] > 100:
                assert own in bottom, (module, bottom)
            leaving = [r for r in key_rows(screen) if r.binding_id in LEAVE_IDS]
            assert leaving, module  # every screen's way out is one of the ids the bar puts first
            for field in screen.query(Input):
                field.cursor_blink = False
            await pilot.press("escape")
            deadline = time.monotonic() + 10
            while app.screen is screen and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert len(app.screen_stack) == 1, (module, [type(s).__name__ for s in app.screen_stack])
        await pilot.press("q")


@pytest.mark.parametrize("size", [(200, 50), (50, 30)])
async def test_the_palettes_key_bar_is_its_own(tmp_path, size):
    """Issue 34: under the command palette the bottom line was the dashboard's (``a Add  space
    Status  q Quit``), none of which works there; it is the palette's own, the way out first."""
    from optui.ui.widgets.key_bar import KeyBar
    from tests.helpers.snapshot_campaign import make_app, settle

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("3", "ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PaletteScreen", what=lambda: app.screen_stack)
        screen = app.screen
        bar = screen.query_one(KeyBar)
        await wait_for(pilot, lambda: bar.render().plain.strip(), what=lambda: bar.render().plain)
        bottom = [strip.text for strip in screen._compositor.render_strips()][-1]
        assert bar.region.y == size[1] - 1 and bar.region.width == size[0], bar.region
        assert bottom.rstrip() == "esc Close  ↑/↓ Choose  ⏎ Run", bottom
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1, what=lambda: app.screen_stack)
        await pilot.press("q")


@pytest.mark.parametrize("size", [(200, 50), (50, 30)])
async def test_the_help_panels_key_bar_says_how_to_close_it_first(tmp_path, size):
    """Issue 34's walk: with the help (``?``) open the bar read ``q Quit  ? Help`` at 50x30
    (``esc Close help`` in the middle of its list at 200): the way out comes first, and goes
    when the help closes."""
    from optui.ui.widgets.key_bar import KeyBar
    from tests.helpers.snapshot_campaign import make_app, settle

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(KeyBar)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.screen.query("KeyHelp") and bar.render().plain.startswith("esc Close help"),
                       what=lambda: bar.render().plain)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.screen.query("KeyHelp") and "Close help" not in bar.render().plain,
                       what=lambda: bar.render().plain)
        await pilot.press("q")


@pytest.mark.parametrize("size", [(200, 50), (50, 30)])
async def test_the_todo_inputs_key_bar_says_what_enter_and_esc_do(tmp_path, size):
    """Issue 34: while typing a new todo item (``a``) the key bar showed only ``f1 Help``; it
    says what Enter and Esc do in each mode of the inline input (add, edit, filter), and they do it."""
    from optui.ui.widgets.key_bar import KeyBar
    from tests.helpers.snapshot_campaign import make_app, settle

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(KeyBar)
        panel = app.query_one("#todo")

        async def bar_for(keys, expected):
            await pilot.press(*keys)
            await wait_for(pilot, lambda: bar.render().plain.startswith(expected), what=lambda: bar.render().plain)
            assert "Quit" not in bar.render().plain  # q types a letter here

        before = len(app.session.todos.items)
        await bar_for(["3", "a"], "⏎ Add  esc Cancel  ")
        await pilot.press(*"nothing", "escape")
        await wait_for(pilot, lambda: not panel.editing)
        assert len(app.session.todos.items) == before  # Esc cancelled it
        await bar_for(["a"], "⏎ Add  esc Cancel  ")
        await pilot.press(*"try mrr 64", "enter")
        await wait_for(pilot, lambda: any(t.content == "try mrr 64" for t in app.session.todos.items))
        assert not panel.editing
        await bar_for(["e"], "⏎ Save  esc Cancel  ")
        await pilot.press("escape")
        await bar_for(["slash"], "⏎ Keep filter  esc Clear filter  ")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not panel.editing)
        await pilot.press("q")
