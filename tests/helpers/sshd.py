"""A real OpenSSH server on 127.0.0.1 for tests (Debian's openssh-server; `.ci/run`
installs it). Temporary host and user keys, a free port, an ``nvidia-smi`` stand-in first
on the remote PATH, and the test-run marker passed to remote processes (so the suite's leak
guard sees them too). The server can be stopped and started again on the same port with
the same host key (a dropped link that comes back)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.demo import free_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
FAKE_SMI = Path(__file__).with_name("fake_nvidia_smi.py")

GPU_ROWS = """0, GPU-11111111-0000-0000-0000-000000000000, NVIDIA H200, 41971, 143771, 616, 100, 23, 56, 683.10, 700.00, 1410
1, GPU-11111111-0000-0000-0000-000000000001, NVIDIA H200, 0, 143771, 616, 0, 0, 34, 80.12, 700.00, 345
"""


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@dataclass
class Sshd:
    """A running test sshd (see module doc)."""

    root: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)  # more variables for remote commands (no spaces)

    @property
    def host_key_pub(self) -> str:
        return (self.root / "host_ed25519.pub").read_text().strip()

    @property
    def client_key(self) -> Path:
        return self.root / "id_ed25519"

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def gpus_file(self) -> Path:
        return self.bin_dir / "gpus.csv"

    @property
    def known_hosts(self) -> Path:
        """A known_hosts file that trusts this server."""
        path = self.root / "known_hosts"
        if not path.exists():
            path.write_text(f"[127.0.0.1]:{self.port} {self.host_key_pub}\n")
        return path

    @property
    def ssh_config(self) -> Path:
        """An ssh_config with the alias ``rack1`` for this server."""
        path = self.root / "ssh_config"
        path.write_text(f"Host rack1\n  HostName 127.0.0.1\n  Port {self.port}\n  User {os.environ.get('USER', 'root')}\n"
                        f"  IdentityFile {self.client_key}\n")
        return path

    def setup(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _keygen(self.root / "host_ed25519")
        _keygen(self.client_key)
        (self.root / "authorized_keys").write_text((self.root / "id_ed25519.pub").read_text())
        self.bin_dir.mkdir(exist_ok=True)
        smi = self.bin_dir / "nvidia-smi"
        shutil.copy(FAKE_SMI, smi)
        smi.chmod(0o755)
        self.gpus_file.write_text(GPU_ROWS)
        marker = os.environ.get("OPTUI_TEST_RUN", "")
        # SHLVL=1: bash must not source the login user's ~/.bashrc for remote commands (bash
        # does so only at shell level 1 under sshd): it is slow, and a command killed by
        # drop_connections() in the middle of e.g. `pyenv rehash` leaves a lock file behind
        # that hangs every later login
        extra = " ".join(f"{k}={v}" for k, v in self.env.items())
        (self.root / "sshd_config").write_text(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.root / 'host_ed25519'}
PidFile {self.root / 'sshd.pid'}
AuthorizedKeysFile {self.root / 'authorized_keys'}
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
PubkeyAuthentication yes
SetEnv PATH={self.bin_dir}:/usr/local/bin:/usr/bin:/bin OPTUI_TEST_RUN={marker} SHLVL=1 {extra}
MaxSessions 20
LogLevel ERROR
""")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation dir

    def start(self) -> None:
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.root / "sshd.log", "ab"), start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.root / 'sshd.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not listen")

    def _connection_pids(self) -> list[int]:
        """Per-connection server processes (and what they run): descendants of the
        listener (each calls setsid(), so they are not in its process group)."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        out, todo = [], list(children.get(self.proc.pid, []))
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def drop_connections(self) -> None:
        """Kill every connection (and the remote commands) but keep listening."""
        for pid in self._connection_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Kill the connections and the server (nothing left running)."""
        if self.proc is None:
            return
        self.drop_connections()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(5)
        self.proc = None


@contextlib.contextmanager
def running_sshd(root: Path, env: dict[str, str] | None = None) -> Iterator[Sshd]:
    """A started :class:`Sshd` under ``root`` (``env``: more variables for remote
    commands), stopped (connections included) on exit."""
    server = Sshd(root, env=dict(env or {}))
    server.setup()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def ssh_host(sshd: Sshd, name: str = "rack1", **kw):
    """An (unstarted) SshHost to ``sshd`` through its ssh_config alias ``rack1``."""
    from optui.adapters.ssh import SshHost

    kw.setdefault("known_hosts", sshd.known_hosts)
    kw.setdefault("connect_timeout_s", 5)
    return SshHost(name, "rack1", config=sshd.ssh_config, client_keys=[sshd.client_key], **kw)


def host_config(sshd: Sshd, name: str = "rack1", *, interval_s: float = 0.5, extra: str = "") -> str:
    """An ``optui.toml`` ``[hosts.NAME]`` section for ``sshd``."""
    return (f'[hosts.{name}]\nssh = "rack1"\nssh_config = "{sshd.ssh_config}"\nknown_hosts = "{sshd.known_hosts}"\n'
            f'identity_file = "{sshd.client_key}"\ninterval_s = {interval_s}\n{extra}\n')


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of group ``pgid`` on this machine (the sshd's host)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[2] == str(pgid) and fields[0] != "Z":
                found.append(int(entry.name))
    return found
