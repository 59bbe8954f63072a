"""Flag catalogue from real-format --help texts: parsing, lookup, checks, toggling (pure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from optui.core.flags.argv import Flags
from optui.core.flags.catalog import FlagCatalog
from optui.core.flags.help_parse import HelpParseError, parse_help
from tests.helpers.demo import subprocess_env

HELP = Path(__file__).parents[1] / "fixtures" / "help"


def catalog(name: str, kind: str) -> FlagCatalog:
    return parse_help((HELP / name).read_text(), kind=kind)


@pytest.fixture(scope="module")
def llama() -> FlagCatalog:
    return catalog("llama-server_0.3.36_help.txt", "llamacpp")


@pytest.fixture(scope="module")
def sglang() -> FlagCatalog:
    return catalog("sglang_0.5.23_help.txt", "sglang")


@pytest.fixture(scope="module")
def vllm() -> FlagCatalog:
    return catalog("vllm_0.33_help.txt", "vllm")


def spec(cat: FlagCatalog, name: str):
    found = cat.lookup(name)
    assert found is not None and found.spec is not None, name
    return found.spec


def errors(cat: FlagCatalog, argv: list[str]) -> list[str]:
    return [str(i) for i in cat.check(Flags.parse(argv, cat.booleans())) if i.level == "error"]


def warnings(cat: FlagCatalog, argv: list[str]) -> list[str]:
    return [str(i) for i in cat.check(Flags.parse(argv, cat.booleans())) if i.level == "warning"]


# ------------------------------------------------------------------ llama.cpp (real peer output)
def test_llama_help_shapes(llama):
    assert llama.style == "llamacpp" and len(llama.specs) > 200
    ctx = spec(llama, "-c")
    assert ctx.names == ("-c", "--ctx-size") and ctx.type == "int" and ctx.env == "LLAMA_ARG_CTX_SIZE"
    assert "size of the prompt context" in ctx.help
    assert spec(llama, "--parallel").names == ("-np", "--parallel")
    assert spec(llama, "--temp").type == "float"
    kvo = spec(llama, "--kv-offload")
    assert kvo.names == ("-kvo", "--kv-offload") and kvo.negations == ("-nkvo", "--no-kv-offload") and kvo.is_boolean
    assert spec(llama, "--repack").negations == ("-nr", "--no-repack")
    assert spec(llama, "--ui").negations == ("--no-ui", "--no-webui")
    assert spec(llama, "--no-host").is_boolean and not spec(llama, "--no-host").negations  # a plain flag
    fa = spec(llama, "-fa")
    assert fa.nargs == "?" and fa.choices == ("on", "off", "auto")
    assert spec(llama, "--rope-scaling").choices == ("none", "linear", "yarn")
    assert spec(llama, "-ctk").choices[:3] == ("f32", "f16", "bf16")
    assert spec(llama, "--cpu-strict").choices == ("0", "1")
    assert spec(llama, "--control-vector-layer-range").nargs == "2"
    assert spec(llama, "-ts").metavar == "N0,N1,N2,..."
    assert spec(llama, "--draft").retired == "removed"
    assert spec(llama, "-ngl").type is None  # "an exact number, 'auto', or 'all'"
    assert spec(llama, "--sleep-idle-seconds").type == "number"
    assert "--metrics" in llama.booleans() and "--no-kv-offload" in llama.booleans() and "-c" not in llama.booleans()


def test_llama_checks(llama):
    base = ["llama-server", "-m", "tiny.gguf", "-c", "2048", "-np", "4", "--metrics"]
    assert errors(llama, base) == [] and warnings(llama, base) == []
    assert errors(llama, [*base, "-c", "lots"]) == ["-c: invalid int value: 'lots'"]
    assert errors(llama, [*base, "--temp", "hot"]) == ["--temp: invalid float value: 'hot'"]
    assert errors(llama, [*base, "-fa", "maybe"]) == ["-fa: invalid choice: 'maybe' (choose from on, off, auto)"]
    assert errors(llama, [*base, "-fa"]) == []  # optional value
    assert errors(llama, [*base, "-ngl", "all"]) == []
    assert errors(llama, [*base, "--metrics=1"])[0].startswith("--metrics: ignored explicit argument '1'")
    assert warnings(llama, [*base, "--no-such-flag"]) == ["--no-such-flag: unknown flag (not in the server's --help)"]
    # llama.cpp does not accept abbreviations (not argparse)
    assert warnings(llama, [*base, "--ctx", "5"])[0].startswith("--ctx: unknown flag")
    assert warnings(llama, [*base, "--ctx-sise", "5"]) == [  # a typo: the known names like it
        "--ctx-sise: unknown flag (not in the server's --help; closest known: --ctx-size)"]
    assert any("removed" in w for w in warnings(llama, [*base, "--draft-max", "4"]))


def test_llama_toggle_replaces_spelling_in_place(llama):
    flags = Flags.parse(["llama-server", "-kvo", "-c", "1"], llama.booleans())
    flags = llama.toggle(flags, "-kvo")
    assert flags.to_argv() == ["llama-server", "--no-kv-offload", "-c", "1"]
    assert llama.toggle(flags, "--kv-offload").to_argv() == ["llama-server", "--kv-offload", "-c", "1"]
    metrics = Flags.parse(["llama-server", "--metrics"], llama.booleans())
    assert llama.toggle(metrics, "--metrics").to_argv() == ["llama-server"]
    assert llama.toggle(Flags.parse(["llama-server"]), "--metrics").to_argv() == ["llama-server", "--metrics"]


def test_an_edit_replaces_another_spelling_of_the_same_flag(llama):
    """``--threads 2`` was added beside ``-t 1`` although the catalogue knows they are one
    flag (issue 34); an unknown ``--no-*`` flag typed with a space is refused, not rewritten
    silently to ``--no-such-flag=1``."""
    from optui.core.flags.argv import FlagError
    from optui.ui.screens.flag_editor import apply_edit

    assert llama.aliases("--threads") == ("-t",) and llama.aliases("-t") == ("--threads",)
    assert llama.aliases("--no-such-flag") == () and llama.aliases("--no-kv-offload") == ()
    flags = Flags.parse(["llama-server", "-m", "tiny.gguf", "-t", "1", "-c", "2048"], llama.booleans())
    assert apply_edit(flags, "--threads 2", {}, llama).to_argv() == ["llama-server", "-m", "tiny.gguf", "--threads", "2",
                                                                     "-c", "2048"]
    assert apply_edit(flags, "--threads=2", {}, llama).to_argv()[3:5] == ["--threads", "2"]
    assert apply_edit(flags, "-t 4", {}, llama).to_argv()[3:5] == ["-t", "4"]  # its own spelling kept
    assert apply_edit(flags, "--threads 2", {}, None).to_argv()[-2:] == ["--threads", "2"]  # no catalogue: no aliases
    with pytest.raises(FlagError, match=r"--no-such-flag: an unknown flag whose name reads as on/off.*type --no-such-flag=1 to pass the value"):
        apply_edit(flags, "--no-such-flag 1", {}, llama)
    with pytest.raises(FlagError, match=r"type --enable-x=1"):
        apply_edit(flags, "--enable-x 1", {}, None)
    assert apply_edit(flags, "--no-such-flag=1", {}, llama).to_argv()[-1] == "--no-such-flag=1"  # as typed


# ------------------------------------------------------------------ SGLang (argparse, store_true)
def test_sglang_help_shapes(sglang):
    assert sglang.style == "argparse" and sglang.positionals == ()
    tp = spec(sglang, "--tp-size")
    assert tp.names == ("--tp-size", "--tensor-parallel-size") and tp.type is None  # argparse hides types
    assert spec(sglang, "--cuda-graph-bs-decode").nargs == "+"
    assert spec(sglang, "--lora-paths").nargs == "*"
    assert spec(sglang, "--enable-metrics").is_boolean and spec(sglang, "--enable-metrics").negations == ()
    assert "EAGLE3" in spec(sglang, "--speculative-algorithm").choices
    assert "out-of-memory errors" in spec(sglang, "--mem-fraction-static").help


def test_sglang_abbreviations_and_argparse_errors(sglang):
    prog = ["python", "-m", "sglang.launch_server", "--model-path", "/m"]
    assert warnings(sglang, [*prog, "--tp", "4"]) == [
        "--tp: abbreviation of --tp-size; write it in full (a later version can make it ambiguous)"]
    assert errors(sglang, [*prog, "--cuda-graph-max-bs", "8"]) == [
        "--cuda-graph-max-bs: ambiguous option: could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"]
    assert errors(sglang, [*prog, "--kv-cache-dtype", "fp7"]) == [
        "--kv-cache-dtype: invalid choice: 'fp7' (choose from auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16)"]
    # store_true given a value: "--enable-metrics 1" leaves a stray positional (argparse: unrecognized)
    assert errors(sglang, [*prog, "--enable-metrics", "1"]) == ["1: unexpected positional argument (--enable-metrics takes no value)"]
    assert errors(sglang, [*prog, "--cuda-graph-bs-decode"]) == [
        "--cuda-graph-bs-decode: expected at least one value (CUDA_GRAPH_BS_DECODE [CUDA_GRAPH_BS_DECODE ...]), got none"]
    assert errors(sglang, [*prog, "--cuda-graph-bs-decode", "1", "2", "4"]) == []
    assert warnings(sglang, [*prog, "--tp_size", "2"]) == ["--tp_size: the help spells it --tp-size"]
    assert warnings(sglang, [*prog, "--port", "1", "--port", "2"]) == ["--port: given more than once; the last one wins"]


# ------------------------------------------------------------------ vLLM (argparse, pairs)
def test_vllm_help_shapes(vllm):
    assert vllm.positionals == ("model_tag",)
    eager = spec(vllm, "--enforce-eager")
    assert eager.negations == ("--no-enforce-eager",) and eager.default == "False"
    prefix = spec(vllm, "--enable-prefix-caching")
    assert prefix.negations == ("--disable-prefix-caching",)
    assert spec(vllm, "-tp").type == "number" and spec(vllm, "--gpu-memory-utilization").type == "float"
    assert spec(vllm, "--api-key").nargs == "+"
    assert spec(vllm, "-ep").negations == ("--no-enable-expert-parallel",)
    assert spec(vllm, "--block-size").choices[:3] == ("1", "8", "16")


def test_vllm_underscores_hidden_negation_and_checks(vllm):
    prog = ["vllm", "serve", "org/model"]
    assert errors(vllm, [*prog, "--max_model_len", "32k", "-tp", "8"]) == []
    assert warnings(vllm, [*prog, "--max_model_len", "32k"]) == []  # vLLM accepts underscores
    assert warnings(vllm, [*prog, "--no-enable-prefix-caching"]) == []  # hidden but accepted
    assert errors(vllm, [*prog, "-tp", "eight"]) == ["-tp: invalid number value: 'eight'"]
    assert errors(vllm, [*prog, "--gpu-memory-utilization", "90%"]) == ["--gpu-memory-utilization: invalid float value: '90%'"]
    assert errors(vllm, ["vllm", "serve", "a", "b"]) == ["b: unexpected positional argument"]


def test_vllm_toggle_uses_negative_spelling(vllm):
    flags = Flags.parse(["vllm", "serve", "m", "--enable-prefix-caching", "-tp", "2"], vllm.booleans())
    off = vllm.toggle(flags, "--enable-prefix-caching")
    assert off.to_argv() == ["vllm", "serve", "m", "--disable-prefix-caching", "-tp", "2"]
    assert vllm.toggle(off, "--enable-prefix-caching").to_argv() == flags.to_argv()
    # a default-on option absent from the argv: toggling its negative adds it explicitly
    assert vllm.toggle(Flags.parse(["vllm", "serve", "m"]), "--disable-prefix-caching").to_argv()[-1] == "--disable-prefix-caching"
    # plain store_true stays add/remove
    stats = Flags.parse(["vllm", "serve", "m", "--disable-log-stats"], vllm.booleans())
    assert vllm.toggle(stats, "--disable-log-stats").to_argv() == ["vllm", "serve", "m"]


def test_describe_and_json_roundtrip(vllm, llama):
    text = vllm.describe("--no-enforce-eager")
    assert "--no-enforce-eager turns --enforce-eager off" in text and "eager-mode PyTorch" in text
    assert "not in" in vllm.describe("--bogus")
    for cat in (vllm, llama):
        again = FlagCatalog.from_json(cat.to_json())
        assert again == cat and again.lookup("--port") == cat.lookup("--port")


def test_garbage_help_is_an_error():
    with pytest.raises(HelpParseError, match="no options found"):
        parse_help("Traceback (most recent call last):\nModuleNotFoundError: No module named 'sglang'\n")


def test_demo_server_help_is_parsed_live():
    out = subprocess.run([sys.executable, "-m", "optui.demo.fake_server", "--help"], capture_output=True, text=True,
                         env=subprocess_env(), stdin=subprocess.DEVNULL, timeout=30, check=True).stdout
    cat = parse_help(out, kind="sglang")
    assert spec(cat, "--model").names == ("--model-path", "--model")
    assert spec(cat, "--kv-cache-dtype").choices == ("auto", "bf16", "fp8_e5m2", "fp8_e4m3")
    assert spec(cat, "--disable-cuda-graph").is_boolean
