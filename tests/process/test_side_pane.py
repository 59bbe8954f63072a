"""The tmux side pane (issue 20, "The side pane"): every panel zooms and every number key
shows its panel at every size; a short pane keeps room for Todo and Bench by folding GPU
hosts to one line; collapsed host rows use the width they have.

The app runs for real (``App.run_test``) on the seeded snapshot campaign.
"""

from __future__ import annotations

import re

import pytest

from optui.ui.widgets.key_bar import KeyBar
from tests.helpers.pilot import wait_for
from tests.helpers.snapshot_campaign import make_app, settle

pytestmark = pytest.mark.usefixtures("snapshot_clock")

BOXES = {"1": "#gpus-box", "2": "#servers-box", "3": "#todo-box", "4": "#bench-box", "5": "#journal-box"}


@pytest.mark.parametrize("size", [(200, 50), (60, 40), (50, 30), (50, 25)])
async def test_every_panel_zooms_to_the_whole_screen(tmp_path, size):
    app = make_app(tmp_path)
    width, height = size
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for key, selector in BOXES.items():
            await pilot.press(key)
            if app.screen.maximized is None:
                await pilot.press("z")
            await pilot.pause(0.1)
            box = app.query_one(selector)
            # the whole screen, less its border (and its padding outside a side pane) and the key bar
            inner = (width - 2 - (0 if width < 80 else 2), height - 3)
            assert app.screen.maximized is box and box.size == inner, (size, selector, box.size)
            # issue 34: zoomed, the key bar stays and says how to go back (at 60x40 there was none)
            bar = app.query_one(KeyBar)
            assert bar.region.height == 1 and bar.region.y == height - 1, bar.region
            assert "z Back to all panels" in bar._text.plain and "q Quit" in bar._text.plain, bar._text.plain
            await pilot.press("z")
            await pilot.pause(0.05)
            assert app.screen.maximized is None
        await pilot.press("q")


async def test_a_number_key_moves_the_zoom_and_shows_a_hidden_panel(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(50, 25)) as pilot:  # a short side pane: Todo and Journal hidden
        await settle(pilot)
        todo = app.query_one("#todo-box")
        assert not todo.display
        await pilot.press("3")  # shown (zoomed), and focused
        await pilot.pause(0.1)
        assert app.screen.maximized is todo and todo.size.height == 22  # the key bar under it
        assert app.focused is app.query_one("#todo-list")
        await pilot.press("4")  # the zoom follows the number key
        await pilot.pause(0.1)
        assert app.screen.maximized is app.query_one("#bench-box") and app.focused is app.query_one("#bench").focus_target()
        await pilot.press("z", "2")  # unzoomed, a panel with room: focused in the layout
        await pilot.pause(0.1)
        assert app.screen.maximized is None and app.focused is app.query_one("#servers")
        await pilot.press("q")


@pytest.mark.parametrize("size", [(60, 40), (50, 30)])
async def test_bench_and_todo_keep_room_in_a_side_pane(tmp_path, size):
    """At 50x30 the Bench panel had no row left (the GPUs' 7 lines took them): the hosts fold
    to one line each there, and Bench shows its status and last result without zooming."""
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        gpus = app.query_one("#gpus")
        lines = gpus.render().plain.splitlines()
        assert len(lines) == (7 if size == (60, 40) else 2), lines  # expanded where there is room
        await pilot.press("4")
        await pilot.pause(0.1)
        bench = app.query_one("#bench-box")
        assert app.screen.maximized is None and app._has_room(bench)
        status = app.query_one("#bench-status")
        assert status.region.height == 1 and status.region.bottom <= bench.region.bottom
        results = app.query_one("#bench-results")
        assert results.region.height >= 2 and results.region.bottom <= bench.region.bottom - 1  # header + last result
        assert app._has_room(app.query_one("#todo-box"))
        assert app.query_one("#servers-box").region.height == 3  # one server, one line: no blank rows under it
        await pilot.press("1", "e")  # e toggles all: folded hosts expand on demand, and back
        await pilot.pause(0.1)
        assert len(gpus.render().plain.splitlines()) == (2 if size == (60, 40) else 7)
        await pilot.press("q")


@pytest.mark.parametrize("size", [(50, 30), (200, 50)])
async def test_collapsed_host_rows_use_the_width_they_have(tmp_path, size):
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        gpus = app.query_one("#gpus")
        if size[0] > 80:
            await pilot.press("1", "e")  # collapse both
            await pilot.pause(0.1)
        lines = gpus.render().plain.splitlines()
        assert len(lines) == 2, lines
        width = gpus.size.width
        for line in lines:
            assert len(line.rstrip()) <= width and "…" not in line, line
        first = lines[0]
        assert first.startswith("gpu-node-1 m") and "64%" in first  # no padding past the longest name
        assert "386G/562G" in first and "88°C" in first, first  # totals and the hottest GPU at 48 columns
        if size[0] > 80:
            assert "4×H200" in first and "kW" in first, first
        await pilot.press("q")


def screen_lines(app) -> list[str]:
    """What the terminal shows, line by line (the compositor's own render)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.timeout(120)
async def test_a_benchmark_shows_its_progress_and_result_in_a_50x30_pane(tmp_path):
    """Issue 20: at 50x30 a benchmark ran with no visible progress. On the real demo: its
    progress line while it runs and its result row after, on screen, without zooming."""
    from optui.config import load_config
    from optui.demo.campaign import write_demo_config
    from optui.session import Session
    from optui.ui.app import OptuiApp
    from tests.helpers.demo import free_port
    from tests.helpers.pilot import wait_for

    cfg = write_demo_config(tmp_path / "demo", port=free_port(), speed=5.0)
    app = OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")
    session = app.session
    rt = session.servers["demo"]
    async with app.run_test(size=(50, 30)) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None, timeout=60)
        await pilot.press("b", "enter")  # the default choice: sweep
        await wait_for(pilot, lambda: any("sweep → demo  RUNNING" in line for line in screen_lines(app)), timeout=30,
                       what=lambda: "\n".join(screen_lines(app)))
        await wait_for(pilot, lambda: session.benches.current is not None and not session.benches.running, timeout=90)
        # its result row: out tok/s and its comparison (the first run: the baseline), and the run's status
        await wait_for(pilot, lambda: any(re.match(r"│ sweep +\d{4} +baseline +\d+\.\d +baseline", line) for line in screen_lines(app))
                       and any("sweep → demo  OK" in line for line in screen_lines(app)),
                       timeout=10, what=lambda: "\n".join(screen_lines(app)))
        assert app.screen.maximized is None
        await pilot.press("q")


async def test_hosts_fold_and_unfold_as_the_pane_is_resized(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(60, 40)) as pilot:
        await settle(pilot)
        gpus = app.query_one("#gpus")
        assert len(gpus.render().plain.splitlines()) == 7
        await pilot.resize_terminal(50, 30)
        await pilot.pause(0.2)
        assert len(gpus.render().plain.splitlines()) == 2 and app._has_room(app.query_one("#bench-box"))
        await pilot.resize_terminal(120, 30)  # not a side pane: hosts expanded whatever the height
        await pilot.pause(0.2)
        assert len(gpus.render().plain.splitlines()) == 7
        await pilot.press("q")


@pytest.mark.parametrize("size", [(50, 30), (60, 40)])
async def test_bench_keeps_its_room_beside_a_fleet_grid_in_a_side_pane(tmp_path, size):
    """Issue 20: at 50x30 the Bench panel was hidden and a benchmark ran with no visible
    progress: with a fleet (``optui demo --fleet 16``) the GPU panel's grid took the rows and
    Todo's and Bench's least heights did not fit what was left, so Bench was pushed below the
    screen (at 60x40 too). Every panel keeps a line on screen, Bench its status and a row."""
    from optui.config import load_config
    from optui.demo.campaign import write_demo_config
    from optui.session import Session
    from optui.ui.app import OptuiApp
    from tests.helpers.demo import free_port
    from tests.helpers.pilot import wait_for

    cfg = write_demo_config(tmp_path / "demo", port=free_port(), speed=100.0, fleet=16)
    app = OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.query("#fleet") and len(app.query_one("#fleet").shown_hosts()) == 16)
        await pilot.pause(0.2)
        assert all(app._has_room(app.query_one(box)) for box in BOXES.values()), [
            (box, app.query_one(box).region) for box in BOXES.values()]
        bench, status = app.query_one("#bench-box"), app.query_one("#bench-status")
        assert bench.region.height >= 5 and status.region.bottom < bench.region.bottom - 1  # status, then a row
        await pilot.press("q")


@pytest.mark.parametrize("size", [(200, 50), (60, 40)])
async def test_a_toast_is_at_most_three_lines_or_five_for_one_line(tmp_path, size):
    """Issue 20: at 200x50 an oom toast (8 lines of traceback) and a todo run's (5 lines)
    stacked over Bench and Journal; a one-line refusal of ~300 characters took 12 lines of a
    60-column pane (a toast: at most half the width). Every toast is its headline in at most
    3 lines, title included (a traceback's exception line), a one-line text in 5; a side
    pane's as wide as the pane; a cut one says where the whole text is: the message log
    (``m``), which has it."""
    from textual.widgets._toast import Toast

    app = make_app(tmp_path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await settle(pilot)
        trace = "Traceback (most recent call last):\n" + "  File 'x.py', line 1\n" * 20 + (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "139.81 GiB of which 1.2 GiB is free; see the documentation for memory management and PYTORCH_CUDA_ALLOC_CONF "
            "to avoid fragmentation when reserved but unallocated memory is large (expandable segments)")
        refusal = ("restart of qwen refused: qwen is benchmarked by another optui process (pid 4242, optui bench run "
                   "qwen sweep --repeat 3, started 14:02:11 on gpu-node-1); wait for it to end or abort it there; "
                   "the flags you chose are kept in the flag editor: " + " ".join(f"--flag-{i} {i}" for i in range(40)))
        # the seeded GPU's memory alert comes first (the alert watcher ticks every 0.5 s): on a
        # loaded CI machine it came after the clear below and stood beside the refusal's toast
        await wait_for(pilot, lambda: any(m.title == "gpu memory" for m in app.messages),
                       what=lambda: [m.title for m in app.messages])
        for batch in ("oom", "todo run"), ("refusal",):  # a side pane shows 3 toasts: two, then "more messages"
            app.clear_notifications()
            if "oom" in batch:
                app.notify(trace, title="#3 experiment failed", severity="error")
                app.notify("; ".join(f"sweep c={c}: 1268.7 out tok/s (+100.7% vs 632.1), TTFT p50 68.0 ms (base 830.4)"
                                     for c in (1, 2, 4, 8)), title="#3 experiment ok", brief=True)  # as a todo run's
            else:
                app.notify(refusal, severity="warning")
            await pilot.pause(0.3)
            toasts = list(app.screen.query(Toast))
            assert len(toasts) == len(batch), [str(t.render()) for t in toasts]
            for toast in toasts:  # 3 lines and the padding; a one-line text 5 (a config error's file:line and cause)
                one_line = "refused" in str(toast.render())
                assert toast.region.height <= (5 if one_line else 3) + 2, (toast.region, toast.render())
                if size[0] < 80:  # a side pane: the pane's width (but the toast rack's scroll bar), not half of it
                    assert toast.region.width == size[0] - 2, toast.region
            messages = [n.message for n in app._notifications]
            if "oom" in batch:
                oom = next(m for m in messages if m.startswith("torch.OutOfMemoryError: CUDA out of memory."))
                assert oom.endswith(" … m: whole message"), messages
            else:
                cut = next(m for m in messages if m.startswith("restart of qwen refused:"))
                assert cut.endswith(" … m: whole message") and "--flag-39 39" not in cut, cut
        await pilot.press("m")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "DetailsScreen"
        body = app.screen.query_one("#details-body").render().plain
        assert "--flag-39 39" in body and "warning" in body and "  File 'x.py', line 1" in body, body
        assert body.index("restart of qwen refused") < body.index("Traceback"), "newest first"
        await pilot.press("escape")
        await pilot.press("q")


@pytest.mark.parametrize(("size", "most"), [((200, 50), 5), ((60, 40), 3)])
async def test_a_burst_of_toasts_shows_a_few_and_says_more_came(tmp_path, size, most):
    """A rack's eight hosts raising a GPU memory alert together stacked eight toasts over the
    whole of a 60x40 side pane (and the Bench and Journal of a 200x50 screen): at most 3 (5)
    toasts show, the last saying more came and that ``m`` has them; an error that comes after
    says so again; every message is in the log."""
    from textual.widgets._toast import Toast

    app = make_app(tmp_path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await settle(pilot)
        app.clear_notifications()
        for host in range(1, 9):
            app.notify(f"gpu-node-{host} GPU 1: memory 97% used (alert at 95%)", title="gpu memory", severity="warning")
        await pilot.pause(0.3)
        shown = [str(t.render()) for t in app.screen.query(Toast)]
        assert len(shown) == most, shown
        assert "more messages" in shown[-1] and "m opens the message log" in shown[-1], shown
        app.notify("llama crashed: oom", title="server crashed", severity="error")
        await pilot.pause(0.3)
        shown = [str(t.render()) for t in app.screen.query(Toast)]
        assert len(shown) == most + 1 and "server crashed and more" in shown[-1], shown
        await pilot.press("m")
        await pilot.pause(0.2)
        body = app.screen.query_one("#details-body").render().plain
        assert all(f"gpu-node-{host} GPU 1" in body for host in range(1, 9)) and "llama crashed: oom" in body, body
        assert not list(app.screen.query(Toast)), "the log opens clear of the toasts it lists"
        await pilot.press("escape")
        for _ in range(3):  # the same refusal again and again (X pressed 3 times): one toast
            app.notify("every pending experiment failed last time (#4 oom)", severity="warning")
        await pilot.pause(0.3)
        shown = [str(t.render()) for t in app.screen.query(Toast)]
        assert shown == ["every pending experiment failed last time (#4 oom)"], shown
        assert sum("every pending" in m.text for m in app.messages) == 3
        await pilot.press("q")
