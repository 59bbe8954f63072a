"""Look and feel (issue 9): shipped themes, keys and their discoverability, read-only mode,
live resizing, the narrow tmux side pane.

The app runs for real (``App.run_test``) on the seeded snapshot campaign; the read-only CLI
checks run the real ``optui`` command in a subprocess.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
from textual.binding import Binding
from textual.widget import Widget

import optui.ui.app as app_module
from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from optui.ui.themes import DEFAULT_THEME, builtin_theme_dir
from optui.ui.widgets.key_bar import ESSENTIAL, KeyBar, fit_items
from tests.helpers.demo import subprocess_env
from tests.helpers.snapshot_campaign import make_app, make_campaign, settle

pytestmark = pytest.mark.usefixtures("snapshot_clock")

SHIPPED = sorted(p.stem for p in builtin_theme_dir().glob("*.toml"))


def test_four_themes_are_shipped():
    assert {"optui-dark", "optui-light", "optui-high-contrast", "optui-colorblind"} <= set(SHIPPED)


@pytest.mark.parametrize("theme", [t for t in SHIPPED if t != DEFAULT_THEME])  # the default: test_snapshots
def test_theme_snapshot(snap_compare, tmp_path, theme):
    app = make_app(tmp_path, theme_name=theme)
    assert app.theme == theme
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle)


async def test_broken_user_theme_warns_and_falls_back(tmp_path, monkeypatch):
    config_home = tmp_path / "xdg"
    (config_home / "optui" / "themes").mkdir(parents=True)
    broken = config_home / "optui" / "themes" / "mine.toml"
    broken.write_text('name = "mine"\nprimary = "not-a-colour"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    app = make_app(tmp_path, theme_name="mine")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.theme == DEFAULT_THEME
        warnings = [n.message for n in app._notifications if n.severity == "warning"]
        assert any(str(broken) in m and "primary" in m for m in warnings), warnings
        assert any("unknown theme 'mine'" in m for m in warnings), warnings
        await pilot.press("q")


async def test_the_first_frame_reads_one_shipped_theme_and_the_others_come_right_after(tmp_path, monkeypatch):
    """Before the first frame only the configured theme's shipped file is read (each file
    read is a TOML parse before it); right after it the other shipped themes are registered
    for the palette's theme list."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    app = make_app(tmp_path, theme_name="optui-light")
    shipped = {path.stem for path in builtin_theme_dir().glob("*.toml")}
    at_ready: list[set[str]] = []
    original_ready = type(app).on_ready

    async def on_ready(self):
        at_ready.append(shipped & set(self.available_themes))
        return await original_ready(self)

    monkeypatch.setattr(type(app), "on_ready", on_ready)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert at_ready == [{"optui-light"}]
        assert shipped <= set(app.available_themes) and app.theme == "optui-light"
        await pilot.press("q")


def _all_bindings() -> list[tuple[str, Binding]]:
    """Every binding declared by optui's app, screens and widgets (their classes' BINDINGS)."""
    import importlib
    import pkgutil

    import optui.ui

    found = []
    for info in pkgutil.walk_packages(optui.ui.__path__, "optui.ui."):
        if info.name.startswith("optui.ui.textual_patches"):  # bases of optui's screens, which declare the keys
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, Widget | app_module.App):
                found += [(f"{cls.__name__}", b) for b in cls.BINDINGS if isinstance(b, Binding)]
    return found


def test_every_action_binding_has_an_id_and_none_uses_ctrl_b():
    bindings = _all_bindings()
    assert len(bindings) > 40
    for owner, binding in bindings:
        keys = binding.key.split(",")
        assert "ctrl+b" not in keys, f"{owner}: {binding.key} collides with the tmux prefix"
        assert binding.id, f"{owner}: {binding.key} → {binding.action} has no id (cannot be remapped)"


async def test_keymap_remaps_by_binding_id(tmp_path):
    config = make_campaign(tmp_path)
    with config.open("a") as f:
        f.write('\n[keymap]\n"app.zoom" = "y"\n"todo.add" = "A"\n')
    app = OptuiApp(Session(load_config(config), actor="tui"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("3", "z")
        assert app.screen.maximized is None  # z no longer zooms
        await pilot.press("y")
        assert app.screen.maximized is not None
        await pilot.press("y")
        assert app.screen.maximized is None
        assert "A Add" in app.query_one(KeyBar)._text.plain  # the bar shows the new key
        await pilot.press("q")


def _help_text(app) -> str:
    return str(app.screen.query_one("KeyHelp").query_one("Static").render())


async def test_question_mark_lists_focused_panel_and_global_keys(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("3", "question_mark")
        await pilot.pause(0.2)
        text = _help_text(app)
        for described in ("Add", "Status", "Run experiment", "Quit", "Zoom", "Restart"):  # todo + global
            assert described in text, text
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert not app.screen.query("KeyHelp")
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert app.screen.query("KeyHelp")
        await pilot.press("escape")  # Escape closes it too, as it closes every dialog
        await pilot.pause(0.1)
        assert not app.screen.query("KeyHelp")
        await pilot.press("q")


def _controlled_campaign(tmp_path):
    """The snapshot campaign with qwen under optui's control, a preset and a benchmark."""
    config = make_campaign(tmp_path)
    text = config.read_text().replace('control = "none"', 'control = "process"')
    text += ('\n[servers.qwen.presets.mrr128]\nset = { "--max-running-requests" = "128" }\n'
             '\n[benchmarks.c64]\nserver = "qwen"\nbuiltin = { concurrency = [64], prompts = 10 }\n')
    config.write_text(text)
    return config


async def test_palette_lists_every_action_with_its_target(tmp_path):
    app = OptuiApp(Session(load_config(_controlled_campaign(tmp_path)), actor="tui"))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for expected in ("Restart qwen with new flags", "Restart qwen with preset mrr128", "Roll back qwen",
                         "Run benchmark c64", "Sweep benchmark c64", "Export findings report", "Theme",
                         "Experiments", "Note", "Command log", "Zoom"):
            assert any(t.startswith(expected) for t in titles), (expected, titles)
        assert len(titles) == len(set(titles)), titles  # each action once
        assert "Abort bench" not in titles  # only while a benchmark runs
        await pilot.press("q")


@pytest.mark.parametrize("read_only", [False, True])
async def test_read_only_hides_and_refuses_every_server_change(tmp_path, read_only):
    session = Session(load_config(_controlled_campaign(tmp_path)), actor="tui", read_only=read_only or None)
    app = OptuiApp(session)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert ("READ-ONLY" in str(app.query_one("#status-line").render())) == read_only
        await pilot.press("2")
        await pilot.pause(0.1)
        bar = app.query_one(KeyBar)._text.plain
        assert ("Restart" in bar) != read_only and ("b Bench" in bar) != read_only, bar
        titles = [c.title for c in app.get_system_commands(app.screen)]
        mutating = [t for t in titles if t.startswith(("Restart", "Roll back", "Stop qwen", "Run benchmark", "Sweep"))]
        assert bool(mutating) != read_only, titles
        await pilot.press("r")
        await pilot.pause(0.2)
        assert (len(app.screen_stack) > 1) != read_only  # the flag editor opens only when writable
        await pilot.press("q")
        if read_only:
            assert not session.todo_runs.running


@pytest.mark.parametrize("argv", [
    ["restart", "qwen", "--set", "--max-running-requests=128"],
    ["bench", "run", "qwen", "c64"],
    ["todo", "run", "1"],
])
def test_read_only_cli_refuses(tmp_path, argv):
    config = make_campaign(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "optui", "-c", str(config), "--read-only", *argv],
                          capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert proc.returncode == 2, proc.stderr
    assert "read-only" in proc.stderr and "Traceback" not in proc.stderr


async def test_resize_keeps_focus_and_cursor(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("3", "down", "down")
        todo = app.focused
        assert todo.cursor == 2
        for size in [(60, 40), (80, 24), (120, 40), (50, 30), (200, 50)]:
            await pilot.resize_terminal(*size)
            await pilot.pause(0.1)
            assert app.focused is todo and todo.cursor == 2, size
        await pilot.press("q")


DESCRIPTIONS = ("Quit", "Help", "Zoom", "Restart", "Bench", "Add", "Edit", "Status", "Delete", "experiment", "palette")


def test_fit_items_leaves_out_whole_keys_from_the_end_never_quit_or_help():
    items = [("a", "Add", "todo.add"), ("e", "Edit", "todo.edit"), ("q", "Quit", "app.quit"),
             ("?", "Help", "app.help"), ("z", "Zoom", "app.zoom")]
    assert fit_items(items, 100) == items
    assert fit_items(items, 30) == items[:4]  # "a Add  e Edit  q Quit  ? Help" is 29 wide
    assert fit_items(items, 10) == items[2:4]  # q and ? even when they do not fit


async def test_narrow_side_pane_zoom_and_essential_keys(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(60, 40)) as pilot:
        await settle(pilot)
        assert app.screen.has_class("-narrow")
        await pilot.press("3")
        await pilot.pause(0.1)
        narrow_bar = app.query_one(KeyBar)._text.plain
        essential = {a.binding.description for a in app.screen.active_bindings.values() if a.binding.id in ESSENTIAL}
        other = {a.binding.description for a in app.screen.active_bindings.values()
                 if a.binding.show and a.binding.id not in ESSENTIAL} - essential
        assert "Add" in narrow_bar and "Quit" in narrow_bar
        assert not [d for d in other if f" {d}" in narrow_bar], (narrow_bar, other)
        # what does not fit is left out whole, q and ? always stay (the bar used to end in "…")
        for width in (60, 80, 100):
            await pilot.resize_terminal(width, 40)
            await pilot.pause(0.1)
            bar = app.query_one(KeyBar)._text.plain.rstrip()
            assert len(bar) <= width and "…" not in bar and bar.endswith(tuple(DESCRIPTIONS)), (width, bar)
            assert "q Quit" in bar and "? Help" in bar, (width, bar)
        await pilot.resize_terminal(60, 40)
        await pilot.pause(0.1)
        box = app.query_one("#todo-box")
        await pilot.press("z")
        await pilot.pause(0.1)
        assert app.screen.maximized is box and box.size.height >= 35  # the whole pane
        await pilot.press("z")
        assert app.screen.maximized is None
        # every panel zooms to the whole pane, also those of a fixed or content height
        for key, selector in (("5", "#journal-box"), ("1", "#gpus-box"), ("4", "#bench-box")):
            await pilot.press(key, "z")
            await pilot.pause(0.1)
            zoomed = app.query_one(selector)
            # the whole pane but the key bar, which a zoom keeps at every size (issue 34: at 60x40 a
            # zoom had no key bar, so nothing said how to leave it)
            assert app.screen.maximized is zoomed and zoomed.size == (58, 37), (selector, zoomed.size)
            assert "z Back" in app.query_one(KeyBar)._text.plain, app.query_one(KeyBar)._text.plain
            await pilot.press("z")
        await pilot.press("3")
        await pilot.resize_terminal(200, 50)
        await pilot.pause(0.1)
        wide_bar = app.query_one(KeyBar)._text.plain
        assert [d for d in other if f" {d}" in wide_bar]  # wide shows the rest again
        await pilot.press("1", "z")
        await pilot.pause(0.1)
        assert app.query_one("#gpus-box").size == (196, 47)  # the screen but the key bar: not 3fr of a row of the layout
        await pilot.press("z", "q")


async def test_pause_and_forced_refresh(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await pilot.pause(0.1)
        assert app.session.paused and "PAUSED" in str(app.query_one("#status-line").render())
        await pilot.press("p", "ctrl+l")
        await pilot.pause(0.1)
        assert not app.session.paused
        await pilot.press("q")
