"""Security (issue 8): flag values and todo text with shell metacharacters never execute (the
argv arrives intact at the real server process: /proc/PID/cmdline), an API key taken from
the environment never appears in the journal, the exports, the command log or a screenshot,
and ``--read-only`` is refused by the session itself (the keys, the palette and the CLI:
tests/process/test_look_and_feel.py). Over SSH: tests/process/test_ssh_rack.py.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from optui.config import load_config
from optui.session import Session
from optui.session.errors import SessionError
from optui.session.journal.export import export
from tests.helpers.faults import app_on, db_bytes, demo_app, demo_config, ready, small_client, wait_for

pytestmark = pytest.mark.timeout(120)

TINY = '[benchmarks.tiny]\nserver = "demo"\nbuiltin = { concurrency = [2], input_len = 16, output_len = 8, prompts = 4 }\n'


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


async def test_metacharacters_in_flags_and_todo_text_never_execute(tmp_path):
    canary = tmp_path / "pwned"
    evil = f"m; touch {canary} && `touch {canary}` $(touch {canary}) | tee {canary} 'single' \"double\" \\ *\nline two"
    app = demo_app(tmp_path, benchmarks=TINY)
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        # a todo item whose text and experiment carry the metacharacters, run from the list
        item = session.todos.add(f"try {evil}", "high", {"server": "demo", "set": {"--served-model-name": evil},
                                                         "bench": ["tiny"]})
        session.todo_runs.enqueue([item])
        await wait_for(pilot, lambda: not session.todo_runs.running, timeout=60, what="experiment done")
        # the item's final status is written on the journal thread, then read back to the list
        await wait_for(pilot, lambda: session.todos.items[0].status.value != "in_progress", timeout=30,
                       what=lambda: session.todos.items[0])
        assert session.todos.items[0].status.value == "completed", session.todos.items[0]
        argv = cmdline(rt.status.pid)
        assert argv[argv.index("--served-model-name") + 1] == evil  # one argv element, byte for byte
        async with httpx.AsyncClient(base_url=rt.cfg.url, timeout=30) as client:  # a loaded machine: not 5 s
            assert (await client.get("/v1/models")).json()["data"][0]["id"] == evil
        # the flag editor's path: Session.restart_server with a value set by hand
        await session.restart_server("demo", [*argv[:argv.index("--served-model-name")], "--served-model-name",
                                              f"$(touch {canary})", *argv[argv.index("--served-model-name") + 2:]])
        assert f"$(touch {canary})" in cmdline(rt.status.pid)
        assert not canary.exists()
        await pilot.press("q")
    assert not canary.exists()


async def test_api_key_from_the_environment_never_leaks(tmp_path, monkeypatch):
    key = "sk-optui-" + uuid.uuid4().hex
    monkeypatch.setenv("OPTUI_FAULTS_KEY", key)  # what optui sends (api_key_env)
    monkeypatch.setenv("OPTUI_DEMO_API_KEY", key)  # what the server requires (from its environment, not argv)
    monkeypatch.setenv("OPENAI_API_KEY", key)  # what the SGLang-style client sends
    config = demo_config(tmp_path, server_extra='api_key_env = "OPTUI_FAULTS_KEY"', benchmarks=TINY)
    small_client(config)
    app = app_on(config)
    session, rt = app.session, app.session.servers["demo"]
    shots: list[str] = []
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        await wait_for(pilot, lambda: rt.status.model == "demo/Llama-3.1-8B-Instruct", what="model (needs the key)")
        for name in ("tiny", "client"):  # the built-in generator and an external client both use it
            session.benches.run(name)
            await wait_for(pilot, lambda: not session.benches.running, timeout=60, what=f"bench {name}")
            assert session.benches.current.view.status == "ok", session.benches.current.view.error
        await session.restart_server("demo", list(rt.status.argv), reason="a restart probes with the key")
        await pilot.pause(0.5)
        shots.append(app.export_screenshot())  # the dashboard with the bench output
        await pilot.press("2", "l")  # the server's log (SGLang logs server_args, api_key included)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ServerLogScreen", what="log view")
        shots.append(app.export_screenshot())
        await pilot.press("escape", "@")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandLogScreen", what="command log")
        shots.append(app.export_screenshot())
        await pilot.press("escape")
        assert any("api_key='***'" in line for line in rt.log_tail)
        commands = json.dumps([r.argv for r in session.command_log.records])
        files = [export(session.journal, session.loaded, fmt, tmp_path / f"export.{fmt}") for fmt in ("md", "jsonl", "csv")]
        await pilot.press("q")
    assert key.encode() in Path(rt.controller.launch.log_path).read_bytes()  # the raw log has it: optui hid it
    assert len(shots) == 3 and all("<svg" in s for s in shots)
    for where, text in [*((f"screenshot {i}", s) for i, s in enumerate(shots)), ("command log", commands),
                        *((str(f), f.read_text()) for f in files)]:
        assert key not in text, where
    assert key.encode() not in db_bytes(session.journal.path)


async def test_read_only_session_refuses_every_mutating_action(tmp_path):
    session = Session(load_config(demo_config(tmp_path, benchmarks=TINY)), read_only=True)
    item = session.todos.add("an experiment", "high", {"server": "demo", "bench": ["tiny"]})
    session.journal.set_last_good("demo", ["python", "-m", "x"])  # a rollback would have somewhere to go
    before = session.journal.count_events()
    for name, attempt in [
        ("restart", lambda: session.restart_server("demo", ["x"])),
        ("rollback", lambda: session.rollback("demo")),
        ("stop", lambda: session.stop_server("demo")),
    ]:
        with pytest.raises(SessionError, match="read-only mode"):
            await attempt()
        assert session.journal.count_events() == before, name  # refused before anything was journaled
    with pytest.raises(SessionError, match="read-only mode"):
        session.benches.run("tiny")
    with pytest.raises(SessionError, match="read-only mode"):
        session.todo_runs.enqueue([item])
    assert not session.benches.running and not session.todo_runs.running
    await session.close()
