"""A configuration is its set of flags (issue 29): the same flags in another order, as
``--x=v`` or ``--x v``, or under an alias the server's learned catalogue resolves, are the
same configuration in "same flags as", folding, baselines and ``optui status``; a flag given
more than once (``--lora a --lora b``) keeps its occurrences' order. Real SQLite journals;
``optui status`` as a real subprocess."""

from __future__ import annotations

import json

from optui.adapters.journal import Journal
from optui.core.flags.argv import Flags
from optui.core.flags.catalog import FlagCatalog, FlagSpec
from optui.core.journal.experiments import baseline_flags_again, config_changes, config_key, fold_repeats, workload_baselines
from optui.session.journal.export import load_experiments
from tests.helpers.campaign import BASE_ARGV, CampaignWriter, result
from tests.process.test_cli_headless import optui, small_demo_config

PROGRAM = ["python", "-m", "sglang.launch_server"]
BASE = [*PROGRAM, "--model-path", "Qwen/Qwen3-8B", "--tp-size", "2", "--max-running-requests", "16"]
# the baseline's flags in another order, one as --x=v
REORDERED = [*PROGRAM, "--max-running-requests=16", "--tp-size", "2", "--model-path", "Qwen/Qwen3-8B"]
BIG = [*PROGRAM, "--model-path", "Qwen/Qwen3-8B", "--tp-size", "2", "--max-running-requests", "64"]
# BIG again under the argparse abbreviation the catalogue resolves, in another order
BIG_ALIAS = [*PROGRAM, "--max-running", "64", "--model-path", "Qwen/Qwen3-8B", "--tp-size", "2"]
CATALOG = FlagCatalog((FlagSpec(("--model-path",)), FlagSpec(("--tp-size", "--tensor-parallel-size")),
                       FlagSpec(("--max-running-requests",)), FlagSpec(("--port",)), FlagSpec(("--lora",))),
                      kind="sglang", program=tuple(PROGRAM))


def test_the_key_ignores_order_and_spelling_but_keeps_a_repeated_flag_s_order():
    assert config_key(BASE) == config_key(REORDERED)
    assert config_key(BASE) == config_key([*REORDERED, "--port", "30001"])  # where it listens is no configuration
    assert config_key(BASE) != config_key(BIG)
    names = CATALOG.canonical_names([BIG_ALIAS, [*PROGRAM, "--tensor-parallel-size", "2"]])
    assert names["aliases"] == {"--max-running": "--max-running-requests", "--tensor-parallel-size": "--tp-size"}
    assert config_key(BIG_ALIAS) != config_key(BIG)  # without the catalogue an abbreviation is another flag
    assert config_key(BIG_ALIAS, names) == config_key(BIG, names)
    lora_ab = [*BASE, "--lora", "a", "--lora", "b"]
    lora_ba = [*BASE, "--lora", "b", "--lora", "a"]
    assert config_key(lora_ab) != config_key(lora_ba)  # adapters are numbered in their order
    assert config_key(lora_ab) == config_key([*PROGRAM, "--lora", "a", "--tp-size", "2", "--lora", "b",
                                              "--max-running-requests", "16", "--model-path", "Qwen/Qwen3-8B"])
    # a repeated flag whose last occurrence is the same is still a change
    assert config_changes(Flags.parse([*BASE, "--lora", "a", "--lora", "b"]),
                          Flags.parse([*BASE, "--lora", "x", "--lora", "b"])) == ["~ --lora: a b → x b"]
    assert config_changes(Flags.parse(BASE), Flags.parse(REORDERED)) == []


def _campaign(journal: Journal) -> dict[str, str]:
    w = CampaignWriter(journal)
    w.argv = list(BASE_ARGV)
    names = CATALOG.canonical_names([BIG_ALIAS])
    ids = {"base": w.restart(BASE, reason="autostart")}
    w.bench(ids["base"], result(1000), result(1010), result(990))
    ids["big"] = w.restart(BIG)
    w.bench(ids["big"], result(1300), result(1310), result(1290))
    ids["again"] = w.restart(REORDERED)  # the baseline's flags again, another order
    w.bench(ids["again"], result(1005), result(995), result(1000))
    ids["big_alias"] = w.restart(BIG_ALIAS, names=names)  # BIG again, another spelling
    w.bench(ids["big_alias"], result(1305))
    ids["lora"] = w.restart([*BASE, "--lora", "a", "--lora", "b"])
    ids["lora_swapped"] = w.restart([*BASE, "--lora", "b", "--lora", "a"])
    return ids


def test_same_flags_in_another_order_or_spelling_are_the_same_configuration(tmp_path):
    journal = Journal(tmp_path / "optui.db")
    try:
        ids = _campaign(journal)
        xs = {x.id: x for x in load_experiments(journal)}
    finally:
        journal.close()
    base, big, again, big_alias = (xs[ids[k]] for k in ("base", "big", "again", "big_alias"))
    assert base.is_baseline
    # the baseline's flags again: recognised as such (compared one by one, verdict same)
    assert again.same_config_as == base.id and again.diff_vs_baseline == ()
    assert again.is_baseline_flags_again and again.id in baseline_flags_again(xs.values())
    assert workload_baselines(again)[again.workloads[0].key][1] is False  # compared with the baseline, not part of it
    # BIG under an abbreviation: the same configuration, its runs judged with BIG's
    assert big_alias.same_config_as == big.id
    assert big_alias.diff_vs_baseline == big.diff_vs_baseline == ("~ --max-running-requests: 16 → 64",)
    assert big_alias.workloads[0].n_ok == 4 and big_alias.verdict == big.verdict == "better"
    # lora adapters in another order: another configuration
    assert xs[ids["lora_swapped"]].same_config_as is None
    rows, folded = fold_repeats(xs.values())
    assert [x.id for x in rows] == [base.id, big.id, again.id, ids["lora"], ids["lora_swapped"]]
    assert folded == {big.id: [big_alias.id]}


def test_optui_status_lists_configurations_as_the_experiments_view_does(tmp_path):
    cfg = small_demo_config(tmp_path)
    journal = Journal(cfg.parent / ".optui" / "optui.db")
    try:
        ids = _campaign(journal)
    finally:
        journal.close()
    res = optui(cfg, "status", "--json", "--wait", "0")
    assert res.returncode == 0, res.stderr
    listed = [x for x in json.loads(res.stdout)["experiments"] if x["server"] == "qwen"]
    assert [x["id"] for x in listed] == [ids[k] for k in ("base", "big", "again", "lora", "lora_swapped")]
    big = next(x for x in listed if x["id"] == ids["big"])
    assert big["starts"] == 2 and big["folded"] == [ids["big_alias"]]
    text = optui(cfg, "status", "--wait", "0")
    assert text.returncode == 0, text.stderr
    rows = [line for line in text.stdout.splitlines() if line.startswith("experiment ")]
    assert not any(ids["big_alias"] in line for line in rows), rows
    big_row = next(line for line in rows if line.startswith(f"experiment {ids['big']} "))
    assert "(2 starts)" in big_row, big_row
    again_row = next(line for line in rows if line.startswith(f"experiment {ids['again']} "))
    assert f"same flags as {ids['base']}" in again_row, again_row  # the baseline's flags again, in another order
