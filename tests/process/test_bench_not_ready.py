"""A benchmark on a server that is not READY is asked about first (issue 16): the TUI shows a
confirm dialog with Cancel focused, ``optui bench run`` refuses unless ``--force``; a run
made anyway says so in its output and in ``bench.started``.

The real app over the demo campaign through Pilot; the real CLI as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from optui.demo.campaign import write_demo_config
from optui.ui.screens.choice import ChoiceScreen
from optui.ui.screens.confirm import ConfirmScreen
from tests.helpers.demo import free_port, subprocess_env
from tests.helpers.faults import demo_app, ready, stored_events, wait_for

pytestmark = pytest.mark.timeout(120)


async def test_a_benchmark_on_a_server_that_is_not_ready_asks_first_with_cancel_focused(tmp_path):
    app = demo_app(tmp_path)
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        await session.stop_server("demo")
        await wait_for(pilot, lambda: rt.status.state.value == "down", what="server down")

        async def ask() -> ConfirmScreen:
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen), what="preset list")
            await pilot.press("enter")  # the first preset of the server: sweep
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="not-ready confirm")
            return app.screen

        dialog = await ask()
        assert app.focused is not None and app.focused.id == "cancel"
        body = str(dialog.query_one("#confirm-body").render())
        assert "demo is DOWN" in body
        await pilot.press("enter")  # the focused button: Cancel
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="dialog closed")
        assert session.benches.current is None and not stored_events(session.journal.path, types=["bench.started"])

        await ask()
        await pilot.press("y")
        await wait_for(pilot, lambda: session.benches.current is not None, what="bench started")
        await wait_for(pilot, lambda: not session.benches.running, timeout=60, what="bench end")
        started = stored_events(session.journal.path, types=["bench.started"])[-1].data
        assert started["server_state"] == "down"
        assert any(line.startswith("optui: demo is DOWN") for line in session.benches.current.lines)
        await pilot.press("q")


def test_cli_bench_run_refuses_a_server_that_is_not_ready_unless_forced(tmp_path):
    cfg = write_demo_config(tmp_path, port=free_port(), speed=20.0)  # its server is never started

    def optui(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), *args], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=90, env=subprocess_env(), start_new_session=True)

    refused = optui("bench", "run", "demo", "loadgen", "--repeat", "1")
    assert refused.returncode == 1 and "--force benchmarks it anyway" in refused.stderr, refused.stderr
    forced = optui("bench", "run", "demo", "loadgen", "--repeat", "1", "--force", "--json")
    assert "demo is down: benchmarking it anyway (--force)" in forced.stderr, forced.stderr
    data = json.loads(forced.stdout)
    assert data["runs"] and data["runs"][0]["status"] == "failed"  # nothing answers: the run fails, it is not refused
    started = stored_events(tmp_path / ".optui" / "optui.db", types=["bench.started"])[-1].data
    assert started["server_state"] == "down"


@pytest.mark.timeout(30)
async def test_without_wait_a_down_server_is_refused_after_its_first_probe_not_a_grace_period(tmp_path):
    # `bench run` without --wait waited a fixed 3 s on a server its first probe had found down
    # (and operators with it); now it settles on the first probe unless the server is on its
    # way to ready. A 600 s grace here would hit the test's timeout on the old code.
    from optui.cli.bench_run_cmd import wait_ready
    from optui.config import load_config
    from optui.session import Session

    cfg = write_demo_config(tmp_path, port=free_port(), speed=20.0)  # its server is never started
    session = Session(load_config(cfg), actor="test", autostart=False)
    await session.start()
    try:
        rt = session.server("demo")
        assert await wait_ready(rt, 600.0, settle=True) == "down"
        assert rt.polled.is_set()
    finally:
        await session.close()
