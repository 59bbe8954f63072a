"""The flag editor screen alone (a bare Textual app, no session): the catalogue learned in the
background reaches the screen whenever it arrives, also while the editor is still mounting
(the CI failure of 2026-11-29: the help line kept "learning the flags…" for good)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App

from optui.core.flags.help_parse import parse_help
from optui.ui.screens.flag_editor import FlagEditorScreen, FlagList

pytestmark = pytest.mark.timeout(60)

HELP = Path(__file__).parents[1] / "fixtures" / "help" / "sglang_0.5.23_help.txt"
ARGV = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2"]


class EarlyCatalogEditor(FlagEditorScreen):
    """Gets its catalogue while mounting: the children exist, ``is_mounted`` is still False."""

    def on_mount(self) -> None:
        assert not self.is_mounted
        self.set_catalog(parse_help(HELP.read_text(), kind="sglang"))
        super().on_mount()


def help_line(app: App) -> str:
    return str(app.screen.query_one("#flags-help").render())


@pytest.mark.parametrize("early", [False, True], ids=["after-mount", "while-mounting"])
async def test_learned_catalogue_reaches_the_help_line(early):
    cls = EarlyCatalogEditor if early else FlagEditorScreen
    editor = cls("demo", "localhost", "process", ARGV, catalog_note="learning the flags from `python --help`…")
    app = App()
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(editor)
        await pilot.pause()
        if not early:
            assert "learning the flags" in help_line(app)
            editor.set_catalog(parse_help(HELP.read_text(), kind="sglang"))
            await pilot.pause()
        assert "flags known from" in help_line(app), help_line(app)
        await pilot.press(*"--kv-ca", "right")  # completion from the catalogue works too
        assert app.screen.query_one("#flags-input").value == "--kv-cache-dtype"
        # on the flag list, the help follows the selected flag
        app.screen.query_one(FlagList).focus()
        await pilot.pause()
        assert help_line(app).startswith("--model-path"), help_line(app)
        await pilot.press("down")
        assert help_line(app).startswith("--tp-size"), help_line(app)
