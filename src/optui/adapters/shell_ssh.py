"""The :class:`~optui.adapters.shell.Shell` of an SSH host: every command and file access
of the controllers, the flag catalogue and benchmarks, run over the host's one shared
:class:`~optui.adapters.ssh.SshHost` connection.

Quoting: commands stay argv lists up to :meth:`SshHost.run` / ``create_process``, which
join them with ``shlex.join`` (the remote login shell must be POSIX: sh, bash, zsh). Where a
remote shell script is unavoidable (a detached launch, cwd/env, a stream that dies with its
channel) the script text is a fixed constant of this module, run as
``sh -c SCRIPT sh ARG...``: whatever the operator typed arrives as ``"$1"``/``"$@"`` and is
never interpolated into script text.

- ``run``: ``timeout -k 2 N ARGV`` (so a command that outlives its timeout is killed on
  the host, not left behind); cwd/env through :data:`_RUN`.
- ``spawn_to_log`` (:data:`_LAUNCH`): the server is DETACHED from the SSH channel —
  ``setsid``, stdin ``/dev/null``, stdout+stderr appended to the remote log,
  ``PYTHONUNBUFFERED=1`` — so it keeps running when the connection drops. A small ``sh``
  wrapper (the process group leader, whose PID is returned and recorded) runs it and writes
  its exit status to ``LOG.exit`` for :meth:`RemoteSpawned.poll`.
- streams (``stream_lines``, ``follow_file``, benchmarks via ``spawn_piped``;
  :data:`_STREAM`): the command runs in its own remote session/process group, whose id is
  the first stdout line (``optui-pgid:N``, stripped here); the channel's stdin stays open
  and a watcher kills the group when it reaches EOF, i.e. when the channel closes (optui
  quit, crashed, or the link died): nothing is left running on the host.
- ``stop_group``: ``kill -s TERM -- -PGID``, poll with ``ps``, then ``kill -s KILL`` — each a
  separate command, never the SSH "signal" request (OpenSSH < 7.9 ignores it).
- Relative paths are relative to the remote home (``~/`` is accepted); a server's default
  log is ``.optui/logs/NAME.log`` there.

Errors: a host that cannot be reached makes every method raise :class:`ShellError`
(``OSError`` for the starters, as the protocol says); polling methods do not wait for a host
known to be down.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import re
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from pathlib import Path

import asyncssh

from optui.adapters import proc
from optui.adapters.aio import within
from optui.adapters.shell import (
    KEPT_EXPERIMENT_LOG_BYTES,
    KEPT_EXPERIMENT_LOGS,
    KEPT_LOGS,
    CommandResult,
    LogSource,
    ShellError,
)
from optui.adapters.ssh import SshError, SshHost
from optui.adapters.ssh_procs import CHUNK, RemoteFileFollower, RemotePiped, RemoteSpawned, parse_exit_status, reap
from optui.core.text.textstream import iter_lines

PGID_MARK = b"optui-pgid:"
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# $1 = cwd ("" = the remote home), $2 = number of NAME=VALUE words that follow; the rest is
# the command. ``export "$1"`` assigns the word as is (no further expansion).
_PRELUDE = """dir=$1 n=$2; shift 2
while [ "$n" -gt 0 ]; do export "$1" || exit 126; shift; n=$((n - 1)); done
if [ -n "$dir" ]; then cd -- "$dir" || exit 126; fi
"""

#: A short command with cwd/env.
_RUN = _PRELUDE + 'exec "$@"\n'

#: $1 = log, $2 = exit-status file, then the prelude's arguments and the command. Prints
#: the PID of the detached wrapper (= its process group and session).
_LAUNCH = """log=$1 status=$2; shift 2
case $log in */*) mkdir -p -- "${log%/*}" || exit 126;; esac
case $status in /*) ;; *) status=$PWD/$status;; esac
rm -f -- "$status"
exec 3>>"$log" || exit 126
""" + _PRELUDE + """case $1 in
  */*) [ -f "$1" ] && [ -x "$1" ] ;;
  *) command -v "$1" >/dev/null 2>&1 ;;
esac || { echo "cannot start '$1': not found or not executable" >&2; exit 127; }
setsid sh -c 'echo "$$" >&4; exec 4>&-; trap : HUP INT TERM; "$@"; echo "$?" >"$0"' "$status" "$@" \\
  4>&1 </dev/null >&3 2>&3 3>&- &
"""

#: A streamed command in its own session (see module doc); run under ``setsid -w``.
_STREAM = _PRELUDE + """exec 3<&0 </dev/null
echo "optui-pgid:$$"
"$@" 3<&- &
child=$!
{ cat <&3 >/dev/null 2>&1; kill -s TERM -- "-$$"; } >/dev/null 2>&1 &
exec 3<&-
wait "$child"
rc=$?
trap '' TERM
kill -s TERM -- "-$$" 2>/dev/null
exit "$rc"
"""


def remote_path(path: str) -> str:
    """``~/x`` → ``x`` (remote commands start in the home directory); other paths as is."""
    path = str(path)
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


def _env_words(env: Mapping[str, str] | None) -> list[str]:
    words = []
    for key, value in (env or {}).items():
        if not _ENV_KEY.match(key):
            raise ShellError(f"environment variable name {key!r} is not valid (letters, digits, _)")
        words.append(f"{key}={value}")
    return words


def _prelude_args(env: Mapping[str, str] | None, cwd: str | None) -> list[str]:
    words = _env_words(env)
    return [remote_path(cwd) if cwd else "", str(len(words)), *words]


class SshShell:
    """:class:`~optui.adapters.shell.Shell` of host ``host`` over ``ssh`` (see module doc)."""

    local = False

    def __init__(self, host: str, ssh: SshHost) -> None:
        self.host = host
        self.ssh = ssh
        #: the command log of server starts, as :class:`~optui.adapters.shell.LocalShell`'s
        #: (``on_command(host, argv, returncode, duration_s, what, running=False)``, which for
        #: a ``running`` start returns ``ended(returncode)``); every other command is logged
        #: by the host's connection
        self.on_command: Callable[..., Callable[[int | None], None] | None] | None = None

    def default_log_path(self, name: str, state_dir: Path) -> str:
        """Where a server's log goes on the host: ``.optui/logs/NAME.log`` in the remote home."""
        return f".optui/logs/{name}.log"

    # ------------------------------------------------------------ plumbing
    async def _call(self, argv: Sequence[str], *, timeout_s: float = 15.0, stdin: str | None = None, poll: bool = False,
                    log_argv: Sequence[str] | None = None, killed_ok: bool = False):
        """One remote command; ShellError when the host cannot run it — also when it was
        killed by a signal (the link dropping takes its processes along): an answer of a
        killed ``ps`` means nothing (unless ``killed_ok``). ``poll``: do not wait for a
        host that is known to be down."""
        wait = 0.0 if poll and self.ssh.is_down() else None
        try:
            done = await self.ssh.run(argv, timeout_s=timeout_s, stdin=stdin, wait_s=wait, log_argv=log_argv)
        except SshError as exc:
            raise ShellError(str(exc)) from exc
        if done.returncode < 0 and not killed_ok:
            raise ShellError(f"{self.host}: `{(log_argv or argv)[0]}` was killed by signal {-done.returncode}")
        return done

    async def _sh(self, script: str, *args: str, timeout_s: float = 15.0, stdin: str | None = None, poll: bool = False,
                  log_argv: Sequence[str] | None = None):
        return await self._call(["sh", "-c", script, "sh", *args], timeout_s=timeout_s, stdin=stdin, poll=poll,
                                log_argv=log_argv)

    # ------------------------------------------------------------ commands
    async def run(self, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult:
        argv = [str(a) for a in argv]
        inner = ["sh", "-c", _RUN, "sh", *_prelude_args(env, cwd), *argv] if env or cwd else argv
        wrapped = ["timeout", "-k", "2", f"{timeout_s:g}", *inner]
        done = await self._call(wrapped, timeout_s=timeout_s + 5.0, log_argv=argv, killed_ok=True)
        if done.returncode == 124:
            raise ShellError(f"`{' '.join(argv)}` did not finish in {timeout_s:.0f} s on {self.host}")
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr, done.duration_s)

    async def spawn_to_log(self, argv: Sequence[str], log_path: str, *, cwd: str | None = None,
                           env: Mapping[str, str] | None = None) -> RemoteSpawned:
        argv = [str(a) for a in argv]
        if not argv:
            raise OSError(errno.EINVAL, "empty argv")
        log = remote_path(log_path)
        status = log + ".exit"
        try:
            args = _prelude_args({"PYTHONUNBUFFERED": "1", **(env or {})}, cwd)
        except ShellError as exc:
            raise OSError(errno.EINVAL, str(exc)) from exc
        try:  # the wrapper returns at once: the server's row is logged here, with the server's exit
            done = await self._sh(_LAUNCH, log, status, *args, *argv, timeout_s=30.0, log_argv=())
        except ShellError as exc:
            self._log_launch(argv, None, started=False)
            raise OSError(errno.EHOSTUNREACH, str(exc)) from exc
        out = (done.stderr.strip() or done.stdout.strip())
        lines = done.stdout.split()
        started = done.returncode == 0 and bool(lines) and lines[-1].isdigit()
        ended = self._log_launch(argv, done.returncode, started=started)
        if done.returncode == 127:
            raise OSError(errno.ENOENT, f"{out or f'cannot start {argv[0]!r}'} on {self.host}")
        if not started:
            raise OSError(errno.EIO, f"cannot start {argv[0]!r} on {self.host} (exit {done.returncode}): {out[-300:]}")
        return RemoteSpawned(self, int(lines[-1]), status, on_exit=ended)

    async def exit_status(self, log_path: str) -> int | None:
        """The exit status that a server launched by :meth:`spawn_to_log` with log
        ``log_path`` left next to it (``LOG.exit``, written by its wrapper when the server
        ended: also for a launch of an earlier optui process); None when there is none (it
        runs, or the wrapper itself was killed). Raises ShellError when the host cannot be asked."""
        return parse_exit_status(await self.read_file(remote_path(log_path) + ".exit"))

    def _log_launch(self, argv: Sequence[str], rc: int | None, *, started: bool) -> Callable[[int | None], None] | None:
        """The command log's row of a server start: ``running`` when the wrapper said it
        started (its ``ended(returncode)`` is returned), else ended with the wrapper's status
        ``rc`` (None: the host did not answer)."""
        if self.on_command is None:
            return None
        if started:
            return self.on_command(self.host, list(argv), None, 0.0, "server start", running=True)
        self.on_command(self.host, list(argv), rc, 0.0, "server start")
        return None

    async def spawn_piped(self, argv: Sequence[str], *, cwd: str | None = None,
                          env: Mapping[str, str] | None = None) -> RemotePiped:
        """Start ``argv`` in its own remote process group with stdout and stderr streamed
        back separately (bytes; read them in chunks). Raises OSError when it cannot start."""
        process, pgid = await self.start_stream(argv, env=env, cwd=cwd, merge_stderr=False)
        return RemotePiped(self, process, pgid)

    async def start_stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                           merge_stderr: bool = True) -> tuple[asyncssh.SSHClientProcess, int]:
        """Start ``argv`` under :data:`_STREAM` (own remote session; killed when the
        channel closes); returns the process (bytes mode, the ``optui-pgid`` line already
        read) and the remote process group. Raises OSError."""
        argv = [str(a) for a in argv]
        try:
            command = ["setsid", "-w", "sh", "-c", _STREAM, "sh", *_prelude_args(env, cwd), *argv]
        except ShellError as exc:
            raise OSError(errno.EINVAL, str(exc)) from exc
        try:
            process = await self.ssh.create_process(command, merge_stderr=merge_stderr, keep_stdin=True, log_argv=argv)
        except (SshError, ShellError) as exc:
            raise OSError(errno.EHOSTUNREACH, str(exc)) from exc
        try:
            first = await within(process.stdout.readline(), 15.0)
        except (TimeoutError, asyncssh.Error, OSError) as exc:
            process.close()
            raise OSError(errno.EIO, f"{self.host}: {argv[0]}: no answer from the remote shell ({exc})") from exc
        if not first.startswith(PGID_MARK):
            why = first
            if not merge_stderr:
                with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
                    why = await within(process.stderr.read(4096), 2.0)
            process.close()
            raise OSError(errno.EIO, f"{self.host}: {argv[0]}: cannot start ({why.decode(errors='replace').strip()})")
        return process, int(first[len(PGID_MARK):].strip())

    async def stream_lines(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncGenerator[str, None]:
        process, pgid = await self.start_stream(argv, env=env)

        async def read_chunk() -> bytes:
            try:
                return await process.stdout.read(CHUNK)
            except (asyncssh.Error, OSError):
                return b""  # the link died: the stream ends like an exited command

        try:
            async for line in iter_lines(read_chunk):
                yield line
        finally:
            process.close()  # the remote watcher kills the group when the channel closes

    def follow_file(self, path: str, on_line: Callable[[str], None], *, offset: int | None = 0) -> LogSource:
        return RemoteFileFollower(self, remote_path(path), on_line, offset=offset)

    # ------------------------------------------------------------ files
    async def file_size(self, path: str) -> int:
        done = await self._call(["stat", "-L", "-c", "%s", "--", remote_path(path)], poll=True)
        text = done.stdout.strip()
        return int(text) if done.returncode == 0 and text.isdigit() else 0

    async def read_file(self, path: str) -> str | None:
        done = await self._sh('[ -e "$1" ] || exit 3; exec cat -- "$1"', remote_path(path), log_argv=["cat", path])
        if done.returncode == 3:
            return None
        if done.returncode != 0:
            raise ShellError(f"cannot read {path} on {self.host}: {done.stderr.strip()}")
        return done.stdout

    async def write_file(self, path: str, text: str) -> None:
        script = ('case $1 in */*) mkdir -p -- "${1%/*}" || exit 1;; esac\n'
                  'tmp="$1.optui-tmp"; cat >"$tmp" && chmod 644 "$tmp" && mv -f -- "$tmp" "$1" || { rm -f -- "$tmp"; exit 1; }')
        done = await self._sh(script, remote_path(path), stdin=text, log_argv=["write", path])
        if done.returncode != 0:
            raise ShellError(f"cannot write {path} on {self.host}: {done.stderr.strip()}")

    async def rotate_file(self, path: str, keep_as: str | None = None) -> None:
        if keep_as:  # one per experiment, the newest N and B bytes of them (LocalShell.rotate_file)
            script = ('[ -s "$1" ] || exit 0; mv -f -- "$1" "$1.$2" || exit 1; n=0; total=0; '
                      'ls -1t -- "$1".exp-* 2>/dev/null | while IFS= read -r f; do '
                      'size=$(wc -c < "$f" 2>/dev/null || echo 0); total=$((total + size)); n=$((n + 1)); '
                      'if [ "$n" -gt 1 ] && { [ "$n" -gt "$3" ] || [ "$total" -gt "$4" ]; }; then rm -f -- "$f"; fi; done')
            await self._sh(script, remote_path(path), keep_as, str(KEPT_EXPERIMENT_LOGS), str(KEPT_EXPERIMENT_LOG_BYTES),
                           log_argv=["rotate", path, keep_as])
            return
        script = ('if [ -s "$1" ]; then n=$2; while [ "$n" -gt 1 ]; do p=$((n - 1)); '
                  '[ -e "$1.$p" ] && mv -f -- "$1.$p" "$1.$n"; n=$p; done; mv -f -- "$1" "$1.1"; fi')
        await self._sh(script, remote_path(path), str(KEPT_LOGS), log_argv=["rotate", path])

    # ------------------------------------------------------------ processes
    async def pid_alive(self, pid: int) -> bool:
        done = await self._call(["ps", "-o", "stat=", "-p", str(int(pid))], poll=True)
        state = done.stdout.strip()
        if done.returncode not in (0, 1):  # 1: no such process; anything else: ps itself failed
            raise ShellError(f"ps failed on {self.host} (exit {done.returncode}): {done.stderr.strip()}")
        return done.returncode == 0 and bool(state) and not state.startswith("Z")

    async def process_start(self, pid: int) -> str | None:
        done = await self._call(["ps", "-o", "lstart=", "-p", str(int(pid))], poll=True)
        if done.returncode not in (0, 1):
            raise ShellError(f"ps failed on {self.host} (exit {done.returncode}): {done.stderr.strip()}")
        return done.stdout.strip() or None if done.returncode == 0 else None

    async def group_pids(self, pgid: int) -> set[int]:
        done = await self._call(["ps", "-A", "-o", "pid=", "-o", "pgid=", "-o", "stat="], poll=True)
        if done.returncode != 0:
            raise ShellError(f"ps failed on {self.host}: {done.stderr.strip()}")
        return parse_group_pids(done.stdout, pgid)

    async def group_stopped(self, pgid: int) -> bool:
        done = await self._call(["ps", "-o", "stat=", "-p", str(int(pgid))], poll=True)
        if done.returncode not in (0, 1):  # 1: no such process
            raise ShellError(f"ps failed on {self.host} (exit {done.returncode}): {done.stderr.strip()}")
        return done.returncode == 0 and done.stdout.strip().startswith(("T", "t"))

    async def _signal_group(self, pgid: int, name: str) -> bool:
        done = await self._call(["kill", "-s", name, "--", f"-{int(pgid)}"])
        return done.returncode == 0

    async def stop_group(self, pgid: int, *, timeout_s: float, handle=None, poll_s: float = 0.2) -> proc.StopOutcome:
        start = time.monotonic()
        if not await self._signal_group(pgid, "TERM"):
            return proc.StopOutcome("exited", 0.0, await reap(handle))
        how = "term"
        deadline = start + timeout_s
        while await self.group_pids(pgid):
            if time.monotonic() >= deadline:
                how = "kill"
                await self._signal_group(pgid, "KILL")
                kill_deadline = time.monotonic() + 5.0
                while await self.group_pids(pgid) and time.monotonic() < kill_deadline:
                    await asyncio.sleep(poll_s)
                break
            await asyncio.sleep(poll_s)
        rc = await reap(handle)
        if rc is None and how == "kill":
            rc = -9
        return proc.StopOutcome(how, time.monotonic() - start, rc)

    def kill_group_now(self, pgid: int) -> None:
        """Best effort without waiting: a KILL of the group is sent when an event loop runs
        (at exit, streams also die with their channel)."""
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            loop.create_task(self._kill_quietly(pgid))

    async def _kill_quietly(self, pgid: int) -> None:
        with contextlib.suppress(ShellError):
            await self._signal_group(pgid, "KILL")


def parse_group_pids(ps_output: str, pgid: int) -> set[int]:
    """PIDs of live members of ``pgid`` in ``ps -A -o pid= -o pgid= -o stat=`` output."""
    found = set()
    for line in ps_output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1] == str(pgid) and not parts[2].startswith("Z"):
            found.add(int(parts[0]))
    return found
