"""Flags: lossless parse/render, editing, diff (pure)."""

import pytest

from optui.core.flags.argv import FlagError, Flags, parse_assignment

ARGVS = [
    ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "4", "--enable-metrics"],
    ["vllm", "serve", "org/model", "--max-model-len=32768", "-tp", "8", "--no-enable-prefix-caching"],
    ["llama-server", "-m", "tiny.gguf", "-c", "2048", "-np", "4", "--metrics"],
    ["python", "-m", "x", "--cuda-graph-bs", "1", "2", "4", "--json-model-override-args", '{"a": [1, 2]}'],
    ["python", "-m", "x", "--api-key", "a b; rm -rf /", "--served-model-name", "m", "--served-model-name", "n"],
    ["serve.sh", "--temperature", "-1.5", "--x=", "--y==z"],
]


@pytest.mark.parametrize("argv", ARGVS)
def test_roundtrip_is_lossless(argv):
    assert Flags.parse(argv).to_argv() == argv


def test_program_part_detected():
    assert Flags.parse(ARGVS[0]).program == ("python", "-m", "sglang.launch_server")
    assert Flags.parse(ARGVS[1]).program == ("vllm", "serve")
    assert Flags.parse(ARGVS[1]).get("<positional 0>") == ("org/model",)


def test_values_short_options_and_nargs():
    f = Flags.parse(ARGVS[2])
    assert f.get("-c") == ("2048",) and f.get("-np") == ("4",) and f.get("--metrics") == ()
    assert Flags.parse(ARGVS[3]).get("--cuda-graph-bs") == ("1", "2", "4")
    assert Flags.parse(ARGVS[5]).get("--temperature") == ("-1.5",)


def test_set_replaces_in_place_and_keeps_inline_style():
    f = Flags.parse(ARGVS[1]).set("--max-model-len", "16384")
    assert f.to_argv()[3] == "--max-model-len=16384"
    f = Flags.parse(ARGVS[0]).set("--tp-size", "8")
    assert f.to_argv() == ARGVS[0][:6] + ["8", "--enable-metrics"]


def test_set_appends_and_dedupes_repeated_flags():
    f = Flags.parse(ARGVS[4])
    assert f.duplicates() == ["--served-model-name"]
    g = f.set("--served-model-name", "z")
    assert g.to_argv().count("--served-model-name") == 1 and g.get("--served-model-name") == ("z",)
    assert f.set("--new", "1").to_argv()[-2:] == ["--new", "1"]


def test_value_with_shell_metacharacters_stays_one_element():
    f = Flags.parse(ARGVS[4]).set("--api-key", "$(touch /tmp/pwned); `x` | y")
    argv = f.to_argv()
    assert argv[argv.index("--api-key") + 1] == "$(touch /tmp/pwned); `x` | y"


def test_unset_and_toggle_pairs():
    f = Flags.parse(ARGVS[0])
    assert not f.unset("--enable-metrics").has("--enable-metrics")
    v = Flags.parse(ARGVS[1])
    t = v.toggle("--enable-prefix-caching")
    assert t.has("--enable-prefix-caching") and not t.has("--no-enable-prefix-caching")
    assert Flags.parse(["x", "--a"]).toggle("--a").to_argv() == ["x"]
    assert Flags.parse(["x"]).toggle("--b").to_argv() == ["x", "--b"]


def test_underscore_and_dash_are_the_same_flag():
    f = Flags.parse(["vllm", "serve", "m", "--max_model_len", "10"])
    assert f.get("--max-model-len") == ("10",)
    assert f.set("--max-model-len", "20").to_argv() == ["vllm", "serve", "m", "--max_model_len", "20"]


def test_diff():
    old = Flags.parse(ARGVS[0])
    new = old.set("--tp-size", "8").unset("--enable-metrics").set("--disable-cuda-graph")
    changes = {c.name: (c.kind, c.describe()) for c in old.diff(new)}
    assert changes["--tp-size"] == ("changed", "~ --tp-size: 4 → 8")
    assert changes["--enable-metrics"][0] == "removed"
    assert changes["--disable-cuda-graph"] == ("added", "+ --disable-cuda-graph (on)")
    assert old.diff(old) == []


def test_diff_compares_every_occurrence_of_a_repeated_flag():
    # the last occurrence alike, an earlier one changed: still a change of that flag (the agent
    # policy's forbidden_flags and every view read the names from this diff)
    old = Flags.parse(["srv", "--lora", "a", "--lora", "b", "--tp", "2"])
    new = Flags.parse(["srv", "--lora", "x", "--lora", "b", "--tp", "2"])
    assert [(c.name, c.describe()) for c in old.diff(new)] == [("--lora", "~ --lora: a b → x b")]
    dropped = Flags.parse(["srv", "--lora", "b", "--lora", "a"]).diff(Flags.parse(["srv", "--lora", "a"]))
    assert [(c.name, c.old, c.new) for c in dropped] == [("--lora", ("b", "a"), ("a",))]
    assert old.diff(Flags.parse(["srv", "--lora", "b", "--lora", "a", "--tp", "2"]))[0].name == "--lora"


def test_bad_edits_raise_flag_error():
    with pytest.raises(FlagError):
        Flags.parse(ARGVS[0]).set("tp-size", "1")
    with pytest.raises(FlagError):
        parse_assignment("   ")
    assert parse_assignment("tp-size=4") == ("--tp-size", "4")
    assert parse_assignment("--x 1 2") == ("--x", "1 2")


@pytest.mark.parametrize("booleans", [(), ("--trust-remote-code",)], ids=["no catalogue", "a catalogue"])
def test_a_value_for_a_flag_named_like_a_boolean_reads_back_as_itself_in_every_parse(booleans):
    # issue 20: the editor showed `+ --no-such-flag 1`, the review (which parses the argv
    # without the catalogue) `+ --no-such-flag (on)` and `+ <positional 0> 1`
    base = Flags.parse(ARGVS[0], booleans)
    edited = base.set("--no-such-flag", "1").set("--enable-x", "2").set("--tp-size", "8")
    argv = edited.to_argv()
    assert argv[-2:] == ["--no-such-flag=1", "--enable-x=2"]
    expected = ["+ --no-such-flag 1", "+ --enable-x 2", "~ --tp-size: 4 → 8"]
    for parse_booleans in ((), booleans, ("--no-such-flag",)):
        reread = Flags.parse(argv, parse_booleans)
        assert sorted(c.describe() for c in Flags.parse(ARGVS[0], parse_booleans).diff(reread)) == sorted(expected)
    assert sorted(c.describe() for c in base.diff(edited)) == sorted(expected)
    with pytest.raises(FlagError, match="one value"):
        base.set("--no-such-flag", ["1", "2"])
    assert base.set("--no-such-flag").to_argv()[-1] == "--no-such-flag"  # on/off stays as it is
