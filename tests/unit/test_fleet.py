"""The fleet's pure parts: the one PromQL query, the API answer, both exporters' series → one
record per GPU (None where a series is missing), staleness with its age. The real Prometheus
path is tests/process/test_fleet_prometheus.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from optui.config import Config
from optui.core.fleet.filter import FilterError, parse_host_filter
from optui.core.fleet.query import SAMPLE_TIME_LABEL, PromAnswerError, names_selector, parse_vector_answer, selector_matchers
from optui.core.fleet.readings import (
    GEN_RATE_LABEL,
    SERVER_TIME_LABEL,
    FleetGpu,
    FleetServer,
    FleetState,
    configured_server,
    fleet_query,
    fleet_server_at,
    host_of,
    records_from_samples,
    servers_from_samples,
)

DCGM_LABELS = {"gpu": "3", "UUID": "GPU-aaaa", "device": "nvidia3", "modelName": "NVIDIA H200",
               "Hostname": "node-7", "instance": "10.0.0.7:9400", "job": "dcgm"}
# nvidia_gpu_exporter's series carry the uuid only (its METRICS.md; uuid without "GPU-" there)
SMI_LABELS = {"uuid": "df6e7a7c-7314-46f8-abc4-b88b36dcf3aa", "instance": "box:9835", "job": "smi"}


def answer(series: list[tuple[str, dict, float, str]]) -> str:
    result = []
    for name, labels, at, value in series:
        metric = dict(labels)
        if name:
            metric["__name__"] = name
        result.append({"metric": metric, "value": [at, value]})
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def dcgm_answer(at: float = 1000.0, sample_at: float = 999.5, omit: tuple[str, ...] = ()) -> str:
    values = {"DCGM_FI_DEV_FB_USED": "41971", "DCGM_FI_DEV_FB_FREE": "101184", "DCGM_FI_DEV_FB_RESERVED": "616",
              "DCGM_FI_DEV_GPU_UTIL": "100", "DCGM_FI_DEV_MEM_COPY_UTIL": "23", "DCGM_FI_DEV_GPU_TEMP": "56",
              "DCGM_FI_DEV_POWER_USAGE": "683.1"}
    series = [(name, DCGM_LABELS, at, value) for name, value in values.items() if name not in omit]
    series.append(("", {**{k: v for k, v in DCGM_LABELS.items()}, SAMPLE_TIME_LABEL: "1"}, at, str(sample_at)))
    return answer(series)


def test_the_one_query_reads_every_gpu_series_with_the_users_selector():
    query = fleet_query('{cluster="a", env!="dev"}')
    head, times, servers, rate, server_times = query.split(" or ")
    assert head.startswith('max by (__name__, UUID, gpu, modelName, Hostname, uuid, index, name, instance, job) '
                           '({__name__=~"DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE|DCGM_FI_DEV_FB_RESERVED|')
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_GPU_TEMP",
                 "DCGM_FI_DEV_POWER_USAGE", "nvidia_smi_memory_used_bytes", "nvidia_smi_gpu_info"):
        assert name in head
    assert head.endswith(',cluster="a", env!="dev"})')
    assert all('cluster="a"' in part for part in (times, servers, rate, server_times))  # every part has the selector
    assert server_times.startswith("label_replace(max by (instance, job) (timestamp(") and SERVER_TIME_LABEL in server_times
    assert "vllm:num_requests_running" in servers and "sglang:token_usage" in servers
    assert servers.startswith("sum by (__name__, instance, job, model_name) (")
    assert 'irate({__name__=~"sglang:generation_tokens_total|vllm:generation_tokens_total|' in query
    assert "timestamp(" in query and SAMPLE_TIME_LABEL in query
    assert names_selector(["up"]) == '{__name__=~"up"}'
    assert selector_matchers(None) == selector_matchers("{}") == ""
    with pytest.raises(ValueError):
        selector_matchers('cluster="a"')
    with pytest.raises(ValueError):
        names_selector(['up"} or vector(1) or {x="'])


def test_a_dcgm_answer_is_one_record_per_gpu_in_optuis_units():
    [gpu] = records_from_samples(parse_vector_answer(dcgm_answer()))
    assert (gpu.host, gpu.index, gpu.uuid, gpu.model, gpu.exporter) == ("node-7", 3, "GPU-aaaa", "NVIDIA H200", "dcgm")
    assert (gpu.mem_used_mib, gpu.mem_free_mib, gpu.mem_reserved_mib) == (41971, 101184, 616)
    assert (gpu.util_gpu_pct, gpu.util_mem_pct, gpu.temp_c, gpu.power_w) == (100, 23, 56, 683.1)
    assert gpu.mem_total_mib == 41971 + 101184 + 616
    assert gpu.sampled_at == 999.5  # the scrape's time, not the query's
    assert gpu.to_json()["mem_free_mib"] == 101184


def test_a_missing_series_is_none_never_zero():
    [gpu] = records_from_samples(parse_vector_answer(dcgm_answer(omit=("DCGM_FI_DEV_FB_RESERVED",
                                                                        "DCGM_FI_DEV_MEM_COPY_UTIL"))))
    assert gpu.mem_reserved_mib is None and gpu.util_mem_pct is None
    assert gpu.to_json()["util_mem_pct"] is None
    nan = answer([("DCGM_FI_DEV_FB_USED", DCGM_LABELS, 1.0, "NaN"), ("DCGM_FI_DEV_GPU_TEMP", DCGM_LABELS, 1.0, "40")])
    [gpu] = records_from_samples(parse_vector_answer(nan))
    assert gpu.mem_used_mib is None and gpu.temp_c == 40 and gpu.power_w is None


def test_nvidia_gpu_exporter_series_are_the_second_mapping():
    info = {**SMI_LABELS, "name": "NVIDIA GeForce RTX 2080 SUPER", "index": "0", "pci_bus_id": "00000000:71:00.0"}
    text = answer([
        ("nvidia_smi_gpu_info", info, 5.0, "1"),
        ("nvidia_smi_memory_used_bytes", SMI_LABELS, 5.0, "7.06740224e+08"),
        ("nvidia_smi_memory_free_bytes", SMI_LABELS, 5.0, "7.883194368e+09"),
        ("nvidia_smi_utilization_gpu_ratio", SMI_LABELS, 5.0, "0.42"),
        ("nvidia_smi_utilization_memory_ratio", SMI_LABELS, 5.0, "0.05"),
        ("nvidia_smi_temperature_gpu", SMI_LABELS, 5.0, "34"),
        ("nvidia_smi_power_draw_watts", SMI_LABELS, 5.0, "28.07"),
        ("", {**SMI_LABELS, SAMPLE_TIME_LABEL: "1"}, 5.0, "4.25"),
    ])
    [gpu] = records_from_samples(parse_vector_answer(text))
    assert (gpu.host, gpu.index, gpu.model, gpu.exporter) == ("box", 0, "NVIDIA GeForce RTX 2080 SUPER", "nvidia_smi")
    assert gpu.mem_used_mib == pytest.approx(674.0) and gpu.mem_free_mib == pytest.approx(7518.0)
    assert gpu.util_gpu_pct == pytest.approx(42.0) and gpu.util_mem_pct == pytest.approx(5.0)
    assert (gpu.temp_c, gpu.power_w, gpu.mem_reserved_mib, gpu.sampled_at) == (34, 28.07, None, 4.25)


def test_the_host_is_the_hostname_label_else_the_instance_without_its_port():
    assert host_of({"Hostname": "n1", "instance": "10.0.0.1:9400"}, "Hostname") == "n1"
    assert host_of({"instance": "10.0.0.1:9400"}, "Hostname") == "10.0.0.1"
    assert host_of({"instance": "[fd00::1]:9400"}, None) == "fd00::1"
    assert host_of({}, None) == "?"


def test_a_gpu_without_new_samples_for_three_intervals_is_stale_with_its_age():
    state = FleetState(interval_s=2.0)
    first = state.update(parse_vector_answer(dcgm_answer(at=1000.0, sample_at=1000.0)), now=1000.2)
    assert not first.gpus[0].stale and first.gpus[0].age_s == pytest.approx(0.2)
    # one sample only: its exporter's scrape interval is unknown (Prometheus's default: 1 min)
    assert not state.update([], now=1170.0).gpus[0].stale
    assert FleetState(2.0).update(parse_vector_answer(dcgm_answer(sample_at=1000.0)), now=1181.0).gpus[0].stale
    state.update(parse_vector_answer(dcgm_answer(at=1002.0, sample_at=1001.0)), now=1002.0)
    # the exporter stopped: Prometheus marks its series stale, they leave the answer
    gone = state.update(parse_vector_answer(answer([])), now=1006.9)
    assert len(gone.gpus) == 1 and not gone.gpus[0].stale  # 5.9 s old: within 3 x 2 s
    late = state.update(parse_vector_answer(answer([])), now=1007.5)
    assert late.gpus[0].stale and late.gpus[0].age_s == pytest.approx(6.5)
    assert late.gpus[0].mem_used_mib == 41971  # the last values, shown as stale
    failed = state.failed("Prometheus at http://p:9090 did not answer within 5 s", now=1008.0)
    assert failed.error.startswith("Prometheus") and failed.gpus[0].stale and failed.series == 0


def test_a_slow_scrape_widens_the_stale_window():
    state = FleetState(interval_s=1.0)
    state.update(parse_vector_answer(dcgm_answer(sample_at=100.0)), now=100.0)
    state.update(parse_vector_answer(dcgm_answer(sample_at=115.0)), now=115.0)  # scraped every 15 s
    assert not state.update([], now=150.0).gpus[0].stale  # 35 s < 3 x 15 s
    assert state.update([], now=161.0).gpus[0].stale


@pytest.mark.parametrize("body, says", [
    (b"<html>login</html>", "not JSON"),
    (b"[1, 2]", "no JSON object"),
    (json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}), "bad_data"),
    (json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}), "expected a vector"),
    (json.dumps({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}), "malformed"),
])
def test_an_answer_that_is_not_a_vector_is_a_clear_error(body, says):
    with pytest.raises(PromAnswerError, match=says):
        parse_vector_answer(body)


def test_the_fleet_table_of_the_config():
    cfg = Config.model_validate({"fleet": {"prometheus": "http://prom.example:9090", "bearer_token_env": "PROM_TOKEN",
                                           "selector": '{cluster="a"}', "interval_s": 2}})
    assert cfg.fleet.interval_s == 2 and cfg.fleet.timeout_s == 5
    assert Config().fleet is None
    for bad in ({"prometheus": "prom:9090"}, {"prometheus": "http://p", "selector": 'cluster="a"'},
                {"prometheus": "http://p", "bearer_token_env": "my token"}, {"prometheus": "http://p", "interval_s": 0}):
        with pytest.raises(ValueError):
            Config.model_validate({"fleet": bad})


def test_inference_servers_series_are_one_record_per_server():
    vllm = {"instance": "node-7:8000", "job": "vllm", "model_name": "llama", "engine": "0"}
    text = answer([
        ("vllm:num_requests_running", vllm, 1.0, "12"),
        ("vllm:num_requests_running", {**vllm, "engine": "1"}, 1.0, "4"),  # two engines: summed
        ("vllm:gpu_cache_usage_perc", vllm, 1.0, "0.5"),  # the pre-0.10 name
        ("", {"instance": "node-7:8000", "job": "vllm", GEN_RATE_LABEL: "1"}, 1.0, "812.5"),
        ("llamacpp:requests_processing", {"instance": "node-8:8080", "job": "llama"}, 1.0, "1"),
    ])
    servers = servers_from_samples(parse_vector_answer(text))
    assert [(s.host, s.kind) for s in servers] == [("node-7", "vllm"), ("node-8", "llamacpp")]
    v, llama = servers
    assert (v.running, v.waiting, v.kv_cache_pct, v.gen_tok_s, v.model) == (16, None, 50, 812.5, "llama")
    assert (llama.running, llama.kv_cache_pct, llama.gen_tok_s) == (1, None, None)
    assert records_from_samples(parse_vector_answer(text)) == []  # no GPU from a server's series
    snap = FleetState(2.0).update(parse_vector_answer(text), now=2.0)
    assert snap.servers_by_host()["node-7"] == (replace(v, age_s=1.0),)  # sampled at the answer's time


def test_a_fleet_server_at_a_configured_servers_address_is_that_server():
    server = FleetServer(host="node-7", instance="node-7:8000", kind="vllm")
    assert configured_server(server, {"a": "http://node-6:8000", "qwen": "http://NODE-7:8000/"}) == "qwen"
    assert configured_server(server, {"a": "http://node-7:8001"}) is None
    assert configured_server(FleetServer("p", "p:80", "sglang"), {"web": "http://p"}) == "web"
    # the other way: a configured server's url finds its fleet series
    assert fleet_server_at("http://NODE-7:8000/v1", [FleetServer("p", "p:80", "sglang"), server]) is server
    assert fleet_server_at("http://node-7:8001", [server]) is None and fleet_server_at("not a url", [server]) is None
    ipv6 = FleetServer(host="::1", instance="[::1]:30000", kind="sglang")
    assert fleet_server_at("http://[::1]:30000", [ipv6]) is ipv6 and configured_server(ipv6, {"s": "http://[::1]:30000"}) == "s"


def test_a_server_without_new_samples_for_three_intervals_is_stale_with_its_age():
    """Issue 21: stale inference-server series show as stale with their age, like GPUs (a server
    that left the answer was dropped at once)."""
    vllm = {"instance": "node-7:8000", "job": "vllm"}

    def scraped(at: float) -> list:
        return parse_vector_answer(answer([("vllm:num_requests_running", vllm, at + 0.3, "12"),
                                           ("", {**vllm, SERVER_TIME_LABEL: "1"}, at + 0.3, str(at))]))
    state = FleetState(interval_s=2.0)
    state.update(scraped(1000.0), now=1000.3)
    fresh = state.update(scraped(1002.0), now=1002.3).servers[0]  # its scrape gap: 2 s
    assert (fresh.sampled_at, fresh.stale, fresh.running) == (1002.0, False, 12) and fresh.age_s == pytest.approx(0.3)
    # its exporter stopped: the series left the answer; the server stays, aging
    assert not state.update([], now=1007.9).servers[0].stale  # 5.9 s: within 3 x 2 s
    late = state.update([], now=1008.5).servers[0]
    assert late.stale and late.age_s == pytest.approx(6.5) and late.running == 12
    assert state.failed("Prometheus at http://p:9090 did not answer within 5 s", now=1009.0).servers[0].stale
    assert late.to_json()["stale"] is True and late.to_json()["age_s"] == pytest.approx(6.5)


def fgpu(host: str = "a", **values) -> FleetGpu:
    """A fleet GPU with ``values`` (the others n/a)."""
    return FleetGpu(host=host, index=0, uuid=f"GPU-{host}", model="NVIDIA H200", exporter="dcgm", **values)


BIG = dict(mem_used_mib=100_000.0, mem_free_mib=43_000.0, mem_reserved_mib=771.0, util_gpu_pct=3.0, temp_c=81.0,
           power_w=350.0)


@pytest.mark.parametrize("text, shown", [
    ("", True), ("a*", True), ("b*", False), ("b* a", True),  # globs: any of them
    ("free>40G", True), ("free>42GiB", False), ("free>=43000M", True), ("free>43000MiB", False),
    ("free > 40G", True), ("FREE>40g", True), ("free>29%", True), ("free>30%", False),
    ("used<1T", True), ("util<10", True), ("util<3%", False), ("util<=3", True), ("util=3", True),
    ("temp>80", True), ("temp>80C", True), ("temp>81", False), ("power>=350W", True), ("power<100", False),
    ("a* free>40G util<10 temp>80", True), ("a* free>40G util>10", False), ("idle", True), ("idle temp<50", False),
])
def test_the_host_filter_reads_globs_and_thresholds(text, shown):
    flt = parse_host_filter(text)
    assert flt.matches("a", [fgpu(**BIG)]) is shown


def test_a_threshold_is_met_by_one_gpu_on_its_own_and_never_by_na_or_stale():
    busy_full = fgpu(**{**BIG, "util_gpu_pct": 90.0, "mem_free_mib": 1000.0, "mem_used_mib": 142_000.0})
    idle_empty = fgpu(**{**BIG, "util_gpu_pct": 0.0, "mem_free_mib": 143_000.0, "mem_used_mib": 0.0})
    both = parse_host_filter("free>40G util<10")
    assert both.matches("a", [busy_full, idle_empty])  # idle_empty meets both
    assert not parse_host_filter("free>40G util>50").matches("a", [busy_full, idle_empty])  # no GPU meets both
    na = fgpu()  # every value n/a
    for text in ("free>0G", "free<1000T", "used<1G", "free<50%", "util<100", "util>=0", "temp<1000", "power>=0",
                 "idle"):
        assert not parse_host_filter(text).matches("a", [na]), text
    assert not parse_host_filter("free>40G").matches("a", [replace(fgpu(**BIG), stale=True)])
    assert parse_host_filter("a").matches("a", [na])  # a glob alone shows any host
    assert parse_host_filter("").matches("a", [])


@pytest.mark.parametrize("text, says", [
    ("foo>3", "unknown field 'foo' in 'foo>3'"), ("free>40", "'free>40' needs a unit"),
    ("free>40X", "unknown unit 'X' in 'free>40X'"), ("util<10G", "unknown unit 'G' in 'util<10G'"),
    ("temp>hot", "'temp>hot' needs a number"), ("free>", "'free>' needs a number"), (">3", "'>3' needs a field"),
    ("gpu-a*>3", "cannot read 'gpu-a*>3'"), ("free>150%", "'free>150%'"), ("a* util<1 free>>4G", "'free>>4G'"),
])
def test_a_bad_filter_term_is_a_clear_error_naming_it(text, says):
    with pytest.raises(FilterError) as err:
        parse_host_filter(text)
    assert says in str(err.value)


def test_the_host_filter_text_is_normalized():
    assert parse_host_filter("  gpu-a*   free > 40G  idle util<=10% ").text == "gpu-a* free>40G util<=10% idle"
    assert parse_host_filter("   ").text == ""
