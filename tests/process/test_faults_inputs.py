"""Issue 30's attacks on optui's inputs, each through the real command in its own process
(memory bounded with ``RLIMIT_AS``, as ``ulimit -v 3000000`` does) or the real poller against a
real HTTP server on 127.0.0.1: a Prometheus answering 200,000-deep JSON or 300 MB, a replay
capture that is ``/dev/zero``, a corrupt journal under every CLI command, a 5 MB todo item, a
flag-search spec nested 5,000 deep or made of random bytes. Each ends in a message naming the
bound and where, never a traceback; docs/faults.md lists them."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click
import pytest

from optui.config import FleetConfig
from optui.core.fleet.query import PromAnswerError, parse_vector_answer
from optui.session.gpu.fleet import FleetPoller, PrometheusFleetSource
from tests.helpers.demo import subprocess_env
from tests.helpers.waiting import until

#: the issue's bound on a command's memory: ``ulimit -v 3000000`` (KiB)
ADDRESS_SPACE = 3_000_000 * 1024
DEEP = 200_000


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def optui(cwd: Path, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m optui ARGS`` in ``cwd`` (its ``optui.toml``), under the issue's memory bound."""
    return subprocess.run([sys.executable, "-m", "optui", *args], cwd=cwd, input=stdin if stdin is not None else "",
                          capture_output=True, text=True, env=subprocess_env({"OPTUI_DEBUG": ""}), timeout=timeout,
                          preexec_fn=_limited)


def no_traceback(r: subprocess.CompletedProcess) -> str:
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "internal error" not in out, out[-3000:]
    return out


# ------------------------------------------------------------------ a hostile Prometheus
class HostilePrometheus:
    """An HTTP server on 127.0.0.1 answering ``/api/v1/query`` with what :attr:`mode` says:
    ``good`` (one GPU's series), ``deep`` (200,000-deep JSON), ``huge`` (300 MB, chunked: no
    Content-Length to refuse it by), ``values`` (inf, a 309-digit number, a negative one)."""

    def __init__(self) -> None:
        self.mode = "good"
        self.served = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # a server's /metrics, /server_info: the probe's answers
                self.do_POST()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                owner.served += 1
                self.send_response(200)
                self.send_header("content-type", "application/json")
                if owner.mode == "huge":
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    chunk = b" " * (1 << 20)
                    try:
                        for _ in range(300):
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:  # the client stopped reading at its cap
                        pass
                    self.close_connection = True
                    return
                body = owner.body()
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def body(self) -> bytes:
        if self.mode == "deep":
            return (b'{"status":"success","data":{"resultType":"vector","result":' + b"[" * DEEP + b"]" * DEEP + b"}}")
        values = {"good": ["41971", "56"], "values": ["+Inf", "1" + "0" * 308]}[self.mode]
        labels = {"gpu": "0", "UUID": "GPU-a", "modelName": "NVIDIA H200", "Hostname": "node-1", "instance": "node-1:9400"}
        result = [{"metric": {"__name__": name, **labels}, "value": [1.0, value]}
                  for name, value in zip(("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP"), values)]
        if self.mode == "values":
            result.append({"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", **labels}, "value": [1.0, "-5"]})
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()

    def __enter__(self) -> HostilePrometheus:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_200000_deep_answer_is_refused_by_the_parser_without_recursion():
    body = b'{"status":"success","data":{"resultType":"vector","result":' + b"[" * DEEP + b"]" * DEEP + b"}}"
    with pytest.raises(PromAnswerError, match=r"nested deeper than 16 levels \(at byte 73\)"):
        parse_vector_answer(body)


def test_infinite_309_digit_and_negative_values_are_no_reading():
    with HostilePrometheus() as prom:
        prom.mode = "values"
        samples = parse_vector_answer(prom.body())
    assert [(s.name, s.value) for s in samples] == [
        ("DCGM_FI_DEV_FB_USED", None), ("DCGM_FI_DEV_GPU_TEMP", None), ("DCGM_FI_DEV_POWER_USAGE", None)]


@pytest.mark.parametrize("mode, message", [
    ("deep", "answer: nested deeper than 16 levels (at byte 73)"),
    ("huge", "the answer is over the limit of 33,554,432 bytes (not read further)"),
])
def test_optui_gpus_json_against_a_hostile_prometheus_ends_with_the_bound(tmp_path, mode, message):
    with HostilePrometheus() as prom:
        prom.mode = mode
        (tmp_path / "optui.toml").write_text(f'[hosts.local]\ngpu_source = "none"\n\n[fleet]\nprometheus = "{prom.url}"\n')
        r = optui(tmp_path, "gpus", "--json")
    no_traceback(r)
    assert r.returncode == 1
    fleet = [e for e in json.loads(r.stdout) if e["source"] == "fleet"]
    assert fleet == [{"host": None, "source": "fleet", "prometheus": prom.url,
                      "error": f"Prometheus at {prom.url}: {message}"}]


async def test_the_fleet_poller_marks_a_bad_answer_stale_with_its_reason_and_recovers():
    """Before issue 30 a deep answer raised RecursionError in the poller's task: it died, the
    grid kept its old values and nothing was ever marked stale."""
    with HostilePrometheus() as prom:
        source = PrometheusFleetSource(FleetConfig(prometheus=prom.url, interval_s=0.25, timeout_s=5))
        poller = FleetPoller(source, lambda: None)
        task = asyncio.create_task(poller.run())
        try:
            await until(lambda: poller.snapshot.gpus and not poller.snapshot.error, what=lambda: poller.snapshot)
            assert poller.snapshot.gpus[0].mem_used_mib == 41971
            prom.mode = "deep"
            await until(lambda: poller.snapshot.error, what=lambda: poller.snapshot)
            assert "nested deeper than 16 levels" in poller.snapshot.error
            assert poller.snapshot.gpus[0].mem_used_mib == 41971  # the last known reading, kept (aging)
            failed_reads = prom.served
            await until(lambda: prom.served >= failed_reads + 2, what=lambda: prom.served)  # still polling
            assert not task.done()
            prom.mode = "good"
            await until(lambda: not poller.snapshot.error, timeout=30, what=lambda: poller.snapshot)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await poller.close()


async def test_a_source_that_raises_never_ends_the_poller_and_backs_off():
    class Broken:
        interval_s = 0.05
        reads = 0

        async def read(self):
            Broken.reads += 1
            raise RecursionError("maximum recursion depth exceeded")

        async def close(self):
            return None

    poller = FleetPoller(Broken(), lambda: None)
    task = asyncio.create_task(poller.run())
    try:
        await until(lambda: Broken.reads >= 3)
        assert poller.snapshot.error == "fleet: reading failed: RecursionError: maximum recursion depth exceeded"
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert [poller.next_wait_s(n) for n in (0, 1, 2, 3, 9)] == [0.05, 0.1, 0.2, 0.4, 0.4]


async def test_a_servers_huge_metrics_and_deep_server_info_are_refused_by_the_probe():
    """The same attacks on a server's own answers (``/metrics``, ``/server_info``, ``/v1/models``)."""
    from optui.adapters.probe import ServerProbe

    with HostilePrometheus() as server:
        probe = ServerProbe(server.url)
        try:
            server.mode = "huge"
            assert await probe.metrics() == (None, "")  # refused at 16 MiB, not read further
            server.mode = "deep"
            assert await probe.server_info() is None
            assert await probe.model_name() is None
            server.mode = "good"
            status, text = await probe.metrics()
            assert status == 200 and "DCGM_FI_DEV_FB_USED" in text
        finally:
            await probe.close()


# ------------------------------------------------------------------ captures, journals, text
def test_status_json_with_replay_file_dev_zero_names_the_bound(tmp_path):
    (tmp_path / "optui.toml").write_text('[hosts.local]\ngpu_source = "replay"\nreplay_file = "/dev/zero"\n')
    r = optui(tmp_path, "status", "--json", "--wait", "0.5")
    no_traceback(r)
    assert r.returncode == 0
    host = json.loads(r.stdout)["hosts"][0]
    assert host["status"] == "error"
    assert host["error"] == "/dev/zero: larger than the limit of 4,194,304 bytes (not read further)"
    r = optui(tmp_path, "gpus", "--from-file", "/dev/zero")
    assert r.returncode == 1 and "larger than the limit of 4,194,304 bytes" in no_traceback(r)


@pytest.mark.parametrize("command", [("log", "classify"), ("bench", "parse")], ids=" ".join)
def test_a_saved_log_or_result_file_that_is_dev_zero_names_the_bound(tmp_path, command):
    """``optui log classify`` and ``bench parse`` read a saved file whole: no further than
    256 MiB (bounded_read.MAX_LOG_BYTES), then exit 2 naming the file and the bound."""
    r = optui(tmp_path, *command, "/dev/zero")
    assert r.returncode == 2, r.stderr[-2000:]
    assert "/dev/zero: larger than the limit of 268,435,456 bytes (not read further)" in no_traceback(r)


CONFIG = '[servers.qwen]\nurl = "http://127.0.0.1:9"\ncontrol = "none"\n'


def _corrupt(kind: str, campaign: Path) -> Path:
    """A campaign whose journal ``.optui/optui.db`` is ``kind``: random bytes, truncated,
    empty, a directory, /dev/null, or from a newer optui (schema 99)."""
    (campaign / "optui.toml").write_text(CONFIG)
    db = campaign / ".optui" / "optui.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    if kind in ("truncated", "schema99"):
        assert optui(campaign, "journal", "note", "note 0 " + "x" * 200).returncode == 0  # made by optui
        from optui.adapters.journal import Journal

        journal = Journal(db)  # 39 more notes in this process: 40 CLI runs took > 120 s beside a CPU hog
        try:
            for i in range(1, 40):
                journal.append("note", None, {"text": f"note {i} " + "x" * 200}, actor="cli")
        finally:
            journal.close()
        if kind == "schema99":
            with sqlite3.connect(db) as conn:
                conn.execute("PRAGMA user_version = 99")
        else:
            with sqlite3.connect(db) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            data = db.read_bytes()
            for extra in campaign.joinpath(".optui").glob("optui.db-*"):
                extra.unlink()
            db.write_bytes(data[: len(data) // 3])
    elif kind == "random":
        db.write_bytes(os.urandom(64 * 1024))
    elif kind == "empty":
        db.write_bytes(b"")
    elif kind == "directory":
        db.mkdir()
    elif kind == "devnull":
        db.symlink_to("/dev/null")
    return db


#: every CLI command, as run over the corrupt journal (arguments a script would give)
EVERY_COMMAND: dict[str, list[str]] = {
    "bench import": ["bench", "import", "results.jsonl"],
    "bench parse": ["bench", "parse", "results.jsonl"],
    "bench run": ["bench", "run", "qwen", "sweep"],
    "gpus": ["gpus", "--json"],
    "journal experiments": ["journal", "experiments"],
    "journal export": ["journal", "export"],
    "journal note": ["journal", "note", "hello"],
    "journal show": ["journal", "show", "1"],
    "journal tail": ["journal", "tail"],
    "journal verdict": ["journal", "verdict", "e1", "keep"],
    "log classify": ["log", "classify", "server.log"],
    "mcp": ["mcp"],
    "restart": ["restart", "qwen", "--set", "--tp-size=2"],
    "search run": ["search", "run", "spec.toml"],
    "search status": ["search", "status"],
    "search stop": ["search", "stop"],
    "status": ["status", "--wait", "0"],
    "todo add": ["todo", "add", "an item"],
    "todo export": ["todo", "export"],
    "todo history": ["todo", "history", "1"],
    "todo import": ["todo", "import", "plan.json"],
    "todo list": ["todo", "list"],
    "todo run": ["todo", "run", "1"],
    "todo set": ["todo", "set", "1", "--status", "completed"],
}
#: commands that start the TUI (a corrupt journal there is the app's startup error:
#: tests/process/test_faults_campaign.py) rather than print and exit
TUI_COMMANDS = {"demo"}


def _leaf_commands() -> set[str]:
    from optui.cli.group import cli

    ctx = click.Context(cli)
    out: set[str] = set()

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
        else:
            out.add(" ".join(path))

    walk(cli, [])
    return out


def test_the_walk_names_every_cli_command():
    assert set(EVERY_COMMAND) | TUI_COMMANDS == _leaf_commands()


def _walk(campaign: Path, commands: dict[str, list[str]]) -> dict[str, subprocess.CompletedProcess]:
    (campaign / "results.jsonl").write_text("{}\n")
    (campaign / "server.log").write_text("Loading weights\n")
    (campaign / "plan.json").write_text('[{"content": "a", "status": "pending"}]')
    (campaign / "spec.toml").write_text('server = "qwen"\nbench = "sweep"\n[flags]\n"--tp-size" = [1, 2]\n')
    with ThreadPoolExecutor(2) as pool:
        runs = dict(zip(commands, pool.map(lambda args: optui(campaign, *args, timeout=90), commands.values())))
    return runs


def test_every_cli_command_over_a_random_bytes_journal_ends_in_a_message(tmp_path):
    db = _corrupt("random", tmp_path)
    before = db.read_bytes()
    runs = _walk(tmp_path, EVERY_COMMAND)
    for name, r in runs.items():
        out = no_traceback(r)
        if r.returncode != 0:
            assert out.strip(), f"{name}: exit {r.returncode} without a word"
    for name in ("status", "todo list", "todo add", "journal tail", "journal note", "restart", "todo import"):
        assert runs[name].returncode != 0, name
        assert f"{db}: cannot open journal: file is not a database" in runs[name].stderr, (name, runs[name].stderr)
    assert db.read_bytes() == before  # nothing written over it


@pytest.mark.parametrize("kind", ["random", "truncated", "empty", "directory", "devnull", "schema99"])
def test_status_over_every_bad_journal_is_a_clean_message(tmp_path, kind):
    db = _corrupt(kind, tmp_path)
    runs = _walk(tmp_path, {"status": ["status", "--wait", "0"], "status --json": ["status", "--json", "--wait", "0"]})
    # after them, not beside them: over an empty file `todo list` makes the journal, and a status
    # that opened it a moment later found one (ci14: exit 0)
    runs["todo list"] = optui(tmp_path, "todo", "list", timeout=90)
    for name, r in runs.items():
        no_traceback(r)
        if kind == "empty" and name == "todo list":  # a reader takes an empty file for a journal not yet made
            assert r.returncode == 0 and r.stdout == ""
            continue
        assert r.returncode == 1, (name, r.stderr)
        assert r.stderr.startswith(f"optui: error: {db}"), (name, r.stderr)


def test_a_5_mb_todo_item_is_refused_and_the_journal_does_not_grow(tmp_path):
    (tmp_path / "optui.toml").write_text(CONFIG)
    assert optui(tmp_path, "todo", "add", "first").returncode == 0
    db = tmp_path / ".optui" / "optui.db"

    def journal_rows() -> tuple[int, int]:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return (conn.execute("SELECT COUNT(*) FROM events").fetchone()[0],
                    conn.execute("SELECT COALESCE(SUM(LENGTH(content)), 0) FROM todos").fetchone()[0])

    before = journal_rows()
    (tmp_path / "big.json").write_text(json.dumps([{"content": "x" * 5_000_000, "status": "pending"}]))
    r = optui(tmp_path, "todo", "import", "big.json")
    no_traceback(r)
    assert r.returncode == 1
    assert r.stderr == (f"optui: error: {(tmp_path / 'big.json').resolve()}:1: [0].content: 5,000,000 characters is over "
                        "the limit of 16,384 (nothing imported)\n")
    r = optui(tmp_path, "todo", "add", "y" * 100_000)
    assert r.returncode == 1 and "todo content: 100,000 characters is over the limit of 16,384" in no_traceback(r)
    r = optui(tmp_path, "journal", "note", "z" * 100_000)
    assert r.returncode == 2 and "note: 100,000 characters is over the limit of 16,384" in no_traceback(r)
    assert journal_rows() == before


def test_status_prints_a_todo_items_newline_as_a_mark_so_no_line_can_be_forged(tmp_path):
    (tmp_path / "optui.toml").write_text(CONFIG)
    assert optui(tmp_path, "todo", "add", "fix it\nserver qwen: ready").returncode == 0
    r = optui(tmp_path, "status", "--wait", "0")
    no_traceback(r)
    assert "todo 1 [pending] (medium) fix it⏎server qwen: ready" in r.stdout.splitlines()
    assert "server qwen: ready" not in r.stdout.splitlines()


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text('server = "qwen"\nx = ' + "[" * 5000 + "]" * 5000 + "\n"), "{spec}:2: nested deeper than 64 levels"),
    (lambda p: p.write_bytes(b"server = 1\n" + bytes(range(128, 256)) * 20), "{spec}:2: not UTF-8 text (byte 0x80 at offset 11)"),
])
def test_a_search_spec_nested_5000_deep_or_of_random_bytes_is_a_clean_message(tmp_path, make: Callable, message):
    (tmp_path / "optui.toml").write_text(CONFIG)
    spec = tmp_path / "spec.toml"
    make(spec)
    r = optui(tmp_path, "search", "run", "spec.toml")
    no_traceback(r)
    assert r.returncode == 2 and message.format(spec="spec.toml") in r.stderr, r.stderr
    deep = tmp_path / "tuner.json"
    deep.write_text('{"a": ' * 5000 + "1" + "}" * 5000)
    r = optui(tmp_path, "search", "run", "tuner.json", "--server", "qwen", "--bench", "sweep")
    assert r.returncode == 2 and "tuner.json: nested deeper than 64 levels (at byte 384)" in no_traceback(r), r.stderr


async def test_a_gpu_source_that_fails_shows_why_backs_off_and_recovers(tmp_path):
    """A replay capture that becomes /dev/zero (then a bug in a source: an exception) is an
    ERROR with its reason on every reading; reads go on, each wait doubled up to 4 intervals;
    the next good capture is LIVE again."""
    import time

    from optui.adapters.gpu_replay import ReplayGpuSource
    from optui.core.gpu.samples import HostStatus
    from optui.session.gpu.poller import GpuPoller, backoff_s

    capture = tmp_path / "gpus.csv"
    good = ("index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n"
            "0, NVIDIA H200, 1000 MiB, 143771 MiB, 5 %\n")
    capture.write_text(good)

    class Flaky(ReplayGpuSource):
        reads: list[float] = []
        broken = False

        async def read(self):
            Flaky.reads.append(time.monotonic())
            if Flaky.broken:
                raise RuntimeError("a bug in the source")
            return await super().read()

    poller = GpuPoller({"node": Flaky("node", capture)}, {"node": 0.1}, lambda: None)
    task = asyncio.create_task(poller.run())
    try:
        await until(lambda: poller.snapshots["node"].status is HostStatus.LIVE, what=lambda: poller.snapshots)
        capture.unlink()
        capture.symlink_to("/dev/zero")
        await until(lambda: poller.snapshots["node"].status is HostStatus.ERROR, what=lambda: poller.snapshots)
        assert poller.snapshots["node"].error == f"{capture}: larger than the limit of 4,194,304 bytes (not read further)"
        Flaky.broken = True
        await until(lambda: poller.snapshots["node"].error == "RuntimeError: a bug in the source")
        n = len(Flaky.reads)
        await until(lambda: len(Flaky.reads) >= n + 3)  # still reading, never silent
        assert not task.done()
        Flaky.broken = False
        capture.unlink()
        capture.write_text(good)
        await until(lambda: poller.snapshots["node"].status is HostStatus.LIVE, what=lambda: poller.snapshots)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert [backoff_s(0.1, n) for n in (0, 1, 2, 3, 10)] == [0.1, 0.2, 0.4, 0.4, 0.4]
