"""Remote hosts over a real OpenSSH server on loopback: host-key trust, exact argv,
the streaming nvidia-smi source, dropped links and the host states."""

from __future__ import annotations

import json

import pytest

from optui.adapters.gpu_smi_stream import SshNvidiaSmiSource
from optui.adapters.ssh import SshError, SshState
from optui.core.gpu.samples import HostStatus
from tests.helpers.pilot import wait_for
from tests.helpers.sshd import Sshd, running_sshd, ssh_host
from tests.helpers.waiting import until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def sshd(tmp_path):
    with running_sshd(tmp_path / "sshd") as server:
        yield server


async def test_argv_with_shell_metacharacters_arrives_intact(sshd, tmp_path):
    host = ssh_host(sshd)
    host.start()
    canary = tmp_path / "pwned"
    argv = ["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))",
            "two words", "it's \"quoted\"", "x; touch " + str(canary), f"$(touch {canary})", "`id`", "a|b&&c", "*"]
    try:
        done = await host.run(argv, timeout_s=20)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == argv[3:]
        assert not canary.exists()
    finally:
        await host.close()


async def test_unknown_host_key_is_refused_until_trusted(sshd, tmp_path):
    known = tmp_path / "empty_known_hosts"
    known.write_text("")
    host = ssh_host(sshd, known_hosts=known)
    host.start()
    try:
        await until(lambda: host.state is SshState.UNTRUSTED)
        fingerprint = host.host_key.fingerprint
        assert fingerprint.startswith("SHA256:") and fingerprint in host.error
        with pytest.raises(SshError):
            await host.run(["true"], timeout_s=1)
        line = host.trust_host_key()
        assert line in known.read_text() and sshd.host_key_pub.split()[1] in line
        await until(lambda: host.state is SshState.LIVE)
        assert (await host.run(["echo", "ok"], timeout_s=10)).stdout.strip() == "ok"
    finally:
        await host.close()


async def test_changed_host_key_is_refused_and_never_trusted(sshd, tmp_path):
    other = Sshd(tmp_path / "other")
    other.setup()  # only for a different key
    known = tmp_path / "known_hosts_changed"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other.host_key_pub}\n")
    host = ssh_host(sshd, known_hosts=known)
    host.start()
    try:
        await until(lambda: host.state is SshState.UNTRUSTED)
        assert host.host_key.changed and "changed" in host.error
        with pytest.raises(SshError, match="CHANGED"):
            host.trust_host_key()
        assert known.read_text().count("\n") == 1
    finally:
        await host.close()


async def test_stream_live_change_latency_and_driver_error(sshd):
    host = ssh_host(sshd)
    source = SshNvidiaSmiSource("rack1", host, interval_s=0.5)
    try:
        await source.read()
        snap = await until(lambda: (s := source.snapshot()).status is HostStatus.LIVE and s.samples and s)
        assert [(g.index, g.mem_used_mib, g.mem_reserved_mib, g.util_gpu_pct) for g in snap.samples] == [
            (0, 41971.0, 616.0, 100.0), (1, 0.0, 616.0, 0.0)]
        # the stream ticks at the asked interval (nvidia-smi -lms 500), and a change on the host
        # reaches the snapshot on the running stream's next ticks (no restart, no re-query)
        assert (sshd.bin_dir / "loops.log").read_text().split()[-1] == "500"
        restarts = source.restarts
        for _ in range(3):  # every tick reaches the snapshot (none skipped or coalesced)
            ticks, seen = source.ticks, source.snapshot().taken_at
            await until(lambda: source.ticks > ticks)  # noqa: B023 - awaited in this iteration
            assert source.snapshot().taken_at > seen
        rows = sshd.gpus_file.read_text().replace("41971, 143771", "50000, 143771")
        ticks = source.ticks
        sshd.gpus_file.write_text(rows)
        await until(lambda: source.snapshot().samples[0].mem_used_mib == 50000.0, timeout=5, step=0.01)
        # the tick printed at the write (and one more the pipe may hold on a busy machine) can
        # still carry the old rows; the one after has them: a skipped/coalesced stream needs more
        assert source.ticks - ticks <= 3 and source.restarts == restarts
        (sshd.bin_dir / "error.txt").write_text(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.")
        snap = await until(lambda: (s := source.snapshot()).status in (HostStatus.NO_GPU, HostStatus.ERROR) and s)
        assert "couldn't communicate with the NVIDIA driver" in snap.error
    finally:
        await source.close()
        await host.close()


async def test_dropped_link_goes_stale_or_lost_then_live_again(sshd):
    host = ssh_host(sshd, max_backoff_s=2)
    source = SshNvidiaSmiSource("rack1", host, interval_s=0.5)
    try:
        await source.read()
        await until(lambda: source.snapshot().status is HostStatus.LIVE)
        sshd.stop()  # the link and the server go away
        snap = await until(lambda: (s := source.snapshot()).status in (HostStatus.LOST, HostStatus.STALE) and s, timeout=10)
        assert snap.samples, "the last values stay visible (dimmed) while the host is away"
        sshd.start()  # same port, same host key
        await until(lambda: source.snapshot().status is HostStatus.LIVE, timeout=20)
        assert host.reconnects >= 1
    finally:
        await source.close()
        await host.close()


async def test_app_shows_ssh_host_and_trusts_unknown_key_via_palette(sshd, tmp_path):
    """The real app: an SSH host with an unknown key is refused (fingerprint shown); the
    operator trusts it from the command palette; its GPUs appear."""
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp

    known = tmp_path / "known_hosts"
    known.write_text("")
    cfg = tmp_path / "optui.toml"
    cfg.write_text(f'''
[hosts.rack1]
ssh = "rack1"
ssh_config = "{sshd.ssh_config}"
known_hosts = "{known}"
identity_file = "{sshd.client_key}"
interval_s = 0.5
''')
    app = OptuiApp(Session(load_config(cfg)))
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: "untrusted" in app.query_one("#gpus").render().plain, 20, what="key refused")
        assert "SHA256:" in app.query_one("#gpus").render().plain
        await pilot.press("ctrl+p")
        await pilot.press(*"Trust host key")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "ConfirmScreen"
        await pilot.press("y")
        await wait_for(pilot, lambda: "H200" in app.query_one("#gpus").render().plain, 20, what="GPUs after trust")
        assert "41.0G/140G" in app.query_one("#gpus").render().plain
        assert "127.0.0.1" in known.read_text()
        await pilot.press("q")
