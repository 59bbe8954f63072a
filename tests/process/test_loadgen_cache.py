"""Workloads that measure the server, not its prefix cache (issue 16): fresh prompts per
run, warm-up prompts of their own, stated prefix sharing, and the server's cache share of
each run — against the demo server's prefix cache (on by default, like SGLang's radix
cache) and its ``/metrics``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from optui.adapters.loadgen import describe_server_side, load_dataset, plan_run, run_load
from optui.config import load_config
from optui.core.bench.result import BenchResult, Workload, cache_share_note
from optui.core.bench.sweep import parse_sweep
from optui.session import Session
from tests.helpers.demo import start_demo_server

IN_LEN = 64


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory):
    with start_demo_server(tmp_path_factory.mktemp("demo"), "--enable-metrics") as srv:
        yield srv.base_url


def cached_and_prompt_tokens(url: str) -> tuple[float, float]:
    """The demo server's (sglang:cached_tokens_total, sglang:prompt_tokens_total) now."""
    text = httpx.get(url + "/metrics", timeout=10).text
    values = {m.group(1): float(m.group(2)) for m in re.finditer(r"^sglang:(\w+_total)\{[^}]*\} (\S+)$", text, re.M)}
    return values["cached_tokens_total"], values["prompt_tokens_total"]


def campaign(tmp_path: Path, url: str, **builtin) -> Session:
    spec = {"concurrency": [1], "input_len": IN_LEN, "output_len": 4, "prompts": 6, "warmup": 1, **builtin}
    body = ", ".join(f"{k} = {json.dumps(v) if not isinstance(v, str) or not v.startswith('{') else v}"
                     for k, v in spec.items())
    (tmp_path / "optui.toml").write_text(
        f'[hosts.local]\ngpu_source = "none"\n[servers.d]\nurl = "{url}"\ncontrol = "none"\n'
        f'[benchmarks.gen]\nserver = "d"\nbuiltin = {{ {body} }}\n')
    return Session(load_config(tmp_path / "optui.toml"))


async def sweep(session: Session, spec: str):
    session.benches.run("gen", sweep=parse_sweep(spec))
    await session.benches.wait()
    return session.benches.current.view


async def test_every_point_of_a_sweep_misses_the_cache(tmp_path, demo_url):
    # on the old code every run sent the same prompts (seed 0): point 2 on was served by the cache
    s = campaign(tmp_path, demo_url)
    cached0, prompt0 = cached_and_prompt_tokens(demo_url)
    view = await sweep(s, "1,2,4 x2")
    cached1, prompt1 = cached_and_prompt_tokens(demo_url)
    assert view.status == "ok" and len(view.results) == 6, view.error
    assert prompt1 - prompt0 == 6 * 7 * IN_LEN  # 6 runs of 6 timed + 1 warm-up prompt
    assert cached1 - cached0 == 0  # the server's own count: not one prompt token came from its cache
    for result in view.results:
        assert result.extra["prefix_cache_hit_pct"] == 0.0 and result.extra["prefix_cache_source"] == "metrics"
        assert result.workload.prefix == "none"
    seeds = [r.workload.seed for r in view.results]
    assert None not in seeds and len(set(seeds)) == 6  # a fresh seed per point and repeat
    assert {r.result.workload.seed for r in s.journal.results()} == set(seeds)  # recorded in the journal
    assert any("Server prefix cache: 0.0% of prompt tokens" in line for line in s.benches.current.lines)
    # fresh seeds leave the workload (and so the comparison with the baseline) unchanged
    assert len({r.workload.key() for r in view.results if r.max_concurrency == 1}) == 1
    await s.close()


async def test_a_fixed_seed_reproduces_each_point_and_the_cache_shows_it(tmp_path, demo_url):
    s = campaign(tmp_path, demo_url, seed=4242)
    first = await sweep(s, "1,2")
    assert [r.workload.seed for r in first.results] == [4242, 4243]  # point k: seed + k
    assert all(r.extra["prefix_cache_hit_pct"] == 0.0 for r in first.results)
    again = await sweep(s, "1,2")  # the same prompts again: now the cache serves them
    hits = [r.extra["prefix_cache_hit_pct"] for r in again.results]
    assert all(h == pytest.approx(100.0 * (IN_LEN - 1) / IN_LEN) for h in hits), hits
    note = cache_share_note(again.results[0], first.results[0])
    assert note == "prefix cache 98% vs 0% in the baseline"
    await s.close()


async def test_a_shared_system_prompt_hits_the_cache(demo_url):
    result = await run_load(demo_url, input_len=IN_LEN, output_len=4, num_prompts=6, concurrency=1,
                            shared_tokens=48, warmup=1)
    assert result.status == "ok", result.error
    # the warm-up prefilled the system prompt; every timed prompt reuses its 48 tokens
    assert result.extra["prefix_cache_hit_pct"] == pytest.approx(100.0 * 48 / IN_LEN)
    assert result.workload.prefix == "shared:48" and result.total_input_tokens == 6 * IN_LEN
    # the server's own TTFT (its histogram over the timed run) lies inside optui's, which adds HTTP
    assert 0 < result.extra["server_ttft_mean_ms"] <= result.ttft_ms["mean"]
    lines = describe_server_side(result)
    assert "Server prefix cache: 75.0% of prompt tokens served from cache (/metrics)" in lines
    assert any(line.startswith("Server latency (/metrics means): TTFT ") for line in lines)
    none = Workload(tool="optui-loadgen", input_len=IN_LEN, prefix="none", seed=1)
    assert result.workload.key() != none.key()  # a different intended sharing is another workload


async def test_shared_prefix_from_the_config_and_a_dataset(tmp_path, demo_url):
    s = campaign(tmp_path, demo_url, prefix="{ shared_tokens = 32 }", prompts=4)
    view = await sweep(s, "2")
    assert view.status == "ok", view.error
    assert view.results[0].workload.prefix == "shared:32"
    assert view.results[0].extra["prefix_cache_hit_pct"] > 40.0
    await s.close()
    data = tmp_path / "prompts.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": f"{i} some words of prompt {i}"}) for i in range(10)) + "\n")
    s = campaign(tmp_path, demo_url, prefix=f'{{ dataset = "{data}" }}', prompts=4, warmup=2)
    view = await sweep(s, "1")
    result = view.results[0]
    assert view.status == "ok" and result.workload.dataset == str(data) and result.workload.prefix == "dataset"
    assert result.total_input_tokens == sum(len(p.prompt.split()) for p in
                                            plan_run(4, IN_LEN, 4, seed=result.workload.seed, warmup=2,
                                                     dataset=load_dataset(str(data))).timed)
    await s.close()
    data.write_text('{"prompt": "one"}\n{"prompt": 3}\n')
    s = campaign(tmp_path, demo_url, prefix=f'{{ dataset = "{data}" }}', prompts=1, warmup=0)
    view = await sweep(s, "1")
    assert view.status == "failed" and f"{data}:2: expected a non-empty \"prompt\" string" in view.error
    await s.close()


def test_seed_reproduces_the_prompts_and_warmup_prompts_are_disjoint():
    plan = plan_run(20, 32, 8, seed=11, warmup=5, random_lengths=True)
    assert plan == plan_run(20, 32, 8, seed=11, warmup=5, random_lengths=True)  # same seed, same prompts
    assert [p.prompt for p in plan.timed] == [p.prompt for p in plan_run(20, 32, 8, seed=11, warmup=0,
                                                                          random_lengths=True).timed]
    other = plan_run(20, 32, 8, seed=12, warmup=5, random_lengths=True)
    assert not {p.prompt for p in other.timed} & {p.prompt for p in plan.timed}
    timed, warm = [p.prompt for p in plan.timed], [p.prompt for p in plan.warmup]
    assert len(warm) == 5 and not set(warm) & set(timed)
    firsts = [p.split()[0] for p in timed + warm]
    assert len(set(firsts)) == len(firsts)  # prefix "none": no two prompts share even a first token
    shared = plan_run(4, 32, 8, seed=3, warmup=2, shared_tokens=20)
    prompts = [p.prompt.split() for p in shared.timed + shared.warmup]
    assert all(words[:20] == prompts[0][:20] and len(words) == 32 for words in prompts)
    assert len({words[20] for words in prompts}) == len(prompts)  # then each its own


def test_dataset_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('"a prompt"\n\nplain text prompt\n{"prompt": "x y"}\n{bad\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}:5: not valid JSON"):
        load_dataset(str(path))
    path.write_text('"a prompt"\n\nplain text prompt\n{"prompt": "x y"}\n')
    assert load_dataset(str(path)) == ["a prompt", "plain text prompt", "x y"]
    with pytest.raises(ValueError, match="the dataset has 3 prompts; this run needs 4"):
        plan_run(3, 8, 8, seed=1, warmup=1, dataset=load_dataset(str(path)))
    with pytest.raises(ValueError, match="cannot read the prompt dataset"):
        load_dataset(str(tmp_path / "missing.jsonl"))


def test_workload_key_ignores_the_seed_and_an_unstated_prefix():
    base = Workload(tool="optui-loadgen", dataset="random", input_len=64, output_len=8, num_prompts=6, max_concurrency=1)
    assert base.key() == Workload(**{**_fields(base), "seed": 5, "prefix": "none"}).key()
    assert base.key() != Workload(**{**_fields(base), "prefix": "shared:16"}).key()
    result = BenchResult(workload=Workload(**{**_fields(base), "seed": 5, "prefix": "none"}))
    assert BenchResult.from_json(result.to_json()).workload == result.workload


def test_cache_share_note_flags_only_differences_beyond_the_tolerance():
    def with_share(pct):
        r = BenchResult()
        if pct is not None:
            r.extra["prefix_cache_hit_pct"] = pct
        return r

    assert cache_share_note(with_share(3.0), with_share(0.0)) is None
    assert cache_share_note(with_share(98.9), with_share(0.0)) == "prefix cache 99% vs 0% in the baseline"
    assert cache_share_note(with_share(0.0), with_share(75.0)) == "prefix cache 0% vs 75% in the baseline"
    assert cache_share_note(with_share(None), with_share(75.0)) is None


def _fields(wl: Workload) -> dict:
    return {name: getattr(wl, name) for name in Workload.__slots__}


def test_prefix_cache_matches_leading_tokens_only():
    from optui.demo.prefix_cache import PrefixCache, prefix_hashes

    cache = PrefixCache(capacity=8)
    cache.insert(prefix_hashes("a b c d".split()))
    assert cache.match(prefix_hashes("a b c x y".split())) == 3
    assert cache.match(prefix_hashes("x b c d".split())) == 0  # differs from the first token: nothing shared
    cache.insert(prefix_hashes("p q r s t u".split()))  # 10 prefixes > capacity 8: the oldest go
    assert len(cache) == 8 and cache.match(prefix_hashes("a b c d".split())) == 2


async def test_demo_server_skips_the_prefill_of_a_cached_prefix_and_says_so(demo_url):
    system = " ".join(f"w{i}" for i in range(40))
    async with httpx.AsyncClient(base_url=demo_url, timeout=30) as client:
        metas = []
        for own in ("first request", "second one"):
            body = {"text": f"{system} {own}", "sampling_params": {"max_new_tokens": 2}}
            metas.append((await client.post("/generate", json=body)).json()["meta_info"])
        text = (await client.get("/metrics")).text
    assert [m["cached_tokens"] for m in metas] == [0, 40]  # the second prefills only its own 2 tokens
    rate = float(re.search(r"^sglang:cache_hit_rate\{[^}]*\} (\S+)$", text, re.M).group(1))
    assert rate == pytest.approx(40 / 42)  # SGLang's gauge: the last prefill batch's hit share
