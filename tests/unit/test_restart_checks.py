"""The pure parts of the one restart door (issue 16): base flags, changes, rollback offer."""

from __future__ import annotations

from optui.core.server.state import ServerState, ServerStatus
from optui.session.server.restart_checks import apply_changes, base_argv, rollback_offer

RUNNING = ("srv", "--port", "1", "--max-running-requests", "8")
GOOD = ("srv", "--port", "1", "--max-running-requests", "4")


def status(state: ServerState, argv=RUNNING, last_good=GOOD) -> ServerStatus:
    return ServerStatus(name="s", kind="sglang", url="http://127.0.0.1:1", state=state, argv=argv, last_good_argv=last_good)


def test_base_is_the_running_argv_else_the_last_good_else_the_config():
    assert base_argv(status(ServerState.READY), running=True, last_good=GOOD) == (RUNNING, "running")
    assert base_argv(status(ServerState.CRASHED), running=True, last_good=GOOD) == (GOOD, "last good")
    assert base_argv(status(ServerState.DOWN), running=False, last_good=GOOD) == (GOOD, "last good")
    assert base_argv(status(ServerState.DOWN), running=False, last_good=None) == (RUNNING, "config")


def test_changes_apply_preset_then_unsets_then_sets():
    flags = apply_changes(GOOD, sets=["-np=2", "--max-running-requests=16"], unsets=["--port"],
                          preset=({"--tp-size": "2"}, ()))
    assert flags.to_argv() == ["srv", "--max-running-requests", "16", "--tp-size", "2", "-np", "2"]


def test_rollback_is_offered_only_for_a_failure_under_offer_with_other_last_good_flags():
    crashed = status(ServerState.CRASHED)
    assert rollback_offer("offer", RUNNING, crashed) == GOOD
    assert rollback_offer("auto", RUNNING, crashed) is None and rollback_offer("off", RUNNING, crashed) is None
    assert rollback_offer("offer", RUNNING, status(ServerState.READY)) is None
    assert rollback_offer("offer", GOOD, status(ServerState.CRASHED, argv=GOOD)) is None  # nothing else to go back to
    assert rollback_offer("offer", RUNNING, status(ServerState.CRASHED, last_good=None)) is None


def test_a_set_replaces_another_spelling_of_its_flag():
    """``optui restart --set --tensor-parallel-size=8`` on ``--tp-size 4`` (issue 34: the
    catalogue knows they are one flag) replaces it rather than adding a second spelling."""
    from pathlib import Path

    from optui.core.flags.help_parse import parse_help
    from optui.session.server.restart_checks import apply_changes

    catalog = parse_help((Path(__file__).parents[1] / "fixtures" / "help" / "sglang_0.5.23_help.txt").read_text(), kind="sglang")
    base = ["python", "-m", "sglang.launch_server", "--tp-size", "4", "--port", "30000"]
    assert apply_changes(base, sets=["--tensor-parallel-size=8"], catalog=catalog).to_argv() == [
        "python", "-m", "sglang.launch_server", "--tensor-parallel-size", "8", "--port", "30000"]
    without = apply_changes(base, sets=["--tensor-parallel-size=8"]).to_argv()  # no catalogue: not known as one
    assert without[3:5] == ["--tp-size", "4"] and without[-2:] == ["--tensor-parallel-size", "8"]


def test_changed_port_is_seen_only_when_the_port_moves():
    from optui.session.server.restart_checks import changed_port

    base = ["vllm", "serve", "m", "--port", "8000"]
    assert changed_port(base, [*base[:-1], "8001"]) == ("--port", 8001, "0.0.0.0")
    assert changed_port(base, [*base, "--host", "127.0.0.1", "--port", "9000"]) == ("--port", 9000, "127.0.0.1")
    assert changed_port(base, base) is None
    assert changed_port(base, [*base[:-1], "http"]) is None  # not a number: the catalogue's business
    assert changed_port(["s"], ["s", "--port", "70000"]) is None
