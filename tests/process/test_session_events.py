"""The session's event stream reaches the TUI once per event, in order (issue 33: events,
not counters). The real app: the demo campaign (its simulated server a real subprocess) for
the restarts, a followed agent list (a real file) for the follow errors.

What the counters got wrong: a crash of a server right after this window's own restart was
hidden for 5 s (``restarts_reporting``) and never shown; a followed list that failed, read
fine, then failed again with the same error was told once (``_follow_errors_seen``)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from optui.config import load_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.faults import app_on, demo_config, ready, wait_for

pytestmark = pytest.mark.timeout(150)


def toasts(app, title: str) -> list[str]:
    """The texts of the toasts titled ``title`` this window showed (its message log), oldest first."""
    return [m.text for m in app.messages if m.title == title]


async def test_a_crash_right_after_the_windows_own_restart_is_shown(tmp_path):
    app = app_on(demo_config(tmp_path))
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        await pilot.press("2", "r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagEditorScreen")
        await pilot.press("ctrl+s")  # no change: a plain restart, reviewed
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
        await pilot.press("y")
        texts = lambda: [m.text for m in app.messages]  # noqa: E731
        await wait_for(pilot, lambda: "restarting demo…" in texts() and "demo is ready" in texts()[texts().index("restarting demo…"):], timeout=60,
                       what="the restart's own report")
        launch = rt.controller.launch
        assert launch is not None and launch.pid
        os.kill(launch.pid, signal.SIGKILL)  # the server dies a moment after the restart said ready
        await wait_for(pilot, lambda: toasts(app, "crashed") or toasts(app, "oom"), timeout=30,
                       what="the crash alert of a server this window had just restarted")
        assert len(toasts(app, "crashed") + toasts(app, "oom")) == 1
        restarts = [e for e in session.events.since(0)[0] if type(e).__name__ == "RestartFinished"]
        assert [(r.result.end.value, r.told_by_caller) for r in restarts][-1] == ("ready", True)
        await pilot.press("q")


async def test_a_failed_restart_is_reported_once_by_its_sequence_not_as_an_alert_too(tmp_path):
    """The failed case: a flag the demo server refuses, rollback "off" (no offer): one error
    toast from the restart's report, no second one from the alert watcher; the crash is still
    journaled as its alert."""
    cfg = demo_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("[servers.demo]\n", '[servers.demo]\nrollback = "off"\n', 1))
    app = app_on(cfg)
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        await pilot.press("2", "r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagEditorScreen")
        for key in "--no-such-flag=1":
            await pilot.press(key)
        await pilot.press("enter", "ctrl+s")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
        await pilot.press("y")
        await wait_for(pilot, lambda: any(m.text.startswith("demo failed: bad_flag") for m in app.messages),
                       timeout=60, what="the failed restart's report")
        await pilot.pause(1.2)  # the alert watcher ticks every 0.5 s
        errors = [m.text for m in app.messages if m.severity == "error"]
        assert len(errors) == 1, errors
        assert any(e.data.get("kind") == "crashed" for e in session.journal.events(types=["alert"], target="demo"))
        await pilot.press("q")


async def test_r_during_a_restart_does_not_cancel_it(tmp_path):
    """A second ``r`` while the first restart runs opens the editor (or is refused); closing
    it leaves the first restart to end and be reported (a restart is never half-killed)."""
    app = app_on(demo_config(tmp_path))
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        await pilot.press("2", "r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagEditorScreen")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
        await pilot.press("y")
        await wait_for(pilot, lambda: rt.status.busy == "restarting", what="the restart under way")
        await pilot.press("r")
        await pilot.pause(0.3)
        if type(app.screen).__name__ == "FlagEditorScreen":
            await pilot.press("escape")
        texts = lambda: [m.text for m in app.messages]  # noqa: E731
        await wait_for(pilot, lambda: "demo is ready" in texts()[texts().index("restarting demo…"):], timeout=60,
                       what="the first restart's report")
        assert rt.status.state.value == "ready" and rt.status.busy is None
        await pilot.press("q")


async def test_a_followed_list_failing_again_after_a_good_read_is_told_again(tmp_path):
    path = tmp_path / "plan.json"
    good = json.dumps([{"content": "A", "status": "pending", "activeForm": "A…"}])
    path.write_text(good)
    spec = f"todowrite:{path}"
    cfg = tmp_path / "optui.toml"
    cfg.write_text('[hosts.local]\ngpu_source = "none"\n[todo]\npoll_s = 0.1\nfollow = ' + json.dumps([spec]) + "\n")
    session = Session(load_config(cfg))
    app = OptuiApp(session)
    title = f"cannot follow {spec}"
    async with app.run_test(size=(160, 45)) as pilot:
        status = lambda: getattr(session.todo_follow.statuses.get(spec), "state", None)  # noqa: E731
        await wait_for(pilot, lambda: status() == "ok")
        for n in (1, 2):
            path.write_text("{ not json")
            await wait_for(pilot, lambda n=n: len(toasts(app, title)) == n, what=f"error toast {n}")
            path.write_text(good)
            await wait_for(pilot, lambda: status() == "ok")
        await pilot.pause(0.3)
        told = toasts(app, title)
        assert len(told) == 2 and told[0] == told[1], told
        await pilot.press("q")


def test_the_stream_is_bounded_and_a_reader_that_fell_behind_learns_how_many_it_missed():
    """No process: the stream keeps its newest events; each reader its own cursor."""
    from optui.session.snapshot_types import Alert
    from optui.session.state import AlertRaised, EventStream

    woken: list[int] = []
    stream = EventStream(lambda: woken.append(1), kept=3)
    early, late = stream.reader(), stream.reader(from_start=False)
    events = [AlertRaised(Alert("hung", f"s{i}", f"s{i} is hung")) for i in range(5)]
    for event in events[:2]:
        stream.emit(event)
    assert late.take() == tuple(events[:2]) and late.take() == ()
    for event in events[2:]:
        stream.emit(event)
    assert late.take() == tuple(events[2:]) and late.missed == 0
    assert early.take() == tuple(events[2:]) and early.missed == 2  # two fell out of the bound
    assert len(woken) == 5
