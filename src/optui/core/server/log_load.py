"""Live load from a server's periodic log lines: the fallback when ``/metrics`` is missing.

Formats (``../shared/reference/servers_and_bench.md`` section 4): SGLang's scheduler lines
``Decode batch. #running-req: 37, #token: 1234, token usage: 0.61, [accept len: 3.2, ]cuda
graph: True, gen throughput (token/s): 2210.40, #queue-req: 0, `` (0.5.2; 0.5.23 writes
``Decode batch,`` and may add ``accept rate``; hybrid models print ``full token usage``) and
``Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00,
#running-req: 0, #queue-req: 0, `` (0.4 adds ``cache hit rate: 0.00%``); vLLM's
``Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s,
Running: 2 reqs, Waiting: 3 reqs, GPU KV cache usage: 4.5%, Prefix cache hit rate: 10.0%``
and ``SpecDecoding metrics: Mean acceptance length: 2.50, ...``. With DP every rank/engine
prints its own line: running and waiting are summed over ranks, usage averaged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optui.core.server.state import LoadView

_SGLANG_BATCH = re.compile(r"^(?:\[[^\]]*?(?P<ranks>(?: [A-Z_]+\d+)*)\] )?.*?(?P<kind>Decode|Prefill) batch(?: \[\d+\])?[.,]\s*(?P<rest>.*)$")
_VLLM_ENGINE = re.compile(r"Engine (?P<engine>\d+): Avg prompt throughput: (?P<rest>.*)$")
_VLLM_V0 = re.compile(r"Avg prompt throughput: (?P<rest>.*Running: .*)$")
_VLLM_SPEC = re.compile(r"SpecDecoding metrics: Mean acceptance length: (?P<len>[\d.]+)")
_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class BatchLine:
    """One parsed stats line: ``source`` "sglang-decode", "sglang-prefill" or "vllm";
    ``rank`` the DP rank / engine it belongs to; percentages 0..100, rates tok/s."""

    source: str
    rank: str = ""
    running: float | None = None
    waiting: float | None = None
    kv_cache_pct: float | None = None
    gen_tok_s: float | None = None
    prompt_tok_s: float | None = None
    prefix_hit_pct: float | None = None
    accept_length: float | None = None


def _fields(rest: str) -> dict[str, str]:
    out = {}
    for part in rest.split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    m = _NUM.search(text)
    return float(m.group()) if m else None


def parse_batch_line(line: str) -> BatchLine | None:
    """Parse one log line; None when it is not a stats line."""
    if "batch" in line:
        m = _SGLANG_BATCH.search(line)
        if m:
            f = _fields(m.group("rest"))
            usage = f.get("token usage", f.get("full token usage"))
            hit = f.get("cache hit rate")
            return BatchLine(
                source="sglang-" + m.group("kind").lower(),
                rank=(m.group("ranks") or "").strip().split(" TP")[0],
                running=_num(f.get("#running-req")),
                waiting=_num(f.get("#queue-req")),
                kv_cache_pct=None if usage is None else 100.0 * (_num(usage) or 0.0),
                gen_tok_s=_num(f.get("gen throughput (token/s)")),
                prompt_tok_s=_num(f.get("input throughput (token/s)")),
                prefix_hit_pct=_num(hit),
                accept_length=_num(f.get("accept len")),
            )
    if "Avg prompt throughput" in line:
        m = _VLLM_ENGINE.search(line) or _VLLM_V0.search(line)
        if m:
            f = _fields("Avg prompt throughput: " + m.group("rest"))
            return BatchLine(
                source="vllm",
                rank=m.groupdict().get("engine") or "",
                running=_num(f.get("running")),
                waiting=_num(f.get("waiting", f.get("pending"))),
                # "GPU KV cache usage", "CPU KV cache usage" (vLLM's CPU build, 0.32), any device
                kv_cache_pct=_num(next((v for k, v in f.items() if k.endswith("kv cache usage")), None)),
                gen_tok_s=_num(f.get("avg generation throughput")),
                prompt_tok_s=_num(f.get("avg prompt throughput")),
                prefix_hit_pct=_num(f.get("prefix cache hit rate")),
            )
    m = _VLLM_SPEC.search(line)
    if m:
        return BatchLine(source="vllm-spec", accept_length=float(m.group("len")))
    return None


class LogLoad:
    """Accumulates stats lines into a :class:`LoadView` with ``source="log"``.

    :attr:`progress` counts lines that report generated tokens (decode lines, vLLM lines
    with a non-zero generation rate): a hung engine prints none (SGLang) or only zero-rate
    lines (vLLM), so the count stands still — the hung detector's token counter.
    """

    def __init__(self) -> None:
        self._ranks: dict[tuple[str, str], BatchLine] = {}
        self._gen: dict[str, float] = {}
        self._prefix: float | None = None
        self._accept: float | None = None
        self._prompt: float | None = None
        self.progress = 0
        self.lines = 0

    def feed(self, line: str) -> bool:
        """Read one log line; True when it was a stats line."""
        parsed = parse_batch_line(line)
        if parsed is None:
            return False
        self.lines += 1
        if parsed.source == "vllm-spec":
            self._accept = parsed.accept_length
            return True
        family = "vllm" if parsed.source == "vllm" else "sglang"
        self._ranks[(family, parsed.rank)] = parsed
        if parsed.gen_tok_s is not None and (parsed.source != "sglang-prefill"):
            self._gen[parsed.rank] = parsed.gen_tok_s
            if parsed.gen_tok_s > 0:
                self.progress += 1
        if parsed.prefix_hit_pct is not None:
            self._prefix = parsed.prefix_hit_pct
        if parsed.accept_length is not None:
            self._accept = parsed.accept_length
        if parsed.prompt_tok_s is not None:
            self._prompt = parsed.prompt_tok_s
        return True

    def idle(self) -> None:
        """Forget the busy counts (a probe showed the server answering while no stats line
        came: SGLang prints no line when its batch empties)."""
        self._ranks = {k: BatchLine(v.source, v.rank, 0.0, 0.0, v.kv_cache_pct) for k, v in self._ranks.items()}
        self._gen = dict.fromkeys(self._gen, 0.0)

    @property
    def busy(self) -> float | None:
        """Running + waiting over all ranks from their last lines, None before any."""
        values = [(b.running or 0.0) + (b.waiting or 0.0) for b in self._ranks.values() if b.running is not None]
        return sum(values) if values else None

    def view(self, hint: str | None = None) -> LoadView:
        """The current load; empty (with ``hint``) before the first stats line."""
        if not self._ranks:
            return LoadView(source="log" if self.lines else "", hint=hint)
        lines = list(self._ranks.values())
        kv = [b.kv_cache_pct for b in lines if b.kv_cache_pct is not None]
        running = [b.running for b in lines if b.running is not None]
        waiting = [b.waiting for b in lines if b.waiting is not None]
        return LoadView(
            running=sum(running) if running else None,
            waiting=sum(waiting) if waiting else None,
            kv_cache_pct=sum(kv) / len(kv) if kv else None,
            gen_tok_s=sum(self._gen.values()) if self._gen else None,
            prompt_tok_s=self._prompt,
            prefix_hit_pct=self._prefix,
            accept_length=self._accept,
            generated_total=float(self.progress),
            source="log",
            hint=hint,
        )
