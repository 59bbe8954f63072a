"""Server actions: a restart with new flags as one sequence (refusal → editor → review →
restart → :meth:`ServerActions.report_restart`, the one place that says how a restart ended,
a crashed one included), roll back (offered after a failed restart), stop, show the log."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.text import Text

from optui.core.text.safe_text import headline
from optui.ui.client import SessionError
from optui.ui.intents.base import Actions

if TYPE_CHECKING:
    from optui.session.state import RestartResult
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
    """Server actions: restart with new flags, roll back, stop, show the log.

    A restart reads top to bottom, one sequence in one worker (:meth:`_restart_sequence`):
    refused now? → flag editor → review (cancelled: back to the editor, the edit kept) →
    restart → :meth:`report_restart`, the one place that says how a restart ended (ready,
    unverified, failed with its crash class, rolled back; after a failure under ``rollback =
    "offer"``, the rollback offer)."""

    def restart_selected(self) -> None:
        name = self.selected_server()
        if name is None:
            self.notify("no server configured", severity="warning")
            return
        self.open_flag_editor(name)

    def _refused_now(self, name: str) -> bool:
        """True (and the refusal shown, before the operator types or confirms anything) when a
        restart of ``name`` would be refused now: read-only, a benchmark running against it,
        another process restarting it (:meth:`SessionClient.restart_refusal_now`, no journal
        read: the dialog opens at once, keys typed right after ``r`` reach it)."""
        try:
            why = self.client.restart_refusal_now(name)
        except SessionError as exc:
            why = str(exc)
        if why:
            self.notify(why, severity="warning", timeout=8)
        return bool(why)

    def _close_if_refused_elsewhere(self, name: str) -> None:
        """A benchmark another optui process runs against ``name`` is looked up in the journal
        while the dialog just opened shows: found, that dialog closes with the refusal (its
        sequence reads the dismissal as a cancel)."""
        opened = self.app.screen

        async def elsewhere() -> None:
            why = await self.client.restart_refusal(name)
            if why:
                self.notify(why, severity="warning", timeout=8)
                if self.app.screen is opened and opened is not self.app.screen_stack[0]:
                    opened.dismiss(None)

        self.run_worker(elsewhere(), group=f"restart-check-{name}", exclusive=True, exit_on_error=False)

    def open_flag_editor(self, name: str) -> None:
        """``r`` (and the palette): restart ``name`` with new flags, unless refused now. The
        editor opens at once (with the flag catalogue, learned from the server's ``--help`` in
        the background the first time); the rest follows in one worker."""
        if self._refused_now(name):  # control = 'none' too
            return
        editor, edited = self._open_editor(name, None)
        self._close_if_refused_elsewhere(name)
        self._run_sequence(name, self._restart_sequence(name, editor, edited))

    def _run_sequence(self, name: str, sequence) -> None:
        """Run one restart sequence of ``name`` in its worker. Never exclusive: a second
        sequence must not cancel one that is restarting the server (a restart is never
        half-killed; the session refuses a second one while the first runs)."""
        self.run_worker(sequence, group=f"restart-{name}", exit_on_error=False)

    async def _restart_sequence(self, name: str, editor: FlagEditorScreen, edited: asyncio.Future) -> None:
        """The flag editor's restart, top to bottom: the editor's argv → the review (cancelled:
        the editor again, the edit kept) → restart → report."""
        while True:
            argv = await edited
            if argv is None:  # cancelled (or closed by a refusal found meanwhile)
                return
            if await self._review(name, argv):
                break
            editor, edited = self._open_editor(name, argv, catalog_from=editor)
        await self._restart_and_report(name, argv, "flag editor")

    def _open_editor(self, name: str, edited: list[str] | None,
                     catalog_from: FlagEditorScreen | None = None) -> tuple[FlagEditorScreen, asyncio.Future]:
        """Show the flag editor of ``name`` on its base flags (``edited``: the edit to start
        from, after a cancelled review); the editor and its dismissal (the new argv or None)."""
        from optui.core.flags.argv import Flags  # after the first frame (see OptuiApp.compose)
        from optui.ui.screens.flag_editor import FlagEditorScreen

        cfg, status = self.client.server_config(name), self.client.server_status(name)
        catalog = self.client.cached_catalog(name) or (catalog_from.catalog if catalog_from else None)
        program = " ".join(Flags.parse(status.argv).program)
        note = None if catalog else f"learning the flags from `{program} --help`…"
        base, base_from = self.client.restart_base(name)  # the CLI's base too: last good when it is down
        if edited is None and base_from == "last good" and tuple(base) != tuple(status.argv):
            self.notify(f"{name} is not running: editing its last good flags")
        editor = FlagEditorScreen(name, cfg.host, cfg.control, list(base), presets=cfg.presets,
                                  catalog=catalog, catalog_note=note, edited=edited,
                                  relearn=lambda: self.run_worker(self._learn_catalog(name, editor, refresh=True),
                                                                  group=f"catalog-{name}", exit_on_error=False))
        done = self.push_screen_now(editor)
        if catalog is None:
            self.run_worker(self._learn_catalog(name, editor), group=f"catalog-{name}", exit_on_error=False)
        return editor, done

    async def _learn_catalog(self, name: str, editor: FlagEditorScreen, refresh: bool = False) -> None:
        catalog, why_not = await self.client.learn_catalog(name, refresh=refresh)
        if catalog is None:
            editor.set_catalog(None, f"no flag catalogue ({why_not}): names and values are not checked")
            return
        editor.set_catalog(catalog)

    def _review(self, name: str, argv: list[str]) -> asyncio.Future:
        """Show host, controller, diff, the catalogue's warnings and exactly what will run, now;
        its answer (True: confirmed) to await."""
        from optui.ui.screens.confirm import ConfirmScreen

        return self.push_screen_now(ConfirmScreen(f"Restart {name}?", restart_review(self.client, name, argv), "Restart"))

    def restart_with_preset(self, name: str, preset: str) -> None:
        """Confirm and restart ``name`` with a configured preset applied (refused before the
        confirm when a restart would be refused now)."""
        from optui.core.flags.argv import Flags  # after the first frame (see OptuiApp.compose)

        if self._refused_now(name):
            return
        p = self.client.server_config(name).presets[preset]
        base, _ = self.client.restart_base(name)
        argv = Flags.parse(base).apply(p.set, p.unset).to_argv()
        review = self._review(name, argv)  # the dialog shows now

        async def sequence() -> None:
            if await review:
                await self._restart_and_report(name, argv, f"preset {preset}")

        self._close_if_refused_elsewhere(name)
        self._run_sequence(name, sequence())

    async def _restart_and_report(self, name: str, argv: list[str], reason: str) -> None:
        """Restart ``name`` with ``argv`` through the session's checked restart (every door's
        checks: the flag catalogue before anything stops, the rollback policy) and report it."""
        from optui.core.flags.argv import FlagError  # after the first frame (see OptuiApp.compose)

        why = await self.client.restart_refusal(name)  # refused meanwhile: one toast, not "restarting…" then why not
        if why:
            self.notify(why, severity="warning", timeout=8)
            return
        self.notify(f"restarting {name}…")
        try:
            outcome = await self.client.restart_checked(name, list(argv), reason)
        except (SessionError, FlagError) as exc:
            self.fail(exc)
            return
        self.report_restart(outcome.result, offer=outcome.offer)

    def report_restart(self, result: RestartResult, *, offer: tuple[str, ...] | None = None) -> None:
        """Say how a restart this window asked for ended: THE one place (the flag editor's,
        a preset's, a rollback's; a crash of it raised no alert: ``told_by_caller``). A failed
        restart with a rollback ``offer`` (``rollback = "offer"``) opens the offer (its body
        says why: no toast over it)."""
        name, status = result.server, result.status
        match result.end:
            case "ready":
                self.notify(f"{name} is ready")
            case "unverified":  # ready, but not with the flags it will be credited with
                self.notify(f"{name} is ready but UNVERIFIED: {status.config_mismatch[0]}", severity="warning", timeout=15)
            case "rolled_back":  # rollback = "auto" already restored the last good flags
                self.notify(f"{name} failed ({result.crash_class}); rolled back to the last good flags: {status.state.value}",
                            severity="warning", timeout=15)
            case "failed" if offer is not None:
                self.confirm_rollback(name, after=result.crash_class)
            case "failed":
                lines = "\n".join(status.crash_lines[-3:])
                self.notify(f"{name} failed: {result.crash_class}\n{lines}", severity="error", timeout=15)

    def rollback_selected(self) -> None:
        name = self.selected_server()
        if name is not None:
            self.ask_rollback(name)

    def ask_rollback(self, name: str) -> None:
        """Confirm a roll back of ``name`` (``ctrl+r``, the palette), unless refused now."""
        if not self._refused_now(name):
            self.confirm_rollback(name)

    def confirm_rollback(self, name: str, *, after: str | None = None) -> None:
        """Confirm and restart ``name`` with its last good flags, then report it; ``after`` (a
        crash class) makes it the offer that follows a failed restart. The question warns when
        those flags measured worse or were rejected (the journal read off the loop first)."""
        self._run_sequence(name, self._rollback_sequence(name, after))

    async def _rollback_sequence(self, name: str, after: str | None) -> None:
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
        import shlex  # (not before the first frame)

        body.append("\n" + shlex.join(last_good) + "\n")
        if after and status.crash_lines:  # after what will happen: at 50x30 the log hid the diff
            body.append("\nthe last lines of its log:\n", style="bold")
            for line in status.crash_lines[-4:]:
                body.append(f"  {headline(line, limit=160)}\n")
        reason = f"offered after {after}" if after else "operator"
        title = f"{name} failed — roll back to its last good flags?" if after else f"Roll back {name} to its last good flags?"
        if not await self.push_screen_now(ConfirmScreen(title, body, "Roll back")):
            return
        try:
            result = await self.client.rollback(name, reason=reason)
        except SessionError as exc:
            self.fail(exc)
            return
        self.report_restart(result)

    def confirm_stop(self, name: str) -> None:
        """Confirm and stop ``name``."""
        from optui.ui.screens.confirm import ConfirmScreen

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_worker(self.client.stop_server(name), group=f"restart-{name}", exit_on_error=False)

        cfg, status = self.client.server_config(name), self.client.server_status(name)
        import shlex  # (not before the first frame)

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
        import shlex  # (not before the first frame)

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

