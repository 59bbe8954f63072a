"""A flag search on the real llama.cpp ``llama-server`` (tests/peers; issue 29's done-when):
``-np 1`` vs ``-np 4`` measured by the built-in generator at c=1 and c=4, the objective
``output_tok_s @ c=4``. Each trial's score is of its c=4 runs only, and the search ends with
the server on the configuration it states: the winner's flags when the winner beat the
runner-up outside the noise (the restart spread included), else the flags it started from
(on this peer it printed a "Winner" launch command although its own evidence said nothing
beat the runner-up, and left the server on its last trial's flags)."""

from __future__ import annotations

import asyncio

import pytest

from optui.config import load_config
from optui.core.search.spec import parse_search_text
from optui.session import Session
from tests.peers.llama_server import free_port
from tests.process.test_peer_server_control import llama_argv, write_config

pytest_plugins = ["tests.peers.fixtures"]
pytestmark = pytest.mark.timeout(240)

def fin_won(session: Session) -> bool:
    return bool(session.journal.events(target="search:np", types=["search.finished"])[-1].data["won"])


SEARCH = '''
[benchmarks.two]
server = "llama"
repeat = 3
builtin = { concurrency = [1, 4], input_len = 8, output_len = 16, prompts = 8 }

[search.np]
server = "llama"
bench = "two"
objective = "output_tok_s @ c=4"
confirm_top = 1
[search.np.flags]
"-np" = [1, 4]
'''


@pytest.mark.parametrize("values", ['[1, 4]', '[4, "x"]'], ids=["noisy", "failed"])
async def test_a_search_at_c4_on_llama_server_ends_on_the_configuration_it_states(tmp_path, llama_server_bin, tiny_gguf,
                                                                                   values):
    """noisy: on the tiny model the two are inside the noise of each other (then nothing won);
    failed: ``-np x`` is refused (the learned catalogue: an int), the only configuration measured (-np 4) wins."""
    port = free_port()
    start = llama_argv(llama_server_bin, tiny_gguf, port, "-c", "512", "-np", "2")
    cfg = write_config(tmp_path, start, port)
    with open(cfg, "a") as fh:
        fh.write(SEARCH.replace('"-np" = [1, 4]', f'"-np" = {values}'))
    session = Session(load_config(cfg), actor="test", stop_servers_on_exit=True)
    await session.start()
    try:
        assert (await session.restart_server("llama", start, reason="the flags before the search")).state.value == "ready"
        spec = parse_search_text(cfg.read_text(), str(cfg), "np")
        await session.search.start(spec, "np")
        end = await asyncio.wait_for(session.search.wait(), 200)
        assert end is not None and end.status == "done", end and end.message
        trials = session.search.trials
        assert [dict(t.point)["-np"] for t in trials][:2] == (["1", "4"] if values == "[1, 4]" else ["4", "x"])
        if values != "[1, 4]":  # the failed case
            assert trials[1].status == "failed" and "-np: invalid int value: 'x'" in trials[1].message, trials[1]
            assert fin_won(session) and session.servers["llama"].status.argv[-1] == "4"
        trials = [t for t in trials if t.feasible]
        for t in trials:  # c=4's runs only, never pooled with c=1's
            assert len(t.run_scores) == 3 and t.values["output_tok_s"] == t.values["output_tok_s@c=4"], t
            assert t.values["output_tok_s@c=1"] != t.values["output_tok_s@c=4"]
        fin = session.journal.events(target="search:np", types=["search.finished"])[-1].data
        running = fin["running"]
        st = session.servers["llama"].status
        assert st.state.value == "ready" and list(st.argv) == running["argv"] and running["error"] is None, (st, running)
        if fin["won"]:  # beat the runner-up outside the noise: the server runs the winner's -np
            assert running["why"] == "winner" and all(c["evidence"]["verdict"] == "better" for c in fin["winner"]["vs"])
            np_now = st.argv[st.argv.index("-np") + 1]
            assert np_now == dict(tuple(p) for p in fin["winner"]["point"])["-np"]
            assert fin["message"].endswith(f"; llama runs the winner's flags (-np {np_now})"), fin["message"]
        else:  # nothing won: back on the flags it started from (-np 2, which no trial ran), and said
            assert running["why"] == "start" and list(st.argv) == start, running
            assert "; nothing won: llama runs the flags it started from (" in fin["message"], fin["message"]
        print("llama search:", fin["message"])
    finally:
        await session.close()
        session.kill_leftovers()
