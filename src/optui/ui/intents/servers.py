"""Server actions: restart with new flags (editor → confirm), roll back (offered after a
failed restart), stop, show the log; notifications when a server hangs or crashes."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text

from optui.core.text.safe_text import headline
from optui.ui.client import SessionError
from optui.ui.intents.base import Actions

if TYPE_CHECKING:
    from optui.ui.client import SessionClient
    from optui.ui.screens.flag_editor import FlagEditorScreen


def restart_review(client: SessionClient, name: str, argv: list[str] | tuple[str, ...], *,
                   running: tuple[str, ...] | None = None, running_from: str = "") -> Text:
    """What a restart of server ``name`` with ``argv`` changes, for the operator to confirm
    (every key that restarts a server shows it): host, controller and url, the flag diff
    from the running flags (``running``: those it will run by then, ``running_from`` saying
    whose, e.g. ``"#3's"``), the flag catalogue's warnings, and exactly what will run."""
    from optui.core.flags.argv import Flags  # after the first frame (see OptuiApp.compose)

    cfg, status = client.server_config(name), client.server_status(name)
    diff = Flags.parse(status.argv if running is None else running).diff(Flags.parse(argv))
    body = Text()
    body.append(f"host: {cfg.host}    control: {cfg.control}    url: {cfg.url}\n\n")
    body.append(f"changes from {running_from} flags:\n" if running_from else "changes:\n", style="bold")
    for change in diff or []:
        body.append(f"  {change.describe()}\n")
    if not diff:
        body.append("  (none — plain restart)\n")
    catalog = client.cached_catalog(name)
    issues = catalog.check(Flags.parse(argv, catalog.booleans())) if catalog else []
    if issues:
        body.append("\nwarnings:\n", style="bold")
        for issue in issues:
            body.append(f"  {issue}\n", style="red" if issue.level == "error" else "yellow")
    body.append("\nwill run:\n", style="bold")
    body.append(client.restart_preview(name, list(argv)) + "\n")
    return body


class ServerActions(Actions):
    """Server actions: restart with new flags (editor → confirm), roll back, stop, show the log."""

    def restart_selected(self) -> None:
        name = self.selected_server()
        if name is None:
            self.notify("no server configured", severity="warning")
            return
        self.open_flag_editor(name)

    def unless_refused(self, name: str, then: Callable[[], None]) -> None:
        """Call ``then`` (open an editor or a confirm that restarts ``name``) unless the
        restart would be refused now: read-only, a benchmark running against it, another
        process restarting it (:meth:`SessionClient.restart_refusal_now`, no journal read: the
        editor opens at once, keys typed right after ``r`` reach it); then the refusal is
        shown instead, before the operator types or confirms anything. A benchmark another
        optui process runs is looked up in the journal meanwhile: the dialog ``then`` opened
        is closed with the refusal when it finds one."""
        try:
            why = self.client.restart_refusal_now(name)
        except SessionError as exc:
            why = str(exc)
        if why:
            self.notify(why, severity="warning", timeout=8)
            return
        then()
        opened = self.app.screen

        async def elsewhere() -> None:
            why = await self.client.restart_refusal(name)
            if why:
                self.notify(why, severity="warning", timeout=8)
                if self.app.screen is opened and opened is not self.app.screen_stack[0]:
                    opened.dismiss(None)

        self.run_worker(elsewhere(), group=f"restart-check-{name}", exclusive=True, exit_on_error=False)

    def open_flag_editor(self, name: str) -> None:
        """Open the flag editor for ``name`` (with the flag catalogue, learned from the
        server's ``--help`` in the background the first time); on apply, confirm, restart.
        A restart that would be refused now is refused before it opens."""
        self.unless_refused(name, lambda: self._open_flag_editor(name))

    def _open_flag_editor(self, name: str) -> None:
        from optui.core.flags.argv import Flags  # after the first frame (see OptuiApp.compose)
        from optui.ui.screens.flag_editor import FlagEditorScreen

        cfg, status = self.client.server_config(name), self.client.server_status(name)
        if cfg.control == "none":
            self.notify(f"{name}: control = 'none' — optui only observes it", severity="warning")
            return
        catalog = self.client.cached_catalog(name)
        program = " ".join(Flags.parse(status.argv).program)
        note = None if catalog else f"learning the flags from `{program} --help`…"
        base, base_from = self.client.restart_base(name)  # the CLI's base too: last good when it is down
        if base_from == "last good" and tuple(base) != tuple(status.argv):
            self.notify(f"{name} is not running: editing its last good flags")
        editor = FlagEditorScreen(name, cfg.host, cfg.control, list(base), presets=cfg.presets,
                                  catalog=catalog, catalog_note=note,
                                  relearn=lambda: self.run_worker(self._learn_catalog(name, editor, refresh=True),
                                                                  group=f"catalog-{name}", exit_on_error=False),
                                  review=lambda argv, answered: self.confirm_restart(name, argv, answered=answered))

        def edited(argv: list[str] | None) -> None:  # the review was confirmed
            if argv is not None:
                self.start_restart(name, argv, "flag editor")

        self.push_screen(editor, edited)
        if catalog is None:
            self.run_worker(self._learn_catalog(name, editor), group=f"catalog-{name}", exit_on_error=False)

    async def _learn_catalog(self, name: str, editor: FlagEditorScreen, refresh: bool = False) -> None:
        catalog, why_not = await self.client.learn_catalog(name, refresh=refresh)
        if catalog is None:
            editor.set_catalog(None, f"no flag catalogue ({why_not}): names and values are not checked")
            return
        editor.set_catalog(catalog)

    def restart_with_preset(self, name: str, preset: str) -> None:
        """Confirm and restart ``name`` with a configured preset applied (refused before the
        confirm when a restart would be refused now)."""
        self.unless_refused(name, lambda: self._restart_with_preset(name, preset))

    def _restart_with_preset(self, name: str, preset: str) -> None:
        from optui.core.flags.argv import Flags  # after the first frame (see OptuiApp.compose)

        p = self.client.server_config(name).presets[preset]
        base, _ = self.client.restart_base(name)
        argv = Flags.parse(base).apply(p.set, p.unset).to_argv()
        self.confirm_restart(name, argv, reason=f"preset {preset}")

    def confirm_restart(self, name: str, argv: list[str], reason: str = "flag editor",
                        answered: Callable[[bool], None] | None = None) -> None:
        """Show host, controller, diff, the catalogue's warnings and exactly what will run;
        restart on confirmation, or tell ``answered`` (True: confirmed) and let it restart."""
        from optui.ui.screens.confirm import ConfirmScreen

        body = restart_review(self.client, name, argv)

        def confirmed(ok: bool | None) -> None:
            if answered is not None:
                answered(bool(ok))
            elif ok:
                self.start_restart(name, argv, reason)

        self.push_screen(ConfirmScreen(f"Restart {name}?", body, "Restart"), confirmed)

    def start_restart(self, name: str, argv: list[str], reason: str) -> None:
        """Restart ``name`` with ``argv`` in a worker (one restart per server at a time)."""
        self.run_worker(self._restart(name, argv, reason), group=f"restart-{name}", exit_on_error=False)

    async def _restart(self, name: str, argv: list[str], reason: str) -> None:
        why = await self.client.restart_refusal(name)  # refused meanwhile: one toast, not "restarting…" then why not
        if why:
            self.notify(why, severity="warning", timeout=8)
            return
        self.notify(f"restarting {name}…")
        # this restart reports its own outcome: the session's crash alert for it is not shown
        # again as a second toast (see OptuiApp._show_alerts)
        self.host.restarts_reporting.add(name)
        try:
            await self._restart_and_report(name, argv, reason)
        finally:
            self.app.set_timer(5.0, lambda: self.host.restarts_reporting.discard(name))

    async def _restart_and_report(self, name: str, argv: list[str], reason: str) -> None:
        from optui.core.flags.argv import FlagError  # after the first frame (see OptuiApp.compose)

        try:  # the checks every door makes (flag catalogue before anything stops, rollback policy)
            outcome = await self.client.restart_checked(name, list(argv), reason)
        except (SessionError, FlagError) as exc:
            self.fail(exc)
            return
        status = outcome.status
        if outcome.ok and status.config_mismatch:  # ready, but not with the flags it will be credited with
            self.notify(f"{name} is ready but UNVERIFIED: {status.config_mismatch[0]}", severity="warning", timeout=15)
            return
        if outcome.ok:
            self.notify(f"{name} is ready")
            return
        try:  # why it failed, as journaled (off the event loop: the journal may be locked)
            failed = await self.client.last_failure(name)
        except Exception:  # noqa: BLE001 - the crash class of the status says it as well
            failed = None
        klass = (failed.data.get("class") if failed else None) or status.crash_class
        if outcome.rolled_back:  # rollback = "auto" already restored the last good flags
            self.notify(f"{name} failed ({klass}); rolled back to the last good flags: {status.state.value}",
                        severity="warning", timeout=15)
            return
        if outcome.offer is not None:
            self.confirm_rollback(name, after=str(status.crash_class))  # its body says why: no toast over it
            return
        lines = "\n".join(status.crash_lines[-3:])
        self.notify(f"{name} failed: {status.crash_class}\n{lines}", severity="error", timeout=15)

    def rollback_selected(self) -> None:
        name = self.selected_server()
        if name is not None:
            self.ask_rollback(name)

    def ask_rollback(self, name: str) -> None:
        """Confirm a roll back of ``name`` (``ctrl+r``, the palette), unless refused now."""
        self.unless_refused(name, lambda: self.confirm_rollback(name))

    def confirm_rollback(self, name: str, *, after: str | None = None) -> None:
        """Confirm and restart ``name`` with its last good flags; ``after`` (a crash class)
        makes it the offer that follows a failed restart. The question warns when those flags
        measured worse or were rejected (the journal read off the loop first)."""
        self.run_worker(self._confirm_rollback(name, after), group=f"rollback-ask-{name}", exclusive=True,
                        exit_on_error=False)

    async def _confirm_rollback(self, name: str, after: str | None) -> None:
        from optui.core.flags.argv import Flags  # after the first frame (see OptuiApp.compose)
        from optui.ui.screens.confirm import ConfirmScreen

        status = self.client.server_status(name)
        last_good = status.last_good_argv
        if not last_good:
            self.notify(f"{name}: no last good flags recorded yet", severity="warning")
            return
        try:
            warning = await self.client.rollback_warning(name, last_good)
        except Exception as exc:  # noqa: BLE001 - a locked or broken journal: say that it was not checked
            warning = f"not checked how they measured ({exc})"
        body = Text()
        if after:
            body.append(f"The restart failed: {after}\n\n", style="bold")
        if warning:  # "last good" is the last that became ready, not the last that measured well
            body.append(f"⚠ {warning}\n\n", style="bold red")
        body.append("back to the last flags that became ready:\n", style="bold")
        changes = Flags.parse(status.argv).diff(Flags.parse(last_good))
        for change in changes:
            body.append(f"  {change.describe()}\n")
        if not changes:
            body.append("  (none: it runs them now; a plain restart)\n", style="dim")
        body.append("\n" + shlex.join(last_good) + "\n")
        if after and status.crash_lines:  # after what will happen: at 50x30 the log hid the diff
            body.append("\nthe last lines of its log:\n", style="bold")
            for line in status.crash_lines[-4:]:
                body.append(f"  {headline(line, limit=160)}\n")
        reason = f"offered after {after}" if after else "operator"
        title = f"{name} failed — roll back to its last good flags?" if after else f"Roll back {name} to its last good flags?"

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_worker(self._rollback(name, reason), group=f"restart-{name}", exit_on_error=False)

        self.push_screen(ConfirmScreen(title, body, "Roll back"), confirmed)

    async def _rollback(self, name: str, reason: str = "operator") -> None:
        try:
            status = await self.client.rollback(name, reason=reason)
            self.notify(f"{name}: {status.state.value}")
        except SessionError as exc:
            self.fail(exc)

    def confirm_stop(self, name: str) -> None:
        """Confirm and stop ``name``."""
        from optui.ui.screens.confirm import ConfirmScreen

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_worker(self.client.stop_server(name), group=f"restart-{name}", exit_on_error=False)

        cfg, status = self.client.server_config(name), self.client.server_status(name)
        self.push_screen(ConfirmScreen(f"Stop {name}?", f"host: {cfg.host}  control: {cfg.control}\n{shlex.join(status.argv)}", "Stop"), confirmed)

    def log_of_selected(self) -> None:
        name = self.selected_server()
        if name is not None:
            self.show_server_log(name)

    def show_command(self, name: str) -> None:
        """The server's full running command (one pasteable line) and its flags that differ
        from the configured launch: what the panel's row cuts."""
        from optui.core.flags.argv import Flags
        from optui.core.journal.experiments import config_changes
        from optui.ui.screens.details import DetailsScreen
        from optui.ui.widgets.server_panel import changed_first

        st = self.client.server_status(name)
        body = Text()
        body.append("running command (pid " + (str(st.pid) if st.pid else "-") + "):\n", style="bold")
        body.append(shlex.join(st.argv) + "\n\n" if st.argv else "(no argv)\n\n")
        changes = config_changes(Flags.parse(st.configured_argv), Flags.parse(st.argv)) if st.configured_argv else []
        body.append("changed vs optui.toml's launch:\n", style="bold")
        body.append("\n".join(f"  {line}" for line in changes) + "\n" if changes else "  (none)\n")
        changed, _ = changed_first(st.argv, st.configured_argv)
        if changed:
            body.append(f"\nthe panel lists these first: {changed}\n", style="dim")
        self.push_screen(DetailsScreen(f"{name}: running command", body))

    def show_server_log(self, name: str) -> None:
        """Show why the server failed (class and the relevant lines) above its log tail."""
        from optui.ui.screens.server_log import ServerLogScreen

        st = self.client.server_status(name)
        log_tail, where = self.client.server_log(name)
        crash = (str(st.crash_class), st.message or "", tuple(st.crash_lines)) if st.crash_class else None
        self.push_screen(ServerLogScreen(name, where, log_tail, crash))

