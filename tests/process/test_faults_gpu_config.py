"""Fault injection, GPUs and config (issue 8): an NVML error in the middle of a run (a GPU
lost, a field that stops being supported) and the config file edited into an error while
optui runs. The real app; NVML is a fake ``pynvml`` module (tests/process/test_gpu_nvml.py) read on
the source's own thread; the config check is a real file edit and a real CLI subprocess.

SSH link dropped and restored: tests/process/test_ssh_rack.py (covered by the SSH work).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.demo import subprocess_env
from tests.helpers.faults import Heartbeat, demo_app, ready, status_line, stored_events, wait_for
from tests.process.test_gpu_nvml import MIB, FakeNvml

pytestmark = [pytest.mark.timeout(120), pytest.mark.serial]  # the UI gaps bench/ui_gaps.py prints come from here


def gpu_lines(app) -> list[str]:
    return app.query_one("#gpus").render().plain.splitlines()


def line_of(app, index: int) -> str:
    return next((x for x in gpu_lines(app) if x.strip().startswith(f"{index} ")), "")


async def test_nvml_error_mid_run_shows_on_that_gpu_only_and_is_journaled(tmp_path, monkeypatch):
    fake = FakeNvml([{"used": 1000 * MIB, "util": (11, 1)}, {"used": 2000 * MIB, "util": (22, 2)}])
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    cfg = tmp_path / "optui.toml"
    cfg.write_text('refresh_s = 0.25\n[hosts.box]\ngpu_source = "nvml"\n')
    app = OptuiApp(Session(load_config(cfg)), title="faults")
    session = app.session
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: " 11%" in line_of(app, 0) and " 22%" in line_of(app, 1), what="first readings")
        beat = Heartbeat(app)
        fake.gpus[1]["fail"] = {"nvmlDeviceGetUtilizationRates": "GPU_IS_LOST"}  # GPU 1 falls off the bus
        fake.gpus[0]["fail"] = {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED"}  # a field GPU 0 stops offering
        fake.gpus[0]["util"] = (77, 7)
        await wait_for(pilot, lambda: "GPU is lost" in line_of(app, 1), what="the error on GPU 1")
        await wait_for(pilot, lambda: " 77%" in line_of(app, 0), what="GPU 0 keeps updating")
        assert "GPU is lost" not in line_of(app, 0)
        await wait_for(pilot, lambda: stored_events(session.journal.path, types=["alert"]), what="journaled")
        alerts = [(e.target, e.data["kind"], e.data["message"]) for e in stored_events(session.journal.path, types=["alert"])]
        assert alerts == [("box:1", "gpu_error", "box GPU 1: GPU is lost")]  # once, and nothing for the unsupported field
        await wait_for(pilot, lambda: any("GPU is lost" in n.message for n in app._notifications), what="notification")
        snap = session.gpus.snapshots["box"]
        assert snap.samples[0].power_w is None and snap.samples[0].error is None
        del fake.gpus[1]["fail"]  # back: the alert re-arms
        fake.gpus[1]["util"] = (33, 3)
        await wait_for(pilot, lambda: " 33%" in line_of(app, 1), what="GPU 1 back")
        beat.stop()
        await pilot.press("q")


async def test_config_edited_with_an_error_while_running(tmp_path):
    app = demo_app(tmp_path)
    session, rt = app.session, app.session.servers["demo"]
    path = session.loaded.path
    good = path.read_text()
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        beat = Heartbeat(app)
        path.write_text(good.replace("stop_timeout_s = 10", 'stop_timeout_s = "ten"'))
        line = good.splitlines().index("stop_timeout_s = 10") + 1
        where = f"{path}:{line}: servers.demo.stop_timeout_s: Input should be a valid number"
        await wait_for(pilot, lambda: f"config: {where}" in status_line(app), what="error on the status line")
        event = stored_events(session.journal.path, types=["config.changed"])[-1]
        assert event.data["valid"] is False and event.data["applied"] is False and event.data["error"].startswith(where)
        await wait_for(pilot, lambda: any(where in n.message for n in app._notifications), what="notification")
        # the running session keeps its last good config: a restart uses it
        assert rt.cfg.stop_timeout_s == 10
        status = await session.restart_server("demo", list(rt.status.argv), reason="with the config it started with")
        await session.synced()  # its events are written on the journal thread: read the DB after them
        assert status.state.value == "ready"
        # a one-shot command against the broken file: exit 2, FILE:LINE: FIELD: problem, no traceback
        cli = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "optui", "-c", str(path), "status"],
                                      capture_output=True, text=True, timeout=60, env=subprocess_env(), stdin=subprocess.DEVNULL)
        assert cli.returncode == 2 and cli.stderr.startswith(where) and "Traceback" not in cli.stderr, cli.stderr
        path.write_text(good)  # fixed
        await wait_for(pilot, lambda: "config:" not in status_line(app), what="error cleared")
        assert stored_events(session.journal.path, types=["config.changed"])[-1].data["valid"] is True
        beat.stop()
        await pilot.press("q")
