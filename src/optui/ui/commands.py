"""The command palette (ctrl+p): its screen (:class:`PaletteScreen`, Textual's palette with a
key bar of its own) and its entries: every action, spelled out per server / preset. The
global keys' own commands (note, experiments, pause, command log, zoom...) come from the key
table (:func:`optui.ui.key_table.palette_key_commands`), by the keys' labels."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Protocol

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.command import CommandPalette

from optui.ui.intents.bench import bench_palette_commands
from optui.ui.key_table import hinted
from optui.ui.widgets.key_bar import screen_key_bar

if TYPE_CHECKING:
    from optui.ui.client import SessionClient
    from optui.ui.intents import BenchActions, HostActions, JournalActions, ServerActions


class PaletteScreen(CommandPalette):
    """Textual's command palette with its own key bar: the way out first (``esc Close``), then
    how to pick and run an entry (issue 34: the dashboard's ``a Add  space Status  q Quit``
    showed under it, none of which works there). Its keys are Textual's; Esc has an id and a word."""

    BINDINGS = [Binding("escape", "escape", "Close", id="palette.close")]

    def compose(self) -> ComposeResult:
        yield from super().compose()
        # the arrows and Enter reach the palette through its search field (Textual's Input,
        # whose own bindings of those keys the key table would name): said here in words
        yield screen_key_bar(also=(("↑/↓", "Choose"), ("⏎", "Run")), palette_hint=False)


class PaletteHost(Protocol):
    """What the palette's entries use of :class:`~optui.ui.app.OptuiApp` (a Protocol, so
    this module does not import the app that imports it)."""

    @property
    def client(self) -> SessionClient | None: ...

    @property
    def server_actions(self) -> ServerActions: ...

    @property
    def bench_actions(self) -> BenchActions: ...

    @property
    def host_actions(self) -> HostActions: ...

    @property
    def journal_actions(self) -> JournalActions: ...


def palette_commands(app: PaletteHost, hints: Mapping[str, str] | None = None) -> Iterator[SystemCommand]:
    """optui's commands for the palette (in addition to Textual's own, e.g. Theme); ``hints``:
    binding id → its key (:func:`~optui.ui.key_table.key_hints`), named in an entry's help."""
    hints = dict(hints or {})
    client = app.client
    if client is None:  # the campaign is still loading
        return
    config = client.config
    writable = not client.snapshot().read_only
    for name, server in config.servers.items():
        yield SystemCommand(f"Show log of {name}", hinted(f"Last lines of {name}'s log", hints, "server.log"), partial(app.server_actions.show_server_log, name))
        if not writable or server.control == "none":
            continue
        yield SystemCommand(f"Restart {name} with new flags", hinted(f"Open the flag editor for {name}", hints, "server.restart"), partial(app.server_actions.open_flag_editor, name))
        for preset_name, preset in server.presets.items():
            yield SystemCommand(
                f"Restart {name} with preset {preset_name}",
                preset.description or f"set {dict(preset.set)} unset {preset.unset}",
                partial(app.server_actions.restart_with_preset, name, preset_name),
            )
        yield SystemCommand(f"Roll back {name} to last good flags",
                            hinted("Restart with the flags of the last successful start", hints, "server.rollback"),
                            partial(app.server_actions.ask_rollback, name))
        yield SystemCommand(f"Stop {name}", "SIGTERM the server's process group, then SIGKILL", partial(app.server_actions.confirm_stop, name))
    yield from bench_palette_commands(app, hints)
    for host in app.host_actions.untrusted_hosts():
        key = client.ssh_hosts()[host].host_key
        fp = key.fingerprint if key is not None else "?"
        yield SystemCommand(f"Trust host key of {host}", f"{fp} — shown again before it is written", partial(app.host_actions.confirm_trust, host))
    for host, ssh in client.ssh_hosts().items():
        if ssh.state.value != "live":
            yield SystemCommand(f"Reconnect {host} now", f"{ssh.state.value}: {ssh.error or ''}", partial(app.host_actions.reconnect_host, host))
    yield SystemCommand("Export findings report", "Markdown report of every experiment into the campaign directory",
                        app.journal_actions.export_report)
