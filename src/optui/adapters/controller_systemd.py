"""``control = "systemd"``: restart a unit with new flags through a drop-in.

A start writes ``/etc/systemd/system/UNIT.d/optui.conf`` (``~/.config/systemd/user/...``
for a user unit) with ``ExecStart=`` reset and the new command quoted for systemd
(:func:`optui.core.server.systemd_unit.render_dropin`), then runs, in order::

    systemctl daemon-reload
    systemctl show UNIT -p ActiveState,SubState,Result,NRestarts,InvocationID,ExecMainPID,...
    systemctl reset-failed UNIT          # only when failed / start-limit-hit
    journalctl -u UNIT -n 1 -o json --no-pager     # the cursor before this start
    systemctl restart --no-block UNIT    # optui runs its own ready gate
    systemctl show UNIT -p ...           # until InvocationID changes

Logs: ``journalctl -u UNIT -o json -f --no-pager --after-cursor=CURSOR`` (restarted from
the last cursor if it exits). State: ``systemctl show`` on every monitor tick; a changed
InvocationID or a higher NRestarts than at our start means the watched start died (systemd
may already have restarted it). Stop: ``systemctl stop UNIT`` (TERM, ``TimeoutStopSec``,
KILL of the whole cgroup). The drop-in stays: it is the unit's current command;
``systemctl revert UNIT`` removes it. Facts: ``../shared/reference/bench_todo_ops.md`` 3.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from optui.adapters import proc
from optui.adapters.controller import ControllerError
from optui.adapters.pidfile import Launch, read_pidfile, write_pidfile
from optui.adapters.shell import LocalShell, LogSource, Shell, ShellError
from optui.core.server.systemd_unit import (
    SHOW_PROPERTIES,
    UnitError,
    UnitState,
    dropin_exec_start,
    parse_journal_line,
    render_dropin,
)
from optui.core.text.textstream import strip_ansi

SYSTEM_UNIT_DIR = "/etc/systemd/system"
USER_UNIT_DIR = "~/.config/systemd/user"
START_WAIT_S = 15.0


class SystemdController:
    """Controls ``unit`` through ``shell`` (see module doc). ``user`` selects the user
    manager (``systemctl --user``, ``journalctl --user-unit``)."""

    def __init__(self, name: str, unit: str, state_dir: Path, *, shell: Shell | None = None, user: bool = False,
                 unit_dir: str | None = None, cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.unit = unit
        self.shell: Shell = shell or LocalShell()
        self.user = user
        base = unit_dir or (USER_UNIT_DIR if user else SYSTEM_UNIT_DIR)
        # "~" stays: the shell resolves it on the unit's host (the local home is not the
        # remote one)
        self.dropin_path = f"{base.rstrip('/')}/{unit}.d/optui.conf"
        self.cwd = cwd
        self.env = env or {}
        self.pidfile = state_dir / "servers" / f"{name}.json"
        self.launch: Launch | None = None
        self.state: UnitState | None = None

    # ------------------------------------------------------------ commands
    def systemctl(self, *args: str) -> list[str]:
        """``systemctl [--user] ARGS`` as an argv list."""
        return ["systemctl", *(["--user"] if self.user else []), *args]

    def journalctl(self, *args: str) -> list[str]:
        """``journalctl -u UNIT ARGS`` (``--user-unit`` for a user unit)."""
        unit = [f"--user-unit={self.unit}"] if self.user else ["-u", self.unit]
        return ["journalctl", *unit, *args]

    async def _run(self, argv: list[str], timeout_s: float = 30.0) -> str:
        try:
            return (await self.shell.run(argv, timeout_s=timeout_s)).check().stdout
        except ShellError as exc:
            raise ControllerError(f"{self.name}: {exc}") from exc

    async def show(self) -> UnitState:
        """The unit's state (``systemctl show UNIT -p ...``)."""
        text = await self._run(self.systemctl("show", self.unit, "-p", ",".join(SHOW_PROPERTIES)))
        return UnitState.from_show(text)

    async def _last_cursor(self) -> str:
        try:
            result = await self.shell.run(self.journalctl("-n", "1", "-o", "json", "--no-pager"), timeout_s=30.0)
        except ShellError:
            return ""
        for line in reversed(result.stdout.splitlines()):
            entry = parse_journal_line(line)
            if entry is not None and entry.cursor:
                return entry.cursor
        return ""

    def preview(self, argv: list[str]) -> str:
        try:
            text = render_dropin(argv, env=self.env, cwd=self.cwd)
        except UnitError as exc:
            return f"cannot write the drop-in: {exc}"
        steps = [shlex.join(self.systemctl("daemon-reload")), shlex.join(self.systemctl("restart", "--no-block", self.unit))]
        return f"write {self.dropin_path} on {self.shell.host}:\n{text}then: " + "; ".join(steps)

    # ------------------------------------------------------------ lifecycle
    async def start(self, argv: list[str], *, keep_log_as: str | None = None) -> Launch:  # the unit's journal keeps its logs
        try:
            text = render_dropin(argv, env=self.env, cwd=self.cwd)
        except UnitError as exc:
            raise ControllerError(f"{self.name}: {exc}") from exc
        try:
            await self.shell.write_file(self.dropin_path, text)
        except ShellError as exc:
            hint = "" if self.user else " (run optui as root, or use a user unit: systemd_user = true)"
            raise ControllerError(f"{self.name}: {exc}{hint}") from exc
        await self._run(self.systemctl("daemon-reload"))
        before = await self.show()
        if before.needs_reset:
            await self._run(self.systemctl("reset-failed", self.unit))
        cursor = await self._last_cursor()
        started_at = time.time()
        await self._run(self.systemctl("restart", "--no-block", self.unit), timeout_s=60.0)
        state = await self._wait_new_invocation(before.invocation_id)
        self.state = state
        self.launch = Launch(state.main_pid, tuple(argv), "", 0, started_at, invocation=state.invocation_id,
                             cursor=cursor, n_restarts=state.n_restarts)
        write_pidfile(self.pidfile, self.launch)
        return self.launch

    async def _wait_new_invocation(self, old: str) -> UnitState:
        deadline = time.monotonic() + START_WAIT_S
        while True:
            state = await self.show()
            if state.invocation_id and state.invocation_id != old:
                return state
            if time.monotonic() > deadline:
                raise ControllerError(f"{self.name}: {self.unit} did not start within {START_WAIT_S:.0f} s ({state.describe()})")
            await asyncio.sleep(0.2)

    async def stop(self, timeout_s: float) -> proc.StopOutcome:
        t0 = time.monotonic()
        # systemd itself sends TERM, waits TimeoutStopSec and KILLs the whole cgroup
        await self._run(self.systemctl("stop", self.unit), timeout_s=timeout_s + 60.0)
        self.state = await self.show()
        with contextlib.suppress(FileNotFoundError):
            self.pidfile.unlink()
        how = "kill" if self.state.result == "timeout" else "term"
        return proc.StopOutcome(how, time.monotonic() - t0, self.state.returncode)

    async def refresh(self) -> None:
        try:
            self.state = await self.show()
        except ControllerError:
            self.state = None

    def process_state(self) -> str:
        st = self.state
        if st is None:
            return "unknown"
        launch = self.launch
        if launch is not None:
            if st.invocation_id and launch.invocation and st.invocation_id != launch.invocation:
                return "exited"  # the start we watch died (systemd may have restarted the unit)
            if launch.n_restarts is not None and st.n_restarts is not None and st.n_restarts > launch.n_restarts:
                return "exited"
        if st.sub_state == "auto-restart":
            return "exited"
        if st.active_state in ("active", "activating", "reloading"):
            return "running"
        if launch is None:
            return "unknown"
        return "exited" if st.active_state in ("inactive", "failed", "deactivating") else "unknown"

    def returncode(self) -> int | None:
        return self.state.returncode if self.state is not None else None

    def paused(self) -> bool:
        return False  # a unit's processes are not checked for SIGSTOP: a frozen one turns DEGRADED by its health

    def exit_note(self) -> str | None:
        return self.state.describe() if self.state is not None else None

    async def attach(self) -> Launch | None:
        await self.refresh()
        st = self.state
        if st is None or st.active_state not in ("active", "activating", "reloading"):
            return None
        recorded = read_pidfile(self.pidfile)
        argv: tuple[str, ...] = ()
        if recorded is not None and recorded.invocation == st.invocation_id:
            argv = recorded.argv
        else:
            with contextlib.suppress(ShellError, UnitError):
                argv = tuple(dropin_exec_start(await self.shell.read_file(self.dropin_path) or "") or ())
        self.launch = Launch(st.main_pid, argv, "", 0, recorded.started_at if recorded else time.time(),
                             invocation=st.invocation_id, cursor=recorded.cursor if recorded else "", n_restarts=st.n_restarts)
        return self.launch

    def open_log(self, on_line: Callable[[str], None], *, resume: bool = False) -> LogSource | None:
        if self.launch is None:
            return None
        return JournalFollower(self.shell, self.journalctl, on_line, cursor="" if resume else self.launch.cursor,
                               from_now=resume)

    async def pids(self) -> set[int]:
        st = self.state or await self.show()
        pids = {st.main_pid} if st.main_pid else set()
        if st.control_group:
            with contextlib.suppress(ShellError):
                text = await self.shell.read_file(f"/sys/fs/cgroup{st.control_group}/cgroup.procs") or ""
                pids |= {int(x) for x in text.split() if x.isdigit()}
        return pids


class JournalFollower:
    """Follows ``journalctl ... -o json -f`` and calls ``on_line`` per message line.

    Resumes after the last seen cursor if journalctl exits (reconnect, rotation). A
    ``MESSAGE`` given as a byte array (ANSI colours, ``\\r`` progress redraws) is decoded,
    progress redraws collapse to their last state and escapes are stripped.
    """

    def __init__(self, shell: Shell, journalctl: Callable[..., list[str]], on_line: Callable[[str], None], *,
                 cursor: str = "", from_now: bool = False, retry_s: float = 1.0) -> None:
        self.shell = shell
        self.journalctl = journalctl
        self.on_line = on_line
        self.cursor = cursor
        self.from_now = from_now
        self.retry_s = retry_s
        self._stopped = False

    def _argv(self) -> list[str]:
        if self.cursor:
            where = [f"--after-cursor={self.cursor}"]
        else:
            where = ["-n", "0" if self.from_now else "all"]
        return self.journalctl("-o", "json", "-f", "--no-pager", *where)

    def deliver(self, json_line: str) -> None:
        """Handle one line of journalctl's output."""
        entry = parse_journal_line(json_line)
        if entry is None:
            if json_line.strip() and not json_line.startswith("-- "):
                self.on_line(json_line)  # journalctl's own complaint (permissions...)
            return
        if entry.cursor:
            self.cursor = entry.cursor
        for part in entry.message.replace("\r\n", "\n").split("\n"):
            self.on_line(strip_ansi(re.split(r"\r", part)[-1]) if "\r" in part else strip_ansi(part))

    async def run(self) -> None:
        delay = self.retry_s
        while not self._stopped:
            delivered = 0
            try:
                async with contextlib.aclosing(self.shell.stream_lines(self._argv())) as lines:
                    async for line in lines:
                        self.deliver(line)
                        delivered += 1
                        if self._stopped:
                            break
            except OSError as exc:
                self.on_line(f"optui: cannot run journalctl: {exc}")
            if not self._stopped:
                # journalctl exited (rotation, reconnect): resume from the cursor, backing
                # off while it keeps failing at once
                delay = self.retry_s if delivered else min(30.0, delay * 2)
                await asyncio.sleep(delay)

    def stop(self) -> None:
        self._stopped = True

    def flush(self) -> None:
        return None

    async def drain(self, timeout_s: float = 5.0) -> None:
        """Stop following and deliver every entry journald has after the last one seen
        (``journalctl ... --after-cursor`` without ``-f``): the lines a unit wrote just
        before it exited, which the follow stream may not have passed on yet."""
        self._stopped = True
        where = [f"--after-cursor={self.cursor}"] if self.cursor else ["-n", "0" if self.from_now else "all"]
        try:
            result = await self.shell.run(self.journalctl("-o", "json", "--no-pager", *where), timeout_s=timeout_s)
        except ShellError:
            return
        entries = [(line, parse_journal_line(line)) for line in result.stdout.splitlines()]
        seen = self.cursor  # the stream may have delivered some of them meanwhile: skip up to its cursor
        if seen and any(e is not None and e.cursor == seen for _, e in entries):
            while entries and not (entries[0][1] is not None and entries[0][1].cursor == seen):
                entries.pop(0)
            entries.pop(0)
        for line, _ in entries:
            self.deliver(line)
