"""optui against a real SGLang (0.5.23 on CPU, tests/peers/sglang_server.py) on 127.0.0.1.

One shared server (``sglang_server``, session scope) for the tests that only read from it;
the crash classes and the SIGTERM stop start their own. docs/engines/sglang.md lists what is
verified here and what only against formats.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from optui.core.flags.help_parse import parse_help
from optui.core.server.effective_config import check_config, sglang_config
from optui.core.server.log import LogClassifier, classify_log, line_of_class
from optui.core.server.metrics_map import generated_total, load_view
from optui.core.server.state import CrashClass
from tests.helpers.engine_peer import check_sglang_bench_serving, classify_crash, get, load_during_completions, taken_port
from tests.peers.sglang_server import DEFAULT_ARGS, run_env

pytest_plugins = ["tests.peers.sglang_fixtures"]


def _wait_ready_line(peer, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = peer.log_path.read_text(errors="replace")
        if "fired up and ready to roll" in text:
            return text
        time.sleep(0.5)
    raise AssertionError(f"no ready line in {peer.log_path}")


# --- own short-lived servers first: the shared one, once started, runs to the session's end

def _crash(python, model, tmp_path, args, port=None) -> dict:
    """Start, and classify the log once the process exits or the log shows a crash."""
    # imported here, not at the top: pytest_plugins must import the plugin first (assert rewriting)
    from tests.peers.sglang_fixtures import launch_sglang

    return classify_crash(launch_sglang(python, model, tmp_path, args, wait=False, port=port), "sglang",
                          f"sglang {args}")


def test_bad_flag_and_bad_value(sglang_python, sglang_model, tmp_path):
    flag = _crash(sglang_python, sglang_model, tmp_path, [*DEFAULT_ARGS, "--no-such-flag", "1"])
    assert (flag["final"], flag["class"]) == ("crashed", CrashClass.BAD_FLAG)
    value = _crash(sglang_python, sglang_model, tmp_path, [*DEFAULT_ARGS, "--max-running-requests", "abc"])
    assert (value["final"], value["class"]) == ("crashed", CrashClass.BAD_FLAG)


def test_port_in_use(sglang_python, sglang_model, tmp_path):
    with taken_port() as port:
        result = _crash(sglang_python, sglang_model, tmp_path, DEFAULT_ARGS, port=port)
    assert (result["final"], result["class"]) == ("crashed", CrashClass.PORT_IN_USE)


def test_kv_cache_memory_is_oom_and_its_cause_is_shown(sglang_python, sglang_model, tmp_path):
    """0.5.23 on CPU sizes the KV pool from free memory: (free after loading) - (free before) x
    (1 - --mem-fraction-static). Any fraction below the weights' share fails the same way, but
    a small positive one (0.0001) only while no other process of this shared machine frees more
    than the ~50 MB margin meanwhile; a negative one always does. The ValueError read bad_flag."""
    result = _crash(sglang_python, sglang_model, tmp_path, [*DEFAULT_ARGS, "--mem-fraction-static", "-1"])
    assert (result["final"], result["class"]) == ("crashed", CrashClass.OOM), result["lines"]
    cause = line_of_class(result["lines"], CrashClass.OOM)
    assert "leave no GPU memory for the KV cache" in cause, result["lines"]


def test_a_sigterm_stop_is_never_a_crash(sglang_python, sglang_model, tmp_path):
    from tests.peers.sglang_fixtures import launch_sglang

    with launch_sglang(sglang_python, sglang_model, tmp_path) as peer:
        _wait_ready_line(peer)
        os.killpg(peer.proc.pid, signal.SIGTERM)  # the process group, as optui's stop does
        rc = peer.proc.wait(timeout=60)
        time.sleep(1)
        text = peer.log_path.read_text(errors="replace")
    result = classify_log(text, "sglang", rc)
    assert result["final"] == "stopped" and result["class"] is None, (rc, result)
    assert "crashed with exit code -15" in text or "SIGTERM received" in text


# --- the shared server

def test_phases_end_at_fired_up_and_ready_to_roll(sglang_server):
    text = _wait_ready_line(sglang_server)
    classifier = LogClassifier("sglang")
    for line in text.splitlines():
        classifier.feed(line)
    phases = [p.phase for p in classifier.phases]
    assert phases[0] == "launching" and phases[-1] == "ready" and classifier.log_ready, phases
    assert phases.index("loading_weights") < phases.index("kv_cache") < phases.index("ready")
    assert (classify_log(text)["kind"], classify_log(text)["final"]) == ("sglang", "ready")


def test_metrics_give_the_load_and_the_counters_match_the_tokens_served(sglang_server):
    run = load_during_completions(sglang_server.url, 100)
    views = run.views
    # seen on 0.5.23: while 4 x 100-token requests ran, neither sglang:generation_tokens_total
    # nor sglang:gen_throughput moved in any 0.5 s scrape; the scrape after the run sees the move
    views.append(load_view(run.after, run.last))
    assert any((v.running or 0) >= 1 for v in views), views
    assert any((v.gen_tok_s or 0) > 0 for v in views), views
    served = sum(u["completion_tokens"] for u in run.usages)
    assert generated_total(run.after) - generated_total(run.before) == served == 400


def test_server_info_gives_the_config_in_effect(sglang_server):
    info = json.loads(get(f"{sglang_server.url}/server_info"))
    running = sglang_config(info)
    assert running is not None and running.version
    argv = ["python", "-m", "sglang.launch_server", "--model-path", str(sglang_server.model), *DEFAULT_ARGS]
    assert check_config("sglang", argv, running).status == "verified"
    wrong = check_config("sglang", [*argv, "--mem-fraction-static", "0.5"], running)
    assert wrong.status != "verified" and wrong.mismatches


def test_flag_catalogue_from_help(sglang_python):
    proc = subprocess.run([str(sglang_python), "-m", "sglang.launch_server", "--help"], capture_output=True, text=True,
                          env=run_env(), timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    catalog = parse_help(proc.stdout, kind="sglang", program=("python", "-m", "sglang.launch_server"))
    assert len(catalog.specs) > 150
    assert catalog.lookup("--max-total-tokens") is not None and catalog.lookup("--enable-metrics").spec.is_boolean


def test_bench_serving_text_and_jsonl_are_parsed_equal(sglang_server, sglang_python, tmp_path):
    check_sglang_bench_serving(sglang_python, "sglang", sglang_server.url, sglang_server.model, tmp_path / "r.jsonl",
                               run_env())
