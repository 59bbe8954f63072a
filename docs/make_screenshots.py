"""Regenerate the README screenshots from the demo (headless, real subprocesses).

    .venv/bin/python docs/make_screenshots.py

Starts the demo campaign in a temporary directory, waits until the simulated server is
ready, lets the GPU history fill for a minute, runs the bundled benchmark, and saves SVG screenshots of the main screen at 200x50
and 60x40 into docs/.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from optui.demo.campaign import DEMO_TODOS, free_port, seed_todo_list, write_demo_config

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp

DOCS = Path(__file__).resolve().parent
HISTORY_S = 50  # seconds of demo before the wide shot (a few sparkline cells of the 5-minute window)


async def shoot(size: tuple[int, int], name: str, bench: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        session = Session(load_config(write_demo_config(Path(tmp), port=free_port(), speed=5)), stop_servers_on_exit=True)
        seed_todo_list(session, DEMO_TODOS)
        app = OptuiApp(session, title="demo")
        async with app.run_test(size=size) as pilot:
            rt = session.servers["demo"]
            deadline = time.monotonic() + 60
            while not (rt.status.state.value == "ready" and rt.status.busy is None) and time.monotonic() < deadline:
                await pilot.pause(0.2)
            if bench:
                await pilot.pause(HISTORY_S)  # some GPU history for the sparklines
                session.benches.run("sweep")
                await session.benches.wait()
            await pilot.pause(2.5)
            app.query_one("#servers").focus()
            await pilot.pause(0.3)
            (DOCS / name).write_text(app.export_screenshot(title="optui demo"))
            print("wrote", DOCS / name)


async def main() -> None:
    await shoot((200, 50), "screenshot-main.svg", bench=True)
    await shoot((60, 40), "screenshot-narrow.svg", bench=False)


if __name__ == "__main__":
    asyncio.run(main())
