"""The fleet through a real Prometheus (Debian's package; skipped without it): what optui reads
equals what the exporters served, through a real scrape and real PromQL; a GPU whose exporter
stopped turns stale with its age; a Prometheus restart; ``optui gpus --json`` / ``status --json`` list every fleet
GPU; a bad token, a slow query, a refused connection, an answer
that is not JSON and a refused query are clear errors. One Prometheus for the module."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest

from optui.adapters.prometheus import PrometheusClient, PrometheusError
from optui.core.fleet.readings import FLEET_GPU_JSON_KEYS, FleetState, fleet_query
from optui.core.gpu.samples import GPU_JSON_KEYS
from optui.ui.widgets.fleet_grid import server_load
from tests.helpers.demo import free_port, subprocess_env
from tests.helpers.prometheus import (
    GPUS_PER_HOST,
    MODEL,
    SMI_MODEL,
    DcgmExporters,
    MetricsServer,
    Prometheus,
    PromProxy,
    gpu_uuid,
    gpu_values,
    host_name,
    nvidia_smi_text,
    prometheus_binary,
    smi_uuid,
    smi_values,
)

HOSTS = 3
NO_COPY_UTIL = 2  # this host's exporter has no DCGM_FI_DEV_MEM_COPY_UTIL series
STOPPED = 1  # the staleness test stops this host's exporter and its SGLang server (it runs last)
SMI_HOST = "smi-node-000"  # a host with nvidia_gpu_exporter (no Hostname label: its instance names it)
SMI_GPUS = 2
ALL_GPUS = HOSTS * GPUS_PER_HOST + SMI_GPUS
FIELDS = {"DCGM_FI_DEV_FB_USED": "mem_used_mib", "DCGM_FI_DEV_FB_FREE": "mem_free_mib",
          "DCGM_FI_DEV_FB_RESERVED": "mem_reserved_mib", "DCGM_FI_DEV_GPU_UTIL": "util_gpu_pct",
          "DCGM_FI_DEV_MEM_COPY_UTIL": "util_mem_pct", "DCGM_FI_DEV_GPU_TEMP": "temp_c",
          "DCGM_FI_DEV_POWER_USAGE": "power_w"}


VLLM_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GEN_PER_SCRAPE = 500  # generated tokens each server adds between two scrapes (1 s apart)


def server_text(kind: str):
    """An inference server's /metrics (vLLM or SGLang names), its token counter growing."""
    scrapes = iter(range(1, 1 << 30))
    names = {"vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                      "vllm:generation_tokens_total", f'engine="0",model_name="{VLLM_MODEL}"', (12, 3, 0.45)),
             "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                        "sglang:generation_tokens_total", 'model_name="qwen"', (7, 0, 0.2))}[kind]

    def text() -> str:
        running, waiting, kv, gen, labels, (r, w, k) = names
        return (f"# TYPE {running} gauge\n{running}{{{labels}}} {r}\n# TYPE {waiting} gauge\n{waiting}{{{labels}}} {w}\n"
                f"# TYPE {kv} gauge\n{kv}{{{labels}}} {k}\n# TYPE {gen} counter\n"
                f"{gen}{{{labels}}} {GEN_PER_SCRAPE * next(scrapes)}\n")
    return text


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    prometheus_binary()
    exporters = DcgmExporters(HOSTS, omit={NO_COPY_UTIL: frozenset({"DCGM_FI_DEV_MEM_COPY_UTIL"})})
    servers = [MetricsServer(server_text("vllm")), MetricsServer(server_text("sglang")),
               MetricsServer(lambda: nvidia_smi_text(SMI_GPUS))]
    jobs = [("vllm", servers[0].target, f"{host_name(0)}:8000"), ("sglang", servers[1].target, f"{host_name(1)}:30000"),
            ("nvidia_gpu_exporter", servers[2].target, f"{SMI_HOST}:9835")]
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"), exporters.targets(), jobs=jobs).start()
    try:
        prom.wait_series("DCGM_FI_DEV_FB_USED", HOSTS * GPUS_PER_HOST)  # every exporter scraped once
        prom.wait_series("nvidia_smi_memory_used_bytes", SMI_GPUS)
        # the inference servers too (their own scrape targets: on a loaded CI host the GPUs'
        # came first and a test read no server series)
        prom.wait_series("vllm:num_requests_running", 1)
        prom.wait_series("sglang:num_running_reqs", 1)
        yield exporters, prom, servers
    finally:
        prom.stop()
        exporters.close()
        for server in servers:
            server.close()


async def read_fleet(client: PrometheusClient, state: FleetState, want_gpus: int, selector=None):
    """Query until the snapshot has ``want_gpus`` GPUs (Prometheus's first scrapes come a few
    seconds after it is ready); the snapshot."""
    snapshots = []

    async def poll():
        snapshots.append(state.update(await client.query(fleet_query(selector)), time.time()))
        return len(snapshots[-1].gpus) >= want_gpus

    deadline = time.monotonic() + 30
    while not await poll():
        assert time.monotonic() < deadline, f"only {len(snapshots[-1].gpus)} GPUs"
        await asyncio.sleep(0.1)  # not a busy loop: Prometheus and the exporters share the CPU
    return snapshots[-1]


async def test_what_optui_reads_is_what_the_exporters_served(fleet):
    exporters, prom, _ = fleet
    client = PrometheusClient(prom.url, timeout_s=5)
    try:
        state = FleetState(interval_s=1.0)
        snap = await read_fleet(client, state, ALL_GPUS)
        assert len(snap.gpus) == ALL_GPUS and snap.error is None
        # dcgm: 7 values + 1 sample time a GPU; nvidia_smi: 7 values + its info + 1 sample time
        gpu_series = HOSTS * GPUS_PER_HOST * 8 - GPUS_PER_HOST + SMI_GPUS * 9
        assert gpu_series < snap.series <= gpu_series + 2 * 5  # and the servers' 3 gauges + tok/s + sample time
        assert list(snap.hosts()) == [*(host_name(h) for h in range(HOSTS)), SMI_HOST]
        # nvidia_gpu_exporter's series (the second mapping), through the real scrape: optui's units
        smi = snap.hosts()[SMI_HOST]
        assert [(g.index, g.uuid, g.model, g.exporter) for g in smi] == [
            (i, smi_uuid(i), SMI_MODEL, "nvidia_smi") for i in range(SMI_GPUS)]
        for gpu in smi:
            for key, value in smi_values(gpu.index).items():
                if key.startswith("optui:"):
                    assert getattr(gpu, key.split(":")[1]) == pytest.approx(value), (key, gpu)
            assert 0 <= gpu.age_s < 5 and not gpu.stale and gpu.mem_total_mib == pytest.approx(80_553)
        for gpu in (g for g in snap.gpus if g.exporter == "dcgm"):
            host = int(gpu.host.rsplit("-", 1)[1])
            assert (gpu.uuid, gpu.model, gpu.exporter) == (gpu_uuid(host, gpu.index), MODEL, "dcgm")
            served = exporters.served(host)
            # every field of the record is of one scrape the exporter served
            matches = [g for g in served if all(getattr(gpu, field) == (
                None if host == NO_COPY_UTIL and metric == "DCGM_FI_DEV_MEM_COPY_UTIL" else value)
                for metric, value in gpu_values(host, gpu.index, g).items() for field in [FIELDS[metric]])]
            assert matches, f"{gpu} is none of {host_name(host)}'s scrapes {served}"
            assert 0 <= gpu.age_s < 5 and not gpu.stale
        assert all(g.util_mem_pct is None for g in snap.hosts()[host_name(NO_COPY_UTIL)])
        # the values change at every scrape: a later reading shows a later scrape
        first = snap.gpus[0]

        async def newer():
            gpu = state.update(await client.query(fleet_query()), time.time()).gpus[0]
            return gpu.sampled_at > first.sampled_at and gpu.mem_used_mib != first.mem_used_mib
        deadline = time.monotonic() + 20
        while not await newer():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)  # not a busy loop: Prometheus and the exporters share the CPU
        # the user's selector is in the query
        assert len((await read_fleet(client, FleetState(1.0), 1, '{job="dcgm"}')).gpus) == HOSTS * GPUS_PER_HOST
        assert await client.query(fleet_query('{job="elsewhere"}')) == []
    finally:
        await client.aclose()


async def test_inference_servers_are_beside_their_hosts_gpus(fleet):
    _, prom, _ = fleet
    client = PrometheusClient(prom.url, timeout_s=5)
    try:
        state = FleetState(interval_s=1.0)
        snaps = []

        async def with_rates():  # a rate needs two scrapes of the counters
            snaps.append(state.update(await client.query(fleet_query()), time.time()))
            return len(snaps[-1].servers) == 2 and all(srv.gen_tok_s for srv in snaps[-1].servers)
        deadline = time.monotonic() + 20
        while not await with_rates():
            assert time.monotonic() < deadline, snaps[-1].servers
            await asyncio.sleep(0.1)  # not a busy loop: Prometheus and the exporters share the CPU
        by_host = snaps[-1].servers_by_host()
        [vllm], [sglang] = by_host[host_name(0)], by_host[host_name(1)]
        assert (vllm.kind, vllm.instance, vllm.model) == ("vllm", f"{host_name(0)}:8000", VLLM_MODEL)
        assert (vllm.running, vllm.waiting, vllm.kv_cache_pct) == (12, 3, 45)
        assert (sglang.kind, sglang.running, sglang.waiting, sglang.kv_cache_pct) == ("sglang", 7, 0, 20)
        for server in (vllm, sglang):  # 500 tokens a scrape, scrapes 1 s apart (their jitter: within 30 %)
            assert 0.7 * GEN_PER_SCRAPE < server.gen_tok_s < 1.3 * GEN_PER_SCRAPE, server
        assert set(by_host) <= set(snaps[-1].hosts())  # on hosts whose GPUs are listed
    finally:
        await client.aclose()


async def test_a_bad_or_missing_token_is_refused_clearly_and_never_shown(fleet):
    _, prom, _ = fleet
    proxy = PromProxy(prom.url, token="s3cret-right")
    clients = []
    try:
        def client(environ):
            clients.append(PrometheusClient(proxy.url, token_env="OPTUI_PROM_TOKEN", timeout_s=5, environ=environ))
            return clients[-1]
        with pytest.raises(PrometheusError) as refused:
            await client({"OPTUI_PROM_TOKEN": "s3cret-wrong"}).query(fleet_query())
        assert refused.value.kind == "auth"
        assert "HTTP 401" in str(refused.value) and "$OPTUI_PROM_TOKEN" in str(refused.value)
        assert "s3cret" not in str(refused.value) and "s3cret" not in repr(clients[-1])
        with pytest.raises(PrometheusError, match="OPTUI_PROM_TOKEN is not set") as unset:
            await client({}).query(fleet_query())
        assert unset.value.kind == "auth"
        with pytest.raises(PrometheusError, match="HTTP 401"):
            await PrometheusClient(proxy.url, timeout_s=5).query(fleet_query())
        assert isinstance(await client({"OPTUI_PROM_TOKEN": "s3cret-right"}).query(fleet_query()), list)
    finally:
        for c in clients:
            await c.aclose()
        proxy.close()


async def test_a_fractional_timeout_is_a_duration_prometheus_takes(fleet):
    """``timeout_s = 2.5`` went to Prometheus as ``timeout=2.5s``, which its duration syntax
    refuses (HTTP 400, bad_data: invalid parameter "timeout"): every query of such a fleet failed."""
    _, prom, _ = fleet
    client = PrometheusClient(prom.url, timeout_s=2.5)
    try:
        state = FleetState(interval_s=1.0)
        snap = await read_fleet(client, state, ALL_GPUS)
        assert snap.error is None and len(snap.gpus) == ALL_GPUS
    finally:
        await client.aclose()


async def test_a_slow_prometheus_times_out_and_a_down_one_is_a_clear_error(fleet):
    _, prom, _ = fleet
    proxy = PromProxy(prom.url)
    client = PrometheusClient(proxy.url, timeout_s=0.3)
    try:
        proxy.hold()
        # the held query is answered at 4 s: 13x the 0.3 s timeout_s, below the 5 s default. A
        # client that waited past its own deadline (none, or the default) would get that answer
        answer_late = threading.Timer(4.0, proxy.release)
        answer_late.start()
        with pytest.raises(PrometheusError, match=r"did not answer within 0.3 s") as slow:
            await client.query(fleet_query())
        assert slow.value.kind == "timeout"
        assert answer_late.is_alive(), "the query waited for the slow Prometheus's answer"
        answer_late.cancel()
        proxy.release()
        proxy.garbage = True
        with pytest.raises(PrometheusError, match="not JSON") as garbage:
            await client.query(fleet_query())
        assert garbage.value.kind == "answer"
    finally:
        await client.aclose()
        proxy.close()
    down = PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    try:
        with pytest.raises(PrometheusError, match="cannot connect to Prometheus") as refused:
            await down.query(fleet_query())
        assert refused.value.kind == "connect"
    finally:
        await down.aclose()
    direct = PrometheusClient(prom.url, timeout_s=5)
    try:
        with pytest.raises(PrometheusError, match="bad_data") as bad:
            await direct.query("sum(")
        assert bad.value.kind == "answer"
    finally:
        await direct.aclose()


def optui_cli(directory, prometheus_url: str, *args: str, server: bool = False) -> subprocess.CompletedProcess:
    """``python -m optui -c CFG ARGS`` with a ``[fleet]`` table pointing at ``prometheus_url``;
    ``server``: the vLLM server of host 0 also configured (not controlled: control = "none")."""
    cfg = directory / "optui.toml"
    cfg.write_text(f'[hosts.local]\ngpu_source = "none"\n\n[fleet]\nprometheus = "{prometheus_url}"\n'
                   'interval_s = 1\ntimeout_s = 3\n\n'
                   + (f'[servers.llama]\nurl = "http://{host_name(0)}:8000"\nkind = "vllm"\ncontrol = "none"\n'
                      if server else ""))
    return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, env=subprocess_env(), cwd=directory,
                          start_new_session=True)


def test_gpus_and_status_json_list_every_fleet_gpu(fleet, tmp_path):
    exporters, prom, _ = fleet
    done = optui_cli(tmp_path, prom.url, "gpus", "--json")
    assert done.returncode == 0, done.stderr
    gpus = json.loads(done.stdout)
    assert len(gpus) == ALL_GPUS
    for gpu in gpus:
        assert tuple(gpu) == (*FLEET_GPU_JSON_KEYS, "source") and set(GPU_JSON_KEYS) <= set(gpu) and gpu["source"] == "fleet"
        if gpu["exporter"] == "nvidia_smi":
            assert (gpu["host"], gpu["name"], gpu["mem_total_mib"]) == (SMI_HOST, SMI_MODEL, pytest.approx(80_553))
            continue
        host = int(gpu["host"].rsplit("-", 1)[1])
        assert (gpu["uuid"], gpu["name"], gpu["exporter"]) == (gpu_uuid(host, gpu["index"]), MODEL, "dcgm")
        assert any(gpu["mem_used_mib"] == v["DCGM_FI_DEV_FB_USED"] and gpu["mem_free_mib"] == v["DCGM_FI_DEV_FB_FREE"]
                   for v in (gpu_values(host, gpu["index"], g) for g in exporters.served(host)))
        assert gpu["util_mem_pct"] is None if host == NO_COPY_UTIL else gpu["util_mem_pct"] is not None
    table = optui_cli(tmp_path, prom.url, "gpus")
    assert table.returncode == 0 and f"{ALL_GPUS} GPUs on {HOSTS + 1} hosts" in table.stdout
    status = optui_cli(tmp_path, prom.url, "status", "--json", "--wait", "0", server=True)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    fleet_status = data["fleet"]
    assert fleet_status["prometheus"] == prom.url and fleet_status["error"] is None
    assert {(g["host"], g["index"]) for g in fleet_status["gpus"]} == {(g["host"], g["index"]) for g in gpus}
    assert {(srv["host"], srv["kind"], srv["configured"]) for srv in fleet_status["servers"]} == {
        (host_name(0), "vllm", "llama"), (host_name(1), "sglang", None)}  # [servers.llama] joins both views
    # and its own entry carries its live load from Prometheus (optui cannot reach it: control none)
    [llama] = data["servers"]
    assert llama["name"] == "llama" and llama["load"]["running"] is None
    assert llama["fleet"]["instance"] == f"{host_name(0)}:8000" and llama["fleet"]["stale"] is False
    assert (llama["fleet"]["running"], llama["fleet"]["waiting"], llama["fleet"]["kv_cache_pct"]) == (12, 3, 45)
    dead = f"http://127.0.0.1:{free_port()}"
    down = optui_cli(tmp_path, dead, "gpus", "--json")
    [failed] = json.loads(down.stdout)  # the failed query is an entry of the list, with its error
    assert down.returncode == 1 and "cannot connect to Prometheus" in failed["error"] and failed["prometheus"] == dead
    # Prometheus down: the status says so and the rest of it is there
    status = optui_cli(tmp_path, dead, "status", "--json", "--wait", "0")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert "cannot connect to Prometheus" in data["fleet"]["error"] and data["fleet"]["gpus"] == []
    assert data["hosts"][0]["host"] == "local" and data["journal_error"] is None


async def test_the_tui_joins_a_configured_server_to_its_series_and_names_a_slow_prometheus(fleet, tmp_path):
    """Issue 21 in the real app: [servers.llama] at host 0's vLLM address (control none: optui
    cannot reach it) shows its live load from Prometheus on its Servers row, and the host's
    details mark it as optui's; a Prometheus that does not answer is a clear message in the
    status line while the keys keep working, gone once it answers again."""
    from optui.config import load_config
    from optui.session import Session
    from optui.ui.app import OptuiApp
    from tests.helpers.pilot import wait_for

    _, prom, _ = fleet
    proxy = PromProxy(prom.url)
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    (campaign / "optui.toml").write_text(
        f'[hosts.local]\ngpu_source = "none"\n\n[fleet]\nprometheus = "{proxy.url}"\ninterval_s = 0.5\ntimeout_s = 1\n\n'
        f'[servers.llama]\nurl = "http://{host_name(0)}:8000"\nkind = "vllm"\ncontrol = "none"\n')
    app = OptuiApp(Session(load_config(campaign / "optui.toml")))
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            def server_row() -> str:
                panel = app.query("#servers")
                return panel.first()._rows[0].plain if panel and panel.first()._rows else ""

            def status() -> str:
                return str(app.query_one("#status-line").render())
            await wait_for(pilot, lambda: "prom vllm 12+3 45%" in server_row(), what=server_row)
            assert server_row().startswith("○ llama DOWN") and "fleet:" not in status()
            grid = app.query_one("#fleet")
            await pilot.press("1")
            for _ in range(3):  # from the summary row to host 0's
                if grid.current_key == host_name(0):
                    break
                await pilot.press("down")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "DetailsScreen")
            body = app.screen.query_one("#details-body").render().plain
            assert f"{host_name(0)}:8000  {VLLM_MODEL}  vllm 12+3 45%" in body and "= [servers.llama] in optui" in body
            await pilot.press("escape")
            proxy.hold()  # Prometheus slow: every query runs past timeout_s
            await wait_for(pilot, lambda: f"fleet: Prometheus at {proxy.url} did not answer within 1 s" in status(),
                           what=status)
            await pilot.press("s")  # the rest keeps working: the grid sorts its last known GPUs
            await wait_for(pilot, lambda: "sort free memory" in grid.rows()[0].plain, what=lambda: grid.rows()[0].plain)
            assert len(grid.shown_hosts()) == HOSTS + 1 and "prom vllm" in server_row()
            proxy.release()
            await wait_for(pilot, lambda: "fleet:" not in status(), what=status)
            await pilot.press("q")
    finally:
        proxy.close()


async def test_a_prometheus_restart_is_an_error_then_the_fleet_again(fleet):
    exporters, prom, _ = fleet
    client = PrometheusClient(prom.url, timeout_s=2)
    try:
        state = FleetState(interval_s=1.0)
        before = await read_fleet(client, state, ALL_GPUS)
        prom.stop()
        with pytest.raises(PrometheusError) as refused:
            await client.query(fleet_query())
        down = state.failed(str(refused.value), time.time())
        assert refused.value.kind == "connect" and down.error.startswith("cannot connect to Prometheus")
        assert len(down.gpus) == ALL_GPUS  # the last known GPUs, aging
        prom.start()  # same port, same storage

        async def fresh_again():
            snap = state.update(await client.query(fleet_query()), time.time())
            return snap.error is None and min(g.sampled_at for g in snap.gpus) > max(g.sampled_at for g in before.gpus)
        deadline = time.monotonic() + 30
        while not await fresh_again():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)  # not a busy loop: Prometheus and the exporters share the CPU
    finally:
        await client.aclose()


async def test_a_gpu_whose_exporter_stopped_turns_stale_with_its_age(fleet):
    """And an inference server whose /metrics stopped answering (the SGLang server of the same
    host) stays listed, stale with its age, like the GPUs (it was dropped at once)."""
    exporters, prom, servers = fleet
    client = PrometheusClient(prom.url, timeout_s=5)
    try:
        state = FleetState(interval_s=0.5)
        snap = await read_fleet(client, state, ALL_GPUS)
        first = snap.hosts()[host_name(STOPPED)][0].sampled_at
        first_server = snap.servers_by_host()[host_name(STOPPED)][0].sampled_at

        async def two_scrapes_seen():  # the exporter's and the server's scrape gaps are known from then on
            snap = state.update(await client.query(fleet_query()), time.time())
            return (snap.hosts()[host_name(STOPPED)][0].sampled_at > first
                    and snap.servers_by_host()[host_name(STOPPED)][0].sampled_at > first_server)
        deadline = time.monotonic() + 20
        while not await two_scrapes_seen():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)  # not a busy loop: Prometheus and the exporters share the CPU
        last_served = exporters.served(STOPPED)[-1]
        exporters.stop(STOPPED)
        servers[1].close()  # the SGLang server on that host

        async def stopped_host_stale():
            nonlocal snap
            snap = state.update(await client.query(fleet_query()), time.time())
            return all(g.stale for g in snap.hosts()[host_name(STOPPED)]) and snap.servers_by_host()[
                host_name(STOPPED)][0].stale
        deadline = time.monotonic() + 20
        while not await stopped_host_stale():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)  # not a busy loop: Prometheus and the exporters share the CPU
        gone = snap.hosts()[host_name(STOPPED)]
        # stale from its age, never at once: older than 3 x max(the 0.5 s poll, the scrape gap last seen),
        # which a loaded machine shortens below the configured 1 s (one scrape late, the next on
        # time: a gap of 0.84 s and a stale server at 2.5 s were seen beside a CPU hog)
        assert len(gone) == GPUS_PER_HOST and all(g.age_s > 3 * 0.5 for g in gone)
        # still listed with the last values it served
        assert gone[0].mem_used_mib in {gpu_values(STOPPED, 0, g)["DCGM_FI_DEV_FB_USED"] for g in
                                        range(last_served + 1)}
        assert not any(g.stale for h, gpus in snap.hosts().items() if h != host_name(STOPPED) for g in gpus)
        [sglang] = snap.servers_by_host()[host_name(STOPPED)]
        assert (sglang.kind, sglang.running, sglang.kv_cache_pct) == ("sglang", 7, 20) and sglang.age_s > 3 * 0.5
        assert server_load(sglang) == f"sglang stale {sglang.age_s:.0f}s"  # as the grid's row and details say
        assert not snap.servers_by_host()[host_name(0)][0].stale  # the vLLM server still answers
    finally:
        await client.aclose()
