"""The test servers' port picker (``tests.peers.peer_cache.free_port``): below the kernel's
ephemeral range, a worker's picks differ one after another, a held port is skipped."""

from __future__ import annotations

import socket

from tests.peers import peer_cache


def test_picks_are_below_the_ephemeral_range_and_differ_in_a_row(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    low, _ = peer_cache.ephemeral_range()
    picks = [peer_cache.free_port() for _ in range(5)]
    assert len(set(picks)) == 5, picks
    assert all(peer_cache.RESERVED_PORTS_FROM <= port < low for port in picks), (picks, low)


def test_workers_have_slices_of_their_own(monkeypatch):
    slices = {}
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices[worker] = peer_cache.free_port()
    low, _ = peer_cache.ephemeral_range()
    size = (low - peer_cache.RESERVED_PORTS_FROM) // peer_cache.PORT_SLICES
    assert [(port - peer_cache.RESERVED_PORTS_FROM) // size for port in slices.values()] == [0, 1], slices


def test_a_port_a_process_holds_is_skipped(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw4")
    monkeypatch.setattr(peer_cache, "_next_in_slice", [0])  # from the slice's start: not at its wrap
    ahead = peer_cache.free_port() + 1  # the next one this worker would be handed
    with socket.socket() as held:
        held.bind(("127.0.0.1", ahead))
        held.listen()
        assert peer_cache.free_port() != ahead


def test_the_range_file_is_read_and_a_missing_one_gives_linux_default(tmp_path):
    (tmp_path / "range").write_text("40000\t50000\n")
    assert peer_cache.ephemeral_range(tmp_path / "range") == (40000, 50000)
    assert peer_cache.ephemeral_range(tmp_path / "absent") == (32768, 60999)
