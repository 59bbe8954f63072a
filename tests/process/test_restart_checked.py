"""A checked restart says what it did (issue 33): ``Session.restart_checked`` learns whether
``rollback = "auto"`` restored the last good flags from the restart itself
(``Session._restart_server`` returns it), never by reading the journal back after the
restart. The real app over the demo campaign (the simulated server a real subprocess): a
crashing flag rolled back, a crash without auto rollback, and a ready restart."""

from __future__ import annotations

import pytest

from tests.helpers.faults import app_on, demo_config, ready

pytestmark = pytest.mark.timeout(120)

BAD = ["--no-such-flag", "1"]


def spy_on_journal_reads(session) -> list[dict]:
    """Every ``journal.events`` call's keyword arguments from now on (the real method runs)."""
    calls: list[dict] = []
    real = session.journal.events

    def events(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    session.journal.events = events
    return calls


@pytest.mark.parametrize("rollback", ["auto", "offer"])
async def test_a_checked_restart_knows_its_rollback_without_reading_the_journal(tmp_path, rollback):
    cfg = demo_config(tmp_path, server_extra="")
    text = cfg.read_text()
    cfg.write_text(text.replace("[servers.demo]\n", f'[servers.demo]\nrollback = "{rollback}"\n', 1))
    app = app_on(cfg)
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        good = list(rt.status.argv)
        reads = spy_on_journal_reads(session)
        crashed = await session.restart_checked("demo", argv=good + BAD, reason="a flag the server refuses", force=True)
        if rollback == "auto":
            assert crashed.rolled_back and crashed.offer is None
            assert crashed.status.state.value == "ready" and list(crashed.status.argv) == good
            # what it did, typed: the failed start's class kept through the rollback
            assert (crashed.result.end.value, crashed.result.crash_class) == ("rolled_back", "bad_flag")
            from optui.session.cli_mcp_shared import restart_json

            assert restart_json(session, "demo", crashed.plan, crashed)["failed"] == "bad_flag"
        else:  # the failed case: crashed, not rolled back, the last good flags offered
            assert not crashed.rolled_back and crashed.offer is not None and tuple(crashed.offer) == tuple(good)
            assert crashed.status.state.value == "crashed"
            assert (crashed.result.end.value, crashed.result.crash_class) == ("failed", "bad_flag")
        fine = await session.restart_checked("demo", argv=good, reason="the good flags again")
        assert not fine.rolled_back and fine.ok
        assert fine.result.end.value == "ready" and fine.result.failed is None
        looked_back = [k for k in reads if k.get("since_seq") is not None and k.get("target") == "demo"]
        assert not looked_back, f"restart_checked read the journal back to learn what it did: {looked_back}"
        await pilot.press("q")
