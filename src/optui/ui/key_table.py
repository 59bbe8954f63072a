"""The one table of the keys that work now: (key, binding id, label, where) for the focus of
the moment, read from the bindings Textual resolved for it (the focused panel's first, then
the global ones; a key the panel takes is not listed again as global), the keymap and the
policy (read-only, loading) applied.

The help (``?``, :mod:`optui.ui.widgets.key_help`), the key bar
(:mod:`optui.ui.widgets.key_bar`) and the command palette's key commands
(:func:`palette_key_commands`) all read it, so none of them can name a key another does
not, or give it another word (tests/process/test_operator_keys.py compares the three)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.binding import Binding

if TYPE_CHECKING:
    from textual.app import SystemCommand
    from textual.dom import DOMNode
    from textual.screen import Screen

#: where a global key is listed (a key bound on the app or the screen)
GLOBAL = "global"

#: Textual's own palette commands for keys optui binds itself (its help panel, maximize, quit):
#: the palette offers those keys by their own labels instead (:func:`palette_key_commands`)
TEXTUAL_KEY_COMMANDS = frozenset({"Keys", "Maximize", "Minimize", "Quit"})

#: the zoom key's label while a panel is zoomed (the key bar's "how to leave")
UNZOOM_LABEL = "Back to all panels"

#: the binding ids that leave a screen or a dialog (the zoom's way back too): the key bar of a
#: pushed screen shows them first, with every key bound to them, and never leaves them out
#: (issue 34: a dialog's bar showed the dashboard's ``q Quit``, ``r Restart``)
LEAVE_IDS = frozenset({"confirm.cancel", "choice.cancel", "prompt.cancel", "details.close", "commands.close",
                       "experiment.cancel", "experiments.close", "flags.cancel", "results.close",
                       "agent_request.later", "palette.close"})

#: binding ids of global keys the command palette offers as commands, by the key's own label
PALETTE_IDS = ("app.help", "app.zoom", "app.command_log", "app.pause", "app.refresh", "journal.note",
               "journal.experiments", "todo.stop_experiments", "bench.abort", "app.quit")
#: what each of :data:`PALETTE_IDS` does, in the palette's help line before its key (a bare
#: ``key E`` said nothing of what Experiments opens)
PALETTE_HELP = {
    "app.help": "every key that works now",
    "app.zoom": "the focused panel full screen, or back to all panels",
    "app.command_log": "every command optui ran: argv, exit code, output",
    "app.pause": "stop or resume redrawing the panels",
    "app.refresh": "redraw the whole screen",
    "journal.note": "write a note into the journal",
    "journal.experiments": "every experiment: its flags, runs and verdict per workload",
    "todo.stop_experiments": "stop the queued todo experiments",
    "bench.abort": "stop the running benchmark",
    "app.quit": "leave optui",
}


@dataclass(frozen=True, slots=True)
class KeyRow:
    """One key that works now: ``keys`` as shown (``"A"``, ``"^c"``; several keys of one
    binding joined by a space), the binding's ``binding_id`` (None for Textual's own
    bindings that have none), its ``label``, ``where`` it works (a panel's name, or
    :data:`GLOBAL`), the Textual ``action`` it runs (as bound on ``node``), and whether it
    is ``shown`` on the key bar."""

    keys: str
    binding_id: str | None
    label: str
    where: str
    action: str
    shown: bool
    node: DOMNode


def where_of(node: DOMNode) -> str:
    """The panel a binding of ``node`` works in: the title of its bordered panel box
    (``"[4] Bench"`` → ``"Bench"``), :data:`GLOBAL` for the app and the screen."""
    from textual.app import App
    from textual.screen import Screen

    if isinstance(node, App | Screen):
        return GLOBAL
    for ancestor in node.ancestors_with_self:
        title = getattr(ancestor, "border_title", None)  # a Widget's; a DOMNode has none
        if ancestor.has_class("panel") and title:
            return str(title).split("] ", 1)[-1]
    return type(node).__name__


def key_rows(screen: Screen) -> list[KeyRow]:
    """The table for ``screen``'s focus now (see module doc), in the order Textual resolves
    bindings: the focused widget's first, the global ones last."""
    app = screen.app
    slots: dict[tuple[int, str], list] = {}  # (node, action) → [the first binding, node, [(shown, key)...]]
    for active in screen.active_bindings.values():
        binding = active.binding
        if not active.enabled or binding.system or not binding.description:
            continue
        slot = slots.setdefault((id(active.node), binding.action), [binding, active.node, []])
        key = app.get_key_display(binding)
        if all(k != key for _, k in slot[2]):
            slot[2].append((binding.show, key))
        if binding.show and not slot[0].show:  # a shown binding's label and id win over a hidden one's
            slot[0] = binding
    rows = []
    zoomed = screen.maximized is not None
    for binding, node, keys in slots.values():
        ordered = [k for shown, k in keys if shown] + [k for shown, k in keys if not shown]  # shown keys first
        # zoomed, the zoom key is the way back: the bar, the help and the palette say so
        label = UNZOOM_LABEL if zoomed and binding.id == "app.zoom" else binding.description
        rows.append(KeyRow(" ".join(ordered), binding.id, label, where_of(node), binding.action,
                           any(shown for shown, _ in keys), node))
    return rows


def key_hints(screen: Screen) -> dict[str, str]:
    """Binding id → ``"key r"`` (the keys working now, as the help shows them), else
    ``"key s in Bench"`` for a panel's key that works when that panel is focused (its class
    binding), for the palette's entries (every entry names its key where it has one)."""
    from textual.widget import Widget

    app = screen.app
    hints = {row.binding_id: f"key {row.keys}" + ("" if row.where == GLOBAL else f" in {row.where}")
             for row in key_rows(screen) if row.binding_id}
    main = app.screen_stack[0] if app.screen_stack else screen
    nodes: list = [app, *main.query(Widget)]
    for node in nodes:
        for binding in getattr(type(node), "BINDINGS", ()):
            if isinstance(binding, Binding) and binding.id and binding.id not in hints and binding.description:
                where = "" if node is app else where_of(node)
                where = "" if where == GLOBAL else f" in {where}"
                keys = " ".join(app.get_key_display(Binding(k.strip(), binding.action)) for k in binding.key.split(","))
                hints[binding.id] = f"key {keys}{where}"
    return hints


def hinted(text: str, hints: dict[str, str], binding_id: str) -> str:
    """``text`` with its key (``"Open the flag editor — key r"``) when ``binding_id`` has one."""
    hint = hints.get(binding_id)
    return f"{text} — {hint}" if hint else text


def palette_key_commands(screen: Screen) -> Iterator[SystemCommand]:
    """The palette's commands for the global keys of :data:`PALETTE_IDS`, titled with the
    key's own label and the key in the help line; one whose key the focused panel takes
    for itself is offered too (the app's binding, without a key to press here); one the
    policy disables now (nothing to abort, read-only) is not. Then every key of the focused
    panel (or of the focused widget of a pushed screen) that the help (``?``) lists, titled
    with its place and label (``Bench: Sweep``), ``key s in Bench`` in the help line (issue
    34: the todo's a/e/x/X, the bench's s/R/B, the journal's t/s/e/c were only in the help)."""
    from textual.app import SystemCommand

    app = screen.app
    table = key_rows(screen)
    rows = {row.binding_id: row for row in table if row.where == GLOBAL}
    shadowed = {b.id: b for b in type(app).BINDINGS if isinstance(b, Binding) and b.id in PALETTE_IDS}
    titles: set[str] = set()
    for binding_id in PALETTE_IDS:
        row = rows.get(binding_id)
        if row is not None:
            titles.add(row.label)
            yield SystemCommand(row.label, _with_help(binding_id, f"key {row.keys}"), _runner(row.node, row.action))
        elif (binding := shadowed.get(binding_id)) is not None and app.check_action(binding.action, ()) is not False:
            key = app.get_key_display(binding)
            titles.add(binding.description)
            yield SystemCommand(binding.description, _with_help(binding_id, f"key {key} from another panel (the "
                                f"focused one uses {key} for its own)"), _runner(app, binding.action))
    for row in table:
        if row.where == GLOBAL:
            continue
        title = f"{row.where}: {row.label}"
        if title in titles:
            continue
        titles.add(title)
        yield SystemCommand(title, f"key {row.keys} in {row.where}", _runner(row.node, row.action))


def _with_help(binding_id: str, key_line: str) -> str:
    """``"what it does — key E"`` (:data:`PALETTE_HELP`), or the key line alone."""
    what = PALETTE_HELP.get(binding_id)
    return f"{what} — {key_line}" if what else key_line


def _runner(node: DOMNode, action: str):
    async def run() -> None:
        await node.app.run_action(action, node)

    return run
