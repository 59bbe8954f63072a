"""The rack's SSH side: one :class:`~optui.adapters.ssh.SshHost` per configured SSH host,
shared by everything that talks to that host (GPU stream, controllers, log followers,
benchmarks), and the connection problems shown on those hosts' servers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from optui.adapters.shell import LocalShell, Shell
from optui.config import Config
from optui.core.server.state import ServerStatus
from optui.session.errors import SessionError

if TYPE_CHECKING:
    from optui.adapters.ssh import SshHost
    from optui.session.server.runtime import ServerRuntime


def shell_for(host: str, ssh: SshHost | None = None) -> Shell:
    """The :class:`~optui.adapters.shell.Shell` of a configured host: over ``ssh`` (the
    session's one shared connection to it) for an SSH host, else this machine. asyncssh is
    only imported for an SSH host."""
    if ssh is None:
        return LocalShell(host)
    from optui.adapters.shell_ssh import SshShell

    return SshShell(host, ssh)


def trust_host_key(host: SshHost) -> str:
    """Append ``host``'s presented (unknown) key to its known_hosts and reconnect; the line
    written. Raises SessionError (the operator's message) when there is no unknown key to
    trust or the key changed (:meth:`~optui.adapters.ssh.SshHost.trust_host_key`)."""
    from optui.adapters.ssh import SshError

    try:
        return host.trust_host_key()
    except SshError as exc:
        raise SessionError(str(exc)) from exc


def make_ssh_hosts(config: Config, *, on_state: Callable[[], None] | None = None,
                   on_command: Callable[[str, list[str], int | None, float], None] | None = None) -> dict[str, SshHost]:
    """An (unstarted) SshHost for every host with ``ssh`` set; started on first use.
    asyncssh is only imported when the config has an SSH host."""
    hosts: dict[str, SshHost] = {}
    for name, hcfg in config.hosts.items():
        if not hcfg.ssh:
            continue
        from optui.adapters.ssh import SshHost

        hosts[name] = SshHost(
            name,
            hcfg.ssh,
            known_hosts=hcfg.known_hosts,
            config=hcfg.ssh_config,
            client_keys=[hcfg.identity_file] if hcfg.identity_file else None,
            connect_timeout_s=10.0,
            on_state=on_state,
            on_command=on_command,
        )
    return hosts


def host_problem(ssh: SshHost | None, now: float | None = None) -> str | None:
    """One line on what is wrong with the connection to a host, None when it is live (or
    not an SSH host): ``"ssh lost: connection closed; retry in 4s"``, ``"ssh untrusted:
    host key unknown: SHA256:…"``, ``"ssh connecting"``."""
    if ssh is None:
        return None
    state = ssh.state.value
    if state == "live":
        return None
    if state == "connecting":
        return "ssh connecting"
    text = f"ssh {state}: {ssh.error or 'no answer'}"
    if state == "lost" and ssh.next_retry_at:
        text += f"; retry in {max(0.0, ssh.next_retry_at - (now or time.time())):.0f}s"
    return text


def with_host_problems(runtimes: Iterable[ServerRuntime], ssh_hosts: Mapping[str, SshHost]) -> tuple[ServerStatus, ...]:
    """The servers' statuses, each with its host's connection problem (``host_problem``)."""
    now = time.time()
    out = []
    for rt in runtimes:
        problem = host_problem(ssh_hosts.get(rt.cfg.host), now)
        out.append(rt.status if problem == rt.status.host_problem else replace(rt.status, host_problem=problem))
    return tuple(out)
