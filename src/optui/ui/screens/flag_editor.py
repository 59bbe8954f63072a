"""The flag editor: change a server's launch flags, see the diff, then restart.

Type an edit and press Enter: ``--flag value`` / ``--flag=value`` sets (replacing the old
value), ``--flag`` alone adds a boolean flag, ``!--flag`` (or ``unset --flag``) removes it,
``preset NAME`` applies a configured preset, ``reset`` starts over. On the flag list, Enter
puts a flag into the input for editing and ``d`` removes it. ``ctrl+s`` (or the button)
returns the new argv; the app then asks for confirmation.
"""

from __future__ import annotations

import shlex

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Static

from optui.config import Preset
from optui.core.flags import Arg, FlagError, Flags, parse_assignment
from optui.ui.colors import focus_now, style
from optui.ui.widgets.cursor_list import CursorList


def apply_edit(flags: Flags, text: str, presets: dict[str, Preset]) -> Flags:
    """Apply one editor command to ``flags`` (see module doc). Raises FlagError with a
    message for the operator."""
    text = text.strip()
    if not text:
        return flags
    if text.startswith("preset "):
        name = text[len("preset "):].strip()
        preset = presets.get(name)
        if preset is None:
            raise FlagError(f"unknown preset {name!r} (known: {', '.join(presets) or 'none'})")
        return flags.apply(preset.set, preset.unset)
    if text.startswith("!") or text.startswith("unset "):
        name = text[1:] if text.startswith("!") else text[len("unset "):]
        name = name.strip()
        if not flags.has(name):
            raise FlagError(f"{name} is not set")
        return flags.unset(name)
    tokens = shlex.split(text)
    if len(tokens) > 1 and not tokens[0].count("="):
        name, values = tokens[0], tokens[1:]
        name, _ = parse_assignment(name)
        return flags.set(name, values if len(values) > 1 else values[0])
    name, value = parse_assignment(tokens[0] if tokens else text)
    return flags.set(name, value)


class FlagList(CursorList):
    """The flags being edited (one occurrence per row)."""

    BINDINGS = [
        Binding("enter,e", "edit_flag", "Edit", id="flags.edit"),
        Binding("d,delete", "remove_flag", "Remove", id="flags.remove"),
    ]

    def action_edit_flag(self) -> None:
        self.screen.edit_selected()  # type: ignore[attr-defined]

    def action_remove_flag(self) -> None:
        self.screen.remove_selected()  # type: ignore[attr-defined]


class FlagEditorScreen(ModalScreen[list[str] | None]):
    """Returns the new argv, or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="flags.cancel"),
        Binding("ctrl+s", "apply", "Review & restart", id="flags.apply"),
    ]
    DEFAULT_CSS = """
    FlagEditorScreen { align: center middle; }
    FlagEditorScreen > Vertical { width: 95%; max-width: 140; height: 90%; border: thick $primary;
        background: $surface; padding: 0 1; }
    FlagEditorScreen #flags-title { text-style: bold; height: auto; }
    FlagEditorScreen FlagList { height: 1fr; border: round $panel; }
    FlagEditorScreen #flags-diff { height: auto; max-height: 10; }
    FlagEditorScreen #flags-error { height: auto; color: $error; }
    FlagEditorScreen Horizontal { height: auto; align-horizontal: right; }
    FlagEditorScreen Button { margin-left: 2; }
    """

    def __init__(self, server: str, host: str, control: str, argv: list[str], *, presets: dict[str, Preset] | None = None,
                 known_flags: list[str] | None = None, booleans: list[str] | None = None) -> None:
        super().__init__()
        self.server = server
        self.host = host
        self.control = control
        self.original = Flags.parse(argv, booleans or ())
        self.flags = self.original
        self.presets = presets or {}
        names = {a.name for a in self.original.args if a.name} | set(known_flags or [])
        self.suggestions = sorted(names) + [f"preset {p}" for p in self.presets]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Restart {self.server} on {self.host} ({self.control}) with new flags", id="flags-title", markup=False)
            yield Static(" ".join(self.original.program), id="flags-program", markup=False)
            yield Input(placeholder="--flag value | --flag=value | !--flag | preset NAME  (Enter applies)", id="flags-input",
                        suggester=SuggestFromList(self.suggestions, case_sensitive=False))
            yield Static("", id="flags-error", markup=False)
            yield FlagList(empty_text="(no flags)", id="flags-list")
            yield Static("", id="flags-diff", markup=False)
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Review & restart (ctrl+s)", id="apply", variant="warning")

    def on_mount(self) -> None:
        self._refresh()
        focus_now(self.query_one(Input))

    def _refresh(self) -> None:
        rows, keys = [], []
        for i, arg in enumerate(self.flags.args):
            keys.append(i)
            rows.append(Text(" ".join(arg.to_argv())))
        self.query_one(FlagList).set_rows(keys, rows)
        diff = self.original.diff(self.flags)
        text = Text()
        if not diff:
            text.append("no changes yet", style="dim")
        for change in diff:
            var = {"added": "delta-good", "removed": "delta-bad"}.get(change.kind, "warning")
            text.append(change.describe() + "\n", style=style(self.app, var))
        self.query_one("#flags-diff", Static).update(text)

    @on(Input.Submitted, "#flags-input")
    def _submit(self, event: Input.Submitted) -> None:
        self._apply_text(event.value)

    def _apply_text(self, value: str) -> bool:
        """Apply one typed edit; False (and the error shown) when it is invalid."""
        error = self.query_one("#flags-error", Static)
        try:
            if value.strip() == "reset":
                self.flags = self.original
            else:
                self.flags = apply_edit(self.flags, value, self.presets)
        except (FlagError, ValueError) as exc:
            error.update(str(exc))
            return False
        error.update("")
        self.query_one(Input).value = ""
        self._refresh()
        return True

    def _selected(self) -> Arg | None:
        key = self.query_one(FlagList).current_key
        return self.flags.args[key] if isinstance(key, int) and key < len(self.flags.args) else None

    def edit_selected(self) -> None:
        arg = self._selected()
        if arg is not None:
            field = self.query_one(Input)
            field.value = shlex.join(arg.to_argv())
            focus_now(field)

    def remove_selected(self) -> None:
        arg = self._selected()
        if arg is None:
            return
        if arg.name is None:
            self.flags = Flags(self.flags.program, tuple(a for a in self.flags.args if a is not arg), self.flags.booleans)
        else:
            self.flags = self.flags.unset(arg.name)
        self._refresh()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_apply()
        else:
            self.action_cancel()

    def action_apply(self) -> None:
        field = self.query_one(Input)
        # an edit typed but not yet applied is applied first; an invalid one blocks
        if field.value.strip() and not self._apply_text(field.value):
            return
        self.dismiss(self.flags.to_argv())

    def action_cancel(self) -> None:
        self.dismiss(None)
