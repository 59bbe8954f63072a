"""The demo server's simulated scheduler: continuous batching with a flag-driven cost model.

One thread runs the loop. Requests wait in a queue until fewer than
``max_running_requests`` run; admitted requests are prefilled in chunks of
``chunked_prefill_size`` tokens (a prefill step blocks decoding, like SGLang without mixed
chunks), then every decode step gives each running request one token. Costs (ms):

- decode step: ``base + 0.15 * batch``; base 6 with CUDA graphs (batch ≤ cuda-graph-max-bs),
  14 without; divided by a tensor-parallel speedup ``1 + 0.3 * log2(tp)``;
- prefill chunk: ``(4 + 0.015 * tokens) / speedup`` per chunk, so TTFT grows with prompt
  length and with the number of chunks.

Prefix cache (on unless ``--disable-radix-cache``, like SGLang's radix cache,
:mod:`optui.demo.prefix_cache`): when a request is admitted, the leading tokens an earlier
request already prefilled are skipped (all but the last, which yields the first token);
a prompt's prefixes are remembered once its prefill is done. ``/metrics`` counts them like
SGLang: ``sglang:cached_tokens_total`` of ``sglang:prompt_tokens_total`` (every prompt token,
cached or not), ``sglang:cache_hit_rate`` of the last prefill batch.

Noise (``--demo-noise F``, off by default): every burst of work (the loop waking from idle)
runs all its steps ``slowdown`` times as long, drawn uniformly from ``[1 - F, 1 + F]`` by a
generator seeded with ``--demo-noise-seed`` (default: fresh per process, so a restart moves
the level too). A benchmark run at concurrency > 1 is one burst, so its throughput varies
from run to run like a real server's; requests sent one at a time average it out.

Each request has its own queue of events (a token count per token, ``None`` at the end),
read by the HTTP thread streaming it. When nothing runs the thread blocks on a condition.
"""

from __future__ import annotations

import itertools
import math
import queue
import random
import threading
import time
from dataclasses import dataclass, field

from optui.demo.prefix_cache import PrefixCache
from optui.demo.sim_log import SimLog

#: TTFT histogram bucket upper bounds in seconds (SGLang's defaults, shortened).
TTFT_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, math.inf)
_ids = itertools.count(1)


@dataclass(eq=False)
class SimRequest:
    """One generation request. Token counts are tokens; times are ``time.monotonic()``.
    ``prefix_hashes``: :func:`optui.demo.prefix_cache.prefix_hashes` of its prompt."""

    prompt_tokens: int
    max_new_tokens: int
    prefix_hashes: tuple[int, ...] = ()
    rid: str = field(default_factory=lambda: f"{next(_ids):032x}")
    created: float = field(default_factory=time.monotonic)
    cached_tokens: int = 0
    prefill_left: int = 0
    generated: int = 0
    first_token_at: float | None = None
    aborted: bool = False
    events: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)


@dataclass(frozen=True)
class CostModel:
    """Step costs derived from the launch flags (see module docstring)."""

    tp_size: int = 1
    cuda_graph_max_bs: int = 64  # 0 = CUDA graphs disabled

    @property
    def speedup(self) -> float:
        return 1.0 + 0.3 * math.log2(max(1, self.tp_size))

    def uses_graph(self, batch: int) -> bool:
        return 0 < batch <= self.cuda_graph_max_bs

    def decode_s(self, batch: int) -> float:
        """Seconds for one decode step of ``batch`` running requests."""
        base = 6.0 if self.uses_graph(batch) else 14.0
        return (base / self.speedup + 0.15 * batch) / 1000.0

    def prefill_s(self, tokens: int) -> float:
        """Seconds for one prefill chunk of ``tokens`` tokens."""
        return (4.0 + 0.015 * tokens) / self.speedup / 1000.0


@dataclass
class Counters:
    """Cumulative and last-interval statistics (the ``/metrics`` source)."""

    prompt_tokens: int = 0  # every prompt token of prefilled requests, cached ones included
    generation_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the prefix cache
    requests: int = 0
    aborted: int = 0
    gen_throughput: float = 0.0  # tok/s over the last decode-log interval
    cache_hit_rate: float = 0.0  # of the last prefill batch
    busy_s: float = 0.0  # seconds spent in steps (GPU "busy")
    ttft_buckets: list[int] = field(default_factory=lambda: [0] * len(TTFT_BUCKETS))
    ttft_sum: float = 0.0
    ttft_count: int = 0


class Scheduler:
    """The simulated scheduler thread (start with :meth:`start`, stop with :meth:`stop`).

    ``hang_at``: a ``time.monotonic()`` instant after which no token is produced any more
    (requests stay running), or None.
    """

    def __init__(
        self,
        log: SimLog,
        *,
        max_running: int,
        chunked_prefill: int,
        max_total_tokens: int,
        cost: CostModel,
        radix_cache: bool = True,
        decode_log_interval: int = 40,
        noise: float = 0.0,
        noise_seed: int | None = None,
    ) -> None:
        self.log = log
        self.noise = noise  # see module doc: per-burst slowdown in [1 - noise, 1 + noise]
        self._noise_rng = random.Random(noise_seed)
        self.slowdown = 1.0
        self.max_running = max(1, max_running)
        self.chunked_prefill = max(1, chunked_prefill)
        self.max_total_tokens = max(1, max_total_tokens)
        self.cost = cost
        self.radix_cache = radix_cache
        self.decode_log_interval = max(1, decode_log_interval)
        self.hang_at: float | None = None
        self.counters = Counters()
        self._cond = threading.Condition()
        self._waiting: list[SimRequest] = []
        self._running: list[SimRequest] = []
        self.prefix_cache = PrefixCache()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    # ------------------------------------------------------------------ API
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and end every open stream (their queues get ``None``)."""
        with self._cond:
            self._stopping = True
            for req in self._waiting + self._running:
                req.events.put(None)
            self._waiting.clear()
            self._running.clear()
            self._cond.notify_all()

    @property
    def hung(self) -> bool:
        return self.hang_at is not None and time.monotonic() >= self.hang_at

    def submit(self, req: SimRequest) -> SimRequest:
        """Queue ``req``; its tokens arrive on ``req.events``."""
        with self._cond:
            if self._stopping:
                req.events.put(None)
                return req
            req.prefill_left = max(1, req.prompt_tokens)
            self._waiting.append(req)
            self._cond.notify_all()
        return req

    def abort(self, req: SimRequest) -> None:
        """Drop ``req`` (its client went away)."""
        with self._cond:
            req.aborted = True
            self._cond.notify_all()

    def load(self) -> dict:
        """Live numbers: running, queued, used_tokens, token_usage (0..1)."""
        with self._cond:
            used = sum(r.prompt_tokens + r.generated for r in self._running)
            return {
                "running": len(self._running),
                "queued": len(self._waiting),
                "used_tokens": used,
                "token_usage": used / self.max_total_tokens,
            }

    # ----------------------------------------------------------------- loop
    def _loop(self) -> None:
        decode_steps = 0
        interval_tokens = 0
        interval_start = time.monotonic()
        while True:
            with self._cond:
                was_idle = not (self._waiting or self._running)
                while not self._stopping and (self.hung or not (self._waiting or self._running)):
                    self._cond.wait()
                if self._stopping:
                    return
                if was_idle and self.noise:  # a new burst of work: a new speed level
                    self.slowdown = self._noise_rng.uniform(1.0 - self.noise, 1.0 + self.noise)
                self._drop_aborted()
                self._admit()
                prefill = [r for r in self._running if r.prefill_left > 0]
            if prefill:
                self._prefill_step(prefill)
                continue
            tokens, batch = self._decode_step()
            decode_steps += 1
            interval_tokens += tokens
            if decode_steps % self.decode_log_interval == 0:
                now = time.monotonic()
                self.counters.gen_throughput = interval_tokens / max(now - interval_start, 1e-9)
                interval_tokens, interval_start = 0, now
                self._log_decode(batch)

    def _drop_aborted(self) -> None:
        for group in (self._waiting, self._running):
            gone = [r for r in group if r.aborted]
            for req in gone:
                group.remove(req)
                self.counters.aborted += 1

    def _admit(self) -> None:
        used = sum(r.prompt_tokens + r.max_new_tokens for r in self._running)
        while self._waiting and len(self._running) < self.max_running:
            nxt = self._waiting[0]
            need = nxt.prompt_tokens + nxt.max_new_tokens
            if self._running and used + need > self.max_total_tokens:
                break  # KV pool full: wait for running requests to finish
            self._running.append(self._waiting.pop(0))
            used += need
            if self.radix_cache and nxt.prefix_hashes:
                nxt.cached_tokens = min(self.prefix_cache.match(nxt.prefix_hashes), max(0, nxt.prompt_tokens - 1))
                nxt.prefill_left = max(1, nxt.prompt_tokens - nxt.cached_tokens)

    def _sleep(self, seconds: float, started: float) -> None:
        seconds *= self.slowdown
        left = seconds - (time.monotonic() - started)
        if left > 0:
            time.sleep(left)
        self.counters.busy_s += seconds

    def _prefill_step(self, prefill: list[SimRequest]) -> None:
        started = time.monotonic()
        budget, new_tokens, done = self.chunked_prefill, 0, []
        for req in prefill:
            take = min(budget, req.prefill_left)
            req.prefill_left -= take
            new_tokens += take
            budget -= take
            if req.prefill_left == 0:
                done.append(req)
            if budget == 0:
                break
        self._sleep(self.cost.prefill_s(new_tokens), started)
        cached = sum(r.cached_tokens for r in done)
        with self._cond:
            c = self.counters
            c.prompt_tokens += new_tokens + cached
            if self.radix_cache:
                for req in done:
                    self.prefix_cache.insert(req.prefix_hashes)
            c.cached_tokens += cached
            c.cache_hit_rate = cached / max(1, cached + new_tokens)
            load_usage = sum(r.prompt_tokens + r.generated for r in self._running) / self.max_total_tokens
            self.log.scheduler(
                f"Prefill batch. #new-seq: {len(done)}, #new-token: {new_tokens}, #cached-token: {cached}, "
                f"token usage: {load_usage:.2f}, #running-req: {len(self._running) - len(done)}, "
                f"#queue-req: {len(self._waiting)}, "
            )
            if not (self.hung or self._stopping):
                for req in done:  # the last prefill chunk yields the first token
                    self._emit(req)

    def _decode_step(self) -> tuple[int, int]:
        started = time.monotonic()
        with self._cond:
            batch = [r for r in self._running if r.prefill_left == 0 and not r.aborted]
        self._sleep(self.cost.decode_s(len(batch)), started)
        with self._cond:
            if self.hung or self._stopping:
                return 0, len(batch)
            for req in batch:
                if not req.aborted:
                    self._emit(req)
        return len(batch), len(batch)

    def _emit(self, req: SimRequest) -> None:
        """Give ``req`` one token (caller holds the lock); finish it at max_new_tokens."""
        now = time.monotonic()
        req.generated += 1
        self.counters.generation_tokens += 1
        if req.first_token_at is None:
            req.first_token_at = now
            ttft = now - req.created
            c = self.counters
            c.ttft_sum += ttft
            c.ttft_count += 1
            c.ttft_buckets[next(i for i, le in enumerate(TTFT_BUCKETS) if ttft <= le)] += 1
        req.events.put(req.generated)
        if req.generated >= req.max_new_tokens:
            req.events.put(None)
            self._running.remove(req)
            self.counters.requests += 1

    def _log_decode(self, batch: int) -> None:
        load = self.load()
        self.log.scheduler(
            f"Decode batch. #running-req: {load['running']}, #token: {load['used_tokens']}, "
            f"token usage: {load['token_usage']:.2f}, cuda graph: {self.cost.uses_graph(batch)}, "
            f"gen throughput (token/s): {self.counters.gen_throughput:.2f}, #queue-req: {load['queued']}, "
        )
