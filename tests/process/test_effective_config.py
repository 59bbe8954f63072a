"""The configuration really in effect (issue 16): what SGLang / vLLM / llama.cpp report
(real response shapes: servers_and_bench.md 1.2/1.3, tests/peers/NOTES.md) against the argv
an experiment is credited to; the ready gate on the demo server with a flag it does not apply
(``OPTUI_DEMO_IGNORE``) marks the experiment unverified in the journal and the experiments."""

from __future__ import annotations

import sys

import pytest

from optui.adapters.journal import Journal
from optui.core.journal.experiments import build_experiments
from optui.core.server.effective_config import (
    cache_config_labels,
    check_config,
    llamacpp_config,
    mismatch_lines,
    sglang_config,
    vllm_config,
)
from tests.helpers.demo import demo_server_cmd, free_port
from tests.helpers.runtime import runtime

pytestmark = pytest.mark.timeout(60)
LLAMA = ["llama-server", "-m", "tiny.gguf", "--port", "8080"]


def props(n_ctx: int, slots: int, build: str = "b1-0c1e570") -> dict:
    """llama.cpp /props as the 0.3.36 peer answers (the keys optui reads, and some others)."""
    return {"default_generation_settings": {"params": {"temperature": 0.8}, "n_ctx": n_ctx}, "total_slots": slots,
            "model_alias": "tiny", "model_path": "tiny.gguf", "build_info": build, "is_sleeping": False}


def models(n_ctx_train: int) -> dict:
    return {"object": "list", "data": [{"id": "tiny", "object": "model", "owned_by": "llamacpp",
                                        "meta": {"n_ctx": 512, "n_ctx_train": n_ctx_train, "n_vocab": 512}}]}


# (args, props n_ctx, total_slots, n_ctx_train): the NOTES.md table of the real peer
LLAMA_OBSERVED = [
    (["-c", "2048", "-np", "4"], 512, 4, 512),
    (["-c", "1024", "-np", "2"], 512, 2, 512),
    (["-c", "4096", "-np", "1"], 512, 1, 512),  # capped at n_ctx_train
    (["-c", "256", "-np", "1"], 256, 1, 512),
    (["-c", "2048", "-np", "1"], 2048, 1, 2048),
    (["-c", "8192", "-np", "2"], 2048, 2, 2048),
    (["-c", "2048", "-np", "4", "--kv-unified"], 2048, 4, 2048),
    (["--ctx-size", "2048", "--parallel", "4"], 512, 4, 2048),
]


@pytest.mark.parametrize(("args", "n_ctx", "slots", "train"), LLAMA_OBSERVED)
def test_llamacpp_per_slot_context_of_the_real_peer_is_verified(args, n_ctx, slots, train):
    running = llamacpp_config(props(n_ctx, slots), models(train))
    check = check_config("llamacpp", [*LLAMA, *args], running)
    assert (check.status, check.mismatches) == ("verified", ())
    assert set(check.checked) == {"total_slots", "n_ctx"}
    assert running.version == "b1-0c1e570" and running.source == "/props + /v1/models"


def test_llamacpp_slots_or_context_not_applied_are_unverified():
    check = check_config("llamacpp", [*LLAMA, "-c", "2048", "-np", "4"], llamacpp_config(props(1024, 2), models(2048)))
    assert check.status == "unverified"
    assert [(m.field, m.expected, m.actual) for m in check.mismatches] == [("total_slots", 4, 2), ("n_ctx", 512, 1024)]
    assert check.describe() == ("-np 4: server runs total_slots=2 (expected 4)",
                                "-c 2048 -np 4: server runs n_ctx=1024 (expected 512)")
    # without -np the slot count and unified mode are the server's own: -c alone is not judged
    alone = check_config("llamacpp", [*LLAMA, "-c", "2048"], llamacpp_config(props(2048, 4), models(2048)))
    assert alone.status == "unchecked" and alone.mismatches == ()
    auto = check_config("llamacpp", [*LLAMA, "-c", "2048", "-np", "-1"], llamacpp_config(props(512, 4), models(2048)))
    assert auto.status == "unchecked" and auto.mismatches == ()  # -np -1: "auto", the server's choice


SGLANG_INFO = {  # /server_info of SGLang 0.5.23 (abridged: resolved ServerArgs + scheduler info)
    "model_path": "Qwen/Qwen3-8B", "tp_size": 2, "dp_size": 1, "mem_fraction_static": 0.88, "max_running_requests": 32,
    "context_length": 32768, "chunked_prefill_size": 8192, "disable_radix_cache": False, "kv_cache_dtype": "auto",
    "launch_command": "python -m sglang.launch_server ...", "status": "ready", "max_total_num_tokens": 712000,
    "internal_states": [{"last_gen_throughput": 0.0}], "version": "0.5.23", "frontend": "python",
}


def test_sglang_server_info_against_the_argv():
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "2",
            "--mem-fraction-static", "0.880", "--max-running-requests", "64", "--context-length", "32768",
            "--disable-radix-cache"]
    running = sglang_config(SGLANG_INFO)
    check = check_config("sglang", argv, running)
    assert running.version == "0.5.23"
    assert check.status == "unverified"
    assert set(check.checked) == {"tp_size", "mem_fraction_static", "max_running_requests", "context_length",
                                  "disable_radix_cache"}
    assert [m.field for m in check.mismatches] == ["max_running_requests", "disable_radix_cache"]
    assert mismatch_lines(check.to_json()) == check.describe()
    assert check.describe()[0] == "--max-running-requests 64: server runs max_running_requests=32 (expected 64)"
    # a PD router's body: the first decode server's
    assert sglang_config({"prefill": [SGLANG_INFO], "decode": [SGLANG_INFO]}).fields["tp_size"] == 2


VLLM_METRICS = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_gpu_blocks="27152",swap_space="4"} 1.0
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 0.0
"""
VLLM_MODELS = {"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm",
                                           "root": "Qwen/Qwen3-8B", "parent": None, "max_model_len": 32768}]}


def test_vllm_models_and_cache_config_info_against_the_argv():
    assert cache_config_labels(VLLM_METRICS)["num_gpu_blocks"] == "27152"
    running = vllm_config(VLLM_MODELS, VLLM_METRICS, "0.33.0")
    ok = ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32K", "--gpu-memory-utilization", "0.90",
          "--block-size", "16", "--enable-prefix-caching"]
    check = check_config("vllm", ok, running)
    assert (check.status, set(check.checked)) == ("verified", {"max_model_len", "gpu_memory_utilization", "block_size",
                                                               "enable_prefix_caching"})
    bad = ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32k", "--gpu-memory-utilization", "0.85",
           "--no-enable-prefix-caching", "--block-size", "32"]
    check = check_config("vllm", bad, running)
    assert [(m.field, m.expected) for m in check.mismatches] == [
        ("max_model_len", 32000), ("gpu_memory_utilization", 0.85), ("block_size", 32), ("enable_prefix_caching", False)]
    assert check_config("vllm", ["vllm", "serve", "m", "--max-model-len", "auto"], running).status == "unchecked"


def test_a_server_that_reports_nothing_is_unchecked_never_unverified():
    check = check_config("sglang", ["x", "--max-running-requests", "8"], None)
    assert check.status == "unchecked" and check.mismatches == () and "reported no configuration" in check.reason
    assert check_config("openai", ["x", "--max-running-requests", "8"], sglang_config(SGLANG_INFO)).status == "unchecked"
    assert mismatch_lines(None) == () and mismatch_lines({"mismatches": "junk"}) == ()


# ------------------------------------------------------------------ the ready gate on the demo server
async def test_a_flag_the_demo_does_not_apply_makes_the_experiment_unverified(tmp_path):
    argv = demo_server_cmd(free_port(), "--max-running-requests", "8", "--tp-size", "2", speed=40.0)
    async with runtime(tmp_path, argv, env={"OPTUI_DEMO_IGNORE": "--max-running-requests"}) as (rt, journal):
        status = await rt.restart(argv, reason="try 8")
        assert status.state.value == "ready"
        ready = journal.events(types=["server.ready"])[-1].data
        check = ready["config_check"]
        assert check["status"] == "unverified" and check["source"] == "/server_info"
        assert check["mismatches"] == [{"flag": "--max-running-requests 8", "field": "max_running_requests",
                                        "expected": 8, "actual": 32}]
        assert "tp_size" in check["checked"] and ready["server_version"]
        line = "--max-running-requests 8: server runs max_running_requests=32 (expected 8)"
        assert rt.status.config_mismatch == (line,)
        (exp,) = build_experiments(journal.events(), [])
        assert exp.unverified == (line,)


async def test_the_same_flags_applied_are_verified(tmp_path):
    argv = demo_server_cmd(free_port(), "--max-running-requests", "8", speed=40.0)
    async with runtime(tmp_path, argv) as (rt, journal):
        assert (await rt.restart(argv)).state.value == "ready"
        check = journal.events(types=["server.ready"])[-1].data["config_check"]
        assert check["status"] == "verified" and "max_running_requests" in check["checked"]
        assert rt.status.config_mismatch == ()
        assert build_experiments(journal.events(), [])[0].unverified == ()


def test_demo_server_args_ignore_keeps_the_default():
    from optui.demo.server_args import parse_args

    args = parse_args(["--model-path", "m", "--max-running-requests", "8", "--tp-size", "2"], "--max-running-requests, --nope")
    assert (args.max_running_requests, args.tp_size) == (32, 2)
    assert sys.modules["optui.demo.server_args"].parse_args(["--model-path", "m", "--max-running-requests", "8"]).max_running_requests == 8


async def test_tui_server_panel_and_experiments_view_say_unverified(tmp_path):
    from tests.helpers.faults import app_on, demo_config, ready, wait_for
    from tests.helpers.pilot import experiment_row

    # the demo campaign autostarts with --max-running-requests 4, which this server ignores
    app = app_on(demo_config(tmp_path, env='OPTUI_DEMO_IGNORE = "--max-running-requests"'))
    line = "--max-running-requests 4: server runs max_running_requests=32 (expected 4)"
    async with app.run_test(size=(180, 45)) as pilot:
        await wait_for(pilot, lambda: "demo" in app.session.servers, what="session")
        rt = app.session.servers["demo"]
        await ready(pilot, rt)
        await wait_for(pilot, lambda: rt.status.config_mismatch == (line,), what=lambda: rt.status.config_mismatch)
        await wait_for(pilot, lambda: "⚠ UNVERIFIED --max-running-requests" in app.query_one("#servers").render().plain,
                       what=lambda: app.query_one("#servers").render().plain)
        await pilot.press("E")
        table = app.screen.query_one("#experiments-table")
        await wait_for(pilot, lambda: table.row_count == 1)
        exp_id = table.coordinate_to_cell_key((0, 0)).row_key.value
        assert "unverified" in experiment_row(table, exp_id)["outcome"], experiment_row(table, exp_id)
        await pilot.press("enter")
        assert f"UNVERIFIED {line}" in app.screen.query_one("#details-body").render().plain
        await pilot.press("escape", "q")


def test_the_report_says_when_the_best_configuration_is_unverified(tmp_path):
    from optui.core.journal import events as ev
    from optui.core.journal.report import ReportInput, render_markdown
    from tests.helpers.campaign import BASE_ARGV, CampaignWriter, flags, result

    j = Journal(tmp_path / "j.db")
    w = CampaignWriter(j)
    base = w.restart(list(BASE_ARGV), reason="autostart")
    w.bench(base, result(1000.0), result(1010.0), result(1005.0))
    big = w.restart(flags(max_running_requests=64))
    check = check_config("sglang", flags(max_running_requests=64), sglang_config({**SGLANG_INFO, "max_running_requests": 32}))
    j.append(ev.SERVER_READY, "qwen", {"ready_s": 30.0, "argv": flags(max_running_requests=64), "config_check": check.to_json()},
             experiment=big, ts=w.tick(1))
    w.bench(big, result(1300.0), result(1290.0), result(1295.0))
    md = render_markdown(ReportInput(title="t", events=j.events(), results=j.results(limit=None)))
    best = md[md.index("## Best configuration"):]
    assert f"**qwen: {big}**" in best
    assert "**Unverified**: the server did not run these flags as given: --max-running-requests 64: server runs " in best
    import csv
    import io

    from optui.core.journal.report import render_csv

    rows = {r["experiment"]: r for r in csv.DictReader(io.StringIO(render_csv(ReportInput(title="t", events=j.events(),
                                                                                          results=j.results(limit=None)))))}
    # (a cell starting with "-" gets the CSV formula guard "'")
    assert rows[big]["unverified"].lstrip("'").startswith("--max-running-requests 64: server runs max_running_requests=32")
    assert rows[base]["unverified"] == ""
    j.close()
