"""One persistent SSH connection per rack host (asyncssh), reused for everything.

- Target: an ``~/.ssh/config`` alias or ``user@host[:port]``; ssh_config is honoured by
  asyncssh (``HostName``, ``User``, ``Port``, ``IdentityFile``, ``ProxyJump``,
  ``ServerAliveInterval``...; not ``StrictHostKeyChecking``/``ControlMaster``, see
  ronf/asyncssh#685); keys and the ssh-agent authenticate.
- Host keys are verified against known_hosts. An unknown key is refused with its
  fingerprint (state ``untrusted``); trusting it is an explicit operator action
  (:meth:`SshHost.trust_host_key`) that appends it to known_hosts. A *changed* key is refused
  and never offered for trust (the old line must be removed by hand). There is no
  "accept all" (``known_hosts=None`` is never used).
- Keepalive on, connect timeout; a dropped connection is re-established with exponential
  backoff (1, 2, 4 … 30 s, jittered); the state is visible to the UI at all times and a lost
  host never blocks another one or the event loop.
- Commands are argv lists joined with :func:`shlex.join` here, at the SSH boundary only, so
  nothing user-supplied reaches the remote shell unquoted.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import random
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from optui.adapters.aio import wait_set, within


class SshState(enum.StrEnum):
    """Connection state of a host."""

    CONNECTING = "connecting"
    LIVE = "live"
    LOST = "lost"  # reconnecting with backoff
    UNTRUSTED = "untrusted"  # host key unknown or changed: refused until the operator decides
    FAILED = "failed"  # authentication or configuration error (retried slowly)


class SshError(Exception):
    """A remote command could not be run (not connected, timed out, channel failed)."""


@dataclass(frozen=True, slots=True)
class RemoteResult:
    """Outcome of a remote command: exit status (``-N`` when killed by signal N), output
    (bytes decoded as UTF-8 with replacement), wall time in s."""

    returncode: int
    stdout: str
    stderr: str
    duration_s: float


@dataclass(frozen=True, slots=True)
class HostKeyInfo:
    """The key a server presented: ``fingerprint`` (SHA256:...), ``known_hosts_line``
    (what trusting it appends), ``changed`` (known_hosts has a different key for it)."""

    fingerprint: str
    known_hosts_line: str
    changed: bool


def parse_target(target: str) -> tuple[str | None, str, int | None]:
    """``user@host:port`` / ``host`` / ``[::1]:2222`` → (user, host, port)."""
    user = None
    if "@" in target:
        user, target = target.rsplit("@", 1)
    port = None
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        return user, host, port
    if target.count(":") == 1:
        host, _, p = target.partition(":")
        if p.isdigit():
            return user, host, int(p)
    return user, target, port


class SshHost:
    """The connection to one host (see module doc). Call :meth:`start` once, then use
    :meth:`run` / :meth:`create_process`; :meth:`close` when done.

    ``known_hosts`` defaults to ``~/.ssh/known_hosts``; ``config`` to asyncssh's default
    (``~/.ssh/config``). ``on_command(host, argv, returncode, duration_s)`` records every
    command run (the command log).
    """

    def __init__(
        self,
        name: str,
        target: str,
        *,
        known_hosts: str | Path | None = None,
        config: str | Path | Sequence[str | Path] | None = None,
        client_keys: Sequence[str | Path] | None = None,
        connect_timeout_s: float = 10.0,
        keepalive_s: float = 15.0,
        max_backoff_s: float = 30.0,
        on_command: Callable[[str, list[str], int | None, float], None] | None = None,
        on_state: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.target = target
        self.user, self.host, self.port = parse_target(target)
        self.known_hosts = Path(known_hosts).expanduser() if known_hosts else Path("~/.ssh/known_hosts").expanduser()
        self.config = config
        self.client_keys = [str(k) for k in client_keys] if client_keys else None
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.max_backoff_s = max_backoff_s
        self.on_command = on_command
        self.on_state = on_state
        self.state = SshState.CONNECTING
        self.error: str | None = None
        self.host_key: HostKeyInfo | None = None
        self.next_retry_at: float | None = None
        self.connected_at: float | None = None
        self.reconnects = 0
        self._conn: asyncssh.SSHClientConnection | None = None
        self._live = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    # ---------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the connect/reconnect loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"ssh-{self.name}")

    async def close(self) -> None:
        """Close the connection and stop reconnecting."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await within(self._conn.wait_closed(), 2.0)
            self._conn = None

    def retry_now(self) -> None:
        """Skip the current backoff wait (operator pressed refresh, or trusted a key)."""
        self._wake.set()

    def _set_state(self, state: SshState, error: str | None = None) -> None:
        self.state, self.error = state, error
        if state is SshState.LIVE:
            self._live.set()
        else:
            self._live.clear()
        if self.on_state is not None:
            self.on_state()

    def _options(self) -> dict:
        options: dict = {
            "known_hosts": str(self.known_hosts),
            "connect_timeout": self.connect_timeout_s,
            "keepalive_interval": self.keepalive_s,
            "keepalive_count_max": 3,
        }
        if self.user:
            options["username"] = self.user
        if self.port:
            options["port"] = self.port
        if self.config is not None:
            options["config"] = [str(c) for c in self.config] if isinstance(self.config, (list, tuple)) else [str(self.config)]
        if self.client_keys is not None:
            options["client_keys"] = self.client_keys
            options["agent_path"] = None
        return options

    async def _supervise(self) -> None:
        backoff = 1.0
        while True:
            self._set_state(SshState.CONNECTING if self.reconnects == 0 else SshState.LOST, self.error)
            try:
                self._conn = await asyncssh.connect(self.host, **self._options())
            except asyncssh.HostKeyNotVerifiable as exc:
                self.host_key = await self._probe_host_key()
                what = "changed (possible attack: remove the old line from known_hosts to proceed)" if (
                    self.host_key and self.host_key.changed) else "unknown"
                fp = self.host_key.fingerprint if self.host_key else "?"
                self._set_state(SshState.UNTRUSTED, f"host key {what}: {fp} ({exc})")
                await self._wait_retry(max(self.max_backoff_s, 30.0))
                continue
            except (asyncssh.PermissionDenied, asyncssh.ConfigParseError, ValueError) as exc:
                self._set_state(SshState.FAILED, f"{type(exc).__name__}: {exc}")
                await self._wait_retry(self.max_backoff_s)
                continue
            except (TimeoutError, OSError, asyncssh.Error) as exc:
                self.reconnects += 1
                self._set_state(SshState.LOST, f"{type(exc).__name__}: {exc}".rstrip(": "))
                await self._wait_retry(backoff)
                backoff = min(self.max_backoff_s, backoff * 2)
                continue
            backoff = 1.0
            self.connected_at = time.time()
            self.next_retry_at = None
            self._set_state(SshState.LIVE)
            try:
                await self._conn.wait_closed()
            finally:
                self._conn = None
            self.reconnects += 1
            self._set_state(SshState.LOST, "connection closed")

    async def _wait_retry(self, delay: float) -> None:
        delay = delay * (0.8 + 0.4 * random.random())
        self.next_retry_at = time.time() + delay
        self._wake.clear()
        await wait_set(self._wake, delay)  # a cancel (closing the session) always ends the reconnect loop

    # ---------------------------------------------------------- host keys
    def _resolved(self) -> tuple[str, int]:
        """(host, port) after ssh_config (``HostName``, ``Port``, ``HostKeyAlias``): the name
        known_hosts entries are checked against."""
        options = self._options()
        # only resolves ssh_config; these options never reach a connection (no key is accepted here)
        resolved = asyncssh.SSHClientConnectionOptions(
            config=options.get("config", ()), host=self.host, port=options.get("port", ()), known_hosts=None)
        name = resolved.host_key_alias or resolved.host or self.host
        return name, resolved.port or 22

    async def _probe_host_key(self) -> HostKeyInfo | None:
        try:
            host, port = self._resolved()
            key = await within(asyncssh.get_server_host_key(host, port), self.connect_timeout_s)
        except (TimeoutError, OSError, asyncssh.Error, ValueError):
            return None
        if key is None:
            return None
        pattern = host if port == 22 else f"[{host}]:{port}"
        line = f"{pattern} {key.export_public_key().decode().strip()}"
        changed = False
        with contextlib.suppress(OSError, ValueError):
            if self.known_hosts.exists():
                known = asyncssh.read_known_hosts(str(self.known_hosts))
                trusted, *_ = known.match(host, "", port)
                changed = bool(trusted)
        return HostKeyInfo(key.get_fingerprint("sha256"), line, changed)

    def trust_host_key(self) -> str:
        """Append the presented (unknown) key to known_hosts and reconnect; returns the
        line written. Raises SshError when there is no unknown key to trust (a changed key
        is never trusted here)."""
        info = self.host_key
        if info is None or self.state is not SshState.UNTRUSTED:
            raise SshError(f"{self.name}: no unknown host key to trust")
        if info.changed:
            raise SshError(f"{self.name}: the host key CHANGED ({info.fingerprint}); remove the old entry from "
                           f"{self.known_hosts} yourself if the change is expected")
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with open(self.known_hosts, "a", encoding="utf-8") as f:
            f.write(info.known_hosts_line + "\n")
        self.retry_now()
        return info.known_hosts_line

    # ---------------------------------------------------------- commands
    async def connection(self, timeout_s: float) -> asyncssh.SSHClientConnection:
        """The live connection, waiting up to ``timeout_s``; SshError otherwise."""
        self.start()
        if self._live.is_set() and self._conn is not None:
            return self._conn
        try:
            await within(self._live.wait(), max(timeout_s, 0.001))
        except TimeoutError:
            raise SshError(f"{self.name}: not connected ({self.state.value}: {self.error or 'no answer'})") from None
        if self._conn is None:
            raise SshError(f"{self.name}: connection lost")
        return self._conn

    def is_down(self) -> bool:
        """True while the host is known to be unreachable (lost, untrusted, failed): a
        caller that only polls should not wait for it (see ``wait_s`` below)."""
        return self.state in (SshState.LOST, SshState.UNTRUSTED, SshState.FAILED)

    async def run(self, argv: Sequence[str], *, timeout_s: float = 30.0, stdin: str | bytes | None = None,
                  wait_s: float | None = None, log_argv: Sequence[str] | None = None) -> RemoteResult:
        """Run ``argv`` on the host (joined with shlex.join) and wait for it; SshError when
        not connected or on timeout (the remote process is not killed by that: callers
        wrap long commands in ``timeout``). ``stdin`` is sent then closed (no stdin: EOF at
        once). ``wait_s``: how long to wait for the connection (default: up to the connect
        timeout). ``log_argv``: what the command log shows (default ``argv``; empty: nothing,
        the caller logs it, as a server start's launch wrapper)."""
        wait = min(timeout_s, self.connect_timeout_s) if wait_s is None else wait_s
        conn = await self.connection(wait)
        shown = list(log_argv if log_argv is not None else argv)
        command = shlex.join(list(argv))
        data = stdin.encode() if isinstance(stdin, str) else stdin
        io = {"input": data} if data is not None else {"stdin": asyncssh.DEVNULL}
        t0 = time.monotonic()
        try:
            done = await within(conn.run(command, check=False, encoding=None, **io), timeout_s)
        except TimeoutError:
            self._log(shown, None, time.monotonic() - t0)
            raise SshError(f"{self.name}: {shown[0]} timed out after {timeout_s:.0f}s") from None
        except (OSError, asyncssh.Error) as exc:
            self._log(shown, None, time.monotonic() - t0)
            raise SshError(f"{self.name}: {shown[0]}: {exc}") from exc
        duration = time.monotonic() - t0
        if done.exit_status is None and done.exit_signal is None:  # the channel died with the link
            self._log(shown, None, duration)
            raise SshError(f"{self.name}: {shown[0]}: connection lost before it finished")
        self._log(shown, done.returncode, duration)

        def text(data) -> str:
            return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else (data or "")

        returncode = done.returncode
        assert returncode is not None  # -signal or the exit status: one of them is set (checked above)
        return RemoteResult(returncode, text(done.stdout), text(done.stderr), duration)

    async def create_process(self, argv: Sequence[str], *, timeout_s: float = 10.0, merge_stderr: bool = True,
                             keep_stdin: bool = False, log_argv: Sequence[str] | None = None) -> asyncssh.SSHClientProcess:
        """Start a long-running remote command in bytes mode. ``merge_stderr``: stderr joins
        stdout (else it is ``process.stderr``); ``keep_stdin``: the remote stdin stays open
        (never written: it reaches EOF when the channel closes), else EOF at once."""
        conn = await self.connection(timeout_s)
        self._log(list(log_argv if log_argv is not None else argv), None, 0.0)
        options: dict = {"stderr": asyncssh.STDOUT} if merge_stderr else {}
        if not keep_stdin:
            options["stdin"] = asyncssh.DEVNULL
        try:
            return await conn.create_process(shlex.join(list(argv)), encoding=None, **options)
        except (OSError, asyncssh.Error) as exc:
            raise SshError(f"{self.name}: {argv[0]}: {exc}") from exc

    def _log(self, argv: Sequence[str], rc: int | None, duration: float) -> None:
        if self.on_command is not None and argv:
            self.on_command(self.name, list(argv), rc, duration)
