"""Server actions: restart with new flags (editor → confirm), roll back, stop, show the log."""

from __future__ import annotations

import shlex

from rich.text import Text

from optui.core.flags import Flags
from optui.session import SessionError
from optui.ui.intents.base import IntentBase
from optui.ui.screens.confirm import ConfirmScreen
from optui.ui.screens.details import DetailsScreen
from optui.ui.screens.flag_editor import FlagEditorScreen


class ServerIntents(IntentBase):
    """Server actions: restart with new flags (editor → confirm), roll back, stop, show the log."""

    def action_restart(self) -> None:
        name = self._selected_server()
        if name is None:
            self.notify("no server configured", severity="warning")
            return
        self.open_flag_editor(name)

    def open_flag_editor(self, name: str) -> None:
        """Open the flag editor for ``name``; on apply, confirm, then restart."""
        rt = self.session.servers[name]
        if rt.cfg.control == "none":
            self.notify(f"{name}: control = 'none' — optui only observes it", severity="warning")
            return
        editor = FlagEditorScreen(name, rt.cfg.host, rt.cfg.control, list(rt.status.argv), presets=rt.cfg.presets)

        def edited(argv: list[str] | None) -> None:
            if argv is not None:
                self.confirm_restart(name, argv)

        self.push_screen(editor, edited)

    def restart_with_preset(self, name: str, preset: str) -> None:
        """Confirm and restart ``name`` with a configured preset applied."""
        rt = self.session.servers[name]
        p = rt.cfg.presets[preset]
        argv = Flags.parse(rt.status.argv).apply(p.set, p.unset).to_argv()
        self.confirm_restart(name, argv, reason=f"preset {preset}")

    def confirm_restart(self, name: str, argv: list[str], reason: str = "flag editor") -> None:
        """Show host, controller, diff and exact argv; restart on confirmation."""
        rt = self.session.servers[name]
        old = Flags.parse(rt.status.argv)
        diff = old.diff(Flags.parse(argv))
        body = Text()
        body.append(f"host: {rt.cfg.host}    control: {rt.cfg.control}    url: {rt.cfg.url}\n\n")
        body.append("changes:\n", style="bold")
        for change in diff or []:
            body.append(f"  {change.describe()}\n")
        if not diff:
            body.append("  (none — plain restart)\n")
        body.append("\nnew command:\n", style="bold")
        body.append(shlex.join(argv) + "\n")

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_worker(self._restart(name, argv, reason), group=f"restart-{name}", exit_on_error=False)

        self.push_screen(ConfirmScreen(f"Restart {name}?", body, "Restart"), confirmed)

    async def _restart(self, name: str, argv: list[str], reason: str) -> None:
        self.notify(f"restarting {name}…")
        try:
            status = await self.session.restart_server(name, argv, reason=reason)
        except SessionError as exc:
            self._fail(exc)
            return
        if status.state.value == "ready":
            self.notify(f"{name} is ready")
        else:
            lines = "\n".join(status.crash_lines[-3:])
            hint = "  ctrl+r rolls back to the last good flags" if status.last_good_argv else ""
            self.notify(f"{name} failed: {status.crash_class}\n{lines}{hint}", severity="error", timeout=15)

    def action_rollback(self) -> None:
        name = self._selected_server()
        if name is not None:
            self.confirm_rollback(name)

    def confirm_rollback(self, name: str) -> None:
        """Confirm and restart ``name`` with its last good flags."""
        rt = self.session.servers[name]
        last_good = rt.status.last_good_argv
        if not last_good:
            self.notify(f"{name}: no last good flags recorded yet", severity="warning")
            return
        diff = Flags.parse(rt.status.argv).diff(Flags.parse(last_good))
        body = "\n".join(c.describe() for c in diff) or "(same flags)"
        body += "\n\n" + shlex.join(last_good)

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_worker(self._rollback(name), group=f"restart-{name}", exit_on_error=False)

        self.push_screen(ConfirmScreen(f"Roll back {name} to its last good flags?", body, "Roll back"), confirmed)

    async def _rollback(self, name: str) -> None:
        try:
            status = await self.session.rollback(name)
            self.notify(f"{name}: {status.state.value}")
        except SessionError as exc:
            self._fail(exc)

    def confirm_stop(self, name: str) -> None:
        """Confirm and stop ``name``."""
        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_worker(self.session.stop_server(name), group=f"restart-{name}", exit_on_error=False)

        rt = self.session.servers[name]
        self.push_screen(ConfirmScreen(f"Stop {name}?", f"host: {rt.cfg.host}  control: {rt.cfg.control}\n{shlex.join(rt.status.argv)}", "Stop"), confirmed)

    def action_server_log(self) -> None:
        name = self._selected_server()
        if name is not None:
            self.show_server_log(name)

    def show_server_log(self, name: str) -> None:
        """Show the last lines of ``name``'s log."""
        rt = self.session.servers[name]
        body = "\n".join(rt.log_tail) or "(no log lines yet)"
        self.push_screen(DetailsScreen(f"{name} log ({rt.controller.launch.log_path if rt.controller.launch else 'not started'})", body))

