"""Server control through the real app (Pilot) over the demo campaign: the flag editor with
the catalogue learned from the server's --help (type checks, help line, toggle, warnings in
the confirm dialog), the rollback offer after a failed restart, the log view with the crash
class, phase times in the servers panel, and the hung notification."""

from __future__ import annotations

import asyncio
import re
import shlex

import httpx
import pytest

from optui.config import load_config
from optui.demo.campaign import write_demo_config
from optui.session import Session
from optui.ui.app import OptuiApp
from tests.helpers.demo import free_port
from tests.helpers.faults import demo_config
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(120)


def make_app(directory, *, extra: str = "", env: str = "") -> OptuiApp:
    cfg = demo_config(directory, server_extra=extra, env=env)
    return OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")


def text_of(app, selector: str) -> str:
    widget = app.screen.query_one(selector)
    rendered = widget.render()
    return getattr(rendered, "plain", str(rendered))


async def edit(pilot, app, text: str) -> None:
    """Put ``text`` into the editor's input and press Enter (typing every key costs ~0.1 s)."""
    app.screen.query_one("#flags-input").value = text
    await pilot.press("enter")


async def ready(pilot, rt):
    await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None)


@pytest.mark.serial  # phase durations read by a 0.2 s log poll: beside a CPU hog the polls stretch and merge phases
async def test_the_journal_ready_row_gives_each_startup_phase_its_time(tmp_path):
    """At demo speed 2 the phases last 0.1-1 s each, longer than the log follower's 0.2 s
    poll even on a loaded CI host (at the suite's speed 100 they last 2-20 ms: every phase is
    read in one poll, after /health said ready, and has no duration to show)."""
    cfg = write_demo_config(tmp_path, port=free_port(), speed=2.0)
    app = OptuiApp(Session(load_config(cfg), stop_servers_on_exit=True), title="test")
    rt = app.session.servers["demo"]
    async with app.run_test(size=(240, 45)) as pilot:
        await ready(pilot, rt)
        await wait_for(pilot, lambda: "ready in" in app.query_one("#journal").render().plain)
        row = next(line for line in app.query_one("#journal").render().plain.splitlines() if "ready in" in line)
        total = re.search(r"ready in (\d+\.\d)s \(", row)
        assert total, row
        times = {name: float(t) for name, t in re.findall(r"(\w+) (\d+\.\d)s", row[total.end() :])}
        assert times.get("loading_weights", 0) >= 0.5, row  # 4 shards of 0.5 s at speed 2: 1 s
        assert sum(times.values()) <= float(total.group(1)) + 0.1, row


async def test_editor_checks_values_against_the_learned_help_and_confirm_lists_warnings(tmp_path):
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        # startup time in the servers panel (per-phase times: the next test)
        await wait_for(pilot, lambda: "(start " in app.query_one("#servers").render().plain)
        await pilot.press("2", "r")
        await wait_for(
            pilot,
            lambda: "flags known from" in text_of(app, "#flags-help"),
            what=lambda: (type(app.screen).__name__, text_of(app, "#flags-help")),
        )
        await edit(pilot, app, "--kv-cache-dtype fp7")
        assert "invalid choice: 'fp7'" in text_of(app, "#flags-error")
        assert "fp7" not in " ".join(app.screen.flags.to_argv())
        await pilot.press("ctrl+u", *"--kv-ca", "right")  # completion from the catalogue
        assert app.screen.query_one("#flags-input").value == "--kv-cache-dtype"
        await pilot.press("ctrl+u", *"--tp")
        assert "--tp-size, --tensor-parallel-size TP_SIZE" in text_of(app, "#flags-help")
        await edit(pilot, app, "--max-running-requests 16")
        await edit(pilot, app, "toggle --disable-radix-cache")
        assert "--disable-radix-cache" in app.screen.flags.to_argv()
        await edit(pilot, app, "--no-such-flag")
        assert "unknown flag" in text_of(app, "#flags-warnings")
        await pilot.press("ctrl+s")
        assert type(app.screen).__name__ == "ConfirmScreen"
        body = text_of(app, "#confirm-body")
        assert "warnings:" in body and "--no-such-flag: unknown flag" in body
        assert "will run:" in body and "optui.demo.fake_server" in body
        assert "~ --max-running-requests: 4 → 16" in body and "+ --disable-radix-cache" in body
        await pilot.press("n")
        await pilot.press("q")


async def test_failed_restart_offers_rollback_and_the_log_shows_the_class(tmp_path):
    app = make_app(tmp_path)
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        good = list(rt.status.argv)
        await pilot.press("2", "r")
        await edit(pilot, app, "--mem-fraction-static 0.99")
        await pilot.press("ctrl+s", "y")
        await wait_for(
            pilot,
            lambda: (
                type(app.screen).__name__ == "ConfirmScreen"
                and "roll back" in text_of(app, "#confirm-title")
                and bool(app.screen.query("#confirm-body"))
            ),
        )  # the body mounts after the title
        assert str(rt.status.crash_class) == "oom"
        assert "The restart failed: oom" in text_of(app, "#confirm-body")
        await pilot.pause(1.2)  # the session's alert watcher ticks every 0.5 s
        errors = [n.message for n in app._notifications if n.severity == "error"]
        assert errors == [], f"toasts over the rollback dialog: {errors}"
        await pilot.press("n")  # not now: look at the log first
        await pilot.press("l")
        assert type(app.screen).__name__ == "ServerLogScreen"
        details = app.screen.query("Static").last().render().plain
        assert details.startswith("oom") and "CUDA out of memory" in details and "last " in details
        await pilot.press("escape", "ctrl+r", "y")
        await wait_for(
            pilot,
            lambda: rt.status.busy is None and rt.status.state.value == "ready" and list(rt.status.argv) == good,
            timeout=40,
        )
        assert session.journal.events(types=["rollback"])[-1].data["reason"] == "operator"
        # the offer path: fail again, accept the offer
        await pilot.press("r")
        await edit(pilot, app, "--mem-fraction-static 0.99")
        await pilot.press("ctrl+s", "y")
        await wait_for(
            pilot,
            lambda: (
                type(app.screen).__name__ == "ConfirmScreen"
                and "roll back" in text_of(app, "#confirm-title")
                and bool(app.screen.query("#confirm-body"))
            ),
        )  # the body mounts after the title
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: rt.status.busy is None and rt.status.state.value == "ready" and list(rt.status.argv) == good,
            timeout=40,
        )
        assert session.journal.events(types=["rollback"])[-1].data["reason"] == "offered after oom"
        await pilot.press("q")


async def test_hung_server_is_shown_and_notified(tmp_path):
    app = make_app(tmp_path, extra="hung_after_s = 1.5", env='OPTUI_DEMO_HANG_AFTER = "1.0", SGLANG_HEALTH_CHECK_TIMEOUT = "60"')
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        async with httpx.AsyncClient(base_url=rt.cfg.url, timeout=60) as client:

            async def drain():
                async with client.stream(
                    "POST", "/v1/completions", json={"prompt": "x", "max_tokens": 20000, "stream": True}
                ) as r:
                    async for _ in r.aiter_lines():
                        pass

            streams = [asyncio.create_task(drain()) for _ in range(2)]
            try:
                await wait_for(pilot, lambda: rt.status.state.value == "hung", timeout=40)
                await pilot.pause(0.5)
                assert "HUNG: 2 requests running/waiting" in app.query_one("#servers").render().plain
                assert any("is hung" in n.message for n in app._notifications), [n.message for n in app._notifications]
                assert app.session.journal.events(types=["alert"])[-1].data["kind"] == "hung"
            finally:
                for task in streams:
                    task.cancel()
                await asyncio.gather(*streams, return_exceptions=True)
        await pilot.press("q")


async def test_after_a_failed_restart_the_editor_starts_from_the_last_good_flags(tmp_path):
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        good = list(rt.status.argv)
        await pilot.press("2", "r")
        await edit(pilot, app, "--mem-fraction-static 0.99")
        await pilot.press("ctrl+s", "y")
        await wait_for(
            pilot, lambda: type(app.screen).__name__ == "ConfirmScreen" and "roll back" in text_of(app, "#confirm-title")
        )
        await pilot.press("n")  # no rollback now: the server stays crashed with the failed flags
        assert rt.status.state.value == "crashed" and "0.99" in rt.status.argv
        await pilot.press("r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagEditorScreen")
        assert app.screen.original.to_argv() == good  # the CLI's base too (Session.restart_base)
        await pilot.press("escape", "q")


async def test_a_preset_with_a_bad_value_is_refused_before_the_server_stops(tmp_path):
    app = make_app(tmp_path, extra='[servers.demo.presets.fp4]\nset = { "--kv-cache-dtype" = "fp4" }')
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        pid, seq = rt.status.pid, app.session.journal.last_seq()
        app.server_actions.restart_with_preset("demo", "fp4")  # the palette's "restart demo with preset fp4"
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: any("invalid choice: 'fp4'" in n.message for n in app._notifications),
            what=lambda: [n.message for n in app._notifications],
        )
        assert rt.status.state.value == "ready" and rt.status.pid == pid
        assert not app.session.journal.events(since_seq=seq, types=["server.restart", "server.stopped"])
        await pilot.press("q")


async def test_a_value_for_an_unknown_no_flag_reads_the_same_in_editor_review_and_journal(tmp_path):
    # issue 20: the editor showed `+ --no-such-flag 1`, the review `+ --no-such-flag (on)` and
    # `+ <positional 0> 1` (it re-reads the argv without the catalogue, guessing --no-* on/off)
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        await pilot.press("2", "r")
        await wait_for(
            pilot,
            lambda: "flags known from" in text_of(app, "#flags-help"),
            what=lambda: (type(app.screen).__name__, text_of(app, "#flags-help")),
        )
        await edit(pilot, app, "--no-such-flag 1")  # issue 34: not rewritten to --no-such-flag=1 without a word
        assert "type --no-such-flag=1" in text_of(app, "#flags-error")
        await edit(pilot, app, "--no-such-flag=1")
        assert text_of(app, "#flags-diff").strip() == "+ --no-such-flag 1"
        await pilot.press("ctrl+s")
        assert type(app.screen).__name__ == "ConfirmScreen"
        body = text_of(app, "#confirm-body")
        changes = body.split("changes:\n", 1)[1].split("\n\n", 1)[0]
        assert changes.strip() == "+ --no-such-flag 1", body
        await pilot.press("y")  # the demo server refuses the flag: the restart fails, that is fine here
        await wait_for(pilot, lambda: app.session.journal.events(types=["flags.changed"]), what="flags.changed")
        assert app.session.journal.events(types=["flags.changed"])[-1].data["diff"] == ["+ --no-such-flag 1"]
        await wait_for(pilot, lambda: rt.status.busy is None, timeout=60)
        await pilot.press("q")


async def test_the_server_log_opens_at_its_newest_line_and_h_hides_the_probe_lines(tmp_path):
    # issue 20: `l` opened at the top of the last 500 lines, mostly health-probe lines
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, rt)
        await wait_for(
            pilot,
            lambda: sum('"GET /health' in line for line in rt.log_tail) >= 3,
            timeout=30,
            what="a few health probes in the log",
        )
        await pilot.press("2", "l")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ServerLogScreen")
        scroll = app.screen.query_one("VerticalScroll")
        await wait_for(
            pilot,
            lambda: scroll.max_scroll_y > 0 and scroll.scroll_y == scroll.max_scroll_y,
            what=lambda: (scroll.scroll_y, scroll.max_scroll_y),
        )
        body = app.screen.query_one("#details-body").render().plain
        assert '"GET /health HTTP/1.1" 200' in body and "probe requests: h hides them" in body
        # the hint where the log opens (its tail, the body's head scrolled away): in the title,
        # and the screen's key bar says its keys (it showed the Journal's)
        assert "lines are probe requests (h hides them)" in app.screen.query_one("#details-title").render().plain
        await pilot.pause(0.1)
        bottom = [strip.text for strip in app.screen._compositor.render_strips()][-1]
        assert "h Hide/show probe lines" in bottom and "Close" in bottom, bottom
        assert "server_args=" in body  # the start of the tail is still there, above
        await pilot.press("h")
        await pilot.pause()
        body = app.screen.query_one("#details-body").render().plain
        assert "GET /health" not in body and "GET /metrics" not in body and "probe lines hidden" in body
        assert "probe lines hidden (h shows them)" in app.screen.query_one("#details-title").render().plain
        assert "Application startup complete." in body and "server_args=" in body
        await wait_for(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y)
        await pilot.press("h")
        await pilot.pause()
        assert "GET /health" in app.screen.query_one("#details-body").render().plain
        await pilot.press("escape", "q")


async def test_the_zoomed_servers_panel_uses_the_whole_60x40_pane(tmp_path):
    """Issue 20: ``2 z`` at 60x40 showed the one line a side pane gives each server. Zoomed,
    on the real demo: the state line, then where it runs, its load, the changed flag and
    the whole command (wrapped, nothing cut), on lines of their own; unzoomed, one line again."""
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(60, 40)) as pilot:
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None, timeout=60)
        argv = list(rt.status.argv)
        argv[argv.index("--max-running-requests") + 1] = "12"
        await app.session.restart_server("demo", argv, reason="test")
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None, timeout=60)
        await pilot.press("2", "z")
        await wait_for(pilot, lambda: "command" in app.query_one("#servers").render().plain)
        lines = [line.rstrip() for line in app.query_one("#servers").render().plain.splitlines()]
        assert app.screen.maximized is app.query_one("#servers-box")
        assert lines[0].startswith("● demo READY"), lines
        labels = [line.split()[0] for line in lines[1:] if line[2] != " "]
        assert labels == ["where", "model", "now", "changed", "command"], lines
        assert "run " in lines[3] and "kv " in lines[3], lines  # the load
        assert next(line for line in lines if "changed" in line).endswith("--max-running-requests 12"), lines
        command = " ".join(line.split(maxsplit=1)[-1] if line.lstrip().startswith("command") else line.strip()
                           for line in lines[lines.index(next(x for x in lines if "command" in x)):])
        assert command == shlex.join(argv), (command, lines)
        assert all(len(line) <= 58 and "…" not in line for line in lines), lines
        await pilot.press("z")
        await pilot.pause(0.1)
        assert len(app.query_one("#servers").render().plain.splitlines()) == 1
        await pilot.press("q")


async def test_a_rollback_to_the_flags_it_runs_says_it_changes_none(tmp_path):
    """Issue 20's verifier: ctrl+r on a healthy server with unchanged flags showed 'back to
    the last flags that became ready:' followed by nothing."""
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        await wait_for(pilot, lambda: rt.status.last_good_argv == rt.status.argv, what="the last good flags")
        await pilot.press("2", "ctrl+r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen" and bool(app.screen.query("#confirm-body")))
        body = text_of(app, "#confirm-body")
        assert "back to the last flags that became ready:\n  (none: it runs them now; a plain restart)" in body, body
        await pilot.press("n", "q")


async def test_a_failed_restarts_one_line_row_shows_the_flag_it_added_first(tmp_path):
    """Issue 34's walk: after ``--disable-cuda-graph`` ran fine, a restart adding
    ``--mem-fraction-static 0.99`` crashed with oom and the row read ``✖ demo CRASHED oom
    --disable-cuda-graph +1`` at 60 and 50 columns (the ``+1`` is the cause). The row orders
    the flags as the experiments view does: the change from the flags that ran before first."""
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(60, 40)) as pilot:
        await ready(pilot, rt)
        await pilot.press("2", "r")
        await edit(pilot, app, "--disable-cuda-graph")
        await pilot.press("ctrl+s", "y")
        await wait_for(pilot, lambda: "--disable-cuda-graph" in rt.status.argv and rt.status.state.value == "ready"
                       and rt.status.busy is None and rt.status.last_good_argv == rt.status.argv, timeout=60)
        await pilot.resize_terminal(50, 30)  # a READY row at 50 columns: the changed flag whole (it read --dis-cud-gra)
        await wait_for(pilot, lambda: "  --disable-cuda-graph" in app.query_one("#servers").render().plain.splitlines()[0],
                       what=lambda: app.query_one("#servers").render().plain.splitlines()[0])
        await pilot.resize_terminal(60, 40)
        await pilot.press("r")
        await edit(pilot, app, "--mem-fraction-static 0.99")
        await pilot.press("ctrl+s", "y")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen" and "roll back" in text_of(app, "#confirm-title"),
                       timeout=60)
        await pilot.press("n")  # not now: the row says what failed
        assert str(rt.status.crash_class) == "oom" and "0.99" in rt.status.argv
        for size in ((60, 40), (50, 30)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
            row = app.query_one("#servers").render().plain.splitlines()[0]
            flags = re.search(r"CRASHED oom  (\S+ \S+)", row)
            # whole, never abbreviated, at any width (issue 34's rule; it read --mfs 0.99 at 50 columns)
            assert flags and flags.group(1) == "--mem-fraction-static 0.99", (size, row)
        await pilot.press("q")


async def test_every_rollback_to_rejected_flags_warns_not_only_the_first(tmp_path):
    """Issue 34's walk: the rollback offer's "⚠ exp-… ran these flags and …" followed one
    experiment, not the flags: after the first rollback to them (a start that measured
    nothing), the next crash offered the same flags with no warning. It is the
    configuration's: any experiment of those flags that was rejected (or measured worse)."""
    from optui.adapters.journal import Journal
    from optui.core.journal import events as ev

    app = make_app(tmp_path)
    session, rt = app.session, app.session.servers["demo"]
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot, rt)
        argv = list(rt.status.argv)
        argv[argv.index("--max-running-requests") + 1] = "8"
        await session.restart_server("demo", argv, reason="test")
        await wait_for(pilot, lambda: rt.status.state.value == "ready" and rt.status.busy is None
                       and list(rt.status.last_good_argv or ()) == argv)
        rejected = session.current_experiment("demo")
        other = Journal(session.journal.path)  # as `optui journal verdict` writes it
        other.append(ev.VERDICT, "demo", {"decision": "reject", "reason": "p99 too high"}, actor="cli", experiment=rejected)
        other.close()
        warning = f"⚠ {rejected} ran these flags and was rejected (p99 too high)"
        for attempt in range(2):
            await pilot.press("2", "r")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagEditorScreen")
            await edit(pilot, app, "--mem-fraction-static 0.99")
            await pilot.press("ctrl+s", "y")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen"
                           and "roll back" in text_of(app, "#confirm-title") and bool(app.screen.query("#confirm-body")),
                           timeout=60)
            assert warning in text_of(app, "#confirm-body"), (attempt, text_of(app, "#confirm-body"))
            await pilot.press("y")  # back to the rejected flags: a start of them that measures nothing
            await wait_for(pilot, lambda: rt.status.busy is None and rt.status.state.value == "ready"
                           and list(rt.status.argv) == argv, timeout=60)
            assert session.current_experiment("demo") != rejected
        await pilot.press("q")


async def test_a_ready_rows_first_flag_is_the_one_this_start_changed(tmp_path):
    """Issue 34's walk at 50x30: ``--chunked-prefill-size 4096`` added on top of a ready
    ``--max-running-requests 32``, the ready row read ``● demo READY  --max-running-requests 32 +1``:
    the flag just changed folded (a ready server's last good flags are its own flags)."""
    app = make_app(tmp_path)
    rt = app.session.servers["demo"]
    async with app.run_test(size=(50, 30)) as pilot:
        await ready(pilot, rt)
        for added in ("--max-running-requests 32", "--chunked-prefill-size 4096"):
            await pilot.press("2", "r")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagEditorScreen")
            await edit(pilot, app, added)
            await pilot.press("ctrl+s", "y")
            # the flag with its value: the configured flags hold --max-running-requests 4, so the
            # name alone was true before this restart began (ci: the next editor then opened on
            # the old flags and the row showed one change, not two)
            await wait_for(pilot, lambda a=added: f" {a} " in f" {shlex.join(rt.status.argv)} "
                           and rt.status.state.value == "ready" and rt.status.busy is None
                           and rt.status.last_good_argv == rt.status.argv, timeout=60)
        assert rt.status.prev_argv is not None and "--chunked-prefill-size" not in rt.status.prev_argv
        await wait_for(pilot, lambda: re.search(r"READY.*  --chunked-prefill-size 4096 \+1",
                                                app.query_one("#servers").render().plain.splitlines()[0]) is not None,
                       what=lambda: app.query_one("#servers").render().plain.splitlines()[0])
        await pilot.press("q")
