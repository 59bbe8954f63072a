"""The fleet's grid in the real app (Pilot) on the simulated fleet of ``optui demo --fleet``
(64 hosts x 8 GPUs, through the same FleetState as Prometheus answers): one row per host and
one cell per GPU at 200x50 and in a 60-column side pane; sort, host glob and "idle but holding
memory" filters; Enter shows a host's GPUs. The simulation's own checks are pure."""

from __future__ import annotations

import asyncio
import fnmatch

import pytest
from textual.geometry import Region

from optui.config import load_config
from optui.demo.campaign import write_demo_config
from optui.demo.sim_fleet import GPUS_PER_HOST, STOPPING_HOST, STOPS_AFTER_S, SimFleetSource, sim_host_name
from optui.session import Session
from optui.ui.app import OptuiApp
from optui.ui.widgets.fleet_grid import BLOCKS, idle_holding, plain_segments
from tests.helpers.demo import free_port
from tests.helpers.pilot import wait_for

HOSTS = 64


def fleet_app(tmp_path) -> OptuiApp:
    campaign = tmp_path / "fleet"
    campaign.mkdir()
    (campaign / "optui.toml").write_text(f'[hosts.local]\ngpu_source = "none"\n\n[fleet]\ndemo_hosts = {HOSTS}\n')
    return OptuiApp(Session(load_config(campaign / "optui.toml")))


@pytest.mark.parametrize("size", [(200, 50), (60, 40)])
async def test_the_fleet_grid_sorts_filters_and_opens_a_host(tmp_path, size):
    app = fleet_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.query("#fleet") and len(app.query_one("#fleet").shown_hosts()) == HOSTS)
        grid = app.query_one("#fleet")
        rows = [row.plain for row in grid.rows()]
        assert rows[0].startswith(f"{HOSTS} hosts {HOSTS * GPUS_PER_HOST} GPUs")
        assert len(rows) == HOSTS + 1
        for i, row in enumerate(rows[1:]):
            assert row.startswith(sim_host_name(i)) and len(row) <= grid.size.width
            cells = row[len(sim_host_name(i)) + 1:][:GPUS_PER_HOST]
            assert all(c in BLOCKS + "?·" for c in cells), row
        assert grid.region.right <= size[0]
        # the grid draws its rows itself (plain_segments): cell by cell what Rich's rendering gives
        base = grid.visual_style.rich_style

        def cells(segments):
            return [(char, segment.style) for segment in segments for char in segment.text]
        for row in grid.rows():
            rich = row.copy()
            rich.stylize_before(base)
            assert cells(plain_segments(row, base)) == cells(rich.render(app.console)), row.plain
        if size[0] >= 100:  # the inference servers' live load beside their host's GPUs (vLLM on host 0)
            assert " vllm " in rows[1] and "t/s" in rows[1]
        # the grid windows its rows within what its box shows; the other panels keep theirs
        visible = app.query_one("#gpus-box").region
        assert grid.region.bottom <= visible.bottom <= size[1]
        assert all(app.query_one(f"#{name}-box").region.height >= 3 for name in ("servers", "todo", "bench", "journal"))
        grid.focus()
        assert grid.current_key == sim_host_name(0)  # the cursor starts on the first host, not the summary
        await pilot.press("pagedown", "pagedown", "pagedown", "pagedown")  # below the rows first shown
        drawn = [strip.text for strip in grid.render_lines(Region(0, 0, grid.size.width, grid.size.height))]
        assert grid.current_key == sim_host_name(40) and any(line.startswith(sim_host_name(40)) for line in drawn)
        assert drawn[-1].startswith(sim_host_name(40))  # the window keeps the cursor row in view, at its foot
        await pilot.press("home")
        hosts = grid.snapshot.hosts()
        await pilot.press("s")  # most free memory first
        free = {h: sum(g.mem_free_mib for g in gpus) for h, gpus in hosts.items()}
        assert grid.shown_hosts()[0] == max(free, key=free.get) and "sort free memory" in grid.rows()[0].plain
        await pilot.press("s", "s", "s")  # idle but holding memory first
        assert any(idle_holding(g) for g in hosts[grid.shown_hosts()[0]])
        await pilot.press("i")
        idle_hosts = {h for h, gpus in hosts.items() if any(idle_holding(g) for g in gpus)}
        assert set(grid.shown_hosts()) == idle_hosts and 0 < len(idle_hosts) < HOSTS
        await pilot.press("i", "s")  # back to all hosts, by name
        await pilot.press("slash")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "TextPrompt")
        await pilot.press(*"fleet-node-00*", "enter")
        await wait_for(pilot, lambda: len(grid.shown_hosts()) == 9)
        assert grid.shown_hosts() == [sim_host_name(i) for i in range(9)]
        assert ("(9 shown)" if size[0] >= 100 else f"9/{HOSTS} hosts") in grid.rows()[0].plain
        # thresholds in the same box, with a glob (issue 21): hosts with one GPU that has more
        # than 20 GiB free and is under 50 % busy; spaces around an operator are fine
        await pilot.press("slash")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "TextPrompt")
        await pilot.press("ctrl+u", *"fleet-node-0[1-3]* free > 20G util<50", "enter")

        def expected() -> list[str]:  # the snapshot shown, read without the parser
            return [h for h, gpus in sorted(grid.snapshot.hosts().items())
                    if fnmatch.fnmatchcase(h, "fleet-node-0[1-3]*") and any(
                        not g.stale and g.mem_free_mib is not None and g.mem_free_mib > 20 * 1024
                        and g.util_gpu_pct is not None and g.util_gpu_pct < 50 for g in gpus)]
        await wait_for(pilot, lambda: app.screen.__class__.__name__ != "TextPrompt" and grid.shown_hosts() == expected(),
                       what=lambda: (grid.shown_hosts(), expected(), [n.message for n in app._notifications]))
        assert 0 < len(grid.shown_hosts()) < 30
        summary = grid.rows()[0].plain  # in full, or in short form in the side pane: never cut
        assert ("hosts " if size[0] >= 100 else "/") + "fleet-node-0[1-3]* free>20G util<50" in summary
        assert summary.index("util<50") + len("util<50") <= grid.size.width  # in view; what follows may be cut
        # a bad term: an error naming it, the prompt again with the text, the filter unchanged
        await pilot.press("slash")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "TextPrompt")
        await pilot.press("ctrl+u", *"fleet-node-0* free>40X", "enter")
        await wait_for(pilot, lambda: any("'free>40X'" in n.message for n in app._notifications),
                       what=lambda: [n.message for n in app._notifications])
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "TextPrompt")
        assert app.screen.query_one("Input").value == "fleet-node-0* free>40X"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ != "TextPrompt")
        assert grid.host_filter.text == "fleet-node-0[1-3]* free>20G util<50"
        await pilot.press("slash")  # back to the first glob for the details below
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "TextPrompt")
        await pilot.press("ctrl+u", *"fleet-node-00*", "enter")
        await wait_for(pilot, lambda: grid.shown_hosts() == [sim_host_name(i) for i in range(9)])
        await pilot.press("down", "enter")  # the second host
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "DetailsScreen")
        body = app.screen.query_one("#details-body").render().plain
        assert f"{sim_host_name(1)}: {GPUS_PER_HOST} GPUs (dcgm)" in body
        assert "inference servers" in body and f"{sim_host_name(1)}:30000" in body and "sglang" in body
        assert body.count("     util ") == GPUS_PER_HOST and "readings)" in body  # each GPU's history
        assert sum(line.strip().startswith(str(i)) for line in body.splitlines() for i in range(8)) >= GPUS_PER_HOST
        frame = app.screen.query_one("#details-body").parent.parent
        assert frame.border_subtitle == "Esc, q or Enter closes"  # q closes it: the dialog says so (issue 34)
        await pilot.press("escape")
        await pilot.press("q")


async def test_1_focuses_the_fleet_grid_whose_keys_then_work(tmp_path):
    """New user: in `optui demo --fleet 64`, 1 then s / i / / did nothing (1 focused the
    configured hosts' list above the grid; only Tab reached it). 1 now focuses the grid, its
    sort key works at once; 1 again goes to the hosts' list."""
    app = fleet_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: app.query("#fleet") and len(app.query_one("#fleet").shown_hosts()) == HOSTS)
        grid = app.query_one("#fleet")
        await pilot.press("1")
        assert app.focused is grid
        await pilot.press("s")
        await wait_for(pilot, lambda: "sort free memory" in grid.rows()[0].plain, timeout=5, what=lambda: grid.rows()[0].plain)
        await pilot.press("1")
        assert app.focused is app.query_one("#gpus")
        await pilot.press("q")


async def test_the_grid_keeps_a_host_selected_and_its_keys_in_view_at_60_columns(tmp_path):
    """New user at 60x40: after 1, `/ fleet-node-00*`, i (one host shown) Enter did nothing (the
    cursor was on the summary row: no host looked selected); the summary was cut at `hosts fl…`
    (the filters unseen); the grid's keys were not in the key bar; `/` and `i` on the configured
    hosts (1 pressed once more) did nothing. Now a host is always selected (the first after a
    filter or a sort), the filters show in short form, the keys are in the bar and `/` / `i` move
    to the grid and work there."""
    app = fleet_app(tmp_path)
    async with app.run_test(size=(60, 40)) as pilot:
        await wait_for(pilot, lambda: app.query("#fleet") and len(app.query_one("#fleet").shown_hosts()) == HOSTS)
        grid = app.query_one("#fleet")
        await pilot.press("1")
        assert app.focused is grid

        def drawn() -> list[str]:
            return [strip.text for strip in grid.render_lines(Region(0, 0, grid.size.width, grid.size.height))]
        bar = app.screen.query_one("KeyBar").render().plain
        assert all(f"{key} {label}" in bar for key, label in (("s", "Sort"), ("/", "Filter"), ("i", "Idle"))), bar
        assert "Host" in bar, bar
        await pilot.press("1")  # the configured hosts' list: `/` and `i` are the grid's there too
        assert app.focused is app.query_one("#gpus")
        await pilot.press("slash")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "TextPrompt")
        await pilot.press(*"fleet-node-00*", "enter")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ != "TextPrompt" and len(grid.shown_hosts()) == 9)
        assert app.focused is grid
        await pilot.press("1", "i")  # from the configured hosts again
        idle = grid.shown_hosts()
        assert app.focused is grid and grid.only_idle and 0 < len(idle) < 9
        summary = drawn()[0]
        assert "/fleet-node-00*" in summary and "idle only" in summary and "…" not in summary[:summary.index("idle only")], summary
        assert grid.current_key == idle[0] and drawn()[1].startswith(idle[0])  # the first host, drawn as the cursor
        await pilot.press("s")
        assert grid.current_key == grid.shown_hosts()[0] and "sort free" in drawn()[0]
        await pilot.press("home", "enter")  # Home: the first host, never the summary
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "DetailsScreen")
        body = app.screen.query_one("#details-body").render().plain
        assert body.startswith(f"{grid.shown_hosts()[0]}: {GPUS_PER_HOST} GPUs")
        await pilot.press("escape")
        await pilot.press("q")


def test_the_simulated_fleet_one_exporter_stops_and_its_gpus_age():
    clock = [1_000_000.0]
    hosts = STOPPING_HOST + 3
    source = SimFleetSource(hosts, interval_s=2.0, clock=lambda: clock[0])
    try:
        first = asyncio.run(source.read())
        assert len(first.gpus) == hosts * GPUS_PER_HOST and not any(g.stale for g in first.gpus)
        assert all(g.util_mem_pct is not None and g.mem_free_mib is not None for g in first.gpus)
        for _ in range(12):  # two minutes: the stopping host's exporter is gone after one
            clock[0] += 10.0
            snap = asyncio.run(source.read())
        assert clock[0] - 1_000_000.0 > STOPS_AFTER_S
        stale = snap.hosts()[sim_host_name(STOPPING_HOST)]
        assert all(g.stale and g.age_s > 3 * 2.0 for g in stale)
        assert sum(g.stale for g in snap.gpus) == GPUS_PER_HOST
    finally:
        asyncio.run(source.close())


def test_optui_demo_fleet_writes_a_fleet_of_simulated_hosts(tmp_path):
    cfg = load_config(write_demo_config(tmp_path, port=free_port(), fleet=64)).config
    assert cfg.fleet.demo_hosts == 64 and cfg.fleet.prometheus is None
    assert load_config(write_demo_config(tmp_path, port=free_port())).config.fleet is None


def test_optui_gpus_lists_the_configured_hosts_and_the_fleet(tmp_path):
    """`optui gpus` on the demo's config with a fleet says where the fleet's GPUs come from (it
    printed `fleet (None): ...`); `gpus --json` lists the configured hosts' GPUs beside the
    fleet's, each with its source (it listed the fleet's only, and without [fleet] it tried NVML
    and answered `{"error": "No NVIDIA driver..."}`); a host that cannot be read is its own
    entry; `status --json` shows the same hosts. Any command whose stdout is closed early exits
    141 without a word (`optui gpus | head -2` said `internal error: BrokenPipeError`)."""
    import json
    import os
    import subprocess
    import sys

    from tests.helpers.demo import subprocess_env

    cfg = write_demo_config(tmp_path, port=free_port(), speed=100.0, fleet=2)

    def optui(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=60, env=subprocess_env(),
                              stdin=subprocess.DEVNULL)
    out = optui("gpus")
    assert out.returncode == 0, out.stderr
    head = next(line for line in out.stdout.splitlines() if line.startswith("fleet ("))
    assert head == f"fleet (simulated: 2 hosts x 8 GPUs): {2 * GPUS_PER_HOST} GPUs on 2 hosts", head
    assert "gpu-node-1 (demo)" in out.stdout and "gpu-node-2 (demo)" in out.stdout
    demo_only = tmp_path / "demo-only.toml"  # the demo without a fleet: its simulated hosts, no NVML
    demo_only.write_text(cfg.read_text().split("[fleet]")[0])
    for config, fleet in ((cfg, 2 * GPUS_PER_HOST), (demo_only, 0)):
        done = subprocess.run([sys.executable, "-m", "optui", "-c", str(config), "gpus", "--json"], capture_output=True,
                              text=True, timeout=60, env=subprocess_env(), stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        gpus = json.loads(done.stdout)
        assert isinstance(gpus, list), gpus
        assert [(g["host"], g["index"], g["source"]) for g in gpus if g["source"] == "demo"] == [
            (host, i, "demo") for host in ("gpu-node-1", "gpu-node-2") for i in range(4)]
        assert sum(g["source"] == "fleet" and g["host"].startswith("fleet-node-") for g in gpus) == fleet
        assert len(gpus) == 8 + fleet and all(g["mem_total_mib"] for g in gpus)
    cfg.write_text(cfg.read_text() + '\n[hosts.broken]\ngpu_source = "replay"\nreplay_file = "no/such.csv"\n')
    done = optui("gpus", "--json")
    assert done.returncode == 1, done.stderr
    gpus = json.loads(done.stdout)
    [broken] = [g for g in gpus if g["host"] == "broken"]
    assert broken["source"] == "replay" and "no/such.csv" in broken["error"]
    assert len(gpus) == 1 + 8 + 2 * GPUS_PER_HOST
    status = optui("status", "--json", "--wait", "0")
    assert status.returncode == 0, status.stderr
    hosts = {h["host"]: h for h in json.loads(status.stdout)["hosts"]}
    assert {h: (v["source"], len(v["gpus"])) for h, v in hosts.items()} == {
        "gpu-node-1": ("demo", 4), "gpu-node-2": ("demo", 4), "broken": ("replay", 0)}
    assert "no/such.csv" in hosts["broken"]["error"]
    read, write = os.pipe()  # a reader gone before the first line (`| head` that exited)
    os.close(read)
    try:
        for args in (("gpus",), ("--help",)):
            done = optui(*args, stdout=write)
            assert (done.returncode, done.stderr) == (141, ""), args
    finally:
        os.close(write)
