"""Journal durability with real processes: ``kill -9`` while writing loses nothing that
was acknowledged, and concurrent writers lose nothing at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from optui.adapters.journal import Journal
from tests.helpers.demo import subprocess_env

pytestmark = pytest.mark.timeout(120)


def writer(db, count, tag, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.journal_writer", str(db), str(count), tag, *extra],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=subprocess_env(), start_new_session=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def test_kill_9_while_writing_keeps_every_acknowledged_event(tmp_path):
    db = tmp_path / "j.db"
    Journal(db).close()
    proc = writer(db, 0, "victim")
    printed: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(printed) < 300 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            printed.append(int(line))
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: it is appending as fast as it can
        rest, _ = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    printed += [int(x) for x in rest.split()]
    assert proc.returncode == -signal.SIGKILL
    assert len(printed) >= 300, proc.stderr.read()
    j = Journal(db)
    assert j.integrity_ok()
    stored = {e.seq for e in j.events(target="victim")}
    missing = set(printed) - stored
    assert not missing, f"{len(missing)} acknowledged events lost, e.g. {sorted(missing)[:5]}"
    assert len(stored) >= len(printed)  # at most the one in flight beyond what was printed
    j.close()


def start_together(db, count, tags, *extra) -> list[subprocess.Popen]:
    """Writers that begin appending at the same moment (after all opened the journal)."""
    go = db.parent / "go"
    procs = [writer(db, count, tag, f"--go={go}", f"--peers={','.join(tags)}", *extra) for tag in tags]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    go.touch()
    return procs


def test_two_processes_append_1000_each_concurrently(tmp_path):
    db = tmp_path / "j.db"
    Journal(db).close()
    procs = start_together(db, 1000, ("a", "b"))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=100)
        assert p.returncode == 0, err
        outs.append([int(x) for x in out.split()])
    j = Journal(db)
    assert j.count_events() == 2000
    assert len(j.events(target="a")) == 1000 and len(j.events(target="b")) == 1000
    assert set(outs[0]).isdisjoint(outs[1]) and len(set(outs[0]) | set(outs[1])) == 2000
    # both really ran at the same time (a midway barrier guarantees it): their seqs interleave
    assert min(outs[1]) < max(outs[0]) and min(outs[0]) < max(outs[1])
    assert j.integrity_ok()
    j.close()


def test_concurrent_processes_never_share_an_experiment_id(tmp_path):
    db = tmp_path / "j.db"
    Journal(db).close()
    procs = start_together(db, 150, ("a", "b"), "--experiments")
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=100)
        assert p.returncode == 0, err
        ids += [line.split()[1] for line in out.splitlines()]
    assert len(ids) == 300 and len(set(ids)) == 300
    j = Journal(db)
    assert sorted(j.experiment_ids("srv")) == sorted(ids)
    assert {e.experiment for e in j.events(types=["experiment.started"])} == set(ids)
    j.close()
