"""One ServerRuntime with its monitor running, for ready-gate and restart tests (no Session)."""

from __future__ import annotations

import asyncio
import contextlib
import os

from optui.adapters.controller import ProcessController
from optui.adapters.journal import Journal
from optui.config import ServerConfig
from optui.session.server.runtime import ServerRuntime
from tests.helpers.demo import SRC, free_port

#: what a server started by these tests needs to import optui and tests.helpers
ENV = {"PYTHONPATH": os.pathsep.join([str(SRC), str(SRC.parent)])}


@contextlib.asynccontextmanager
async def runtime(tmp_path, argv, *, kind="sglang", controller=None, gpu_holders=None, env=None, **cfg_kw):
    """``(runtime, journal)`` of server ``s`` run by ``argv`` (port from its ``--port``),
    monitored; stopped and closed at the end. ``env`` adds to :data:`ENV`; ``cfg_kw``
    overrides the quick test timings."""
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else free_port()
    env = {**ENV, **(env or {})}
    cfg = ServerConfig(url=f"http://127.0.0.1:{port}", kind=kind, argv=argv, env=env,
                       **{"ready_timeout_s": 20, "stop_timeout_s": 3, "poll_interval_s": 0.2, **cfg_kw})
    ctl = controller or ProcessController("s", tmp_path / "state", env=env)
    journal = Journal(tmp_path / "journal.db")
    rt = ServerRuntime("s", cfg, ctl, journal, on_change=lambda: None, gpu_holders=gpu_holders)
    monitor = asyncio.create_task(rt.run())
    try:
        yield rt, journal
    finally:
        await rt.shutdown(True)
        monitor.cancel()
        await asyncio.gather(monitor, return_exceptions=True)
        journal.close()
