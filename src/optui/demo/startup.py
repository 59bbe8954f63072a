"""The demo server's startup: SGLang's log phases, paced, with a simulated GPU memory plan.

At ``--demo-speed 1`` the phases take about 5 s before HTTP starts (plus ~1 s of warmup
in :mod:`optui.demo.fake_server`). Strings follow ``servers_and_bench.md`` section 4.1.
Failures: ``--mem-fraction-static`` above 0.95 raises a CUDA OOM while allocating the KV
cache, below 0.3 SGLang's "Not enough memory" error; both print a scheduler traceback.
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass

from optui.demo.server_args import server_args_repr
from optui.demo.sim_log import SimLog
from optui.demo.tqdm_text import timing, tqdm_line

#: One H200 as NVML reports it: total and driver-reserved memory (MiB).
H200_TOTAL_MIB = 143771.0
H200_RESERVED_MIB = 616.0
_CTX_MIB = 620.0  # CUDA context + NCCL buffers after "Init torch distributed"
_WEIGHTS_FRACTION = 0.26  # of one GPU at tp=1 (a ~18B-parameter bf16 model)
_KV_KIB_PER_TOKEN = 192.0  # bf16 K+V over all layers at tp=1 (48 layers x 8 heads x 128)
_SHARDS = 4
_SITE = "/usr/local/lib/python3.12/dist-packages/sglang/srt"


class StartupFailed(Exception):
    """Startup failed; the message was logged. ``exit_code`` is the process exit code."""

    def __init__(self, exit_code: int = 1) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


class Interrupted(Exception):
    """SIGTERM arrived during startup."""


@dataclass
class LiveState:
    """What the simulated GPUs show now: startup phase, memory per GPU (MiB), util (%)."""

    phase: str = "launching"
    mem_used_mib: float = 0.0
    util_pct: float = 0.0


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory (MiB) the server will use, and the KV capacity in tokens."""

    weights_mib: float
    kv_mib: float
    graph_mib: float
    kv_tokens: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MemoryPlan:
        tp = max(1, args.tp_size)
        weights = H200_TOTAL_MIB * _WEIGHTS_FRACTION / tp
        kv = H200_TOTAL_MIB * args.mem_fraction_static - weights - _CTX_MIB
        graph = 0.0 if args.disable_cuda_graph else 600.0 + 5.0 * args.cuda_graph_max_bs
        kib_per_token = _KV_KIB_PER_TOKEN / tp / (2 if args.kv_cache_dtype.startswith("fp8") else 1)
        tokens = int(max(kv, 0.0) * 1024 / kib_per_token)
        return cls(weights, kv, graph, tokens)


def avail_gb(used_mib: float) -> float:
    """Free memory of one simulated GPU in GB as SGLang logs it ("avail mem=...")."""
    return (H200_TOTAL_MIB - H200_RESERVED_MIB - used_mib) / 1024.0


def capture_batch_sizes(max_bs: int) -> list[int]:
    """SGLang's CUDA-graph batch sizes up to ``max_bs``: 1, 2, 4, 8, then steps of 8."""
    sizes = [bs for bs in [1, 2, 4, 8, *range(16, 1025, 8)] if bs <= max_bs]
    return sizes or [1]


class Startup:
    """Runs the startup phases for ``args``; :meth:`run` returns the memory plan."""

    def __init__(self, args: argparse.Namespace, log: SimLog, live: LiveState, stop: threading.Event) -> None:
        self.args, self.log, self.live, self.stop = args, log, live, stop
        self.plan = MemoryPlan.from_args(args)

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` / demo speed; raise :class:`Interrupted` on SIGTERM."""
        if self.stop.wait(seconds / self.args.demo_speed):
            raise Interrupted

    def run(self) -> MemoryPlan:
        a, log, live, plan = self.args, self.log, self.live, self.plan
        log.main(f"server_args={server_args_repr(a)}")
        self.pause(0.4)
        live.phase = "init_dist"
        log.scheduler("Init torch distributed begin.")
        self.pause(0.4)
        live.mem_used_mib = _CTX_MIB
        log.scheduler(f"Init torch distributed ends. mem usage={_CTX_MIB / 1024:.2f} GB")
        live.phase = "loading_weights"
        log.scheduler(f"Load weight begin. avail mem={avail_gb(live.mem_used_mib):.2f} GB")
        self._load_shards()
        log.scheduler(
            f"Load weight end. elapsed={2.0 / a.demo_speed:.2f} s, type=LlamaForCausalLM, "
            f"avail mem={avail_gb(live.mem_used_mib):.2f} GB, mem usage={plan.weights_mib / 1024:.2f} GB."
        )
        self.pause(0.2)
        self._check_memory()
        live.phase = "kv_cache"
        live.mem_used_mib += plan.kv_mib
        kv_gb = plan.kv_mib / 1024
        dtype = "torch.float8_e5m2" if a.kv_cache_dtype.startswith("fp8") else "torch.bfloat16"
        log.scheduler(
            f"KV Cache is allocated. dtype: {dtype}, #tokens: {plan.kv_tokens}, "
            f"K size: {kv_gb / 2:.2f} GB, V size: {kv_gb / 2:.2f} GB"
        )
        self.pause(0.2)
        log.scheduler(f"Memory pool end. avail mem={avail_gb(live.mem_used_mib):.2f} GB")
        if not a.disable_cuda_graph:
            self._capture_graphs()
        self.pause(0.2)
        log.scheduler(
            f"max_total_num_tokens={plan.kv_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
            f"max_prefill_tokens={a.max_prefill_tokens}, max_running_requests={a.max_running_requests}, "
            f"context_len={a.context_length}, available_gpu_mem={avail_gb(live.mem_used_mib):.2f} GB"
        )
        self.pause(0.3)
        return plan

    def _load_shards(self) -> None:
        started = time.monotonic()
        desc = "Loading safetensors checkpoint shards"
        for n in range(_SHARDS + 1):
            if n:
                self.pause(0.5)
                self.live.mem_used_mib += self.plan.weights_mib / _SHARDS
                self.live.util_pct = 3.0
            elapsed = time.monotonic() - started
            pct = 100 * n / _SHARDS
            self.log.write(f"{desc}: {pct:3.0f}% Completed | {n}/{_SHARDS} {timing(n, _SHARDS, elapsed)}\n")
        self.live.util_pct = 0.0

    def _check_memory(self) -> None:
        a, plan = self.args, self.plan
        if a.mem_fraction_static > 0.95:
            free_gib = max(0.4, (1.0 - a.mem_fraction_static) * H200_TOTAL_MIB / 1024 * 0.6)
            self._crash(
                "mem_cache/memory_pool.py", "_create_buffers", "torch.zeros(",
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                f"{plan.kv_mib / 1024 / 24:.2f} GiB. GPU 0 has a total capacity of "
                f"{(H200_TOTAL_MIB - H200_RESERVED_MIB) / 1024:.2f} GiB of which {free_gib:.2f} GiB is free. "
                f"Including non-PyTorch memory, this process has "
                f"{self.live.mem_used_mib / 1024 + plan.kv_mib / 1024 * 0.9:.2f} GiB memory in use. "
                "If reserved but unallocated memory is large try setting "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
                "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
            )
        if a.mem_fraction_static < 0.3 or plan.kv_tokens <= 0:
            self._crash(
                "model_executor/pool_configurator.py", "configure", "raise RuntimeError(",
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                f"Current value: mem_fraction_static={a.mem_fraction_static}",
            )

    def _crash(self, file: str, func: str, code: str, error: str) -> None:
        """Log SGLang's scheduler traceback ending in ``error``, then raise StartupFailed."""
        self.live.phase = "failed"
        frames = [
            ("managers/scheduler.py", 3012, "run_scheduler_process", "scheduler = Scheduler("),
            ("managers/scheduler.py", 402, "__init__", "self.init_model_worker()"),
            ("managers/tp_worker.py", 247, "__init__", "self._model_runner = ModelRunner("),
            ("model_executor/model_runner.py", 398, "initialize", "self.init_memory_pool(pre_model_load_memory)"),
            (file, 611, func, code),
        ]
        lines = ["Scheduler hit an exception: Traceback (most recent call last):"]
        for path, line, name, src in frames:
            lines.append(f'  File "{_SITE}/{path}", line {line}, in {name}')
            lines.append(f"    {src}")
        self.log.scheduler("\n".join(lines) + "\n" + error + "\n")
        self.log.main("Received sigquit from a child process. It usually means the child failed.")
        raise StartupFailed(1)

    def _capture_graphs(self) -> None:
        a, live, log = self.args, self.live, self.log
        live.phase = "cuda_graph"
        log.scheduler(
            f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail_gb(live.mem_used_mib):.2f} GB"
        )
        sizes = capture_batch_sizes(a.cuda_graph_max_bs)[::-1]
        started = time.monotonic()
        step_mem = self.plan.graph_mib / len(sizes)
        for n, bs in enumerate([*sizes, sizes[-1]]):
            if n:
                self.pause(1.5 / len(sizes))
                live.mem_used_mib += step_mem
                live.util_pct = 40.0
            desc = f"Capturing batches (bs={bs} avail_mem={avail_gb(live.mem_used_mib):.2f} GB)"
            done = min(n, len(sizes))
            log.write("\r" + tqdm_line(done, len(sizes), time.monotonic() - started, desc))
        log.write("\n")
        live.util_pct = 0.0
        elapsed = time.monotonic() - started
        log.scheduler(
            f"Capture cuda graph end. Time elapsed: {elapsed:.2f} s. mem usage={self.plan.graph_mib / 1024:.2f} GB. "
            f"avail mem={avail_gb(live.mem_used_mib):.2f} GB."
        )

