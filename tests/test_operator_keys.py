"""Keys a new operator relies on (issue 20, "keys"): refresh while paused, keys that restart
servers ask first, the run-all queue's failures, one key table, the benchmark picker —
the real app (Pilot) over real sessions (the demo GPU rack, the demo server on loopback)."""

from __future__ import annotations

import pytest

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(120)


async def test_ctrl_l_refreshes_once_while_paused(tmp_path):
    """``p`` pauses the GPU refresh; ``ctrl+l`` still reads every host once (one fresh
    frame), and the pause holds after it."""
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "demo"\ninterval_s = 60\n')  # no read of its own for 60 s
    app = OptuiApp(Session(load_config(cfg)), title="test")
    async with app.run_test(size=(120, 40)) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.gpus.snapshots["local"].taken_at > 0)
        await pilot.press("p")
        await wait_for(pilot, lambda: s.paused and "PAUSED" in str(app.query_one("#status-line").render()))
        before = s.gpus.snapshots["local"].taken_at
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: s.gpus.snapshots["local"].taken_at > before, timeout=10,
                       what="a GPU read after ctrl+l while paused")
        assert s.paused and "PAUSED" in str(app.query_one("#status-line").render())
        await pilot.press("q")
