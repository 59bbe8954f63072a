"""optui's controller, probe, state machine and journal against llama.cpp's real
``llama-server`` (tests/peers): start → 503 "Loading model" → ready; restart with changed
``-c``/``-np`` (diff journaled, new values in /props and /slots); a bad flag → bad_flag →
rollback to the last good flags → ready; ``kill -9`` → crashed/killed; /metrics mapped.
Exact peer behaviour: tests/peers/NOTES.md."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from optui.config import load_config
from optui.session import Session
from tests.peers.llama_server import free_port

pytest_plugins = ["tests.peers.fixtures"]
pytestmark = pytest.mark.timeout(90)


def write_config(directory: Path, argv: list[str], port: int, poll_interval_s: float = 0.1, **server: object) -> Path:
    lines = ['[hosts.local]', 'gpu_source = "none"', "", "[servers.llama]", f'url = "http://127.0.0.1:{port}"',
             'kind = "llamacpp"', 'control = "process"', f"argv = {json.dumps(argv)}",
             f"poll_interval_s = {poll_interval_s}", "stop_timeout_s = 5", "ready_timeout_s = 60"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in server.items()]
    path = directory / "optui.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def llama_argv(binary: Path, model: Path, port: int, *extra: str) -> list[str]:
    # -t 1 like the peer fixtures (tests/peers/fixtures.py PEER_THREADS: 2 threads crawl on a loaded 2-core machine)
    return [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", "1", "--no-ui", *extra]


@contextlib.asynccontextmanager
async def session_for(tmp_path: Path, argv: list[str], port: int, **server: object):
    session = Session(load_config(write_config(tmp_path, argv, port, **server)), actor="test", stop_servers_on_exit=True)
    await session.start()
    try:
        yield session, session.servers["llama"]
    finally:
        await session.close()
        session.kill_leftovers()


def events(session: Session, type_: str) -> list[dict]:
    return [e.data for e in session.journal.events(target="llama", types=[type_])]


@pytest.mark.serial  # it sees WARMING by polling the model's load window (~1 s): beside 4 workers and a CPU hog the
# optui process's poll came only after the load had ended (starting → ready), as a monitor that slow would
async def test_start_shows_loading_503_then_ready_with_phase_times_and_metrics(tmp_path, llama_server_bin, big_gguf):
    port = free_port()
    argv = llama_argv(llama_server_bin, big_gguf, port, "--load-mode", "none", "-c", "2048", "-np", "4", "--metrics", "-a", "tiny")
    async with session_for(tmp_path, argv, port) as (session, rt):
        status = await session.restart_server("llama", argv, reason="test")
        assert status.state.value == "ready", (status.crash_class, status.crash_lines)
        states = [(e["old"], e["new"]) for e in events(session, "server.state")]
        new_states = [new for _, new in states]
        assert new_states.index("starting") < new_states.index("warming") < new_states.index("ready"), states
        ready = events(session, "server.ready")[-1]
        phases = {p["phase"]: p for p in ready["phases"]}
        assert list(phases)[:3] == ["launching", "loading_weights", "kv_cache"] and "ready" in phases
        assert phases["loading_weights"]["dur"] > 0.1  # the visible load of the 136 MB model
        assert ready["ready_s"] >= phases["kv_cache"]["t"]
        assert session.journal.last_good("llama") == argv
        # /metrics mapped after real traffic
        async with httpx.AsyncClient(base_url=rt.cfg.url, timeout=30) as client:
            for _ in range(2):
                r = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 8})
                assert r.status_code == 200
        deadline = time.monotonic() + 10
        while (rt.status.load.generated_total or 0) < 16 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        load = rt.status.load
        assert load.source == "metrics" and load.generated_total >= 16 and load.running == 0 and load.waiting == 0


async def test_restart_with_new_ctx_and_parallel_is_journaled_and_visible(tmp_path, llama_server_bin, tiny_gguf):
    port = free_port()
    argv = llama_argv(llama_server_bin, tiny_gguf, port, "-c", "2048", "-np", "4", "--metrics", "-a", "tiny")
    async with session_for(tmp_path, argv, port) as (session, rt):
        assert (await session.restart_server("llama", argv)).state.value == "ready"
        new = [*argv[:-7], "-c", "1024", "-np", "2", "--metrics", "-a", "tiny"]
        status = await session.restart_server("llama", new, reason="smaller context")
        assert status.state.value == "ready" and status.argv == tuple(new), (status, events(session, "server.failed"))
        assert events(session, "flags.changed")[-1]["diff"] == ["~ -c: 2048 → 1024", "~ -np: 4 → 2"]
        assert events(session, "server.restart")[-1]["reason"] == "smaller context"
        async with httpx.AsyncClient(base_url=rt.cfg.url) as client:
            props = (await client.get("/props")).json()
            slots = (await client.get("/slots")).json()
        assert props["total_slots"] == 2 and [s["n_ctx"] for s in slots] == [512, 512]
        check = events(session, "server.ready")[-1]["config_check"]  # -c 1024 / -np 2 = 512 a slot, as /props says
        assert (check["status"], check["checked"], check["source"]) == ("verified", ["total_slots", "n_ctx"], "/props + /v1/models")
        assert events(session, "server.ready")[-1]["server_version"] == props["build_info"]
        stopped = events(session, "server.stopped")[-1]
        assert stopped["how"] == "term" and stopped["returncode"] == 0  # SIGTERM: clean exit 0
        # `optui status` of another campaign watching this server with the default 2 s poll:
        # llama.cpp's tok/s is its counter's rate, two scrapes a poll apart, more than the 1.5 s
        # wait (the H200 run: no gen tok/s in 8 samples); status waits for the second scrape
        (tmp_path / "observer").mkdir()
        cfg = write_config(tmp_path / "observer", new, port, poll_interval_s=2.0)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2] / "src"),
                                                                         os.environ.get("PYTHONPATH")]))}
        res = subprocess.run([sys.executable, "-m", "optui", "-c", str(cfg), "status", "--json"], capture_output=True,
                             text=True, timeout=60, env=env)
        assert res.returncode == 0, res.stderr
        (server,) = json.loads(res.stdout)["servers"]
        assert server["state"] == "ready" and server["load"]["gen_tok_s"] is not None, server["load"]


async def test_bad_flag_is_classified_and_rolled_back_to_the_last_good(tmp_path, llama_server_bin, tiny_gguf):
    port = free_port()
    argv = llama_argv(llama_server_bin, tiny_gguf, port, "-c", "2048", "-np", "4", "-a", "tiny")
    async with session_for(tmp_path, argv, port, rollback="auto") as (session, rt):
        assert (await session.restart_server("llama", argv)).state.value == "ready"
        status = await session.restart_server("llama", [*argv, "--no-such-flag"], reason="try a flag")
        failed = events(session, "server.failed")[-1]
        assert failed["class"] == "bad_flag" and failed["returncode"] == 1
        assert failed["lines"] == ["error: invalid argument: --no-such-flag"]
        rollback = events(session, "rollback")[-1]
        assert rollback["reason"] == "auto after bad_flag" and rollback["to_argv"] == argv
        assert events(session, "server.restart")[-1]["reason"] == "rollback: auto after bad_flag"
        assert status.state.value == "ready" and status.argv == tuple(argv)
        async with httpx.AsyncClient(base_url=rt.cfg.url) as client:
            assert (await client.get("/health")).json() == {"status": "ok"}
        types = [e.type for e in session.journal.events(target="llama")]
        tail = types[types.index("server.failed"):]
        assert tail.index("rollback") < tail.index("server.restart") < tail.index("server.ready")


async def test_kill_9_is_crashed_killed_and_metrics_hint_without_flag(tmp_path, llama_server_bin, tiny_gguf):
    port = free_port()
    argv = llama_argv(llama_server_bin, tiny_gguf, port, "-a", "tiny")  # no --metrics: 501
    async with session_for(tmp_path, argv, port) as (session, rt):
        assert (await session.restart_server("llama", argv)).state.value == "ready"
        deadline = time.monotonic() + 10
        while rt.status.load.hint is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert rt.status.load.hint == "no /metrics: add --metrics"
        os.kill(rt.status.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while rt.status.state.value != "crashed" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert (rt.status.state.value, str(rt.status.crash_class)) == ("crashed", "killed")
        failed = events(session, "server.failed")[-1]
        assert failed["class"] == "killed" and failed["returncode"] == -9
        assert rt.status.message == rt.status.crash_cause == "killed by SIGKILL (rc=-9)"


async def test_a_bad_gguf_fails_load_failed_naming_the_invalid_magic_line(tmp_path, llama_server_bin):
    port = free_port()
    bad = tmp_path / "bad.gguf"
    bad.write_text("not a gguf file at all\n")
    argv = llama_argv(llama_server_bin, bad, port, "-c", "256", "-np", "1")
    async with session_for(tmp_path, argv, port) as (session, rt):
        status = await session.restart_server("llama", argv)
        assert (status.state.value, str(status.crash_class)) == ("crashed", "load_failed")
        failed = events(session, "server.failed")[-1]
        assert failed["cause"].endswith("gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'")
        assert status.message == "exited rc=1: " + failed["cause"] and status.crash_cause == status.message


async def test_flag_catalogue_learned_from_the_real_help(tmp_path, llama_server_bin, tiny_gguf):
    port = free_port()
    argv = llama_argv(llama_server_bin, tiny_gguf, port, "-c", "2048")
    async with session_for(tmp_path, argv, port) as (session, rt):
        assert rt.cached_catalog() is None
        catalog = await rt.learn_catalog()
        assert catalog.style == "llamacpp" and catalog.program == (str(llama_server_bin),)
        assert catalog.lookup("-np").spec.names == ("-np", "--parallel")
        assert rt.cached_catalog() is catalog
        fresh = Session(load_config(tmp_path / "optui.toml"), actor="test2")  # a second optui reads the cache
        try:
            assert fresh.servers["llama"].cached_catalog() == catalog
        finally:
            fresh.journal.close()


async def test_a_wrapper_that_overrides_np_makes_the_experiment_unverified(tmp_path, llama_server_bin, tiny_gguf):
    port = free_port()
    wrapper = tmp_path / "serve.sh"  # a launch script that "knows better": its -np comes last and wins
    wrapper.write_text(f'#!/bin/sh\nexec "{llama_server_bin}" "$@" -np 1\n')
    wrapper.chmod(0o755)
    argv = [str(wrapper), *llama_argv(llama_server_bin, tiny_gguf, port, "-c", "2048", "-np", "4", "-a", "tiny")[1:]]
    async with session_for(tmp_path, argv, port) as (session, rt):
        assert (await session.restart_server("llama", argv)).state.value == "ready"
        check = events(session, "server.ready")[-1]["config_check"]
        assert check["status"] == "unverified"
        # one slot of min(2048, n_ctx_train 512): n_ctx still reads 512, the slot count does not
        assert check["mismatches"] == [{"flag": "-np 4", "field": "total_slots", "expected": 4, "actual": 1}]
        assert rt.status.config_mismatch[0] == "-np 4: server runs total_slots=1 (expected 4)"
        (exp,) = [x for x in session.experiments() if x.server == "llama"]
        assert exp.unverified == rt.status.config_mismatch


async def test_np_abc_is_refused_by_the_real_help_before_the_server_stops(tmp_path, llama_server_bin, tiny_gguf):
    from optui.session.server.restart_checks import RestartRefused

    port = free_port()
    argv = llama_argv(llama_server_bin, tiny_gguf, port, "-c", "2048", "-np", "4", "-a", "tiny")
    async with session_for(tmp_path, argv, port) as (session, rt):
        assert (await session.restart_server("llama", argv)).state.value == "ready"
        pid, seq = rt.status.pid, session.journal.last_seq()
        with pytest.raises(RestartRefused, match=r"-np: invalid int value: 'abc'.*the server was not stopped"):
            await session.restart_checked("llama", sets=["-np=abc"], reason="cli")
        assert rt.status.state.value == "ready" and rt.status.pid == pid
        os.kill(pid, 0)
        assert not session.journal.events(since_seq=seq, types=["server.restart", "server.stopped", "experiment.started"])
        # a good value goes through the same door
        outcome = await session.restart_checked("llama", sets=["-np=2"], reason="cli")
        assert outcome.ok and outcome.plan.base_from == "running" and rt.status.pid != pid


async def test_a_changed_port_that_is_taken_is_refused_before_the_server_stops(tmp_path, llama_server_bin, tiny_gguf):
    """Issue 32: a restart to a ``--port`` another listener holds was only found after the
    stop (the new server died with "address already in use"); now it is refused first."""
    import socket

    from optui.session.server.restart_checks import RestartRefused

    port = free_port()
    argv = llama_argv(llama_server_bin, tiny_gguf, port, "-c", "2048", "-np", "2", "-a", "tiny")
    async with session_for(tmp_path, argv, port) as (session, rt):
        assert (await session.restart_server("llama", argv)).state.value == "ready"
        pid = rt.status.pid
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            other = taken.getsockname()[1]
            with pytest.raises(RestartRefused, match=rf"--port: port {other} is in use on this machine.*not stopped"):
                await session.restart_checked("llama", sets=[f"--port={other}"], reason="cli")
        assert rt.status.state.value == "ready" and rt.status.pid == pid
