"""JSON and Prometheus bodies of the demo server's read-only endpoints.

Shapes follow SGLang 0.5.23 (``servers_and_bench.md`` sections 1.2 and 2.1). Each function
takes the server's ``runtime`` (see :class:`optui.demo.fake_server.Runtime`) and returns a
``dict`` (JSON) or ``str`` (Prometheus text).
"""

from __future__ import annotations

import datetime as dt
import math
import time

from optui.demo.scheduler import TTFT_BUCKETS

VERSION = "0.5.23-demo"


def model_card(runtime) -> dict:
    """One ``/v1/models`` ModelCard."""
    name = runtime.args.served_model_name
    return {
        "id": name,
        "object": "model",
        "created": int(runtime.started_wall),
        "owned_by": "sglang",
        "root": name,
        "parent": None,
        "max_model_len": runtime.args.context_length,
    }


def models(runtime) -> dict:
    """``GET /v1/models``."""
    return {"object": "list", "data": [model_card(runtime)]}


def model_info(runtime) -> dict:
    """``GET /model_info`` (and the deprecated ``/get_model_info``)."""
    a = runtime.args
    return {
        "model_path": a.model_path,
        "served_model_name": a.served_model_name,
        "tokenizer_path": a.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": "null",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
    }


def _internal_state(runtime) -> dict:
    a, plan, sched = runtime.args, runtime.plan, runtime.scheduler
    return {
        "world_size": a.tp_size,
        "effective_max_running_requests_per_dp": a.max_running_requests,
        "last_gen_throughput": sched.counters.gen_throughput if sched else 0.0,
        "memory_usage": {
            "weight": round(plan.weights_mib / 1024, 2),
            "kvcache": round(plan.kv_mib / 1024, 2),
            "token_capacity": plan.kv_tokens,
            "graph": {"decode": round(plan.graph_mib / 1024, 2)},
        },
        "avg_spec_accept_length": None,
        "load": sched.load()["running"] if sched else 0,
    }


def server_info(runtime) -> dict:
    """``GET /server_info``: resolved args, launch command, scheduler info, internal state."""
    a = runtime.args
    out = {k: v for k, v in vars(a).items() if k != "api_key"}
    out["api_key"] = None if a.api_key is None else "***"
    out["launch_command"] = runtime.launch_command
    out["status"] = "ready"
    out["max_total_num_tokens"] = runtime.plan.kv_tokens
    out["max_req_input_len"] = a.context_length - 1
    out["startup_time"] = runtime.startup_time_s
    out["internal_states"] = [_internal_state(runtime)]
    out["version"] = VERSION
    out["frontend"] = "python"
    return out


def loads(runtime) -> dict:
    """``GET /v1/loads``: one DP rank's load."""
    a, sched = runtime.args, runtime.scheduler
    load = sched.load() if sched else {"running": 0, "queued": 0, "used_tokens": 0, "token_usage": 0.0}
    c = sched.counters if sched else None
    now = dt.datetime.now(dt.UTC).isoformat()
    entry = {
        "timestamp": now,
        "dp_rank": 0,
        "num_running_reqs": load["running"],
        "num_waiting_reqs": load["queued"],
        "num_used_tokens": load["used_tokens"],
        "num_total_tokens": runtime.plan.kv_tokens,
        "max_total_num_tokens": runtime.plan.kv_tokens,
        "max_running_requests": a.max_running_requests,
        "token_usage": round(load["token_usage"], 4),
        "gen_throughput": round(c.gen_throughput, 2) if c else 0.0,
        "cache_hit_rate": round(c.cache_hit_rate, 4) if c else 0.0,
        "utilization": runtime.live.util_pct / 100.0,
    }
    return {"timestamp": now, "version": VERSION, "accelerator": "cuda", "num_accelerators": a.tp_size, "loads": [entry]}


def go_float(value: float) -> str:
    """A number as prometheus_client prints it (``37.0``, ``1.23456e+06``, ``+Inf``)."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def metrics(runtime) -> str:
    """``GET /metrics`` (only with ``--enable-metrics``): SGLang's Prometheus text."""
    model = runtime.args.served_model_name
    sched = runtime.scheduler
    load = sched.load()
    c = sched.counters
    created = go_float(runtime.started_wall)
    rank = _labels(engine_type="unified", model_name=model, pp_rank="0", tp_rank="0")
    tok = _labels(model_name=model)
    out: list[str] = []
    gauges = (
        ("num_running_reqs", "The number of running requests.", load["running"]),
        ("num_queue_reqs", "The number of requests in the waiting queue.", load["queued"]),
        ("num_used_tokens", "The number of used tokens.", load["used_tokens"]),
        ("token_usage", "The token usage.", load["token_usage"]),
        ("gen_throughput", "The generation throughput (token/s).", c.gen_throughput),
        ("cache_hit_rate", "The prefix cache hit rate.", c.cache_hit_rate),
        ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", runtime.plan.kv_tokens),
        ("utilization", "The utilization.", runtime.live.util_pct / 100.0),
    )
    for name, help_text, value in gauges:
        out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} gauge", f"sglang:{name}{rank} {go_float(value)}"]
    counters = (
        ("prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens),
        ("generation_tokens", "Number of generation tokens processed.", c.generation_tokens),
        ("cached_tokens", "Number of cached prompt tokens.", c.cached_tokens),
        ("num_requests", "Number of requests processed.", c.requests),
        ("num_aborted_requests", "Number of requests aborted.", c.aborted),
    )
    for name, help_text, value in counters:
        out += [
            f"# HELP sglang:{name}_total {help_text}",
            f"# TYPE sglang:{name}_total counter",
            f"sglang:{name}_total{tok} {go_float(value)}",
            f"sglang:{name}_created{tok} {created}",
        ]
    hist = "sglang:time_to_first_token_seconds"
    out += [f"# HELP {hist} Histogram of time to first token in seconds.", f"# TYPE {hist} histogram"]
    cumulative = 0
    for le, count in zip(TTFT_BUCKETS, c.ttft_buckets):
        cumulative += count
        out.append(f"{hist}_bucket{_labels(le=go_float(le), model_name=model)} {go_float(cumulative)}")
    out += [
        f"{hist}_count{tok} {go_float(c.ttft_count)}",
        f"{hist}_sum{tok} {go_float(c.ttft_sum)}",
        f"{hist}_created{tok} {created}",
    ]
    return "\n".join(out) + "\n"


def _hms(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))


def health_failure_line(last_output_wall: float, timeout_s: float) -> str:
    """SGLang's log line for a failed ``/health`` of a hung server."""
    return (
        f"Health check failed. Server couldn't get a response from detokenizer for last {timeout_s:g} seconds. "
        f"tic start time: {_hms(time.time())}. last_heartbeat time: {_hms(last_output_wall)}"
    )
