"""SSH host actions: trust an unknown SSH host key (shown by fingerprint, confirmed first),
reconnect a host now."""

from __future__ import annotations

from optui.ui.client import SessionError
from optui.ui.intents.base import Actions


class HostActions(Actions):
    """SSH host actions (palette only: they are rare and deliberate)."""

    def untrusted_hosts(self) -> list[str]:
        """Hosts refused because their (unknown, not changed) key is not trusted yet."""
        return [name for name, ssh in self.client.ssh_hosts().items()
                if ssh.state.value == "untrusted" and ssh.host_key is not None and not ssh.host_key.changed]

    def confirm_trust(self, host: str) -> None:
        """Show the key's fingerprint; on confirmation append it to known_hosts."""
        from optui.ui.screens.confirm import ConfirmScreen

        ssh = self.client.ssh_hosts()[host]
        info = ssh.host_key
        if info is None:
            self.notify(f"{host}: no host key to trust", severity="warning")
            return
        body = (f"host {host} ({ssh.target}) presented a key that is not in {ssh.known_hosts}:\n\n"
                f"  {info.fingerprint}\n\nCompare it with the server's own fingerprint "
                f"(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on the host) before trusting it.\n\n"
                f"Line to append:\n{info.known_hosts_line}")

        def confirmed(ok: bool | None) -> None:
            if ok:
                try:
                    self.client.trust_host_key(host)
                    self.notify(f"{host}: key trusted, connecting…")
                except SessionError as exc:
                    self.fail(exc)

        self.push_screen(ConfirmScreen(f"Trust the host key of {host}?", body, "Trust"), confirmed)

    def reconnect_host(self, host: str) -> None:
        """Skip the backoff and reconnect now."""
        self.client.reconnect_host(host)
