"""The flag editor: change a server's launch flags, see the diff, then restart.

Type an edit and press Enter: ``--flag value`` / ``--flag=value`` sets (replacing the old
value), ``--flag`` alone adds a boolean flag, ``!--flag`` (or ``unset --flag``) removes it,
``toggle --flag`` flips an on/off flag (vLLM ``--x``/``--no-x``, ``--enable-x``/
``--disable-x``: the opposite spelling replaces it), ``preset NAME`` applies a configured
preset, ``reset`` starts over, ``relearn`` reads the server's ``--help`` again (after an
upgrade). On the flag list, Enter puts a flag into the input for
editing, ``t`` toggles it and ``d`` removes it.

With the server's flag catalogue (learned from its ``--help``): flag names complete as you
type, the help of the typed or selected flag is shown, a value of the wrong type or not
among the choices is refused, unknown flags are warned about. ``ctrl+s`` (or the button)
returns the new argv unless a flag has an error; the restart sequence then asks for
confirmation (:meth:`optui.ui.intents.servers.ServerActions.open_flag_editor`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Static

from optui.core.flags.argv import Arg, FlagError, Flags, canonical_name, is_flag_token, parse_assignment
from optui.core.flags.catalog import FlagCatalog, Issue
from optui.core.text.safe_text import safe_line
from optui.ui.colors import focus_now, style
from optui.ui.widgets.cursor_list import CursorList
from optui.ui.widgets.dialog_fit import ButtonRow
from optui.ui.widgets.key_bar import screen_key_bar
from optui.ui.widgets.one_line_input import OneLineInput

if TYPE_CHECKING:
    from optui.config import Preset


def edited_name(text: str) -> str | None:
    """The flag name an editor command is about (``--tp 4``, ``!--x``, ``toggle --x``)."""
    text = text.strip()
    for prefix in ("!", "unset ", "toggle "):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
            break
    token = text.split(" ", 1)[0].split("=", 1)[0]
    return token if token and is_flag_token(token) else None


def apply_edit(flags: Flags, text: str, presets: dict[str, Preset], catalog: FlagCatalog | None = None) -> Flags:
    """Apply one editor command to ``flags`` (see module doc). Raises FlagError with a
    message for the operator, also when the catalogue says the new value is invalid."""
    text = text.strip()
    if not text:
        return flags
    if text.startswith("preset "):
        name = text[len("preset "):].strip()
        preset = presets.get(name)
        if preset is None:
            raise FlagError(f"unknown preset {name!r} (known: {', '.join(presets) or 'none'})")
        return flags.apply(preset.set, preset.unset)
    if text.startswith("toggle "):
        name = text[len("toggle "):].strip()
        if not is_flag_token(name):
            raise FlagError(f"not a flag name: {name!r}")
        return catalog.toggle(flags, name) if catalog else flags.toggle(name)
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
        _refuse_a_changed_form(flags, name, values, catalog)
        new = flags.set(name, values if len(values) > 1 else values[0], aliases=_aliases(catalog, name))
    else:
        name, value = parse_assignment(tokens[0] if tokens else text)
        new = flags.set(name, value, aliases=_aliases(catalog, name))
    if catalog is not None:
        errors = [i for i in _issues_of(new, name, catalog) if i.level == "error"]
        if errors:
            raise FlagError("; ".join(map(str, errors)))
    return new


def _aliases(catalog: FlagCatalog | None, name: str) -> tuple[str, ...]:
    """The other spellings of ``name`` the catalogue knows (``-t`` for ``--threads``): set
    replaces them rather than adding a second spelling of one option."""
    return catalog.aliases(name) if catalog is not None else ()


def _refuse_a_changed_form(flags: Flags, name: str, values: list[str], catalog: FlagCatalog | None) -> None:
    """FlagError for ``--no-such-flag 1`` typed: its name reads as on/off (``--no-*``,
    ``--enable-*``), so it would run as ``--no-such-flag=1`` (issue 20) without a word;
    the operator types that form, or learns the flag is not known."""
    found = catalog.lookup(name) if catalog is not None else None
    if found is not None or not flags.may_read_as_boolean(name):  # a known flag: the catalogue's checks speak
        return
    what = "an unknown flag whose name" if catalog is not None else "its name"  # the help line says where it looked
    raise FlagError(f"{name}: {what} reads as on/off (a value after a space is read apart): "
                    f"type {name}={' '.join(values)} to pass the value")


def _issues_of(flags: Flags, name: str, catalog: FlagCatalog) -> list[Issue]:
    key = canonical_name(name)
    return [i for a in flags.args if a.name and canonical_name(a.name) == key for i in catalog.check_arg(a)]


class FlagList(CursorList):
    """The flags being edited (one occurrence per row)."""

    BINDINGS = [
        Binding("enter,e", "edit_flag", "Edit", id="flags.edit"),
        Binding("t", "toggle_flag", "Toggle", id="flags.toggle"),
        Binding("d,delete", "remove_flag", "Remove", id="flags.remove"),
    ]

    def action_edit_flag(self) -> None:
        self.screen.edit_selected()  # type: ignore[attr-defined]

    def action_toggle_flag(self) -> None:
        self.screen.toggle_selected()  # type: ignore[attr-defined]

    def action_remove_flag(self) -> None:
        self.screen.remove_selected()  # type: ignore[attr-defined]


class FlagEditorScreen(ModalScreen[list[str] | None]):
    """Returns the new argv (ctrl+s), or None when cancelled. ``argv``: the flags edited
    (the diff's old side); ``edited``: the edit to start from (the review of it was
    cancelled: the operator is back in the editor with the edit kept)."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="flags.cancel"),
        Binding("ctrl+s", "apply", "Review & restart", id="flags.apply"),
    ]
    DEFAULT_CSS = """
    FlagEditorScreen { align: center middle; }
    FlagEditorScreen > Vertical { width: 95%; max-width: 140; height: 90%; border: thick $primary;
        background: $surface; padding: 0 1; }
    FlagEditorScreen #flags-title { text-style: bold; height: auto; }
    FlagEditorScreen #flags-help { height: auto; max-height: 5; color: $text-muted; }
    FlagEditorScreen FlagList { height: 1fr; border: round $panel; }
    FlagEditorScreen #flags-diff { height: auto; max-height: 10; }
    FlagEditorScreen #flags-error { height: auto; color: $error; }
    FlagEditorScreen #flags-warnings { height: auto; max-height: 6; color: $warning; }
    """

    def __init__(self, server: str, host: str, control: str, argv: list[str], *, presets: dict[str, Preset] | None = None,
                 known_flags: list[str] | None = None, booleans: list[str] | None = None,
                 catalog: FlagCatalog | None = None, catalog_note: str | None = None,
                 relearn: Callable[[], None] | None = None, edited: list[str] | None = None) -> None:
        super().__init__()
        self.relearn = relearn
        self.server = server
        self.host = host
        self.control = control
        self.catalog = catalog
        self.catalog_note = catalog_note
        self._booleans = set(booleans or ()) | set(catalog.booleans() if catalog else ())
        self.original = Flags.parse(argv, self._booleans)
        self.flags = self.original if edited is None else Flags.parse(edited, self._booleans)
        self.presets = presets or {}
        self.known_flags = list(known_flags or [])

    # ------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Restart {self.server} on {self.host} ({self.control}) with new flags", id="flags-title", markup=False)
            yield Static(" ".join(self.original.program), id="flags-program", markup=False)
            yield OneLineInput(placeholder="--flag value | --flag=value | !--flag | toggle --flag | preset NAME  (Enter applies)",
                        id="flags-input", suggester=SuggestFromList(self._suggestions(), case_sensitive=False))
            yield Static(self._catalog_line(), id="flags-help", markup=False)
            yield Static("", id="flags-error", markup=False)
            yield FlagList(empty_text="(no flags)", id="flags-list")
            yield Static("", id="flags-warnings", markup=False)
            yield Static("", id="flags-diff", markup=False)
            with ButtonRow():
                yield Button("Cancel", id="cancel")
                yield Button("Review & restart (ctrl+s)", id="apply", variant="warning")
        yield screen_key_bar()

    def on_mount(self) -> None:
        self._show_catalog()
        focus_now(self.query_one(Input))

    def _suggestions(self) -> list[str]:
        names = {a.name for a in self.original.args if a.name} | set(self.known_flags)
        if self.catalog is not None:
            names |= set(self.catalog.names())
        ordered = sorted(names, key=lambda n: (not n.startswith("--"), n))
        toggles = sorted(self.catalog.booleans()) if self.catalog else []
        return [*ordered, *(f"toggle {n}" for n in toggles if n.startswith("--")), *(f"preset {p}" for p in self.presets)]

    def _catalog_line(self) -> str:
        if self.catalog is not None:
            return f"{len(self.catalog.specs)} flags known from `{' '.join(self.catalog.program) or 'the server'} --help`"
        return self.catalog_note or "no flag catalogue: names and values are not checked"

    def set_catalog(self, catalog: FlagCatalog | None, note: str | None = None) -> None:
        """Install the catalogue once learned (or why it could not be): completion, help
        and checks start working; the argv is re-read knowing which flags take no value."""
        self.catalog, self.catalog_note = catalog, note
        if catalog is not None:
            self._booleans |= set(catalog.booleans())
            self.original = Flags.parse(self.original.to_argv(), self._booleans)
            self.flags = Flags.parse(self.flags.to_argv(), self._booleans)
        # Not ``is_mounted``: that turns true only after on_mount, and a catalogue learned
        # while the children mount would be dropped from the screen (on_mount shows it too).
        if self.query("#flags-help"):
            self._show_catalog()

    def _show_catalog(self) -> None:
        self.query_one(Input).suggester = SuggestFromList(self._suggestions(), case_sensitive=False)
        self.query_one("#flags-help", Static).update(self._catalog_line())
        self._refresh()

    # ------------------------------------------------------------ rendering
    def _refresh(self) -> None:
        rows, keys = [], []
        for i, arg in enumerate(self.flags.args):
            keys.append(i)
            rows.append(Text(safe_line(" ".join(arg.to_argv()))))
        self.query_one(FlagList).set_rows(keys, rows)
        diff = self.original.diff(self.flags)
        text = Text()
        if not diff:
            text.append("no changes yet", style="dim")
        for change in diff:
            var = {"added": "delta-good", "removed": "delta-bad"}.get(change.kind, "warning")
            text.append(safe_line(change.describe()) + "\n", style=style(self.app, var))
        self.query_one("#flags-diff", Static).update(text)
        issues = self.issues()
        self.query_one("#flags-warnings", Static).update("\n".join(f"! {i}" for i in issues))

    def issues(self) -> list[Issue]:
        """The catalogue's findings for the current flags (empty without a catalogue)."""
        return self.catalog.check(self.flags) if self.catalog else []

    def _show_help(self, name: str | None) -> None:
        help_line = self.query_one("#flags-help", Static)
        if not name:
            help_line.update(self._catalog_line())
        elif self.catalog is None:
            help_line.update(f"{name}: {self._catalog_line()}")
        else:
            help_line.update(self.catalog.describe(name))

    @on(Input.Changed, "#flags-input")
    def _typed(self, event: Input.Changed) -> None:
        self._show_help(edited_name(event.value))

    def on_cursor_list_highlighted(self, event: CursorList.Highlighted) -> None:
        # Only while the operator moves through the list: the list's own first highlight
        # (at mount) must not replace the catalogue line under the input.
        if event.list is self.query_one(FlagList) and event.list.has_focus:
            self._show_selected_help()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, FlagList):
            self._show_selected_help()

    def _show_selected_help(self) -> None:
        arg = self._selected()
        if arg is not None and arg.name:
            self._show_help(arg.name)

    # ------------------------------------------------------------ editing
    @on(Input.Submitted, "#flags-input")
    def _submit(self, event: Input.Submitted) -> None:
        self._apply_text(event.value)

    def _apply_text(self, value: str) -> bool:
        """Apply one typed edit; False (and the error shown) when it is invalid."""
        error = self.query_one("#flags-error", Static)
        try:
            if value.strip() == "relearn" and self.relearn is not None:
                self.relearn()
                self.catalog_note = "learning the flags again…"
                self.query_one("#flags-help", Static).update(self.catalog_note)
            elif value.strip() == "reset":
                self.flags = self.original
            else:
                self.flags = apply_edit(self.flags, value, self.presets, self.catalog)
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

    def toggle_selected(self) -> None:
        arg = self._selected()
        if arg is not None and arg.name:
            self._apply_text(f"toggle {arg.name}")

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
        errors = [i for i in self.issues() if i.level == "error"]
        if errors:
            self.query_one("#flags-error", Static).update("fix before restarting: " + "; ".join(map(str, errors)))
            return
        self.dismiss(self.flags.to_argv())

    def action_cancel(self) -> None:
        self.dismiss(None)
