"""``optui restart --json``'s ``ready_s`` (issue 29): measured from the new process's start,
never negative, and the number the journal's ``server.ready`` says. It read −25.1 s ("ready
in -114.9s") whenever a running server was restarted: the CLI's session re-attached to the
running launch, kept that launch's ready time, and the new start took it as its own."""

from __future__ import annotations

import json

import pytest

from tests.process.test_cli_headless import journal_of, kill_demo_server, optui, small_demo_config

pytestmark = pytest.mark.timeout(120)


def test_restarting_a_running_server_reports_the_new_start_s_ready_time(tmp_path):
    cfg = small_demo_config(tmp_path)
    try:
        first = optui(cfg, "restart", "demo", "--json")
        assert first.returncode == 0, first.stderr
        for value in ("8", "16"):  # each a running server restarted by a new CLI process
            res = optui(cfg, "restart", "demo", "--set", f"--max-running-requests={value}", "--json")
            assert res.returncode == 0, res.stderr
            out = json.loads(res.stdout)
            j = journal_of(cfg)
            ready = j.events(target="demo", types=["server.ready"], limit=1, newest_first=True)[0]
            j.close()
            assert out["ready_s"] is not None and out["ready_s"] >= 0, out["ready_s"]
            assert out["ready_s"] == ready.data["ready_s"], (out["ready_s"], ready.data)
            text = optui(cfg, "restart", "demo", "--set", f"--max-running-requests={value}2")
            assert text.returncode == 0, text.stderr
            assert "in -" not in text.stdout, text.stdout
    finally:
        kill_demo_server(cfg)
