"""The rack's SSH side: one :class:`~optui.adapters.ssh.SshHost` per configured SSH host,
shared by everything that talks to that host (GPU stream, controllers, benchmarks)."""

from __future__ import annotations

from collections.abc import Callable

from optui.adapters.ssh import SshHost
from optui.config import Config


def make_ssh_hosts(config: Config, *, on_state: Callable[[], None] | None = None,
                   on_command: Callable[[str, list[str], int | None, float], None] | None = None) -> dict[str, SshHost]:
    """An (unstarted) SshHost for every host with ``ssh`` set; started on first use."""
    hosts = {}
    for name, hcfg in config.hosts.items():
        if not hcfg.ssh:
            continue
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
