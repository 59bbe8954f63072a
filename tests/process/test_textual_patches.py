"""optui's Textual patches (``optui.ui.textual_patches``): the gate, canaries for every private
Textual name a patch relies on, and the app with the patches on and off.

A canary fails the moment Textual changes a name, a signature or the source a patch was
written against: re-read the patch against the new Textual (its module docstring says what
it replaces and why), then update the fingerprint here. The fingerprints are of Textual
8.2.8, the pinned version."""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import textual
from textual import _time, _xterm_parser
from textual.app import App
from textual.dom import DOMNode
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.reactive import Reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Log

from optui.ui import textual_patches
from optui.ui.textual_patches import PINNED_TEXTUAL, SWITCH, wanted

REPO = Path(__file__).resolve().parents[2]


def fingerprint(obj) -> str:
    """The first 12 hex digits of the sha256 of ``obj``'s source (dedented)."""
    return hashlib.sha256(textwrap.dedent(inspect.getsource(obj)).encode()).hexdigest()[:12]


def params(func) -> list[str]:
    return list(inspect.signature(func).parameters)


# ---------------------------------------------------------------- the gate
def test_the_pinned_version_is_the_one_pyproject_pins():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d.split("==", 1)[1] for d in deps if re.match(r"textual\s*==", d)]
    assert pins == [PINNED_TEXTUAL], f"pyproject pins textual {pins}, textual_patches.PINNED_TEXTUAL is {PINNED_TEXTUAL}"


@pytest.mark.parametrize(("version", "environ", "on"), [
    (PINNED_TEXTUAL, {}, True),
    (PINNED_TEXTUAL, {SWITCH: "1"}, True),
    (PINNED_TEXTUAL, {SWITCH: "0"}, False),
    (PINNED_TEXTUAL, {SWITCH: " Off "}, False),
    ("8.2.3", {}, False),
    ("8.0.0", {}, False),
    ("8.2.9", {SWITCH: "1"}, False),
])
def test_the_gate(version, environ, on):
    assert wanted(version, environ) is on


def test_the_patches_are_on_here():
    """The installed Textual is the pinned one, so this test process runs the patched app
    (unless the switch is set in its environment)."""
    if os.environ.get(SWITCH):
        pytest.skip(f"{SWITCH} is set")
    assert textual.__version__ == PINNED_TEXTUAL
    assert textual_patches.ENABLED


def run_python(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter (the gate is read at import) from the repository
    root; its stdout. Fails with its output when it exits non-zero."""
    environ = {k: v for k, v in os.environ.items() if k != SWITCH}
    environ.update(env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=environ,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_textual_other_than_the_pinned_one_gets_plain_textual():
    out = run_python("""
        import textual
        textual.__version__ = "8.2.3"  # as if another Textual were installed
        from textual.drivers.linux_driver import LinuxDriver
        from textual.screen import Screen
        from optui.ui import textual_patches
        from optui.ui.main_screen import MainScreen
        assert not textual_patches.ENABLED
        assert MainScreen.__bases__ == (Screen,), MainScreen.__mro__
        assert textual_patches.driver_class(LinuxDriver) is LinuxDriver
        print("plain")
    """)
    assert out.strip() == "plain"


# ---------------------------------------------------------------- canaries
# What each patch was written against (Textual 8.2.8). A change here: re-read the patch.
FINGERPRINTS = {
    # quiet_driver.QuietLinuxDriver replaces it (and its three fixes live in it)
    "LinuxDriver.run_input_thread": (LinuxDriver.run_input_thread, "03c4634c663e"),
    # quiet_driver wraps these two: the suspend flag around SIGTSTP / SIGCONT
    "LinuxDriver._sigtstp_application": (LinuxDriver._sigtstp_application, "8044421ac7ab"),
    "LinuxDriver._sigcont_application": (LinuxDriver._sigcont_application, "5c1afbf36f9e"),
    # frame_timer.FrameTimer replaces it
    "Timer._run": (Timer._run, "92f4923ce3b2"),
    # focus_screen: replaced, and the two it does the work of
    "Screen._update_focus_styles": (Screen._update_focus_styles, "a201e700fa64"),
    "Screen._update_timer": (Screen._update_timer.fget, "ed1ff3583a64"),
    "Widget._check_refresh": (Widget._check_refresh, "13fd74f1d91f"),
    # theme_select.select_theme_before_mount does what it does, less the CSS refresh
    "App._watch_theme": (App._watch_theme, "585f469c9ae8"),
    # not private, but the bug StreamLog works around (docs/upstream/log_write_lines_pruning.md):
    # when this changes, see whether Textual fixed it and StreamLog.append can stop refreshing
    "Log.write_lines": (Log.write_lines, "6d19624abd6b"),
}


@pytest.mark.parametrize("name", sorted(FINGERPRINTS))
def test_the_source_a_patch_was_written_against_is_unchanged(name):
    obj, expected = FINGERPRINTS[name]
    assert fingerprint(obj) == expected, f"Textual's {name} changed: re-read the patch that relies on it"


def test_the_private_names_the_driver_relies_on():
    assert params(LinuxDriver.run_input_thread) == ["self"]
    for name in ("_sigtstp_application", "_sigcont_application"):
        assert callable(getattr(LinuxDriver, name))
    driver_init = inspect.getsource(Driver.__init__)
    for attribute in ("self._app =", "self._debug =", "self._loop ="):
        assert attribute in driver_init, attribute
    linux_init = inspect.getsource(LinuxDriver.__init__)
    # QuietLinuxDriver replaces exit_event, and writes the first frame to _file itself
    for attribute in ("self.fileno =", "self.exit_event =", "self._file ="):
        assert attribute in linux_init, attribute
    assert "self._driver" in inspect.getsource(App._process_messages)  # textual_patches.first_frame_shown reads it
    parser = _xterm_parser.XTermParser(False)
    assert hasattr(parser, "_timeout_time") and parser._timeout_time is None  # set while an escape is incomplete
    assert callable(parser.tick) and callable(parser.feed)
    assert callable(_time.get_time)


def test_the_private_names_the_frame_timer_relies_on():
    assert callable(_time.get_time) and inspect.iscoroutinefunction(_time.sleep)
    assert params(Timer._tick) == ["self", "next_timer", "count"]
    assert {"event_target", "interval", "name", "callback", "pause"} <= set(params(Timer.__init__))
    source = inspect.getsource(Timer)
    for attribute in ("self._interval", "self._active", "def _start"):
        assert attribute in source, attribute


def test_the_private_names_the_focus_screen_relies_on():
    assert params(Screen._update_focus_styles) == ["self", "focused", "blurred"]
    assert params(Screen.set_focus) == ["self", "widget", "scroll_visible", "from_app_focus"]
    assert isinstance(Screen._update_timer, property)
    assert isinstance(Screen.__dict__["focused"], Reactive)
    assert callable(Screen._on_timer_update)
    from textual.css.stylesheet import Stylesheet

    assert "self._has_focus_within: bool = False" in inspect.getsource(DOMNode.__init__)
    assert "node._has_focus_within = " in inspect.getsource(Stylesheet)  # set when a node is styled
    assert params(Widget._check_refresh) == ["self"]


def test_the_private_names_the_theme_select_relies_on():
    assert params(App._refresh_truecolor_filter) == ["self", "theme"]
    assert params(App._invalidate_css) == ["self"] and params(App._validate_theme) == ["self", "theme_name"]
    assert "update" in params(DOMNode.update_classes)


async def test_the_theme_is_chosen_without_a_css_refresh_before_the_first_frame(tmp_path, monkeypatch):
    """``App.refresh_css`` (a reparse of every stylesheet) is not called before the first
    frame, and the app has the chosen theme's classes and colours all the same."""
    from optui.ui.textual_patches.theme_select import select_theme_before_mount
    from tests.helpers.snapshot_campaign import make_app

    refreshes: list[str] = []
    original = App.refresh_css

    def counted(self, *args, **kwargs):
        refreshes.append("refresh_css")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(App, "refresh_css", counted)
    app = make_app(tmp_path, theme_name="optui-light")
    at_ready: list[list[str]] = []
    original_ready = type(app).on_ready

    async def on_ready(self):
        at_ready.append(list(refreshes))
        return await original_ready(self)

    monkeypatch.setattr(type(app), "on_ready", on_ready)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert at_ready == [[]]
        assert app.theme == "optui-light" and {"-theme-optui-light", "-light-mode"} <= app.classes
        assert "-dark-mode" not in app.classes
        assert app.screen.styles.background == app.current_theme.to_color_system().background
    (tmp_path / "plain").mkdir()
    plain = make_app(tmp_path / "plain")  # (the shipped themes but its own are registered after the first frame)
    select_theme_before_mount(plain, "textual-light")
    with pytest.raises(Exception, match="not been registered"):
        select_theme_before_mount(plain, "no-such-theme")


# ---------------------------------------------------------------- the app, patches on and off
APP_CHECK = """
    import asyncio, tempfile
    from pathlib import Path
    from textual.screen import Screen
    from optui.ui import textual_patches
    from optui.ui.widgets.key_bar import KeyBar
    from tests.helpers.snapshot_campaign import make_app

    async def main():
        app = make_app(Path(tempfile.mkdtemp()))
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                if app.panels_mounted and app.session is not None and app.session.version > 0:
                    break
                await pilot.pause(0.1)
            screen = app.screen
            for key, focused in (("3", "todo-list"), ("4", "bench"), ("2", "servers")):
                await pilot.press(key)
                await pilot.pause(0.2)
                assert app.focused is not None and app.focused.id is not None, key
                ancestors = [node.id for node in app.focused.ancestors_with_self]
                assert any(i is not None and i.startswith(focused) for i in ancestors), (key, ancestors)
            keys = str(app.query_one(KeyBar).render())
            assert "estart" in keys, keys  # the servers panel's keys
            await pilot.press("q")
        print(textual_patches.ENABLED, type(screen).__mro__[1].__name__, app.get_driver_class().__name__)

    asyncio.run(main())
"""


def test_the_app_runs_with_the_patches_off():
    out = run_python(APP_CHECK, **{SWITCH: "0"})
    assert out.split() == ["False", "Screen", "LinuxDriver"], out


def test_the_app_runs_with_the_patches_on():
    out = run_python(APP_CHECK)
    assert out.split() == ["True", "OneFrameFocusScreen", "QuietLinuxDriver"], out


async def test_the_private_attributes_exist_on_a_running_screen(tmp_path):
    """What ``OneFrameFocusScreen`` reads and writes on a live screen and its widgets."""
    from optui.ui.textual_patches.focus_screen import OneFrameFocusScreen
    from optui.ui.textual_patches.frame_timer import FrameTimer
    from tests.helpers.snapshot_campaign import make_app

    if not textual_patches.ENABLED:
        pytest.skip("the patches are off")
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, OneFrameFocusScreen)
        assert isinstance(screen._update_timer, FrameTimer)
        assert screen._update_timer in screen._timers
        assert isinstance(screen._dirty_widgets, set)
        widget = app.query_one("#status-line")
        assert widget in screen._compositor
        for flag in ("_repaint_required", "_layout_required", "_refresh_styles_required"):
            assert isinstance(getattr(widget, flag), bool), flag
        assert app.query_one("#servers-box")._has_focus_within  # .panel:focus-within in optui.tcss
        await pilot.press("q")


# ---------------------------------------------------------------- nothing private outside the package
METACLASS_NAMES = {"_css_type_name", "_css_type_names", "_computes", "_decorated_handlers", "_merged_bindings",
                   "_reactives", "_abc_impl"}  # set on every class by Textual's metaclass (or ABCMeta)


def _textual_classes() -> list[type]:
    import textual.app
    import textual.drivers.linux_driver
    import textual.message_pump
    import textual.screen
    import textual.widgets

    classes = [textual.app.App, textual.screen.Screen, textual.screen.ModalScreen, Widget, DOMNode,
               textual.message_pump.MessagePump, Driver, LinuxDriver, Timer, _xterm_parser.XTermParser]
    classes += [getattr(textual.widgets, name) for name in textual.widgets.__all__]
    return [base for cls in classes for base in cls.__mro__ if base.__module__.startswith("textual")]


SELF_ASSIGNED = re.compile(r"self\.(_[a-z]\w*)\s*(?::[^=\n]*)?=")


@functools.cache
def _assigned_in_module(module: str) -> frozenset[str]:
    """The ``self._x`` attributes assigned anywhere in Textual module ``module``."""
    return frozenset(SELF_ASSIGNED.findall(Path(sys.modules[module].__file__).read_text()))


def _private_names(classes: list[type]) -> set[str]:
    """The private names Textual's ``classes`` define: class attributes, and ``self._x =``
    in their modules."""
    names: set[str] = set()
    for cls in set(classes):
        names.update(n for n in vars(cls) if n.startswith("_") and not n.startswith("__"))
        names.update(_assigned_in_module(cls.__module__))
    return names - METACLASS_NAMES


def test_no_private_textual_name_is_used_outside_textual_patches():
    """Every use of a private Textual name is inside ``optui.ui.textual_patches``: no
    ``textual._*`` import, no override of a private method of a Textual base class, no
    read or write of a private attribute that optui does not define itself."""
    import ast
    import importlib

    private = _private_names(_textual_classes())
    src = REPO / "src"
    trees = {path: ast.parse(path.read_text()) for path in (src / "optui").rglob("*.py")
             if "textual_patches" not in path.parts}
    own: set[str] = set()  # private names optui defines itself (its own attributes and methods)
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
    found = []
    for path, tree in trees.items():
        where = path.relative_to(REPO)
        module_name = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("textual"):
                if any(part.startswith("_") for part in node.module.split(".")) or \
                        any(alias.name.startswith("_") for alias in node.names):
                    found.append(f"{where}:{node.lineno}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                found += [f"{where}:{node.lineno}: import {a.name}" for a in node.names
                          if a.name.startswith("textual.") and "._" in a.name]
            elif isinstance(node, ast.Attribute) and node.attr in private and node.attr not in own:
                found.append(f"{where}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.ClassDef) and module_name.startswith("optui.ui"):
                # an override: a method of an optui class, or an attribute it sets, that a Textual base defines
                cls = getattr(importlib.import_module(module_name), node.name, None)
                bases = [b for b in getattr(cls, "__mro__", ())[1:] if b.__module__.startswith("textual")]
                if not bases:
                    continue
                mine = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
                mine |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                         and isinstance(n.value, ast.Name) and n.value.id == "self"}
                found += [f"{where}:{node.lineno}: {node.name}.{name} (Textual's)"
                          for name in sorted(mine & _private_names(bases))]
    assert not found, "private Textual names outside optui.ui.textual_patches:\n" + "\n".join(found)
